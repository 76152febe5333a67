"""Permission prompts as floats, and edits landing in the buffer through workspace/applyEdit."""

from __future__ import annotations

from pathlib import Path

from tests.fakes.deepseek_server import FakeDeepSeek, Reply
from tests.neovim.harness import Editor
from tests.server.harness import text_reply, tool_call_stream


def edit_call(path: Path, old: str, new: str, call_id: str = "call_1") -> Reply:
    return Reply.stream(
        tool_call_stream([(call_id, "edit_file", {"path": str(path), "old_string": old, "new_string": new})])
    )


def permission_floats(editor: Editor) -> list[dict]:
    return [f for f in editor.floats() if f["kind"] == "permission"]


def permission_float(editor: Editor) -> dict:
    return editor.wait(lambda: next(iter(permission_floats(editor)), None), what="the permission float")


def answer(editor: Editor, keys: str) -> None:
    """Go to the prompt on purpose (:DshPermission), then type `keys` there."""
    editor.cmd("DshPermission")
    editor.wait(lambda: any(f["current"] for f in permission_floats(editor)), what="the prompt focused")
    editor.keys(keys)


def test_permission_float_allow_once_and_the_edit_lands_saved(editor: Editor, fake: FakeDeepSeek) -> None:
    target = editor.paths.work / "b.py"
    target.write_text("x = 1\ny = 2\n")
    fake.script(edit_call(target, "x = 1", "x = 2"), text_reply("Changed x."))
    editor.cmd("edit b.py")
    editor.cmd("Dsh set x to 2")
    pf = permission_float(editor)
    assert not pf["current"]  # announced over the transcript, never focused by itself
    assert "-x = 1" in pf["lines"] and "+x = 2" in pf["lines"]
    assert pf["lines"][0] == "  ▸ Allow once"
    assert pf["title"].startswith(" dsh: ") and "gy once" in pf["footer"] and "gY always" in pf["footer"]
    assert editor.status() == "running"
    answer(editor, "gy")  # allow once
    editor.wait(lambda: permission_floats(editor) == [], what="the float to close")
    editor.wait_footers(1)
    buf = editor.lua(
        "local b = vim.fn.bufnr(...); return {lines = vim.api.nvim_buf_get_lines(b, 0, -1, false), modified = vim.bo[b].modified}",
        str(target),
    )
    # In the buffer and saved (dsh/document/save): a command run next sees it (protocol.md §9).
    assert buf == {"lines": ["x = 2", "y = 2"], "modified": False}
    assert target.read_text() == "x = 2\ny = 2\n"
    lines = editor.lines()
    row = next(i for i, line in enumerate(lines) if line.startswith("⚙ edit_file"))
    (card,) = [c for c in editor.snapshot()["cards"] if c["row"] == row]
    assert card["text"].strip() == "✓ ok +1 −1"
    assert "Changed x." in lines
    assert "Workspace edit" not in editor.lua("return T.messages()")  # no print spam
    # Changed lines flash; :DshEdits lists the touched places.
    flashed = editor.lua(
        "local b = vim.fn.bufnr(...); local out = {} for _, m in ipairs(vim.api.nvim_buf_get_extmarks(b, require('dsh.edits').ns, 0, -1, {details = true})) do out[#out+1] = m[2] end return out",
        str(target),
    )
    assert flashed == [0]
    editor.cmd("DshEdits")
    qf = editor.lua(
        "return vim.tbl_map(function(e) return {vim.api.nvim_buf_get_name(e.bufnr), e.lnum, e.text} end, vim.fn.getqflist())"
    )
    assert qf == [[str(target), 1, "dsh: edit b.py"]]


