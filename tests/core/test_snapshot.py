"""Derived-state snapshots (issue 20.3, docs/design.md §6.7): a cache of what the log derives at a turn
end. Opening a session with its snapshot, with an older one, with a corrupt one or with none at all
builds the same agent — the same history, logged requests, turn marks, inbox and turn number — and
the same next model request, byte for byte; only the number of rows read differs."""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import re
import shutil
import sqlite3
import threading
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from dsh_daemon.agent.derive import Derivation
from dsh_daemon.agent.loop import Agent
from dsh_daemon.agent.snapshot import SNAPSHOT_FORMAT, DerivedSnapshot, SnapshotCodec
from dsh_daemon.host.manager import SessionManager
from dsh_daemon.llm.scripted import reply, usage
from dsh_daemon.model import events as ev
from dsh_daemon.model.jsonvalue import dumps
from dsh_daemon.model.messages import Message
from dsh_daemon.model.payloads import ConversationCut, entry
from dsh_daemon.session.store import DB_FILENAME, SessionStore
from tests.core.harness import Harness, echo_tool, msg

SCRIPT = [
    reply("", tool_calls=[("c1", "echo", '{"x": 1}')]),
    reply("one", use=usage(300, 5)),
    reply("two", use=usage(500, 5)),
    reply("three", use=usage(900, 5)),  # the next boundary compacts first
    reply("SUMMARY of one, two and three"),
    reply("four", use=usage(400, 5)),
    reply("after the cut", use=usage(100, 5)),
]


def _entries(entries: list[tuple[int, Message]]) -> list[Any]:
    return [[position, message.to_json()] for position, message in entries]


def derived_state(agent: Agent) -> str:
    """Everything an agent derives from its log, as one comparable text."""
    return _state_text(agent.derive(), agent.inbox.to_json(), agent.turn, agent.log.next_seq)


def _state_text(d: Derivation, inbox: Any, turn: int, next_seq: int) -> str:
    return dumps(
        {
            "entries": _entries(d.entries),
            "header": d.header,
            "contextUsed": d.context_used,
            "cuts": d.cuts,
            "turnStarts": d.turn_starts,
            "summary": None if d.summary is None else d.summary.to_json(),
            "marks": {
                str(turn): [
                    _entries(mark.entries[0][: mark.entries[1]]),
                    mark.cuts[0][: mark.cuts[1]],
                    mark.turn_starts[0][: mark.turn_starts[1]],
                    None if mark.summary is None else mark.summary.to_json(),
                    mark.context_used,
                ]
                for turn, mark in d.marks.items()
            },
            "requests": [request.to_json() for request in d.requests],
            "inbox": inbox,
            "turn": turn,
            "nextSeq": next_seq,
        }
    )


async def _scenario(state: Path, snapshots: list[tuple[int, str]] | None = None) -> str:
    """Turns with a tool call, queued followups (pending at turn ends), a compaction, a conversation
    cut and an input left pending; a snapshot after every turn. Returns the session id."""
    h = Harness(state, SCRIPT, tools=[echo_tool()], snapshot_every=1)
    h.provider.window = 1000
    if snapshots is not None:
        write = h.manager.store.write_snapshot

        def recording(session_id: str, upto: int, format: int, data: str) -> bool:
            snapshots.append((upto, data))
            return write(session_id, upto, format, data)

        h.manager.store.write_snapshot = recording  # type: ignore[method-assign]
    for text in ("A", "B", "C"):  # queued at once: B and C are pending when turn 1 ends
        h.agent.followup(msg(text, id=text))
    await h.idle()
    h.agent.followup(msg("D", id="D"))
    await h.idle()
    assert h.durable(ev.CONTEXT_COMPACTED)
    h.agent.log.append(*entry(ConversationCut(2)), commit=True)
    h.agent.followup(msg("E", id="E"))
    await h.idle()
    h.agent.inject(msg("parked", id="parked"))
    h.check()
    session_id = h.agent.session_id
    await h.manager.close()
    return session_id


def _open(state: Path, session_id: str) -> Harness:
    return Harness(state, [reply("resumed")], tools=[echo_tool()], session_id=session_id)


