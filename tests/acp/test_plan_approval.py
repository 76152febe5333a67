"""A plan's approval over ACP (the official SDK client, protocol.md §3 "Plan approval", "ACP mode"):
`propose_plan` is a `switch_mode` call whose permission request shows the plan with three options;
"Approve: accept edits" switches the mode (`current_mode_update`) and the plan runs inside the same
`session/prompt`, answered when the plan's own turn ends; "Keep planning" stays in plan mode."""

from __future__ import annotations

from pathlib import Path

from acp import text_block

from tests.acp.harness import acp_daemon, settle
from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.harness import tool_call_stream

PLAN = "1. Write notes.txt.\n2. Say done."


def propose(call_id: str) -> Reply:
    return Reply.stream(tool_call_stream([(call_id, "propose_plan", {"plan": PLAN})]))


async def test_approve_runs_the_plan_inside_the_prompt_in_the_chosen_mode(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    async with acp_daemon(tmp_path / "state", fake) as d:
        sid = await d.new_session()
        await settle(d.conn.set_session_mode(session_id=sid, mode_id="plan"))
        write = ("call_w", "write_file", {"path": "notes.txt", "content": "planned\n"})
        fake.script(
            propose("call_p"), Reply.stream(tool_call_stream([write])), Reply.stream(text_stream(["done"]))
        )
        d.client.permission_answer = "approve-accept-edits"
        response = await settle(d.conn.prompt(session_id=sid, prompt=[text_block("plan a note")]))
        assert response.stop_reason == "end_turn"

        (asked,) = d.client.permission_requests  # the write ran unasked: accept edits
        assert [o["optionId"] for o in asked["options"]] == ["approve-accept-edits", "approve-ask", "revise"]
        assert [o["kind"] for o in asked["options"]] == ["allow_once", "allow_once", "reject_once"]
        assert (
            asked["toolCall"]["title"] == "Approve the plan?" and asked["toolCall"]["kind"] == "switch_mode"
        )
        assert asked["toolCall"]["content"][0]["content"]["text"] == PLAN
        modes = d.client.updates(sid, "current_mode_update")
        assert [m["currentModeId"] for m in modes] == ["plan", "accept-edits"]
        # The plan's own turn ran inside this prompt: its request saw the plan and the write happened.
        assert len(fake.requests) == 3 and PLAN in str(fake.requests[1].json["messages"][-1]["content"])
        assert (d.work / "notes.txt").read_text() == "planned\n"
        assert "done" in d.client.text(sid)


async def test_keep_planning_stays_in_plan_mode(tmp_path: Path, fake: FakeDeepSeek) -> None:
    async with acp_daemon(tmp_path / "state", fake) as d:
        sid = await d.new_session()
        await settle(d.conn.set_session_mode(session_id=sid, mode_id="plan"))
        fake.script(propose("call_p"), Reply.stream(text_stream(["What should change?"])))
        d.client.permission_answer = "revise"
        response = await settle(d.conn.prompt(session_id=sid, prompt=[text_block("plan")]))
        assert response.stop_reason == "end_turn"
        assert [m["currentModeId"] for m in d.client.updates(sid, "current_mode_update")] == ["plan"]
        result = [m for m in fake.requests[1].json["messages"] if m["role"] == "tool"][-1]
        assert "rejected" in result["content"] and "still in plan mode" in result["content"]
        assert len(fake.requests) == 2
