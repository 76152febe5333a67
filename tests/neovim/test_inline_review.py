"""Issue 37.5: review a proposed edit in the file itself — each hunk drawn over the buffer (the lines
it replaces marked, the proposed lines as virtual lines under them) with keep/reject keys on each;
the decision answers the permission request, and the daemon writes what was kept."""

from __future__ import annotations

from pathlib import Path

from tests.fakes.deepseek_server import FakeDeepSeek
from tests.neovim.harness import Editor
from tests.neovim.test_tools import answer, edit_call, permission_float, permission_floats
from tests.server.harness import text_reply

BEFORE = "".join(f"line {i}\n" for i in range(1, 11))
OLD = "".join(f"line {i}\n" for i in range(2, 10))
NEW = OLD.replace("line 2\n", "line two\n").replace("line 9\n", "line nine\nline nine and a half\n")


def overlay(editor: Editor, path: Path) -> dict:
    """What the overlay draws in the file's buffer: hunk headers, marked rows, proposed lines."""
    return editor.lua(
        """
        local buf = vim.fn.bufnr(...)
        local ns = require('dsh.inline').ns
        local out = {headers = {}, marked = {}, added = {}}
        for _, m in ipairs(vim.api.nvim_buf_get_extmarks(buf, ns, 0, -1, {details = true})) do
          local d = m[4]
          if d.virt_text then table.insert(out.headers, {m[2] + 1, d.virt_text[1][1]}) end
          if d.line_hl_group == 'DshInlineDelete' then table.insert(out.marked, m[2] + 1) end
          for _, vl in ipairs(d.virt_lines or {}) do table.insert(out.added, vl[1][1]) end
        end
        out.text = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
        out.current = vim.api.nvim_get_current_buf() == buf
        return out
        """,
        str(path),
    )


def start_inline_review(editor: Editor, fake: FakeDeepSeek, target: Path) -> None:
    target.write_text(BEFORE)
    fake.script(edit_call(target, OLD, NEW), text_reply("Done."))
    editor.cmd("Dsh rename two lines")
    float_ = permission_float(editor)
    assert any("Review in the file (keep/reject each hunk)" in line for line in float_["lines"])
    answer(editor, "gi")
    editor.wait(lambda: permission_floats(editor) == [], what="the prompt to close")
    editor.wait(lambda: overlay(editor, target)["headers"], what="the overlay")


def test_keep_one_hunk_reject_the_other_in_the_buffer(editor: Editor, fake: FakeDeepSeek) -> None:
    target = editor.paths.work / "b.py"
    start_inline_review(editor, fake, target)
    o = overlay(editor, target)
    assert o["current"] and o["text"] == BEFORE.splitlines()  # the buffer's text is untouched
    assert o["headers"] == [
        [2, " ◆ dsh hunk 1/2 · \\k keep · \\x reject"],
        [9, " ◆ dsh hunk 2/2 · \\k keep · \\x reject"],
    ]
    assert o["marked"] == [2, 9] and o["added"] == ["+ line two", "+ line nine", "+ line nine and a half"]
    rows = editor.screen(capture="37.5-inline-review")
    print("\n".join(rows))
    assert any("line 2" in r and "◆ dsh hunk 1/2" in r for r in rows)
    assert any(
        r.lstrip("~ ").startswith("+ line nine and a half") or "+ line nine and a half" in r for r in rows
    )
    editor.keys("\\k")  # the cursor is on hunk 1: keep it (the cursor goes on to hunk 2)
    o = overlay(editor, target)
    assert o["headers"][0] == [2, " ✓ dsh hunk 1/2 kept"] and o["headers"][1][1].startswith(" ◆ dsh hunk 2/2")
    editor.keys("\\x")  # reject hunk 2: every hunk decided, the request is answered
    editor.wait_footers(1)
    assert target.read_text() == BEFORE.replace("line 2\n", "line two\n")
    assert overlay(editor, target)["headers"] == []  # the overlay is gone, and its keys
    assert editor.lua("return vim.fn.maparg('\\\\k', 'n')") == ""
    assert "✓ allowed your version of the edit to b.py" in editor.lines()
    sent = [m for m in fake.requests[-1].json["messages"] if m["role"] == "tool"][-1]["content"]
    assert "Wrote b.py as the user changed it" in sent  # the model is told it got the person's version


def test_keep_every_hunk_allows_the_edit_as_proposed(editor: Editor, fake: FakeDeepSeek) -> None:
    target = editor.paths.work / "b.py"
    start_inline_review(editor, fake, target)
    editor.keys("\\K")
    editor.wait_footers(1)
    assert target.read_text() == BEFORE.replace(OLD, NEW)
    assert overlay(editor, target)["headers"] == []