async def test_a_resume_with_the_snapshot_sends_the_same_request_as_one_without(tmp_path: Path) -> None:
    session_id = await _scenario(tmp_path / "with")
    shutil.copytree(tmp_path / "with", tmp_path / "without")
    store = SessionStore(tmp_path / "without")
    store.drop_snapshot(session_id)
    store.close()

    results = []
    for name in ("with", "without"):
        manager = SessionManager(tmp_path / name)
        agent = manager.open(session_id)
        events = agent.log.events
        state = derived_state(agent)
        # the snapshot is really used (the log's prefix stays on disk), or really absent
        assert (events.base > 0 and not events.prefix_loaded) == (name == "with")
        await manager.close()
        h = _open(tmp_path / name, session_id)
        assert derived_state(h.agent) == state
        h.agent.followup(msg("next", id="next"))
        await h.idle()
        h.check()  # every request still equals its rebuild from the whole log (read back from disk)
        results.append((state, dumps(h.provider.requests[0].to_json())))
        await h.manager.close()
    assert results[0] == results[1]
    assert "parked" in results[0][1] and "after the cut" in results[0][1]


async def test_a_crash_at_any_point_around_a_snapshot_resumes_as_the_log_says(tmp_path: Path) -> None:
    """The log cut after each event (what a SIGKILL after that commit leaves), with the newest snapshot
    written by then (the crash came after its write) or the one before it (the crash came between the
    turn end's commit and the snapshot's write, or the snapshot was older anyway): every open
    extends it with the rest of the log to exactly the state of an open from the log alone."""
    snapshots: list[tuple[int, str]] = []
    session_id = await _scenario(tmp_path / "scenario", snapshots)
    store = SessionStore(tmp_path / "scenario")
    events = store.load_events(session_id)
    store.close()
    assert len(snapshots) >= 5 and all(events[upto].type == ev.TURN_END for upto, _ in snapshots)
    compared = 0
    for cut in range(1, len(events) + 1):
        if cut < len(events) and events[cut].type == ev.USER_MESSAGE:
            continue  # a step/start and the messages it enters are appended with no await between them
        written = [s for s in snapshots if s[0] < cut]
        for label, snapshot in (("none", None), ("newest", written[-1:]), ("older", written[-2:-1])):
            if label != "none" and not snapshot:
                continue
            state = tmp_path / f"cut-{cut}-{label}"
            store = SessionStore(state)
            store.create_session(session_id, title=None, cwd=str(tmp_path))
            store.append_events(session_id, events[:cut])
            if snapshot:
                upto, data = snapshot[0]
                assert store.write_snapshot(session_id, upto, SNAPSHOT_FORMAT, data)
            store.close()
            manager = SessionManager(state)
            agent = manager.open(session_id)
            got = derived_state(agent)
            if label == "none":
                expected = got
            else:
                assert agent.log.events.base == snapshot[0][0] + 1  # type: ignore[index]
                assert got == expected, (cut, label)
                compared += 1
            manager.leases.release(session_id)
            manager.store.close()
    assert compared > len(events)


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[: len(data) // 2],  # cut short
        lambda data: re.sub(r'"now":\[\d+', '"now":[999', data, count=1),  # a reference to nothing
        lambda data: data.replace(f'"format":{SNAPSHOT_FORMAT}', '"format":99', 1),  # another build's
        lambda data: "not json at all",
    ],
    ids=["truncated", "bad-reference", "other-format", "garbage"],
)
async def test_a_corrupt_snapshot_is_ignored_and_said(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: Any
) -> None:
    session_id = await _scenario(tmp_path / "s")
    reference = _open(tmp_path / "s", session_id)
    expected = derived_state(reference.agent)
    await reference.manager.close()
    db = sqlite3.connect(tmp_path / "s" / DB_FILENAME)
    (data,) = db.execute("SELECT data FROM derived_snapshots").fetchone()
    damaged = damage(data)
    assert damaged != data
    db.execute("UPDATE derived_snapshots SET data=?", (damaged,))
    db.commit()
    db.close()
    with caplog.at_level(logging.WARNING, logger="dsh_daemon.host.manager"):
        h = _open(tmp_path / "s", session_id)
    assert "derived-state snapshot ignored" in caplog.text
    assert h.agent.log.events.base == 0  # derived from the whole log instead
    assert derived_state(h.agent) == expected
    assert h.manager.store.read_snapshot(session_id) is None  # dropped, so a new one can replace it
    h.agent.followup(msg("next", id="next"))
    await h.idle()
    h.check()
    await h.manager.close()


