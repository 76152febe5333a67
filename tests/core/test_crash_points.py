"""A crash after any durable event: every reload repairs to a sound log that has lost no acknowledged
input (issue 8). The scenario's log is cut after each of its events in turn and opened from a fresh
store, which is exactly what a SIGKILL after that event's commit leaves behind."""

from __future__ import annotations

import asyncio
from pathlib import Path

from dsh_daemon.agent.hooks import Enter, Hooks, PreStepContext, PreStepDecision
from dsh_daemon.agent.invariants import check_log, unaccounted
from dsh_daemon.host.manager import SessionManager
from dsh_daemon.llm.scripted import reply
from dsh_daemon.model import events as ev
from dsh_daemon.session.store import SessionStore
from tests.core.harness import Harness, echo_tool, msg


async def _scenario(tmp_path: Path) -> list[ev.Event]:
    """Followups queued behind a running turn, steers and injects at boundaries, a tool batch and a
    keep-inbox cancel, so the log holds claims at first and later boundaries of several turns."""
    hooks = Hooks()
    steered = asyncio.Event()
    harness: list[Harness] = []

    async def steer_once(ctx: PreStepContext, inner: object) -> PreStepDecision:
        if ctx.step == 1 and ctx.turn == 1 and not steered.is_set():
            steered.set()
            harness[0].agent.steer(msg("steer-1", id="s1"))
            harness[0].agent.inject(msg("ctx-1", {"kind": "plugin", "plugin": "t"}, id="i1"))
        return await inner()  # type: ignore[operator,no-any-return]

    hooks.pre_step.append(steer_once)
    h = Harness(
        tmp_path / "scenario",
        [reply("", tool_calls=[("c1", "echo", '{"x": 1}')]), reply("one"), reply("two"), reply("three")],
        hooks=hooks,
        tools=[echo_tool()],
    )
    harness.append(h)
    h.agent.inject(msg("parked", id="p1"))
    h.agent.followup(msg("A", id="a"))
    selection = msg("x = 1", {"kind": "editor", "uri": "file:///a.py", "contextKind": "selection"}, id="sel")
    h.agent.send(msg("B", id="b"), target="next-turn", wakeup=True, attachments=[selection])
    h.agent.followup(msg("C", id="c"))
    await h.idle()
    h.agent.followup(msg("D", id="d"))
    h.agent.cancel(keep_inbox=True)
    await h.idle()
    h.check()
    await h.manager.close()
    return list(h.log)


async def test_a_crash_after_any_event_loses_no_acknowledged_input(tmp_path: Path) -> None:
    events = await _scenario(tmp_path)
    assert any(e.type == ev.INBOX_SPLICED and "outcome" not in e.data and e.data.get("removedCount")
               for e in events), "the scenario must claim"  # fmt: skip
    repaired = 0
    for cut in range(1, len(events) + 1):
        if cut < len(events) and events[cut].type == ev.USER_MESSAGE:
            continue  # a step/start and the messages it enters are appended with no await between them
        state = tmp_path / f"cut-{cut}"
        store = SessionStore(state)
        store.create_session("s", title=None, cwd=str(tmp_path))
        store.append_events("s", events[:cut])
        store.close()
        manager = SessionManager(state)
        agent = manager.open("s")
        after = agent.log.events
        pending = agent.inbox.pending_ids()
        assert check_log(after, pending) == [], cut
        acknowledged = {
            str(m["id"]) for e in events[:cut] if e.type == ev.INBOX_SPLICED for m in e.data["inserted"]
        }
        assert unaccounted(after, acknowledged, pending) == set(), cut
        repaired += len(after) > cut
        await manager.close()
    assert repaired > 10  # many cuts fall inside a turn


async def test_a_crash_between_claim_and_step_returns_the_claim_to_the_front(tmp_path: Path) -> None:
    """The case seen once in 100 kills: `turn/start` and the claims are on disk, `step/start` is not."""
    hooks = Hooks()
    blocked = asyncio.Event()

    async def stall(ctx: PreStepContext, inner: object) -> PreStepDecision:
        blocked.set()
        await asyncio.Event().wait()  # the "crash" happens while the boundary is in its pre-step
        return Enter(())

    hooks.pre_step.append(stall)
    h = Harness(tmp_path / "a", hooks=hooks)
    h.agent.inject(msg("ctx", id="x"))
    h.agent.followup(msg("A", id="a"))
    h.agent.followup(msg("B", id="b"))
    await blocked.wait()
    h.agent.log.commit()
    events = list(h.log)
    types = [e.type for e in events]
    assert types.count(ev.TURN_START) == 1 and ev.STEP_START not in types

    state = tmp_path / "b"
    store = SessionStore(state)
    store.create_session("s", title=None, cwd=str(tmp_path))
    store.append_events("s", events)
    store.close()
    manager = SessionManager(state)
    agent = manager.open("s")
    assert [m.id for m in agent.inbox.next_step] == ["x"]
    assert [m.id for m in agent.inbox.next_turn] == ["a", "b"]
    assert agent.log.events[-1].data["reason"] == {"kind": "interrupted"}
    assert check_log(agent.log.events, ["x", "a", "b"]) == []
    await manager.close()
    h.agent.log.close()
