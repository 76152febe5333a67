"""A subagent in the Neovim chat (issue 34.1) over the real daemon: the scripted model's
`run_subagent` call shows as a nested card under its call, with the child's description, its tool
calls as they run, a question it waits on (the permission prompt names the child), its state and,
when it ends, its summary; `K` on the card folds it to one line and back. The child has a script of
its own (`FakeDeepSeek.script_for`), as in tests/server/test_subagents.py."""

from __future__ import annotations

from collections.abc import Callable

from tests.fakes.deepseek_server import FakeDeepSeek, Reply
from tests.neovim.harness import Editor, footers
from tests.neovim.test_tools import answer, permission_float, permission_floats
from tests.server.harness import text_reply, tool_call_stream

CHILD = "CHILD-PROMPT: fix the greeting in a.txt"


def card(editor: Editor) -> list[str]:
    """The subagent card's lines in the transcript: from its header to the line after it."""
    lines = editor.lines()
    at = next((i for i, line in enumerate(lines) if "subagent “fix the greeting”" in line), None)
    if at is None:
        return []
    end = at + 1
    while end < len(lines) and lines[end].startswith("  │ "):
        end += 1
    return lines[at:end]


def test_a_subagent_is_a_nested_card_with_its_calls_its_question_and_its_summary(
    editor: Editor, fake: FakeDeepSeek
) -> None:
    target = editor.paths.work / "a.txt"
    target.write_text("helo\n")
    delegate = {"description": "fix the greeting", "prompt": CHILD, "tools": "edit"}
    fake.script(
        Reply.stream(tool_call_stream([("call_child", "run_subagent", delegate)])),
        text_reply("The child fixed it."),
    )
    edit = {"path": str(target), "old_string": "helo", "new_string": "hello"}
    fake.script_for(
        CHILD,
        Reply.stream(tool_call_stream([("c_read", "read_file", {"path": str(target)})])),
        Reply.stream(tool_call_stream([("c_edit", "edit_file", edit)])),
        text_reply("SUMMARY: a.txt now says hello\nnothing else changed"),
    )
    editor.cmd("Dsh fix the greeting")

    # The child waits on the person: its card says so and names the question; the prompt names the child.
    pf = permission_float(editor)
    assert "Subagent “fix the greeting”" in pf["title"], pf["title"]
    shown = editor.wait(
        lambda: (c := card(editor)) and "waits for you" in c[0] and c, what="the card waiting"
    )
    assert shown[0] == "  ▾ subagent “fix the greeting” (edit) · waits for you"
    # The edit is a call once it may run (the child's tool/call follows the answer).
    assert shown[1] == "  │ ⚙ read_file  a.txt  ✓"
    assert shown[2].startswith("  │ ⚠ asks: Subagent “fix the greeting”: Edit ") and len(shown) == 3
    lines = editor.lines()
    row = lines.index(shown[0])
    assert lines[row - 1].startswith("⚙ run_subagent  fix the greeting")  # nested under its call

    answer(editor, "gy")  # allow once
    editor.wait(lambda: permission_floats(editor) == [], what="the prompt answered")
    editor.wait_footers(1)
    assert target.read_text() == "hello\n"
    assert card(editor) == [
        "  ▾ subagent “fix the greeting” (edit) · completed",
        "  │ ⚙ read_file  a.txt  ✓",
        "  │ ⚙ edit_file  a.txt  ✓",
        "  │ ↳ SUMMARY: a.txt now says hello",
        "  │   nothing else changed",
    ]
    lines = editor.lines()
    assert lines.index("The child fixed it.") > lines.index("  │   nothing else changed")
    # Its call's own card ended as the parent's model got the summary.
    row = next(i for i, line in enumerate(lines) if line.startswith("⚙ run_subagent"))
    (call_card,) = [c for c in editor.snapshot()["cards"] if c["row"] == row]
    assert call_card["text"].strip() == "✓ ok"

    # K on the card folds it to its first line; again unfolds it. The rest of the transcript stays.
    win = editor.lua("return vim.fn.win_findbuf(T.chat().buf)[1]")
    header = lines.index("  ▾ subagent “fix the greeting” (edit) · completed")
    editor.lua("vim.api.nvim_set_current_win(...)", win)
    editor.lua("vim.api.nvim_win_set_cursor(0, {..., 0})", header + 2)  # on a line of the card
    editor.keys("K")
    editor.wait(lambda: card(editor) == ["  ▸ subagent “fix the greeting” (edit) · completed · 2 tool calls"])
    assert "The child fixed it." in editor.lines()
    assert editor.floats() == []  # K on a subagent card folds it; no tool card float opens
    editor.lua("vim.api.nvim_win_set_cursor(0, {..., 0})", header + 1)
    editor.keys("K")
    editor.wait(lambda: len(card(editor)) == 5, what="unfolded")


