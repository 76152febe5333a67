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
from dsh_daemon.session.gaps import LOG_GAP

ROOT = Path(__file__).resolve().parents[2]
RUNS = 20


Seen = dict[int, tuple[str, str]]  # seq -> (type, digest) of what a client was sent


def _run_child(
    state: Path, session_id: str, tag: str, kill_after: float, seen: Seen | None = None
) -> list[str]:
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
    # The kill can land in the middle of a write: a last line without its newline was never fully
    # received, so it acknowledges nothing and reports no event.
    lines = out.split(b"\n")[:-1]
    for line in lines:
        if line.startswith(b"EV ") and seen is not None:
            _, seq, kind, digest = line.decode().split()
            seen[int(seq)] = (kind, digest)
    return [line.split()[1].decode() for line in lines if line.startswith(b"ACK ")]


def _check_no_seen_seq_reused(events: list[ev.Event], seen: Seen, this_run: Seen, run: int) -> int:
    """Every seq a client was ever sent still holds that event, or a `log/gap` saying it never
    happened; a client reattaching after the last seq this run sent learns of every one it lost."""
    from tests.core.crash_child import digest

    for seq, (kind, want) in seen.items():
        assert seq < len(events), (run, seq, "a seen seq is free for the next event")
        stored = events[seq]
        if stored.type != LOG_GAP:
            assert (stored.type, digest(stored.data)) == (kind, want), (run, seq, kind, stored.type)
    lost = [seq for seq in this_run if events[seq].type == LOG_GAP]
    last_seen = max(this_run)
    if lost:
        gaps = [e for e in events[last_seen + 1 :] if e.type == LOG_GAP]
        assert gaps and gaps[0].data["from"] <= min(lost), (run, lost)
    return len(lost)


def test_sigkill_at_random_points_loses_no_acknowledged_send(tmp_path: Path) -> None:
    rng = random.Random(20261130)
    state = tmp_path / "state"
    session_id = "crash-session"
    acknowledged: set[str] = set()
    repaired_runs = 0
    last_turn = 0
    seen: Seen = {}
    lost_seen = 0  # seqs a client was sent that the kill kept off the disk
    for run in range(RUNS):
        this_run: Seen = {}
        acknowledged.update(_run_child(state, session_id, f"r{run}", rng.uniform(0.05, 0.5), this_run))
        assert this_run, run
        seen.update(this_run)
        manager = SessionManager(state)
        raw = manager.read(session_id)
        open_tail = any(e.type == ev.TURN_START for e in raw) and not _tail_closed(raw)
        agent = manager.open(session_id)  # takes the dead child's lease at once, repairs the tail
        events = agent.log.events
        lost_seen += _check_no_seen_seq_reused(events, seen, this_run, run)
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
    assert lost_seen > 0, "no kill landed between a publish and its commit"


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
