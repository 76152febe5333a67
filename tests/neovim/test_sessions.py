"""Sessions and context (issue 22 item 10): :Dsh reopens the latest session and never makes an empty
one, pickers hide empty sessions, the window bar shows the context gauge and the model, :DshModel
switches it, context typed in the input attaches like the visual keys, and notices meant for the
model are not shown."""

from __future__ import annotations

import json
from collections.abc import Callable

from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.neovim.harness import Editor
from tests.neovim.test_tools import answer, permission_float
from tests.server.harness import text_reply, tool_call_stream


def listed(editor: Editor) -> list[dict]:
    return editor.lua("return T.request('dsh/session/list', vim.empty_dict())")["sessions"]


def test_dsh_reopens_the_latest_session_and_never_makes_an_empty_one(
    start_editor: Callable[[], Editor], fake: FakeDeepSeek
) -> None:
    fake.script(Reply.stream(text_stream(["hello back"])), Reply.stream(text_stream(["fresh"])))
    first = start_editor()
    first.cmd("Dsh")  # nothing yet: a new chat, no session
    first.wait(lambda: first.lua("return vim.b.dsh_kind") == "input", what="the chat")
    assert first.snapshot()["id"] is None and listed(first) == []
    first.type_in_input("hello")
    first.keys("<CR>")  # the first prompt makes the session
    first.wait_footers(1)
    session_id = first.snapshot()["id"]
    assert [s["sessionId"] for s in listed(first)] == [session_id]
    first.quit()

    second = start_editor()
    second.cmd("Dsh")  # reopens the latest session of the project
    second.wait_text("hello back")
    assert second.snapshot()["id"] == session_id
    second.cmd("DshNew")  # a new chat: still no session until its first prompt
    second.wait(lambda: second.snapshot()["id"] is None, what="a new chat")
    assert len(listed(second)) == 1
    second.cmd("DshSessions")  # the picker lists sessions with something in them
    picker = second.wait(
        lambda: next((f for f in second.floats() if f["kind"] == "picker"), None), what="picker"
    )
    assert len(picker["lines"]) == 1 and picker["lines"][0].startswith(session_id[:8])
    second.keys("q")
    # An empty session (made by another client) is not offered, nor reopened by :Dsh.
    empty = second.lua("return T.request('dsh/session/new', vim.empty_dict())")["sessionId"]
    assert {s["sessionId"] for s in listed(second)} == {session_id, empty}
    second.cmd("DshSessions")
    picker = second.wait(
        lambda: next((f for f in second.floats() if f["kind"] == "picker"), None), what="picker"
    )
    assert [line[:8] for line in picker["lines"]] == [session_id[:8]]
    second.keys("q")
    second.cmd("Dsh the new one")
    second.wait_footers(1)
    new_id = second.snapshot()["id"]
    assert new_id not in (None, session_id, empty) and len(listed(second)) == 3


def test_window_bar_shows_the_context_gauge_and_the_model_and_dsh_model_switches_it(
    editor: Editor, fake: FakeDeepSeek
) -> None:
    fake.script(Reply.stream(text_stream(["one"])), Reply.stream(text_stream(["two"])))
    editor.lua("vim.o.columns = 200")
    editor.cmd("Dsh")
    editor.wait(editor.snapshot, what="the chat")
    # A small context window for this test: 12 input tokens are 12 % of 100.
    editor.lua(
        "require('dsh.client').notify(require('dsh.client').root_for(0), 'workspace/didChangeConfiguration',"
        " {settings = {dsh = {provider = {contextWindow = 100}}}})"
    )
    editor.cmd("Dsh first")
    editor.wait_footers(1)
    editor.wait(lambda: "ctx 12%" in editor.snapshot()["winbar"], what="the context gauge")
    assert editor.snapshot()["winbar"].replace("%%", "%").endswith("ctx 12% · deepseek-v4-flash")
    # The sandbox's level is probed off the daemon's loop: its status can come after the turn's end.
    editor.wait(
        lambda: (
            editor.lua("return require('dsh').status()")
            == "dsh ○ idle · ctx 12% · ⚠ sandbox full-access · unconfined"
        ),
        what="the status with the sandbox",
    )
    editor.cmd("DshModel deepseek-v4-pro")
    editor.wait(lambda: "deepseek-v4-pro" in editor.snapshot()["winbar"], what="the model shown")
    editor.cmd("Dsh second")
    editor.wait_footers(2)
    assert [r.json["model"] for r in fake.requests] == ["deepseek-v4-flash", "deepseek-v4-pro"]
    assert editor.snapshot()["winbar"].endswith("· deepseek-v4-pro")


