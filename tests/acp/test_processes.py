"""Issue 39.8: a background process (`run_command {background: true}`) over ACP is a card of its own,
`process/started` announcing it (what runs) and `process/exited` ending it (how it ended), live and in
a replay; `/ps` lists them and `/kill N` stops one (ACP has no method for it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from acp import text_block

from tests.acp.harness import acp_daemon, settle
from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.harness import tool_call_stream


def process_cards(updates: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    cards: dict[str, list[dict[str, Any]]] = {}
    for update in updates:
        if str(update.get("toolCallId", "")).startswith("process-"):
            cards.setdefault(update["toolCallId"], []).append(update)
    return cards


def ended(cards: dict[str, list[dict[str, Any]]], call_id: str) -> bool:
    return any(u["sessionUpdate"] == "tool_call_update" for u in cards.get(call_id, ()))


async def test_a_background_process_is_a_card_from_start_to_exit(tmp_path: Path, fake: FakeDeepSeek) -> None:
    state = tmp_path / "state"
    started = [
        ("b1", "run_command", {"command": "echo up; exit 3", "background": True}),
        ("b2", "run_command", {"command": "sleep 60", "background": True}),
    ]
    fake.script(
        Reply.stream(tool_call_stream(started)),
        Reply.stream(tool_call_stream([("s1", "process_stop", {"process_id": "p2"})])),
        Reply.stream(text_stream(["stopped it"])),
    )
    async with acp_daemon(state, fake) as d:
        sid = await d.new_session()
        stop = await settle(d.conn.prompt(session_id=sid, prompt=[text_block("start two")]))
        assert stop.stop_reason == "end_turn"
        await d.wait_for(lambda: ended(process_cards(d.client.updates(sid)), "process-p1"))
        cards = process_cards(d.client.updates(sid))
        assert set(cards) == {"process-p1", "process-p2"}
        first, last = cards["process-p1"][0], cards["process-p1"][-1]
        assert first["sessionUpdate"] == "tool_call" and first["status"] == "in_progress"
        assert first["title"] == "Background p1: echo up; exit 3" and first["kind"] == "execute"
        assert "p1 runs `echo up; exit 3` (pid " in first["content"][0]["content"]["text"]
        assert last["status"] == "failed" and last["rawOutput"] == {"exitCode": 3}
        assert last["content"][0]["content"]["text"] == "p1 exited with code 3."
        stopped = cards["process-p2"][-1]
        assert stopped["status"] == "completed" and stopped["rawOutput"]["stoppedBy"] == "agent"
        assert stopped["content"][0]["content"]["text"] == "p2 stopped by the agent."
    fake.script()
    async with acp_daemon(state, fake) as d:
        await settle(d.conn.load_session(cwd=str(d.work), session_id=sid, mcp_servers=[]))
        replayed = process_cards(d.client.updates(sid))
        assert [u["sessionUpdate"] for u in replayed["process-p1"]] == ["tool_call", "tool_call_update"]
        assert replayed["process-p1"][-1] == last and replayed["process-p2"][-1] == stopped


async def test_ps_lists_the_processes_and_kill_stops_one(tmp_path: Path, fake: FakeDeepSeek) -> None:
    fake.script(
        Reply.stream(tool_call_stream([("b1", "run_command", {"command": "sleep 60", "background": True})])),
        Reply.stream(text_stream(["started"])),
    )
    async with acp_daemon(tmp_path / "state", fake) as d:
        sid = await d.new_session()

        async def said(text: str) -> str:
            before = d.client.text(sid)
            response = await settle(d.conn.prompt(session_id=sid, prompt=[text_block(text)]))
            assert response.stop_reason == "end_turn"
            return d.client.text(sid)[len(before) :]

        assert await said("/ps") == "No background processes in this chat."
        await said("start it")
        assert (await said("/ps")).startswith("Background processes:\n- p1 `sleep 60`: running (pid ")
        assert (await said("/kill")).startswith("Usage: /kill N")
        assert await said("/kill 7") == "No background process p7 in this chat (/ps lists them)."
        assert await said("/kill 1") == "Stopped p1 (`sleep 60`)."
        await d.wait_for(lambda: ended(process_cards(d.client.updates(sid)), "process-p1"))
        (card_end,) = [u for u in process_cards(d.client.updates(sid))["process-p1"][1:]]
        assert card_end["rawOutput"]["stoppedBy"] == "person" and card_end["status"] == "completed"
        assert card_end["content"][0]["content"]["text"] == "p1 stopped by you."
        assert await said("/ps") == "Background processes:\n- p1 `sleep 60`: stopped (person)"
        assert await said("/kill p1") == "p1 had already ended."
        assert fake.requests and all("/ps" not in str(r.json) for r in fake.requests)
