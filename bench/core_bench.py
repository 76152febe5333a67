"""Agent core benchmark. Each figure is printed beside a baseline measured in the same run.

    .venv/bin/python -m bench.core_bench [--turns N] [--events N]

1. followups/s through the whole loop (instant scripted provider) vs bare SQLite insert+commit/s;
2. median latency of an acknowledged `send` (durable commit included) vs a bare insert+commit;
3. a resume of a 100,000-event session (`SessionManager.open`: load, repair check, inbox, the state
   an attach needs), and open + the derivation of the history its first model request carries
   (issue 20.3, goal <= 3x), each vs a bare `SELECT` of the same rows, in `--runs` interleaved rounds
   (median [min-max]): from the derived-state snapshot a turn end wrote, from it plus the most events
   a resume folds after one, and with no snapshot; plus what writing a snapshot costs.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from dsh_daemon.agent.loop import AgentOptions
from dsh_daemon.agent.snapshot import SNAPSHOT_FORMAT, DerivedSnapshot, SnapshotCodec
from dsh_daemon.host.manager import SNAPSHOT_EVERY, SessionManager
from dsh_daemon.llm.scripted import ScriptedProvider, reply
from dsh_daemon.model.events import Event
from dsh_daemon.model.jsonvalue import freeze_json
from dsh_daemon.model.messages import UserMessage
from dsh_daemon.session.store import SessionStore


def bare_sqlite_commits(path: Path, n: int) -> list[float]:
    """Baseline: one small row per committed transaction, WAL + synchronous=FULL like the store."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)")
    times = []
    for i in range(n):
        start = time.perf_counter()
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO t VALUES (?, ?)", (i, '{"type":"text","text":"hello"}'))
        db.execute("COMMIT")
        times.append(time.perf_counter() - start)
    db.close()
    return times


async def followups_per_second(state: Path, turns: int) -> float:
    manager = SessionManager(
        state, provider=ScriptedProvider(default=reply("ok")), options=lambda: AgentOptions(model="m")
    )
    agent = manager.create()
    start = time.perf_counter()
    for i in range(turns):
        agent.followup(UserMessage.create(f"prompt {i}"))
    await agent.when_idle()
    elapsed = time.perf_counter() - start
    await manager.close()
    return turns / elapsed


async def send_latencies(state: Path, n: int) -> list[float]:
    manager = SessionManager(state, provider=ScriptedProvider(), options=lambda: AgentOptions(model="m"))
    agent = manager.create()
    times = []
    for i in range(n):
        message = UserMessage.create(f"context {i}")
        start = time.perf_counter()
        agent.inject(message)  # acknowledged: the splice is committed when this returns
        times.append(time.perf_counter() - start)
    await manager.close()
    return times


def _turn_rows(turn: int, seq: int) -> list[Event]:
    """One stored turn of the big session: a prompt, a streamed answer (7 events)."""
    user = UserMessage.create(f"question {turn}").to_json()
    answer = {
        "id": f"a{turn}",
        "role": "assistant",
        "content": [{"type": "text", "text": "answer " * 10}],
        "source": {"kind": "model", "provider": "p", "model": "m"},
    }
    rows = [
        ("turn/start", {"turn": turn}),
        ("step/start", {"turn": turn, "step": 1}),
        ("user/message", user),
        ("assistant/chunk", {"turn": turn, "step": 1, "deltas": [{"type": "text", "text": "answer "}]}),
        ("assistant/message", {"turn": turn, "step": 1, "message": answer, "sourceEventSeqs": [seq + 3]}),
        ("step/end", {"turn": turn, "step": 1}),
        ("turn/end", {"turn": turn, "reason": {"kind": "completed"}}),
    ]
    return [Event(kind, freeze_json(data), seq + i, 0) for i, (kind, data) in enumerate(rows)]


def append_turns(state: Path, sid: str, events: int) -> None:
    """Store whole turns (at least `events` events) after the session's last one, as a daemon that
    crashed before its next snapshot would have left them."""
    store = SessionStore(state)
    seq = store.last_seq(sid) + 1
    turn = store.load_events_of_type(sid, "turn/start")[-1].data["turn"] if seq else 0
    target, batch = seq + events, []
    while seq < target:
        turn += 1
        rows = _turn_rows(turn, seq)
        batch += rows
        seq += len(rows)
        if len(batch) >= 5000:
            store.append_events(sid, batch)
            batch = []
    store.append_events(sid, batch)
    store.close()


def build_big_session(state: Path, events: int) -> str:
    store = SessionStore(state)
    store.create_session("big", title=None, cwd=None)
    store.close()
    append_turns(state, "big", events)
    return "big"


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} s [{min(values):.3f}-{max(values):.3f}, n={len(values)}]"


