"""SIGKILL a child driving a session at random points; every reload must be sound (D6, D7)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from dsh_daemon.agent.invariants import check_log, unaccounted
from dsh_daemon.host.manager import SessionManager
from dsh_daemon.model import events as ev

ROOT = Path(__file__).resolve().parents[2]
RUNS = 20


def _run_child(state: Path, session_id: str, tag: str, kill_after: float) -> list[str]:
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.core.crash_child", str(state), session_id, tag],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "DSH_HOME": str(state)},
    )
    assert child.stdout is not None
    opened = child.stdout.readline()
    assert opened.startswith(b"OPEN"), child.stderr.read() if child.stderr else opened
    time.sleep(kill_after)
    child.send_signal(signal.SIGKILL)
    out, _ = child.communicate()
    return [line.split()[1].decode() for line in out.splitlines() if line.startswith(b"ACK ")]


def test_sigkill_at_random_points_loses_no_acknowledged_send(tmp_path: Path) -> None:
    rng = random.Random(20261130)
    state = tmp_path / "state"
    session_id = "crash-session"
    acknowledged: set[str] = set()
    repaired_runs = 0
    last_turn = 0
    for run in range(RUNS):
        acknowledged.update(_run_child(state, session_id, f"r{run}", rng.uniform(0.05, 0.5)))
        manager = SessionManager(state)
        raw = manager.read(session_id)
        open_tail = any(e.type == ev.TURN_START for e in raw) and not _tail_closed(raw)
        agent = manager.open(session_id)  # takes the dead child's lease at once, repairs the tail
        events = agent.log.events
        problems = check_log(events, agent.inbox.pending_ids())
        assert problems == [], (run, problems)
        inserted = {m["id"] for e in events if e.type == ev.INBOX_SPLICED for m in e.data["inserted"]}
        assert acknowledged <= inserted, (run, acknowledged - inserted)
        pending = agent.inbox.pending_ids()
        assert unaccounted(events, acknowledged, pending) == set(), run
        if open_tail:
            repaired_runs += 1
            assert events[-1].type == ev.TURN_END
            assert events[-1].data["reason"] == {"kind": "interrupted"}
        turns = [int(e.data["turn"]) for e in events if e.type == ev.TURN_START]
        assert turns == list(range(1, len(turns) + 1))
        assert agent.turn >= last_turn
        last_turn = agent.turn
        manager.leases.release(session_id)
        manager.store.close()
    assert repaired_runs >= 5, f"only {repaired_runs} of {RUNS} kills landed mid-turn"


def _tail_closed(events: list) -> bool:
    for event in reversed(events):
        if event.type == ev.TURN_END:
            return True
        if event.type == ev.TURN_START:
            return False
    return True


async def test_resumed_session_continues_with_the_next_turn_number(tmp_path: Path) -> None:
    from dsh_daemon.agent.loop import AgentOptions
    from dsh_daemon.llm.scripted import ScriptedProvider
    from dsh_daemon.model.messages import UserMessage

    state = tmp_path / "state"
    _run_child(state, "s", "x", 0.3)
    manager = SessionManager(state, provider=ScriptedProvider(), options=lambda: AgentOptions(model="m"))
    agent = manager.open("s")
    before = agent.turn
    agent.inbox.clear()
    agent.followup(UserMessage.create("after the crash"))
    await agent.when_idle()
    starts = [int(e.data["turn"]) for e in agent.log.events if e.type == ev.TURN_START]
    assert starts[-1] == before + 1
    assert agent.log.events[-1].data["reason"] == {"kind": "completed"}
    await manager.close()