def test_permission_reject_keeps_the_file_and_the_turn_goes_on(editor: Editor, fake: FakeDeepSeek) -> None:
    target = editor.paths.work / "c.txt"
    target.write_text("keep me\n")
    fake.script(edit_call(target, "keep me", "gone"), text_reply("OK, leaving it."))
    editor.cmd("Dsh change it")
    permission_float(editor)
    answer(editor, "gn")
    editor.wait(lambda: permission_floats(editor) == [], what="the float to close")
    (footer,) = editor.wait_footers(1)
    assert footer.startswith("── completed")
    lines = editor.lines()
    row = next(i for i, line in enumerate(lines) if line.startswith("⚙ edit_file"))
    (card,) = [c for c in editor.snapshot()["cards"] if c["row"] == row]
    assert card["text"].strip() == "✗ REJECTED" and card["hl"] == "DshToolError"
    assert "OK, leaving it." in lines
    assert target.read_text() == "keep me\n"


def test_the_float_closes_when_the_turn_is_stopped(editor: Editor, fake: FakeDeepSeek) -> None:
    target = editor.paths.work / "d.txt"
    target.write_text("one\n")
    fake.script(edit_call(target, "one", "two"))
    editor.cmd("Dsh edit d")
    permission_float(editor)
    editor.cmd("DshStop")  # the chat of this project stops; the prompt goes away
    editor.wait(lambda: permission_floats(editor) == [], what="the float to close")
    (footer,) = editor.wait_footers(1)
    assert footer.startswith("── aborted (user)")
    assert target.read_text() == "one\n"


def test_the_cancel_choice_cancels_the_turn_and_keeps_the_queue(editor: Editor, fake: FakeDeepSeek) -> None:
    target = editor.paths.work / "e.txt"
    target.write_text("one\n")
    fake.script(edit_call(target, "one", "two"))
    editor.cmd("Dsh edit e")
    permission_float(editor)
    editor.lua("require('dsh').send(T.chat(), 'followup', 'later')")
    editor.wait(lambda: editor.pending() == 1, what="queued")
    answer(editor, "gC")  # cancel: the turn is cancelled, the queue kept
    editor.wait(lambda: permission_floats(editor) == [], what="the float to close")
    (footer,) = editor.wait_footers(1)
    assert footer.startswith("── aborted")
    assert editor.pending() == 1


def test_command_permission_shows_the_command_and_its_cwd(editor: Editor, fake: FakeDeepSeek) -> None:
    command = "echo hello-from-the-tool"
    fake.script(
        Reply.stream(tool_call_stream([("call_c", "run_command", {"command": command})])),
        text_reply("It ran."),
    )
    editor.cmd("Dsh run it")
    pf = permission_float(editor)
    assert pf["lines"][-3:] == [f"$ {command}", "", f"cwd: {editor.paths.work}"]
    assert "  ▸ Allow always: exactly this command, this session" in pf["lines"]
    assert "run_command" in pf["title"] or command in pf["title"]
    answer(editor, "gY")  # allow always (this exact command)
    editor.wait(lambda: permission_floats(editor) == [], what="the float to close")
    editor.wait_footers(1)
    lines = editor.lines()
    row = lines.index(f"⚙ run_command  {command}")
    (card,) = [c for c in editor.snapshot()["cards"] if c["row"] == row]
    assert card["text"].strip() == "✓ ok · exit 0"
    assert "It ran." in lines


LOSE_THE_PROMPT = """
_G.lost = {}
require('dsh.permissions').request = function(_, params)
  table.insert(_G.lost, params.callId)
  coroutine.yield() -- never answered, nothing shown
end
"""


