""":DshFork and :DshRewind in a real headless Neovim (issue 25 item 4): the fork is shown in the chat
with the turns it kept, the rewind previews the files first, restores the edit in the buffer through
workspace/applyEdit, notes the cut in the transcript, and the next request leaves the cut turn out."""

from __future__ import annotations

from tests.fakes.deepseek_server import FakeDeepSeek
from tests.neovim.harness import Editor
from tests.neovim.test_tools import answer, edit_call, permission_float, permission_floats
from tests.server.harness import text_reply


def buffer_lines(editor: Editor, path: str) -> list[str]:
    return editor.lua("return vim.api.nvim_buf_get_lines(vim.fn.bufnr(...), 0, -1, false)", path)


def test_fork_then_rewind_with_a_preview(editor: Editor, fake: FakeDeepSeek) -> None:
    target = editor.paths.work / "b.py"
    target.write_text("x = 1\ny = 2\n")
    fake.script(edit_call(target, "x = 1", "x = 2"), text_reply("Changed x."), text_reply("Fresh."))
    editor.lua(
        "_G.asked, _G.answer = {}, 1;"
        " vim.fn.confirm = function(msg, choices) table.insert(_G.asked, {msg, choices}); return _G.answer end"
    )
    editor.cmd("edit b.py")
    editor.cmd("Dsh set x to 2")
    permission_float(editor)
    answer(editor, "gy")
    editor.wait(lambda: permission_floats(editor) == [], what="the float to close")
    editor.wait_footers(1)
    assert buffer_lines(editor, str(target)) == ["x = 2", "y = 2"]
    original = editor.snapshot()["id"]

    editor.cmd("DshFork")  # at the latest turn: the fork is shown in the chat, its turn replayed
    editor.wait(lambda: editor.snapshot().get("id") not in (None, original), what="the fork shown")
    editor.wait_text("Changed x.")
    forked = editor.snapshot()["id"]
    assert "forked at turn 1" in editor.lua("return T.messages()")
    sessions = editor.lua("return T.request('dsh/session/list', vim.empty_dict())")["sessions"]
    assert {s["sessionId"] for s in sessions} == {original, forked}

    editor.cmd("DshRewind")  # before the latest turn: the preview names the file first
    editor.wait(lambda: editor.lua("return #_G.asked") == 1, what="the preview")
    question, choices = editor.lua("return _G.asked[1]")
    print(question)
    assert question.startswith("Rewind the dsh session to before turn 1?") and "Restored: b.py" in question
    assert "Files only" in choices and "onversation only" in choices
    editor.wait(lambda: buffer_lines(editor, str(target)) == ["x = 1", "y = 2"], what="the buffer restored")
    lines = editor.wait_text("── rewound to before turn 1: the turns since are out of the model's history ──")
    print("\n".join(lines))
    assert "── files rewound to before turn 1: b.py ──" in lines
    assert "rewound to before turn 1: restored b.py; the conversation cut" in editor.lua(
        "return T.messages()"
    )

    editor.type_in_input("again")
    editor.keys("<CR>")
    editor.wait_text("Fresh.")
    users = [m["content"] for m in fake.requests[-1].json["messages"] if m["role"] == "user"]
    assert users == ["again"]
