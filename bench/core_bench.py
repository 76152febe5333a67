"""Agent core benchmark. Each figure is printed beside a baseline measured in the same run.

    .venv/bin/python -m bench.core_bench [--turns N] [--events N]

1. followups/s through the whole loop (instant scripted provider) vs bare SQLite insert+commit/s;
2. median latency of an acknowledged `send` (durable commit included) vs a bare insert+commit;
3. a resume of a 100,000-event session (`SessionManager.open`: load, repair check, inbox, the state
   an attach needs), and open + the derivation of the history its first model request carries
   (issue 20.3, goal <= 3x), each vs a bare `SELECT` of the same rows, in `--runs` interleaved rounds
   (median [min-max]): from the derived-state snapshot a turn end wrote, from it plus the most events
   a resume folds after one, and with no snapshot;
4. the event loop's worst stall (a probe asking to wake every millisecond) across a turn of that
   session whose end writes a derived-state snapshot: the first of a session opened with none, the
   next one, the first after a resume from it, beside the same turn writing none and the idle loop
   (issue 40.4, goal: no stall over 20 ms), each with the session's state frozen as the daemon does
   (host/heap.py) and, in the next round, not frozen; and the garbage the freezes kept;
   before them, the CPU time of a snapshot encode's worst step (what one step adds to a slice);
5. from a send to the first byte of its provider request at a real HTTP server on loopback (the
   fake DeepSeek): a fresh session, one of 2,000 turns, and that one after a compaction, the first
   send after each open and the next (issue 40.3, goal: <= 20 ms added over the fresh session).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from dsh_daemon.agent.loop import Agent, AgentOptions  # noqa: E402
from dsh_daemon.agent.snapshot import SLICE_S, SNAPSHOT_FORMAT, SnapshotCodec, SnapshotView  # noqa: E402
from dsh_daemon.host.heap import keep_long_lived_state, stop_keeping_long_lived_state  # noqa: E402
from dsh_daemon.host.manager import SNAPSHOT_EVERY, SessionManager  # noqa: E402
from dsh_daemon.llm.config import ProviderConfig  # noqa: E402
from dsh_daemon.llm.deepseek import DeepSeekProvider  # noqa: E402
from dsh_daemon.llm.scripted import ScriptedProvider, reply  # noqa: E402
from dsh_daemon.model.events import Event  # noqa: E402
from dsh_daemon.model.jsonvalue import freeze_json  # noqa: E402
from dsh_daemon.model.messages import UserMessage  # noqa: E402
from dsh_daemon.session.store import SessionStore  # noqa: E402
from tests.fakes import deepseek_server  # noqa: E402


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


async def snapshot_cost(state: Path, sid: str) -> None:
    """What encoding the snapshot costs (now on the snapshot writer's thread), first and next."""
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
    print(
        f"snapshot of {agent.log.next_seq:,} events ({len(text) / 1e6:.1f} MB), encode: first {first:.3f} s, "
        f"the next one (only what is new is encoded) {again:.3f} s; write {first_write:.3f} s / "
        f"{again_write:.3f} s"
    )


class LoopLag:
    """The event loop's stalls, as a task that asks to wake every millisecond sees them: how late
    each wake-up came, and how much of that the cyclic garbage collector took (a full collection of
    a heap holding a 100,000-event session's state takes about a second, wherever it falls)."""

    def __init__(self) -> None:
        self.lags: list[tuple[float, float]] = []  # (lag, of which collecting)
        self._task: asyncio.Task[None] | None = None
        self._collecting = 0.0
        self._started = 0.0

    def _gc(self, phase: str, _info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self._collecting += time.perf_counter() - self._started

    async def _probe(self) -> None:
        while True:
            start, collected = time.perf_counter(), self._collecting
            await asyncio.sleep(0.001)
            self.lags.append((time.perf_counter() - start - 0.001, self._collecting - collected))

    def start(self) -> None:
        gc.callbacks.append(self._gc)
        self._task = asyncio.get_running_loop().create_task(self._probe())

    async def stop(self) -> None:
        gc.callbacks.remove(self._gc)
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def worst_during(self, work: Callable[[], Awaitable[None]]) -> tuple[float, float]:
        """The worst stall during `work`, and the worst with the collector's time taken out."""
        await asyncio.sleep(0.01)  # (a stall before this call is not this work's)
        self.lags.clear()
        await work()
        await asyncio.sleep(0.003)  # the wake-up that was due during the last stall
        return max(lag for lag, _ in self.lags), max(lag - collecting for lag, collecting in self.lags)


async def _snapshots_written(manager: SessionManager) -> None:
    while manager._snapshot_writes:
        await asyncio.gather(*manager._snapshot_writes, return_exceptions=True)


async def turn_end_stalls(state: Path, sid: str, runs: int) -> None:
    """Issue 40.4: the worst event-loop stall across one turn of the big session (the send, the
    scripted reply, the turn end and the snapshot written), in interleaved rounds: with no snapshot
    written (`snapshot_every` out of reach), the first of a session opened with none (its codec new:
    everything is encoded), the next one, the first after a resume from a snapshot; and the idle loop.
    Each round twice, one after the other: with the state frozen as the daemon runs (host/heap.py),
    and with the collector walking all of it (the same-run baseline of the freezes)."""
    cases = [
        "idle loop, 0.2 s",
        "turn, no snapshot",
        "first snapshot",
        "next snapshot",
        "first after a resume",
    ]
    ways = ("frozen (host/heap.py)", "not frozen")
    worst: dict[tuple[str, str], list[tuple[float, float]]] = {(c, w): [] for c in cases for w in ways}
    probe = LoopLag()
    probe.start()
    kept: list[int] = []

    def manager(every: int) -> SessionManager:
        return SessionManager(
            state,
            provider=ScriptedProvider(default=reply("ok")),
            options=lambda: AgentOptions(model="m"),
            snapshot_every=every,
        )

    def turn(m: SessionManager, agent: Agent, text: str) -> Callable[[], Awaitable[None]]:
        async def one() -> None:
            agent.followup(UserMessage.create(text))
            await agent.when_idle()
            await _snapshots_written(m)

        return one

    for index in range(runs * 2):
        way = ways[index % 2]
        if way == ways[0]:
            keep_long_lived_state()  # as the daemon runs
        store = SessionStore(state)
        store.drop_snapshot(sid)
        store.close()
        # Opened with no snapshot: its first request derives the whole log (the resume figures' part),
        # so a turn is run first, writing nothing, and the turns measured come after it.
        m = manager(10**9)
        agent = m.open(sid)
        await turn(m, agent, "warm-up")()
        worst[cases[0], way].append(await probe.worst_during(lambda: asyncio.sleep(0.2)))
        worst[cases[1], way].append(await probe.worst_during(turn(m, agent, "no snapshot")))
        m.snapshot_every = 1  # every turn end from now on writes one: this first one encodes everything
        worst[cases[2], way].append(await probe.worst_during(turn(m, agent, "first")))
        worst[cases[3], way].append(await probe.worst_during(turn(m, agent, "next")))
        del agent
        await m.close_session(sid)  # as a daemon closes a session (host/heap.py: frees it)
        await m.close()
        m = manager(1)
        agent = m.open(sid)  # from the snapshot just written: its codec resumes from the stored text
        worst[cases[4], way].append(await probe.worst_during(turn(m, agent, "after a resume")))
        del agent
        await m.close_session(sid)
        await m.close()
        if way == ways[0]:
            stop_keeping_long_lived_state()  # everything back to the collector: what it frees now
            kept.append(gc.collect())  # is garbage the freezes kept
        gc.collect()  # (each round starts from the same heap)
    await probe.stop()
    print(
        f"the event loop's worst stall across a turn of the big session, {runs} rounds each way, "
        "interleaved (ms, median [min-max]); beside it, the worst with the garbage collector's time "
        "taken out:"
    )
    for case in cases:
        for way in ways:
            whole, own = ([v[i] * 1e3 for v in worst[case, way]] for i in (0, 1))
            print(
                f"  {case:<22} {way:<22} {statistics.median(whole):7.1f} [{min(whole):.1f}-{max(whole):.1f}]"
                f"   without collections {statistics.median(own):6.1f} [{min(own):.1f}-{max(own):.1f}]"
            )
    print("  (issue 40.4 goal: no stall over 20 ms at a turn end)")
    print(f"  garbage the freezes had kept from the collector at each frozen round's end: {kept} objects")


def encode_steps_cpu(state: Path, sid: str) -> None:
    """Issue 40.4: the CPU time (this thread's, so a loaded machine's other processes do not count)
    of the worst step of a snapshot's encode, which is what one step can add to a slice of
    `encode_in_slices` (SLICE_S of steps, then one more), beside the whole encode's: a fresh codec's
    and the next one's."""

    async def run() -> list[tuple[float, float, int]]:
        manager = SessionManager(
            state, provider=ScriptedProvider(default=reply("ok")), options=lambda: AgentOptions(model="m")
        )
        agent = manager.open(sid)
        codec = SnapshotCodec()
        figures = []
        for text in ("one more", "and one more"):
            agent.followup(UserMessage.create(text))
            await agent.when_idle()
            steps = codec.encode_steps(SnapshotView.of(agent.snapshot()))
            worst, whole, count = 0.0, 0.0, 0
            with_collector = gc.isenabled()
            gc.disable()  # (as encode_in_slices runs each slice)
            try:
                while True:
                    start = time.thread_time()
                    try:
                        next(steps)
                    except StopIteration:
                        break
                    finally:
                        took = time.thread_time() - start
                        worst, whole, count = max(worst, took), whole + took, count + 1
            finally:
                if with_collector:
                    gc.enable()
            figures.append((worst, whole, count))
        await manager.close()
        return figures

    (first, first_all, first_n), (next_, next_all, next_n) = asyncio.run(run())
    print(
        f"snapshot encode, CPU time of its worst step (goal: a slice of {SLICE_S * 1e3:.0f} ms plus one step "
        f"well under 20 ms): fresh codec {first * 1e3:.1f} ms of {first_all * 1e3:.0f} ms in {first_n} "
        f"steps; the next {next_ * 1e3:.1f} ms of {next_all * 1e3:.0f} ms in {next_n} steps"
    )


FIRST_BYTES: list[float] = []  # when each request's first byte reached the fake server (its thread)


def _note_first_bytes() -> None:
    """The fake server notes the time the first bytes of each request it reads arrive."""
    fill, read_request = deepseek_server._Conn.fill, deepseek_server.FakeDeepSeek._read_request
    awaiting: set[int] = set()

    async def noted(conn: deepseek_server._Conn) -> bool:
        got = await fill(conn)
        if got and id(conn) in awaiting:
            awaiting.discard(id(conn))
            FIRST_BYTES.append(time.perf_counter())
        return got

    async def reading(
        server: deepseek_server.FakeDeepSeek, conn: deepseek_server._Conn
    ) -> deepseek_server.RecordedRequest | None:
        if not conn.buf:
            awaiting.add(id(conn))
        return await read_request(server, conn)

    deepseek_server._Conn.fill = noted  # type: ignore[method-assign]
    deepseek_server.FakeDeepSeek._read_request = reading  # type: ignore[method-assign]


async def first_request_latency(root: Path, turns: int, runs: int) -> None:
    """Issue 40.3: from a send (`followup`, what `dsh/send` calls) to the first byte of its model
    request at a real HTTP server on loopback: the user message committed, the history derived, the
    prompt assembled, the request serialised and sent. A fresh session, one of `turns` stored turns,
    and one of as many turns compacted once (its history is then the summary), each opened anew
    every round (the first send after an open, then the next), in interleaved rounds. Each long
    session is opened from the derived-state snapshot a daemon leaves (resuming without one is
    the resume figures' subject)."""
    _note_first_bytes()
    fake = deepseek_server.FakeDeepSeek().start()
    provider = DeepSeekProvider(ProviderConfig(base_url=fake.base_url, api_key="sk-bench-not-a-real-key"))
    state = root / "requests"
    store = SessionStore(state)
    for sid in ("long", "compacted"):
        store.create_session(sid, title=None, cwd=None)
    store.close()
    for sid in ("long", "compacted"):
        append_turns(state, sid, turns * 7)

    def manager() -> SessionManager:
        return SessionManager(
            state, provider=provider, options=lambda: AgentOptions(model=ProviderConfig().model)
        )

    m = manager()
    await m.open("compacted").compact()
    long = m.open("long")
    long.followup(UserMessage.create("a turn whose end writes the snapshot a daemon leaves"))
    await long.when_idle()
    await m.close()

    async def send(agent: Agent) -> float:
        FIRST_BYTES.clear()
        start = time.perf_counter()
        agent.followup(UserMessage.create("the next question"))
        await agent.when_idle()
        if len(FIRST_BYTES) != 1:
            raise SystemExit(f"expected one provider request per send, saw {len(FIRST_BYTES)}")
        return FIRST_BYTES[0] - start

    kinds = {"fresh session": None, f"{turns:,} turns": "long", f"{turns:,} turns, compacted": "compacted"}
    firsts: dict[str, list[float]] = {kind: [] for kind in kinds}
    nexts: dict[str, list[float]] = {kind: [] for kind in kinds}
    for _ in range(runs):
        for kind, sid in kinds.items():
            m = manager()
            agent = m.create() if sid is None else m.open(sid)
            firsts[kind].append(await send(agent))
            nexts[kind].append(await send(agent))
            await m.close()
    fake.stop()
    base_first, base_next = (
        statistics.median(firsts["fresh session"]),
        statistics.median(nexts["fresh session"]),
    )
    print(f"send to the first byte of its provider request, {runs} rounds (ms, median [min-max]):")
    for kind in kinds:
        first, again = [v * 1e3 for v in firsts[kind]], [v * 1e3 for v in nexts[kind]]
        print(
            f"  {kind:<24} first after open {statistics.median(first):6.2f} [{min(first):.2f}-{max(first):.2f}]"
            f" added {statistics.median(first) - base_first * 1e3:6.2f};   next {statistics.median(again):6.2f}"
            f" [{min(again):.2f}-{max(again):.2f}] added {statistics.median(again) - base_next * 1e3:6.2f}"
        )
    print("  (issue 40.3 goal: <= 20 ms added over the fresh session)")


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
    asyncio.run(snapshot_cost(state, sid))
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
    parser.add_argument("--request-turns", type=int, default=2000, help="stored turns of the request figures")
    parser.add_argument("--only", choices=("stalls", "requests"), help="only these figures")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        if args.only == "requests":
            asyncio.run(first_request_latency(root, args.request_turns, args.runs))
            return
        if args.only == "stalls":
            sid = build_big_session(root / "big", args.events)
            encode_steps_cpu(root / "big", sid)
            asyncio.run(turn_end_stalls(root / "big", sid, args.runs))
            return
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
        encode_steps_cpu(root / "big", sid)
        asyncio.run(turn_end_stalls(root / "big", sid, args.runs))
        asyncio.run(first_request_latency(root, args.request_turns, args.runs))


if __name__ == "__main__":
    main()
