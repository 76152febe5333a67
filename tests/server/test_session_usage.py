"""`dsh/session/usage` (protocol.md §3): a session's tokens and cost summed over every durable
`turn/usage`, whichever process ran the turns, through real daemon processes over real pipes (the
fake DeepSeek on loopback streaming real SSE with usage); and the fold itself (model/usage.py), which
ACP's `usage_update` cost shares."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from pygls.exceptions import JsonRpcException

from dsh_daemon.model.usage import UsageTotals, summed
from tests.fakes.deepseek_server import FakeDeepSeek
from tests.server.harness import Daemon, start_daemon, stop_daemon, text_reply
from tests.server.test_subagents import PARENT, delegate


async def _turn(daemon: Daemon, sid: str, text: str) -> None:
    done = len(daemon.of(sid, "turn/end"))
    await daemon.request("dsh/followup", {"sessionId": sid, "message": {"content": text}})
    await daemon.wait_idle_turn(sid, done + 1)


def _expected(usages: list[dict[str, Any]]) -> dict[str, Any]:
    """The sum as the turns' own `turn/usage` events said them, added up here."""
    cost = 0.0
    for u in usages:  # in log order, as the daemon adds them (the same float)
        cost += u["costUsd"]
    out: dict[str, Any] = {
        "turns": len(usages),
        "usage": {
            "inputTokens": sum(u["inputTokens"] for u in usages),
            "outputTokens": sum(u["outputTokens"] for u in usages),
        },
        "costUsd": cost,
        "unpricedTurns": 0,
    }
    cached = sum(u.get("cacheReadTokens", 0) for u in usages)
    if cached:
        out["usage"]["cacheReadTokens"] = cached
    return out


