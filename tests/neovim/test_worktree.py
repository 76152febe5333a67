"""Sessions in their own git worktree in Neovim (issue 34.2) over the real daemon: :DshNewWorktree
starts a chat whose first prompt makes the session's worktree; the scripted model's write lands there,
not in the project; :DshSessions' lines show the branch and what changed; :DshWorktree diff opens the
change; :DshWorktree apply writes it into the project, and a second session's conflicting change is
refused with the file in the quickfix list and nothing written."""

from __future__ import annotations

import json
from pathlib import Path

from tests.fakes.deepseek_server import FakeDeepSeek, Reply
from tests.neovim.harness import Editor, Paths
from tests.server.harness import text_reply, tool_call_stream
from tests.server.test_worktrees import git


def repository(paths: Paths) -> None:
    git(paths.work, "init", "-q", "-b", "main")
    (paths.work / "app.py").write_text("VALUE = 1\n")
    git(paths.work, "add", "-A")
    git(paths.work, "commit", "-q", "-m", "start")
    config = {"tools": {"sandbox": "full-access", "permissions": {"write_file": "allow"}}}
    (paths.state / "config.json").write_text(json.dumps(config))


def write(value: int) -> Reply:
    call = ("c1", "write_file", {"path": "app.py", "content": f"VALUE = {value}\n"})
    return Reply.stream(tool_call_stream([call]))


def described(editor: Editor) -> list[str]:
    return editor.lua(
        "local out = {} for _, s in ipairs(T.request('dsh/session/list', {cwd = T.chat().root}).sessions) do"
        " out[#out + 1] = require('dsh.sessions').describe(s) end return out"
    )


def test_a_worktree_chat_works_in_its_own_copy_and_applies_it(
    editor: Editor, paths: Paths, fake: FakeDeepSeek
) -> None:
    repository(paths)
    copies = paths.work.parent / f"{paths.work.name}.dsh-worktrees"
    fake.script(write(2), text_reply("Set to 2."))
    editor.cmd("DshNewWorktree feat")
    editor.cmd("Dsh set it to 2")
    editor.wait_footers(1)
    assert (copies / "feat" / "app.py").read_text() == "VALUE = 2\n"
    assert (paths.work / "app.py").read_text() == "VALUE = 1\n"
    (line,) = described(editor)
    assert line.endswith("⎇ feat: 1 file changed"), line

    editor.cmd("DshWorktree diff")
    diff = editor.wait(
        lambda: (
            (lines := editor.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)"))
            and any(x.startswith("-VALUE = 1") for x in lines)
            and lines
        ),
        what="the diff tab",
    )
    assert diff[0].startswith("# feat · ") and "# modified app.py  +1 −1" in diff
    assert editor.lua("return vim.bo.filetype") == "diff"
    editor.cmd("tabclose")

    editor.cmd("DshWorktree apply")
    editor.wait(lambda: (paths.work / "app.py").read_text() == "VALUE = 2\n", what="the applied file")
    assert "applied 1 file(s)" in editor.wait(
        lambda: (m := editor.lua("return T.messages()")) and "applied" in m and m, what="the note"
    )

    # A second worktree chat changes the same line: refused, the file in the quickfix list.
    fake.script(write(3), text_reply("Set to 3."))
    editor.cmd("DshNewWorktree other")
    editor.cmd("Dsh set it to 3")
    editor.wait_footers(1)  # the new chat's turn ended
    assert (copies / "other" / "app.py").read_text() == "VALUE = 3\n"
    editor.cmd("DshWorktree apply")
    items = editor.wait(
        lambda: editor.lua("return vim.fn.getqflist()") or None,
        timeout=60,
        what="the conflicts in the quickfix list",
    )
    assert [Path(editor.lua("return vim.fn.bufname(...)", i["bufnr"])).name for i in items] == ["app.py"]
    assert items[0]["text"] == "you changed it where this session changed it too"
    assert (paths.work / "app.py").read_text() == "VALUE = 2\n"