def user_texts(fake: FakeDeepSeek, i: int = -1) -> list[str]:
    return [
        m["content"] if isinstance(m["content"], str) else json.dumps(m["content"])
        for m in fake.requests[i].json["messages"]
        if m["role"] == "user"
    ]


def test_context_typed_in_the_input_attaches_like_the_visual_keys(editor: Editor, fake: FakeDeepSeek) -> None:
    (editor.paths.work / "notes.md").write_text("note text\n")
    app = editor.paths.work / "app.py"
    app.write_text("def f():\n    return 1\n\nprint(f())\n")
    fake.script(Reply.stream(text_stream(["Seen."])), Reply.stream(text_stream(["Again."])))
    editor.cmd("edit app.py")
    editor.keys("ggVj<Esc>")  # the last selection in app.py: lines 1-2
    editor.cmd("Dsh")
    editor.wait(lambda: editor.lua("return vim.b.dsh_kind") == "input", what="the chat input")
    # Completion: <C-x><C-o> (and typing # or @) completes the words.
    editor.keys("i#se<C-x><C-o><Esc>")
    assert editor.snapshot()["input"] == ["#selection"]
    editor.keys("A and @no<C-x><C-o><Esc>")
    assert editor.snapshot()["input"] == ["#selection and @notes.md"]
    editor.keys("A, #buffer: why?<Esc>")
    editor.keys("<CR>")
    editor.wait_footers(1)
    texts = user_texts(fake)
    assert texts[-1] == "#selection and @notes.md, #buffer: why?"
    assert any(t.startswith("Selection in ") and "lines 1-2" in t and "    return 1\n" in t for t in texts), (
        texts
    )
    assert any(t.startswith("File ") and "note text" in t for t in texts)
    assert any(t.startswith("File ") and "print(f())" in t for t in texts)
    lines = editor.lines()
    assert "📎 selection app.py:1-2" in lines and "📎 file notes.md" in lines and "📎 file app.py" in lines
    # The same through :Dsh; a word naming nothing is refused, the text kept for a retry.
    editor.type_in_input("see @missing.txt")
    editor.keys("<CR>")
    editor.wait(lambda: "@missing.txt: no such file" in editor.lua("return T.messages()"), what="the refusal")
    assert editor.snapshot()["input"] == ["see @missing.txt"] and len(fake.requests) == 1
    editor.cmd("Dsh and @notes.md again")
    editor.wait_footers(2)
    assert any(t.startswith("File ") and "note text" in t for t in user_texts(fake))


def test_notices_for_the_model_are_not_shown(editor: Editor, fake: FakeDeepSeek) -> None:
    notes = editor.paths.work / "notes.txt"
    notes.write_text("v1\n")
    fake.script(
        Reply.stream(tool_call_stream([("call_r", "read_file", {"path": str(notes)})])),
        Reply.stream(tool_call_stream([("call_w", "run_command", {"command": "echo v2 >> notes.txt"})])),
        text_reply("Done."),
    )
    editor.cmd("Dsh read then change it")
    permission_float(editor)
    answer(editor, "gy")
    editor.wait_footers(1)
    sent = json.dumps(fake.requests[2].json["messages"])
    assert "changed on disk (or in the editor) since you read it" in sent  # the model was told...
    assert not any("since you read it" in line for line in editor.lines())  # ...the person is not
    assert not any(line.startswith("ℹ") for line in editor.lines())