async def test_the_sum_covers_every_turn_of_every_process_live_and_from_the_store(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    state = tmp_path / "state"
    first = await start_daemon(state, fake)
    fake.script(text_reply("one"), text_reply("two"))
    sid = await first.new_session()
    assert await first.request("dsh/session/usage", {"sessionId": sid}) == {
        "turns": 0,
        "usage": {"inputTokens": 0, "outputTokens": 0},
        "costUsd": None,
        "unpricedTurns": 0,
    }
    await _turn(first, sid, "one")
    await _turn(first, sid, "two")
    usages = [e["data"]["usage"] for e in first.of(sid, "turn/usage")]
    assert len(usages) == 2 and all(isinstance(u.get("costUsd"), float) for u in usages)  # priced model
    assert await first.request("dsh/session/usage", {"sessionId": sid}) == _expected(usages)
    await stop_daemon(first)

    # Another process drives it now: a third turn there; a reader sums the same from the store, and a
    # one-turn transcript page holds only a part of it.
    driver = await start_daemon(state, fake)
    reader = await start_daemon(state, fake)
    try:
        await driver.request("dsh/session/attach", {"sessionId": sid})
        fake.script(text_reply("three"))
        await _turn(driver, sid, "three")
        usages += [e["data"]["usage"] for e in driver.of(sid, "turn/usage") if e["data"]["turn"] == 3]
        assert len(usages) == 3
        from_memory = await driver.request("dsh/session/usage", {"sessionId": sid})
        from_store = await reader.request("dsh/session/usage", {"sessionId": sid})
        assert from_memory == from_store == _expected(usages)
        page = await reader.request("dsh/session/transcript", {"sessionId": sid, "limit": 1})
        assert [t["turn"] for t in page["turns"]] == [3] and page["hasMore"] is True
    finally:
        await stop_daemon(reader)
        await stop_daemon(driver)


async def test_an_unknown_session_is_unknown_session_and_the_daemon_goes_on(daemon: Daemon) -> None:
    with pytest.raises(JsonRpcException) as caught:
        await daemon.request("dsh/session/usage", {"sessionId": "nope"})
    assert caught.value.data["code"] == "unknown_session"
    with pytest.raises(JsonRpcException) as bad:
        await daemon.request("dsh/session/usage", {})
    assert bad.value.data["code"] == "invalid_params"
    assert daemon.initialized.capabilities.experimental["dsh"]["sessionUsage"] is True
    sid = await daemon.new_session()
    assert (await daemon.request("dsh/session/usage", {"sessionId": sid}))["turns"] == 0


def test_the_fold_counts_unpriced_turns_apart_and_round_trips_the_answer() -> None:
    priced = {"inputTokens": 10, "outputTokens": 4, "cacheReadTokens": 6, "costUsd": 0.25}
    unpriced = {"inputTokens": 5, "outputTokens": 1, "reasoningTokens": 3}
    totals = summed([priced, unpriced, priced])
    answer = totals.to_json()
    assert answer == {
        "turns": 3,
        "usage": {"inputTokens": 25, "outputTokens": 9, "cacheReadTokens": 12, "reasoningTokens": 3},
        "costUsd": 0.5,
        "unpricedTurns": 1,
    }
    assert UsageTotals.from_json(answer) == totals
    none_priced = summed([unpriced]).to_json()
    assert none_priced["costUsd"] is None and none_priced["unpricedTurns"] == 1
    assert UsageTotals.from_json(none_priced).cost_known is False
    # a value of the wrong type counts as nothing, never as a crash
    assert summed([{"inputTokens": "7", "outputTokens": True, "costUsd": "1"}]).to_json()["costUsd"] is None


async def test_the_subagents_turns_are_summed_apart_and_read_the_same_from_another_process(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    state = tmp_path / "state"
    d = await start_daemon(
        state, fake, init_options={"thinking": False, "agent": {"subagentsMaxParallel": 1}}
    )
    reader = await start_daemon(state, fake)
    try:
        sid = await d.new_session()
        fake.script(text_reply("alone"))
        await _turn(d, sid, "alone")
        assert "subagents" not in await d.request("dsh/session/usage", {"sessionId": sid})  # none yet
        fake.script(
            delegate(("c1", "one", "CHILD-ONE: say one", {}), ("c2", "two", "CHILD-TWO: say two", {})),
            text_reply("PARENT-DONE"),
        )
        fake.script_for("CHILD-ONE", text_reply("SUMMARY-ONE"))
        fake.script_for("CHILD-TWO", text_reply("SUMMARY-TWO"))
        await _turn(d, sid, PARENT)
        children = [e["data"]["childId"] for e in d.of(sid, "subagent/started")]
        assert len(children) == 2
        answer = await d.request("dsh/session/usage", {"sessionId": sid})
        # The parent's own figures are its own turns only, as before it started any.
        own = [e["data"]["usage"] for e in d.of(sid, "turn/usage")]
        assert {k: v for k, v in answer.items() if k != "subagents"} == _expected(own)
        # The children's own answers, added up.
        parts = [await d.request("dsh/session/usage", {"sessionId": child}) for child in children]
        assert all(p["turns"] == 1 and "subagents" not in p for p in parts)
        sub = answer["subagents"]
        assert sub["sessions"] == 2 and sub["turns"] == 2 and sub["unpricedTurns"] == 0
        assert sub["usage"]["inputTokens"] == sum(p["usage"]["inputTokens"] for p in parts) > 0
        assert sub["usage"]["outputTokens"] == sum(p["usage"]["outputTokens"] for p in parts) > 0
        assert sub["costUsd"] == pytest.approx(sum(p["costUsd"] for p in parts), rel=1e-12)
        # Another process reads the same from the store.
        assert await reader.request("dsh/session/usage", {"sessionId": sid}) == answer
        # A child whose stored usage is unreadable is left out; the session's own and the other
        # child's figures still answer.
        with sqlite3.connect(state / "sessions.sqlite3") as db:
            db.execute(
                "UPDATE events SET data='{\"turn\":\"x\"}' WHERE session_id=? AND type='turn/usage'",
                (children[0],),
            )
        damaged = await reader.request("dsh/session/usage", {"sessionId": sid})
        assert {k: v for k, v in damaged.items() if k != "subagents"} == _expected(own)
        assert damaged["subagents"]["sessions"] == 2 and damaged["subagents"]["turns"] == 1
        assert damaged["subagents"]["usage"] == parts[1]["usage"]
    finally:
        await stop_daemon(reader)
        await stop_daemon(d)