async def test_a_changed_row_under_the_snapshot_drops_it(tmp_path: Path) -> None:
    """A snapshot stands for the rows it was folded from: a row at or below its seq edited (or deleted)
    through SQLite drops it, so the next open reads — and checks — the whole log again."""
    session_id = await _scenario(tmp_path / "s")
    db = sqlite3.connect(tmp_path / "s" / DB_FILENAME)
    (upto,) = db.execute("SELECT upto_seq FROM derived_snapshots").fetchone()
    db.execute("UPDATE events SET time=time+1 WHERE seq=? AND session_id=?", (upto + 1, session_id))
    assert db.execute("SELECT count(*) FROM derived_snapshots").fetchone() == (1,)  # after it: kept
    db.execute("UPDATE events SET data=data WHERE seq=3 AND session_id=?", (session_id,))
    assert db.execute("SELECT count(*) FROM derived_snapshots").fetchone() == (0,)
    db.commit()
    db.close()


async def test_a_snapshot_round_trips_the_derivation(tmp_path: Path) -> None:
    """Encoding, then decoding, gives the state the agent had (a fresh codec and a resumed one alike)."""
    session_id = await _scenario(tmp_path / "s")
    h = _open(tmp_path / "s", session_id)
    again = Agent(h.agent.log, None, snapshot=DerivedSnapshot.decode(h.agent.snapshot().encode()))
    assert derived_state(again) == derived_state(h.agent)
    codec = h.manager._codecs[session_id]  # resumed from the stored snapshot, encoding on from it
    resumed = Agent(h.agent.log, None, snapshot=DerivedSnapshot.decode(codec.encode(h.agent.snapshot())))
    assert derived_state(resumed) == derived_state(h.agent)
    await h.manager.close()


async def test_the_log_of_a_resumed_session_reads_its_older_events_only_when_asked(tmp_path: Path) -> None:
    session_id = await _scenario(tmp_path / "s")
    manager = SessionManager(tmp_path / "s")
    agent = manager.open(session_id)
    events = agent.log.events
    stored = manager.store.load_events(session_id)
    base = events.base
    assert 0 < base < len(events) == len(stored)
    assert (
        list(itertools.islice(reversed(events), len(events) - base + 2))
        == stored[::-1][: len(events) - base + 2]
    )
    assert events[base:] == stored[base:] and events[-1] == stored[-1]
    first_cut = events.last_of(ev.CONVERSATION_CUT)
    assert first_cut is not None and first_cut == [e for e in stored if e.type == ev.CONVERSATION_CUT][-1]
    assert not events.prefix_loaded  # none of the above read the older rows into memory
    assert list(events) == stored and events[:base] == stored[:base] and events[3] == stored[3]
    assert events.prefix_loaded
    await manager.close()


