"""A plan's approval in Neovim (protocol.md §3 "Plan approval") over the real daemon: in plan mode the
model's `propose_plan` opens the permission float with the plan itself and four choices (approve:
accept edits, approve: ask, revise, cancel); revise asks for the person's words (vim.ui.input) and
sends them back; gy approves into accept edits, the plan runs at once as the next turn, and its
prompt shows as the approved plan."""

from __future__ import annotations

from tests.fakes.deepseek_server import FakeDeepSeek, Reply
from tests.neovim.harness import Editor
from tests.neovim.test_tools import answer, permission_float, permission_floats
from tests.server.harness import text_reply, tool_call_stream

PLAN = "1. Write notes.txt with the summary.\n2. Say what changed."
REVISED = PLAN + "\n3. Mention the tests."


def propose(plan: str, call_id: str) -> Reply:
    return Reply.stream(tool_call_stream([(call_id, "propose_plan", {"plan": plan})]))


def test_a_plan_is_revised_then_approved_from_the_float(editor: Editor, fake: FakeDeepSeek) -> None:
    write = ("call_w", "write_file", {"path": "notes.txt", "content": "summary\n"})
    fake.script(
        text_reply("Hello."),
        propose(PLAN, "call_1"),
        propose(REVISED, "call_2"),
        Reply.stream(tool_call_stream([write])),
        text_reply("All done."),
    )
    editor.cmd("Dsh hello")
    editor.wait_footers(1)
    sid = editor.snapshot()["id"]
    editor.lua("return T.request('dsh/session/setMode', {sessionId = ..., mode = 'plan'})", sid)
    editor.type_in_input("plan the notes")
    editor.keys("<CR>")

    pf = permission_float(editor)
    assert pf["title"] == " dsh: Approve the plan? " and not pf["current"]  # announced, not focused
    assert pf["lines"][:4] == [
        "  ▸ Approve: accept edits (the plan runs now)",
        "  ▸ Approve: ask before each edit",
        "  ▸ Revise: tell the agent what to change",
        "  ▸ Cancel the turn (the queue is kept)",
    ]
    assert pf["lines"][5:] == PLAN.split("\n")
    assert "gy approve · ga approve, ask · gn revise" in pf["footer"]

    # Revise: the person's words go back; the agent proposes again, still in plan mode.
    editor.lua(
        "vim.ui.input = function(opts, on_confirm) T.asked = opts.prompt; on_confirm('mention the tests') end"
    )
    answer(editor, "gn")
    editor.wait(lambda: len(fake.requests) >= 3, what="the revision's request")
    assert editor.lua("return T.asked") == "What should change in the plan? "
    said = [m for m in fake.requests[2].json["messages"] if m["role"] == "tool"][-1]["content"]
    assert "mention the tests" in said and "still in plan mode" in said
    pf = editor.wait(
        lambda: next((f for f in permission_floats(editor) if "3. Mention the tests." in f["lines"]), None),
        what="the revised plan",
    )

    # gy: approve into accept edits; the plan runs now, the write needs no question.
    answer(editor, "gy")
    editor.wait_text("All done.", timeout=30)
    editor.wait(lambda: editor.status() == "idle", what="idle")
    assert (editor.paths.work / "notes.txt").read_text().startswith("summary\n")  # written unasked
    attached = editor.lua("return T.request('dsh/session/attach', {sessionId = ...})", sid)
    assert attached["mode"] == "accept-edits"
    lines = editor.lines()
    assert "approved plan (accept edits)" in lines  # the plan's prompt, under its "## You"
    assert PLAN in str(fake.requests[3].json["messages"][-1]["content"])
    assert permission_floats(editor) == []
