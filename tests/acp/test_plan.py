"""The agent's plan as ACP `plan` session updates (the official SDK client): the whole plan at each
`update_plan`, live; the same on `session/load`; after a rewind, the plan as it was before the cut
turn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from acp import text_block
from acp.schema import AgentPlanUpdate

from tests.acp.harness import AcpDaemon, acp_daemon, settle
from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.harness import tool_call_stream

FIRST = [{"title": "Read the code", "status": "in_progress"}, {"title": "Fix it", "status": "pending"}]
SECOND = [{"title": "Read the code", "status": "done"}, {"title": "Fix it", "status": "in_progress"}]


def plan_then_done(call_id: str, steps: list[dict[str, str]]) -> tuple[Reply, Reply]:
    call = Reply.stream(tool_call_stream([(call_id, "update_plan", {"steps": steps})]))
    return call, Reply.stream(text_stream(["done"]))


def entries(steps: list[dict[str, str]]) -> list[dict[str, Any]]:
    status = {"pending": "pending", "in_progress": "in_progress", "done": "completed"}
    return [{"content": s["title"], "priority": "medium", "status": status[s["status"]]} for s in steps]


def plans(d: AcpDaemon, sid: str) -> list[list[dict[str, Any]]]:
    updates = d.client.updates(sid, "plan")
    for update in updates:
        AgentPlanUpdate.model_validate(update)  # the SDK's own schema of the update
    return [u["entries"] for u in updates]


async def run(d: AcpDaemon, sid: str, text: str) -> None:
    response = await settle(d.conn.prompt(session_id=sid, prompt=[text_block(text)]))
    assert response.stop_reason == "end_turn"


async def test_plan_updates_live_on_load_and_after_a_rewind(tmp_path: Path, fake: FakeDeepSeek) -> None:
    state = tmp_path / "state"
    fake.script(*plan_then_done("call_1", FIRST), *plan_then_done("call_2", SECOND))
    async with acp_daemon(state, fake) as d:
        sid = await d.new_session()
        await run(d, sid, "start")
        await run(d, sid, "go on")
        assert plans(d, sid) == [entries(FIRST), entries(SECOND)]
        call = d.client.updates(sid, "tool_call")[0]
        assert call["kind"] == "think" and call["title"] == "Update the plan"
        assert d.client.permission_requests == []

    async with acp_daemon(state, fake) as d:
        await settle(d.conn.load_session(cwd=str(d.work), session_id=sid, mcp_servers=[]))
        assert plans(d, sid) == [entries(FIRST), entries(SECOND)]  # the replay, in order
        before = len(plans(d, sid))
        await run(d, sid, "/rewind 2")
        assert plans(d, sid)[before:] == [entries(FIRST)]  # the plan as turn 2 began
        await run(d, sid, "/rewind 1")
        assert plans(d, sid)[before + 1 :] == [[]]  # no plan before turn 1: an empty one clears it