async def test_each_snapshot_is_the_whole_state_dumped_and_is_written_off_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The codec turns into text only what is new since its last encode (issue 20: dumping a 100k-event
    session's whole state held the event loop ~0.1 s at a turn end); what it writes must still be
    exactly `json.dumps` of the whole state, at every snapshot of a session that compacts, is cut and
    is resumed from its snapshot. The write itself runs on the snapshot writer's thread."""
    encoded: list[tuple[str, str]] = []
    threads: list[str] = []
    steps, write = SnapshotCodec.encode_steps, SessionStore.write_snapshot

    def checked_encode(codec: SnapshotCodec, snapshot: Any) -> Generator[None, None, str]:
        text = yield from steps(codec, snapshot)
        # the value behind the text just encoded (encoding it again adds nothing to the codec)
        whole = json.dumps(codec._encode(snapshot), separators=(",", ":"), ensure_ascii=False)
        encoded.append((text, whole))
        return text

    def recorded_write(store: SessionStore, session_id: str, upto: int, format: int, data: str) -> bool:
        threads.append(threading.current_thread().name)
        return write(store, session_id, upto, format, data)

    monkeypatch.setattr(SnapshotCodec, "encode_steps", checked_encode)
    monkeypatch.setattr(SessionStore, "write_snapshot", recorded_write)
    session_id = await _scenario(tmp_path)
    first = len(encoded)
    h = Harness(tmp_path, [reply("resumed"), reply("again")], session_id=session_id, snapshot_every=1)
    for text in ("F", "G"):
        h.agent.followup(msg(text, id=text))
        await h.idle()
    await h.manager.close()

    assert first >= 5 and len(encoded) >= first + 2 and len(threads) == len(encoded)
    for text, whole in encoded:
        assert text == whole
    assert all(name.startswith("dsh-snapshot") for name in threads)


async def test_the_first_snapshot_after_a_resume_dumps_only_what_is_new(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A resumed codec takes the stored snapshot's text of its tables as already dumped: the first turn
    end after a resume turns into JSON only that turn's messages and requests, as every later one does
    (dumping a 100k-event session's tables again held the event loop 0.1–0.36 s). What it writes is
    still the whole state, which the test above checks at every snapshot, this one included."""
    import dsh_daemon.agent.snapshot as snapshot_module

    session_id = await _scenario(tmp_path)
    dumped: list[int] = []
    decoded: list[int] = []
    dumps_, decode = snapshot_module._dumps, SnapshotCodec.decode

    def counted_dumps(value: Any) -> str:
        text = dumps_(value)
        dumped.append(len(text))
        return text

    def recorded_decode(codec: SnapshotCodec, text: str) -> DerivedSnapshot:
        decoded.append(len(text))
        return decode(codec, text)

    monkeypatch.setattr(snapshot_module, "_dumps", counted_dumps)
    monkeypatch.setattr(SnapshotCodec, "decode", recorded_decode)
    h = Harness(tmp_path, [reply("resumed")], session_id=session_id, snapshot_every=1)
    h.agent.followup(msg("F", id="F"))
    await h.idle()
    await h.manager.close()
    assert decoded, "the session was not resumed from its snapshot"
    # the new turn's text (a user message, a reply, a request, their list items) and the keys, next to
    # the resumed tables' text: without the adopted text the whole of it is dumped again
    assert 0 < sum(dumped) < decoded[0] / 2, (sum(dumped), decoded[0])


async def test_a_turn_end_encodes_its_snapshot_in_slices_as_that_turn_end_left_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 40.4: encoding a long session's snapshot at its turn end held the event loop 0.15-1.3 s.
    The turn end now only takes a view (no history copied); the encode runs on the loop in slices
    (here a step each) with the loop's other work between them, and the write on the writer's
    thread. Held there (the first write) until the loop has run on (the history grown, a compaction's
    new lists, a cut), each snapshot written is still exactly the state its own turn end left:
    deriving the log through its seq gives the same."""
    import dsh_daemon.agent.snapshot as snapshot_module

    monkeypatch.setattr(snapshot_module, "SLICE_S", 0.0)
    gate = threading.Event()
    snapshots: list[tuple[int, str]] = []
    threads: list[str] = []
    loop_turns_during: list[int] = []  # per encode, how many times the loop ran other work meanwhile
    ticks = 0
    steps, write = SnapshotCodec.encode_steps, SessionStore.write_snapshot

    def counted_steps(codec: SnapshotCodec, view: Any) -> Generator[None, None, str]:
        started = ticks
        text = yield from steps(codec, view)
        loop_turns_during.append(ticks - started)
        return text

    def held_write(store: SessionStore, session_id: str, upto: int, format: int, data: str) -> bool:
        threads.append(threading.current_thread().name)
        if not gate.wait(60):
            raise AssertionError("the test never let the write go on")
        snapshots.append((upto, data))
        return write(store, session_id, upto, format, data)

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    monkeypatch.setattr(SnapshotCodec, "encode_steps", counted_steps)
    monkeypatch.setattr(SessionStore, "write_snapshot", held_write)
    ticking = asyncio.get_running_loop().create_task(tick())
    state = tmp_path / "s"
    h = Harness(state, SCRIPT, tools=[echo_tool()], snapshot_every=1)
    h.provider.window = 1000
    for text in ("A", "B", "C"):
        h.agent.followup(msg(text, id=text))
    await h.idle()
    h.agent.followup(msg("D", id="D"))
    await h.idle()
    assert h.durable(ev.CONTEXT_COMPACTED)
    h.agent.log.append(*entry(ConversationCut(2)), commit=True)
    h.agent.followup(msg("E", id="E"))
    await h.idle()
    assert len(threads) == 1 and not snapshots  # the first write waits; the others wait for it
    gate.set()
    session_id = h.agent.session_id
    await h.manager.close()
    ticking.cancel()

    assert len(snapshots) == len(threads) == len(loop_turns_during) >= 4
    assert all(name.startswith("dsh-snapshot") for name in threads)
    assert all(during > 1 for during in loop_turns_during)  # each encode let the loop run between
    store = SessionStore(state)
    events = store.load_events(session_id)
    store.close()
    for upto, data in snapshots:
        decoded = DerivedSnapshot.decode(data)
        assert decoded.upto == upto
        folded = Derivation()
        for event in events[: upto + 1]:
            folded.feed(event)
        inbox = {target: [item.to_json() for item in items] for target, items in decoded.inbox.items()}
        assert _state_text(decoded.derivation, inbox, decoded.turn, upto + 1) == _state_text(
            folded, inbox, decoded.turn, upto + 1
        )