TWO_CHILDREN = """
local chat = require('dsh.chat').Chat.new('/w', 'parent-1')
local function ev(t, data) chat:on_event({ sessionId = 'parent-1', type = t, data = data }) end
local function child(call, t, data) ev('subagent/event', { callId = call, childId = 'k-' .. call, event = { type = t, data = data } }) end
ev('turn/start', { turn = 1 })
for _, c in ipairs({ 'ca', 'cb' }) do
  ev('tool/call', { turn = 1, step = 1, callId = c, name = 'run_subagent', arguments = '{"description": "' .. c .. ' work"}' })
end
ev('subagent/started', { callId = 'ca', childId = 'k-ca', description = 'ca work', tools = 'explore', maxSteps = 30 })
ev('subagent/started', { callId = 'cb', childId = 'k-cb', description = 'cb work', tools = 'edit', maxSteps = 30 })
-- The children run at once: their calls interleave, each lands in its own card.
child('ca', 'tool/call', { callId = 'a1', name = 'grep', arguments = '{"pattern": "x"}' })
child('cb', 'tool/call', { callId = 'b1', name = 'read_file', arguments = '{"path": "b.txt"}' })
child('ca', 'tool/result', { callId = 'a1', name = 'grep', error = { name = 'E', code = 'NOT_FOUND' }, message = {} })
child('cb', 'tool/result', { callId = 'b1', name = 'read_file', message = {} })
child('ca', 'tool/call', { callId = 'a2', name = 'read_file', arguments = '{"path": "a.txt"}' })
ev('subagent/finished', { callId = 'cb', childId = 'k-cb', status = 'budget', summary = 'B stopped at its step cap' })
ev('subagent/finished', { callId = 'ca', childId = 'k-ca', status = 'completed', summary = 'A found it' })
chat:flush()
local lines = chat:lines()
require('dsh.subagents').toggle(chat, vim.fn.index(lines, '  ▾ subagent “ca work” (explore) · completed'))
local folded = chat:lines()
for _, b in ipairs({ chat.buf, chat.input }) do pcall(vim.api.nvim_buf_delete, b, { force = true }) end
return { lines = lines, folded = folded }
"""


def test_two_children_at_once_each_update_their_own_card(editor: Editor) -> None:
    """Cards rewritten in place: a child's call lands in its own card while the other's grows or
    shrinks below it; folding one leaves the other as it is."""
    got = editor.lua(TWO_CHILDREN)
    lines = [line for line in got["lines"] if line.startswith("  ")]
    assert lines == [
        "  ▾ subagent “ca work” (explore) · completed",
        "  │ ⚙ grep  x  ✗ NOT_FOUND",
        "  │ ⚙ read_file  a.txt  …",
        "  │ ↳ A found it",
        "  ▾ subagent “cb work” (edit) · budget",
        "  │ ⚙ read_file  b.txt  ✓",
        "  │ ↳ B stopped at its step cap",
    ]
    folded = [line for line in got["folded"] if line.startswith("  ")]
    assert folded == ["  ▸ subagent “ca work” (explore) · completed · 2 tool calls", *lines[4:]]


def test_after_a_restart_the_card_shows_how_the_child_ended(
    start_editor: Callable[[], Editor], fake: FakeDeepSeek
) -> None:
    """:DshResume draws the transcript page: the card comes from its subagent events (the child's own
    steps are in the child's transcript), with how the child ended and its summary."""
    delegate = {"description": "look around", "prompt": "CHILD-LOOK: list the files"}
    fake.script(
        Reply.stream(tool_call_stream([("call_child", "run_subagent", delegate)])),
        text_reply("The child looked."),
    )
    fake.script_for("CHILD-LOOK", text_reply("SUMMARY: two files"))
    first = start_editor()
    first.cmd("Dsh look around")
    first.wait_footers(1)
    live = first.lines()
    assert "  ▾ subagent “look around” (explore) · completed" in live
    first.quit()

    second = start_editor()
    second.cmd("DshResume")
    second.wait(lambda: len(footers(second.lines())) >= 1, what="the transcript")
    lines = second.lines()
    at = lines.index("  ▾ subagent “look around” (explore) · completed")
    assert lines[at - 1].startswith("⚙ run_subagent  look around")
    assert lines[at + 1] == "  │ ↳ SUMMARY: two files"
