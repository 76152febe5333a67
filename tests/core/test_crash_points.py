"""A crash after any durable event: every reload repairs to a sound log that has lost no acknowledged
input (issue 8). The scenario's log is cut after each of its events in turn and opened from a fresh
store, which is exactly what a SIGKILL after that event's commit leaves behind."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from dsh_daemon.agent.hooks import Enter, Hooks, PreStepContext, PreStepDecision
from dsh_daemon.agent.invariants import check_log, unaccounted
from dsh_daemon.host.manager import SessionManager
from dsh_daemon.llm.scripted import Sleep, reply
from dsh_daemon.model import events as ev
from dsh_daemon.model.provider import Finish, TextDelta
from dsh_daemon.session.gaps import LOG_GAP
from dsh_daemon.session.store import DB_FILENAME, SessionStore
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


# ---- issue 18 item 3: a seq a client saw is never reused ------------------------------------------------


def _reopened(snapshot: Path) -> SessionManager:
    """A daemon starting on what a SIGKILL at the snapshot left: the dead holder's lease is gone."""
    db = sqlite3.connect(snapshot / DB_FILENAME)
    db.execute("DELETE FROM leases")
    db.commit()
    db.close()
    return SessionManager(snapshot)


async def test_a_seq_a_client_saw_is_never_reused_whatever_the_kill_point(tmp_path: Path) -> None:
    """Durable events are published at once and written up to 100 ms later. At every publish, the
    database is copied as a SIGKILL right then would leave it; a daemon started on each copy drives
    the session on: every seq published so far must hold the same event, or a `log/gap` saying it
    never happened, and a client reattaching after any seq it saw must learn of that."""
    steps = [TextDelta("a"), Sleep(0.02), TextDelta("b"), Sleep(0.02), TextDelta("c"), Finish("stop")]
    h = Harness(
        tmp_path / "run",
        [reply("", tool_calls=[("c1", "echo", '{"x": 1}')]), steps, steps, steps],
        tools=[echo_tool()],
    )
    sid = h.agent.session_id
    source = sqlite3.connect(h.state_dir / DB_FILENAME)
    seen: list[ev.Event] = []
    snapshots: list[Path] = []

    def at_publish(event: ev.Event) -> None:
        if event.seq is None:
            return
        seen.append(event)
        copy = tmp_path / f"kill-{len(seen)}"
        copy.mkdir()
        target = sqlite3.connect(copy / DB_FILENAME)
        source.backup(target)  # exactly what is committed right now
        target.close()
        snapshots.append(copy)

    h.agent.subscribe(at_publish)
    h.agent.followup(msg("first", id="f1"))
    await h.idle()
    h.agent.followup(msg("second", id="f2"))
    h.agent.followup(msg("third", id="f3"))
    await h.idle()
    await h.manager.close()
    source.close()
    assert len(seen) > 30
    reused = []
    for index, snapshot in enumerate(snapshots):
        manager = _reopened(snapshot)
        agent = manager.open(sid)
        agent.inject(msg("after the restart"))  # the next driver writes on
        after = agent.log.events
        assert check_log(after, agent.inbox.pending_ids()) == [], index
        for event in seen[: index + 1]:
            assert event.seq is not None
            if event.seq >= len(after):  # not in the log: the next events the driver writes take it
                reused.append((index, event.seq, event.type, "(free for the next event)"))
                continue
            stored = after[event.seq]
            if stored.type == LOG_GAP:
                assert stored.data["from"] <= event.seq <= stored.data["to"]
            elif (stored.type, stored.data) != (event.type, event.data):
                reused.append((index, event.seq, event.type, stored.type))
        # a client that saw everything up to here reattaches after its last seq: if anything it saw
        # was lost, the replay tells it
        last_seen = seen[index].seq
        assert last_seen is not None
        lost = [e.seq for e in seen[: index + 1] if e.seq < len(after) and after[e.seq].type == LOG_GAP]
        replay = manager.read(sid, last_seen)
        if lost:
            gaps = [e for e in replay if e.type == LOG_GAP]
            assert gaps and gaps[0].data["from"] <= min(lost), (index, lost)
        await manager.close()
    assert reused == [], reused[:5]