async def drive_one_turn(state: Path, sid: str) -> float:
    """Resume the session and run one turn, as the daemon does: its end writes the derived-state
    snapshot (issue 20.3). Returns how long the snapshot's encode and write took."""
    manager = SessionManager(
        state, provider=ScriptedProvider(default=reply("ok")), options=lambda: AgentOptions(model="m")
    )
    agent = manager.open(sid)
    agent.followup(UserMessage.create("one more"))
    await agent.when_idle()
    codec = SnapshotCodec()
    timings = []
    for _ in range(2):
        agent.followup(UserMessage.create("and one more"))
        await agent.when_idle()
        start = time.perf_counter()
        text = codec.encode(agent.snapshot())
        encoded = time.perf_counter()
        manager.store.write_snapshot(sid, agent.log.next_seq - 1, SNAPSHOT_FORMAT, text)
        timings.append((encoded - start, time.perf_counter() - encoded))
    (first, first_write), (again, again_write) = timings
    await manager.close()
    after_resume = await first_encode_after_a_resume(state, sid)
    print(
        f"snapshot of {agent.log.next_seq:,} events ({len(text) / 1e6:.1f} MB): the encode, on the event "
        f"loop: first {first:.3f} s, the next one (only what is new is encoded) {again:.3f} s, the "
        f"first after a resume from the snapshot {after_resume:.3f} s; "
        f"the write, on the snapshot writer's thread: {first_write:.3f} s / {again_write:.3f} s"
    )
    return again


async def first_encode_after_a_resume(state: Path, sid: str) -> float:
    """The session resumed from the snapshot just written, and one turn run: how long its turn end's
    snapshot encode took (the codec resumed from the stored text takes it as already dumped)."""
    timings: list[float] = []
    encode = SnapshotCodec.encode

    def timed_encode(codec: SnapshotCodec, snapshot: DerivedSnapshot) -> str:
        start = time.perf_counter()
        text = encode(codec, snapshot)
        timings.append(time.perf_counter() - start)
        return text

    SnapshotCodec.encode = timed_encode  # type: ignore[method-assign,assignment]
    try:
        manager = SessionManager(
            state,
            provider=ScriptedProvider(default=reply("ok")),
            options=lambda: AgentOptions(model="m"),
            snapshot_every=1,
        )
        agent = manager.open(sid)
        agent.followup(UserMessage.create("after a resume"))
        await agent.when_idle()
        await manager.close()
    finally:
        SnapshotCodec.encode = encode  # type: ignore[method-assign]
    return timings[0]


def resume_rounds(state: Path, sid: str, runs: int, label: str) -> None:
    """Opening a long session and deriving what its first model request carries, each round beside a
    bare SELECT of the same rows (interleaved, so a loaded machine hits both)."""
    raw, opened, first = [], [], []
    events = 0
    messages: list[object] = []
    for _ in range(runs):
        store = SessionStore(state)
        start = time.perf_counter()
        rows = store._db.execute(
            "SELECT seq, time, type, data FROM events WHERE session_id=?", (sid,)
        ).fetchall()
        raw.append(time.perf_counter() - start)
        store.close()
        manager = SessionManager(state)
        start = time.perf_counter()
        agent = manager.open(sid)
        opened.append(time.perf_counter() - start)
        messages = list(agent.derive().messages)  # the history the first request carries (D7)
        first.append(time.perf_counter() - start)
        events = agent.log.next_seq
        manager.leases.release(sid)
        manager.store.close()
        assert len(rows) == events and messages
    select = statistics.median(raw)
    print(f"{label}:")
    print(f"  bare SELECT of {events:,} rows: {spread(raw)}")
    print(f"  resume (open): {spread(opened)}   ratio {statistics.median(opened) / select:.1f}")
    print(
        f"  open + the first request's history ({len(messages):,} messages): {spread(first)}   "
        f"ratio {statistics.median(first) / select:.1f} (issue 20.3 goal <= 3)"
    )


def resume_figures(state: Path, sid: str, runs: int) -> None:
    """Issue 20.3, three cases: the snapshot a turn end wrote; that snapshot plus the most a resume
    folds (SNAPSHOT_EVERY events logged after it, as if the daemon died just before the next one);
    no snapshot at all (deleted: the whole log is derived, as before snapshots existed)."""
    asyncio.run(drive_one_turn(state, sid))
    resume_rounds(state, sid, runs, "resumed from the snapshot its last turn end wrote")
    append_turns(state, sid, SNAPSHOT_EVERY - 7)
    resume_rounds(state, sid, runs, f"... with ~{SNAPSHOT_EVERY} events logged after the snapshot (the most)")
    store = SessionStore(state)
    store.drop_snapshot(sid)
    store.close()
    resume_rounds(state, sid, max(1, runs // 2), "no snapshot (deleted: derived from the whole log)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--sends", type=int, default=300)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5, help="rounds of the resume figures")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        base = bare_sqlite_commits(root / "bare.sqlite3", args.sends)
        base_rate = len(base) / sum(base)
        rate = asyncio.run(followups_per_second(root / "loop", args.turns))
        print(
            f"followups/s through the loop: {rate:,.0f}   bare commits/s: {base_rate:,.0f}   "
            f"ratio {rate / base_rate:.3f} (each turn commits several times)"
        )
        sends = asyncio.run(send_latencies(root / "sends", args.sends))
        med, base_med = statistics.median(sends), statistics.median(base)
        print(
            f"acknowledged send, median: {med * 1e3:.3f} ms   bare insert+commit: {base_med * 1e3:.3f} ms   "
            f"ratio {med / base_med:.2f}"
        )
        sid = build_big_session(root / "big", args.events)
        resume_figures(root / "big", sid, args.runs)


if __name__ == "__main__":
    main()
