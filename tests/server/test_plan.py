"""The agent's plan through the real daemon process (protocol.md §7 `plan/updated`, §12 `update_plan`):
the tool offered and explained to the model, every update a durable event replayed on attach and
kept across a SIGKILL and in a fork, a rewind taking back the cut turns' plans, bad plans refused with a typed
error and nothing recorded, and the tool offered in plan mode without a permission question."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path
from typing import Any

from dsh_daemon.model.events import Event
from dsh_daemon.model.jsonvalue import freeze_json
from dsh_daemon.model.plan import current_plan
from tests.fakes.deepseek_server import FakeDeepSeek, Reply
from tests.server.harness import Daemon, start_daemon, stop_daemon, text_reply, tool_call_stream

FIRST = [{"title": "Read the code", "status": "in_progress"}, {"title": "Fix the bug", "status": "pending"}]
SECOND = [{"title": "Read the code", "status": "done"}, {"title": "Fix the bug", "status": "in_progress"}]
THIRD = [
    {"title": "Read the code", "status": "done"},
    {"title": "Fix the bug", "status": "done"},
    {"title": "Run the tests", "status": "in_progress"},
]


def plan_call(steps: list[dict[str, str]], call_id: str, note: str | None = None) -> Reply:
    args: dict[str, Any] = {"steps": steps}
    if note is not None:
        args["note"] = note
    return Reply.stream(tool_call_stream([(call_id, "update_plan", args)]))


async def run_turn(daemon: Daemon, sid: str, text: str) -> None:
    done = len(daemon.of(sid, "turn/end"))
    await daemon.request("dsh/followup", {"sessionId": sid, "message": {"content": text}})
    await daemon.wait_idle_turn(sid, done + 1)


def plan_of(daemon: Daemon, sid: str) -> dict[str, Any] | None:
    """The plan a client folds from the durable events it received (model/plan.py's rule)."""
    events = [
        Event(e["type"], freeze_json(e["data"]), e["seq"]) for e in daemon.of(sid) if e.get("seq") is not None
    ]
    plan = current_plan(events)
    return None if plan is None else plan.data()


async def kill(daemon: Daemon) -> None:
    server = daemon.client._server
    assert server is not None
    os.kill(server.pid, signal.SIGKILL)
    await asyncio.wait_for(server.wait(), 15)
    with contextlib.suppress(Exception):
        await daemon.client.stop()


async def test_plan_updates_are_durable_replayed_kept_across_sigkill_and_cut_by_a_rewind(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    state, work = tmp_path / "state", tmp_path / "work"
    work.mkdir()
    d = await start_daemon(state, fake, root=work)
    fake.script(
        plan_call(FIRST, "call_1"),
        plan_call(SECOND, "call_2", note="found it"),
        text_reply("first done"),
        plan_call(THIRD, "call_3"),
        text_reply("second done"),
    )
    sid = await d.new_session(cwd=str(work))
    await run_turn(d, sid, "fix the bug")

    # The model is offered the tool and told to use it.
    first_request = fake.requests[0].json
    assert "update_plan" in [t["function"]["name"] for t in first_request["tools"]]
    assert "update_plan" in first_request["messages"][0]["content"]  # the system prompt's guidance

    ids = [c["data"]["callId"] for c in d.of(sid, "tool/call")]  # the daemon's own call ids
    updates = d.of(sid, "plan/updated")
    assert [u["data"] for u in updates] == [
        {"turn": 1, "steps": FIRST, "callId": ids[0]},
        {"turn": 1, "steps": SECOND, "note": "found it", "callId": ids[1]},
    ]
    assert all(isinstance(u["seq"], int) for u in updates)
    results = d.of(sid, "tool/result")
    assert [r["data"]["message"]["content"][0]["content"][0]["text"] for r in results] == [
        "Plan updated: 0/2 done.",
        "Plan updated: 1/2 done.",
    ]
    assert all("error" not in r["data"] for r in results)
    assert d.permission_requests == []  # it only records: nobody is asked
    # Each update lands between its call and its result.
    seqs = {(e["type"], e["data"].get("callId")): e["seq"] for e in d.of(sid) if e.get("seq") is not None}
    assert seqs[("tool/call", ids[0])] < seqs[("plan/updated", ids[0])] < seqs[("tool/result", ids[0])]

    await run_turn(d, sid, "and test it")
    ids = [c["data"]["callId"] for c in d.of(sid, "tool/call")]
    after_turn_2 = {"turn": 2, "steps": THIRD, "callId": ids[2]}
    after_turn_1 = {"turn": 1, "steps": SECOND, "note": "found it", "callId": ids[1]}
    assert plan_of(d, sid) == after_turn_2

    # A fork at turn 1 copies the log that far: its plan is turn 1's.
    forked = (await d.request("dsh/session/fork", {"sessionId": sid, "atTurn": 1}))["sessionId"]
    attached = await d.request("dsh/session/attach", {"sessionId": forked})
    assert attached["plan"] == after_turn_1 and plan_of(d, forked) == after_turn_1

    # SIGKILL: the plan is on disk; a new process replays it on attach.
    await kill(d)
    d = await start_daemon(state, fake, root=work)
    attached = await d.request("dsh/session/attach", {"sessionId": sid})
    assert attached["plan"] == after_turn_2  # the current plan, folded by the daemon
    assert [u["data"] for u in d.of(sid, "plan/updated")] == [
        {"turn": 1, "steps": FIRST, "callId": ids[0]},
        after_turn_1,
        after_turn_2,
    ]
    assert plan_of(d, sid) == after_turn_2

    # A rewind to before turn 2: the plan is what it was when turn 2 began.
    result = await d.request("dsh/session/rewind", {"sessionId": sid, "beforeTurn": 2})
    assert "cutSeq" in result
    assert plan_of(d, sid) == after_turn_1

    # ... and stays so after another SIGKILL, for a client that attaches afresh: replaying all, or
    # nothing (the attach is answered from the store, its plan too).
    await kill(d)
    d = await start_daemon(state, fake, root=work)
    attached = await d.request("dsh/session/attach", {"sessionId": sid, "replay": "none"})
    assert attached["plan"] == after_turn_1 and d.of(sid, "plan/updated") == []
    await d.request("dsh/session/detach", {"sessionId": sid})
    attached = await d.request("dsh/session/attach", {"sessionId": sid})
    assert attached["plan"] == after_turn_1 and plan_of(d, sid) == after_turn_1
    # A rewind to before turn 1: no plan at all.
    await d.request("dsh/session/rewind", {"sessionId": sid, "beforeTurn": 1})
    assert plan_of(d, sid) is None
    await stop_daemon(d)
    d = await start_daemon(state, fake, root=work)
    assert "plan" not in await d.request("dsh/session/attach", {"sessionId": sid})
    await stop_daemon(d)


async def test_a_bad_plan_is_refused_with_a_typed_error_and_records_nothing(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    d = await start_daemon(tmp_path / "state", fake)
    two_running = [{"title": "a", "status": "in_progress"}, {"title": "b", "status": "in_progress"}]
    fake.script(
        plan_call(two_running, "call_1"),
        plan_call([{"title": "a", "status": "started"}], "call_2"),
        plan_call([{"title": "   ", "status": "pending"}], "call_3"),
        Reply.stream(tool_call_stream([("call_4", "update_plan", {"steps": "do it"})])),
        plan_call([{"title": f"step {i}", "status": "pending"} for i in range(51)], "call_5"),
        text_reply("gave up"),
    )
    sid = await d.new_session()
    await run_turn(d, sid, "plan badly")
    results = d.of(sid, "tool/result")
    assert [r["data"]["error"]["code"] for r in results] == ["INVALID_ARGUMENTS"] * 5
    texts = [r["data"]["message"]["content"][0]["content"][0]["text"] for r in results]
    assert "at most one step may be in_progress" in texts[0]
    assert "status must be one of: pending, in_progress, done" in texts[1]
    assert "title must be a non-empty string" in texts[2]
    assert "'steps' must be an array" in texts[3]
    assert "at most 50" in texts[4]
    assert d.of(sid, "plan/updated") == []
    await stop_daemon(d)


async def test_plan_mode_offers_update_plan_and_records_without_asking(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    d = await start_daemon(tmp_path / "state", fake)
    fake.script(plan_call(FIRST, "call_1"), text_reply("here is my plan"))
    sid = await d.new_session()
    await d.request("dsh/session/setMode", {"sessionId": sid, "mode": "plan"})
    await run_turn(d, sid, "plan it")
    offered = [t["function"]["name"] for t in fake.requests[0].json["tools"]]
    assert "update_plan" in offered and "edit_file" not in offered
    assert [u["data"]["steps"] for u in d.of(sid, "plan/updated")] == [FIRST]
    assert d.permission_requests == []
    await stop_daemon(d)