def test_a_request_still_open_when_the_chat_reattaches_is_shown_again(
    editor: Editor, fake: FakeDeepSeek
) -> None:
    """The chat buffer closed and reopened while the daemon waits for an answer that this Neovim no
    longer shows: the attach reply's request opens the float again; its answer is
    dsh/permissions/respond."""
    target = editor.paths.work / "f.txt"
    target.write_text("one\n")
    fake.script(edit_call(target, "one", "two", call_id="call_f"), text_reply("Done."))
    editor.lua(LOSE_THE_PROMPT)
    editor.cmd("Dsh edit f")
    editor.wait(lambda: editor.lua("return #_G.lost") == 1, what="the request reached Neovim")
    assert permission_floats(editor) == []
    session_id = editor.snapshot()["id"]
    editor.lua("vim.api.nvim_buf_delete(T.chat().buf, {force = true})")  # the transcript wiped by hand
    editor.cmd("Dsh")  # reopens the chat: attached again
    pf = permission_float(editor)
    assert "-one" in pf["lines"] and "+two" in pf["lines"] and not pf["current"]
    assert editor.snapshot()["id"] == session_id
    answer(editor, "gy")
    editor.wait(lambda: permission_floats(editor) == [], what="the float to close")
    editor.wait_footers(1)
    assert "Done." in editor.lines()
    # Allowed: the edit is on disk (f.txt had no buffer: edited in a hidden one, let go).
    assert target.read_text() == "two\n" and editor.lua("return vim.fn.bufloaded(...)", str(target)) == 0
    assert "no longer open" not in editor.lua("return T.messages()")


def test_resume_shows_an_open_request_once_and_it_closes_when_answered_elsewhere(
    editor: Editor, fake: FakeDeepSeek
) -> None:
    target = editor.paths.work / "g.txt"
    target.write_text("one\n")
    fake.script(edit_call(target, "one", "two", call_id="call_g"), text_reply("Left it."))
    editor.lua(LOSE_THE_PROMPT)
    editor.cmd("Dsh edit g")
    editor.wait(lambda: editor.lua("return #_G.lost") == 1, what="the request reached Neovim")
    session_id = editor.snapshot()["id"]
    editor.cmd("DshNew")  # leaves the session waiting for the answer (detached, its turn goes on)
    editor.wait(lambda: editor.snapshot()["id"] != session_id, what="a new session")
    assert permission_floats(editor) == []
    editor.cmd(f"DshResume {session_id}")
    permission_float(editor)
    editor.cmd(f"DshResume {session_id}")  # attached again: still one float, not two
    editor.wait(lambda: editor.lua("return T.chat().state.rendered_seq") is not None, what="reattached")
    editor.wait(lambda: editor.lua("return T.chat().loading") is None, what="the page")
    assert len(permission_floats(editor)) == 1
    # Answered by another client: permission/resolved closes the float (which answered nothing).
    call_id = editor.lua("return _G.lost[1]")  # the daemon's id for the call (never the provider's call_g)
    assert call_id != "call_g"
    answer = {"sessionId": session_id, "callId": call_id, "outcome": "reject"}
    assert editor.lua("return T.request('dsh/permissions/respond', ...)", answer) == {"answered": True}
    editor.wait(lambda: permission_floats(editor) == [], what="the float to close")
    editor.wait_footers(1)
    assert "Left it." in editor.lines()
    assert target.read_text() == "one\n"
    messages = editor.lua("return T.messages()")
    assert "no longer open" not in messages and "could not answer" not in messages


def test_the_float_closes_when_the_request_is_answered_elsewhere(editor: Editor, fake: FakeDeepSeek) -> None:
    """The float of the daemon's own request closes on permission/resolved (Neovim ignores the
    $/cancelRequest the daemon sends for it)."""
    target = editor.paths.work / "h.txt"
    target.write_text("one\n")
    fake.script(edit_call(target, "one", "two", call_id="call_h"))
    editor.cmd("Dsh edit h")
    permission_float(editor)
    session_id = editor.snapshot()["id"]
    listed = editor.lua("return T.request('dsh/permissions/list', {sessionId = ...})", session_id)
    (call_id,) = [p["callId"] for p in listed["open"]]  # the daemon's id for the call
    answer = {"sessionId": session_id, "callId": call_id, "outcome": "cancelled"}
    assert editor.lua("return T.request('dsh/permissions/respond', ...)", answer) == {"answered": True}
    editor.wait(lambda: permission_floats(editor) == [], what="the float to close")
    settled = "return require('dsh.permissions').settled[...] == true"
    assert editor.wait(lambda: editor.lua(settled, session_id + "\0" + call_id), what="permission/resolved")
    (footer,) = editor.wait_footers(1)
    assert footer.startswith("── aborted")
