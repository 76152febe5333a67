"""agent-semantics §8 scenarios 62-71, plus the store, leases and values (D6, D7)."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from dsh_daemon.agent.derive import derive_messages
from dsh_daemon.llm.scripted import Hang, reply
from dsh_daemon.model import events as ev
from dsh_daemon.model.events import Event, EventBus
from dsh_daemon.model.jsonvalue import FrozenDict, NotJsonError, dumps, freeze_json
from dsh_daemon.session.lease import LeaseHolder, SessionBusyError
from dsh_daemon.session.log import SessionLog
from dsh_daemon.session.repair import TOOL_NOT_STARTED, TOOL_OUTCOME_UNKNOWN, repair_closers
from dsh_daemon.session.store import (
    DB_FILENAME,
    CorruptSessionError,
    NewerFormatError,
    SessionStore,
    StoreConflictError,
)
from tests.core.harness import Harness, echo_tool, msg, plugin_msg


async def test_62_context_injected_at_session_start_reaches_request_1(tmp_path: Path) -> None:
    # Adapted: no session-start hook; the first point to seed context is an inject after create.
    h = Harness(tmp_path)
    h.agent.inject(plugin_msg("P", "seed"))
    h.agent.followup(msg("A"))
    await h.idle()
    assert h.provider.requests[0].messages[0].source == {"kind": "plugin", "plugin": "seed"}
    h.check()


async def test_63_idle_inject_survives_a_restart_without_dispose(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.agent.inject(msg("X"))
    # no dispose, no close: a second process opens the store after this one vanished
    h.manager.leases.release(h.agent.session_id)
    h2 = Harness(tmp_path, session_id=h.agent.session_id)
    assert [m.text for m in h2.agent.inbox.next_step] == ["X"]
    assert h2.agent.status == "idle" and h2.durable(ev.TURN_START) == []
    h2.agent.followup(msg("A"))
    await h2.idle()
    assert h2.request_texts(0) == ["X", "A"]
    h2.check()


async def test_64_resumed_session_continues_numbering_and_derivation(tmp_path: Path) -> None:
    h = Harness(tmp_path, [reply("one")])
    h.agent.followup(msg("A"))
    await h.idle()
    before = [m.to_json() for m in derive_messages(h.log)]
    h2 = await h.reopen()
    assert [m.to_json() for m in derive_messages(h2.log)] == before
    h2.agent.followup(msg("B"))
    await h2.idle()
    assert [e.data["turn"] for e in h2.durable(ev.TURN_START)] == [1, 2]
    headers = h2.durable(ev.REQUEST_HEADER)
    assert [e.data["reason"] for e in headers] == ["initial", "resume"]
    assert [e.seq for e in h2.log] == list(range(len(h2.log)))
    assert h2.request_texts(0) == ["A", "one", "B"]
    h2.check()


def _raw_session(tmp_path: Path, events: list[tuple[str, dict]]) -> tuple[SessionStore, str]:
    store = SessionStore(tmp_path)
    store.create_session("s1", title=None, cwd=None)
    store.append_events(
        "s1", [Event(kind, freeze_json(data), seq, 1000 + seq) for seq, (kind, data) in enumerate(events)]
    )
    return store, "s1"


def _assistant_with_calls(*calls: str) -> dict:
    return {
        "turn": 1,
        "step": 1,
        "message": {
            "id": "m1",
            "role": "assistant",
            "content": [{"type": "tool-call", "id": c, "name": "echo", "arguments": "{}"} for c in calls],
            "source": {"kind": "model", "provider": "scripted", "model": "m1"},
        },
    }


def test_65_cold_log_repair_closers(tmp_path: Path) -> None:
    events = [
        (ev.TURN_START, {"turn": 1}),
        (ev.STEP_START, {"turn": 1, "step": 1}),
        (ev.ASSISTANT_MESSAGE, _assistant_with_calls("c1", "c2")),
        (ev.TOOL_CALL, {"turn": 1, "step": 1, "callId": "c1", "name": "echo", "arguments": "{}"}),
    ]
    store, sid = _raw_session(tmp_path, events)
    loaded = store.load_events(sid)
    closers = repair_closers(loaded)
    assert [k for k, _ in closers] == [ev.TOOL_RESULT, ev.TOOL_RESULT, ev.STEP_END, ev.TURN_END]
    assert closers[0][1]["error"]["code"] == TOOL_OUTCOME_UNKNOWN
    assert closers[0][1]["sourceEventSeqs"] == [3]
    assert closers[1][1]["error"]["code"] == TOOL_NOT_STARTED
    assert closers[3][1]["reason"] == {"kind": "interrupted"}
    store.close()
    h = Harness(tmp_path, session_id=sid)
    tail = h.log[4:]
    assert [e.type for e in tail] == [ev.TOOL_RESULT, ev.TOOL_RESULT, ev.STEP_END, ev.TURN_END]
    assert {e.time for e in tail} == {1003}  # stamped with the last event's time
    h.check()


def test_66_torn_write_loses_only_itself_and_a_bad_row_is_corruption(tmp_path: Path) -> None:
    # Adapted: SQLite instead of JSONL. An uncommitted transaction (a torn write) leaves no trace;
    # a committed row that cannot be read is a corruption error, never silently skipped.
    store, sid = _raw_session(
        tmp_path, [(ev.INBOX_SPLICED, {"target": "next-step", "start": 0, "inserted": []})]
    )
    db = sqlite3.connect(tmp_path / DB_FILENAME)
    db.execute("BEGIN")
    db.execute("INSERT INTO events VALUES ('s1', 1, 1, 'turn/start', '{\"turn\":1}', 0)")
    db.rollback()
    assert [e.seq for e in store.load_events(sid)] == [0]
    db.execute("INSERT INTO events VALUES ('s1', 1, 1, 'turn/start', '{not json', 0)")
    db.commit()
    with pytest.raises(CorruptSessionError, match="unreadable event at seq 1"):
        store.load_events(sid)
    db.execute("DELETE FROM events WHERE seq=1")
    db.execute("INSERT INTO events VALUES ('s1', 2, 1, 'turn/start', '{\"turn\":1}', 0)")
    db.commit()
    with pytest.raises(CorruptSessionError, match="seq gap"):
        store.load_events(sid)


def test_67_unknown_event_types_load_only_when_ignorable(tmp_path: Path) -> None:
    store, sid = _raw_session(tmp_path, [])
    store.append_events(sid, [Event("future/thing", FrozenDict({}), 0, 1, ignorable=True)])
    assert store.load_events(sid)[0].type == "future/thing"
    store.append_events(sid, [Event("future/other", FrozenDict({}), 1, 1)])
    with pytest.raises(CorruptSessionError, match="unknown event type"):
        store.load_events(sid)


def test_68_newer_format_is_refused(tmp_path: Path) -> None:
    SessionStore(tmp_path).close()
    db = sqlite3.connect(tmp_path / DB_FILENAME)
    db.execute("UPDATE meta SET value='99' WHERE key='format_version'")
    db.commit()
    with pytest.raises(NewerFormatError, match="newer dsh-daemon"):
        SessionStore(tmp_path)


async def test_69_sessions_are_isolated(tmp_path: Path) -> None:
    # Adapted: dsh has no fork; two sessions in one store never share pending items or numbering.
    h = Harness(tmp_path)
    h.agent.inject(msg("only in s1"))
    other = h.manager.create()
    assert len(other.inbox) == 0 and other.turn == 0
    other.followup(msg("B"))
    await other.when_idle()
    assert [e.data["turn"] for e in other.log.events if e.type == ev.TURN_START] == [1]


async def test_70_requests_equal_derivation_and_header_logged_on_change(tmp_path: Path) -> None:
    h = Harness(
        tmp_path,
        [reply("", tool_calls=[("c1", "echo", '{"x": 1}')]), reply("a"), reply("b")],
        tools=[echo_tool()],
    )
    h.agent.followup(msg("A"))
    await h.idle()
    h.agent.options.system = "a new system prompt"
    h.agent.followup(msg("B"))
    await h.idle()
    assert [e.data["reason"] for e in h.durable(ev.REQUEST_HEADER)] == ["initial", "change"]
    assert len(h.provider.requests) == 3
    h.check()


async def test_71_chunks_are_batched_and_flush_drains(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    store.create_session("s", title=None, cwd=None)
    log = SessionLog(store, "s", [], EventBus(), write_delay=0.2)
    for i in range(20):
        log.append("turn/usage", {"turn": 1, "usage": {"i": i}})
    assert store.last_seq("s") == -1  # nothing written yet: one batch pending
    log.commit()
    assert store.last_seq("s") == 19
    log.append("turn/usage", {"turn": 1, "usage": {}})
    await asyncio.sleep(0.3)
    assert store.last_seq("s") == 20


async def test_acknowledged_send_is_on_disk_before_send_returns(tmp_path: Path) -> None:
    h = Harness(tmp_path, [[Hang()]])
    h.agent.followup(msg("A"))
    h.agent.inject(msg("B"))
    reader = SessionStore(tmp_path)
    kinds = [e.type for e in reader.load_events(h.agent.session_id)]
    assert kinds.count(ev.INBOX_SPLICED) >= 2
    h.agent.cancel()
    await h.idle()


async def test_shutdown_with_a_queue_then_resume_keeps_the_queue(tmp_path: Path) -> None:
    h = Harness(tmp_path, [[Hang()]])
    h.agent.followup(msg("A"))
    h.agent.followup(msg("queued-1"))
    h.agent.inject(msg("ctx"))
    for _ in range(100):
        if h.durable(ev.LLM_REQUEST):
            break
        await asyncio.sleep(0.005)
    h2 = await h.reopen()
    assert h2.turn_ends() == [{"kind": "aborted", "cause": "shutdown"}]
    assert [m.text for m in h2.agent.inbox.next_turn] == ["queued-1"]
    assert [m.text for m in h2.agent.inbox.next_step] == ["ctx"]
    assert h2.agent.status == "idle"
    h2.agent.wake()
    await h2.idle()
    assert h2.user_messages()[-2:] == [(2, "ctx"), (2, "queued-1")]
    h2.check()


def test_store_refuses_a_seq_that_does_not_continue(tmp_path: Path) -> None:
    store, sid = _raw_session(tmp_path, [(ev.TURN_START, {"turn": 1})])
    with pytest.raises(StoreConflictError):
        store.append_events(sid, [Event(ev.TURN_END, FrozenDict({"turn": 1}), 0, 1)])
    assert len(store.load_events(sid)) == 1


def test_lease_blocks_a_live_holder_and_frees_a_dead_one(tmp_path: Path) -> None:
    store, sid = _raw_session(tmp_path, [])
    other = SessionStore(tmp_path)
    # a live holder: a real child process's pid
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        live = LeaseHolder(other, pid=child.pid)
        live.acquire(sid)
        me = LeaseHolder(store)
        with pytest.raises(SessionBusyError) as busy:
            me.acquire(sid)
        assert busy.value.pid == child.pid
        assert store.load_events(sid) == []  # reading a leased session still works
    finally:
        child.kill()
        child.wait()
    me.acquire(sid)  # the holder's pid is gone: free at once, no heartbeat wait
    assert me.holds(sid)


async def test_second_manager_gets_session_busy(tmp_path: Path) -> None:
    from dsh_daemon.host.manager import SessionManager

    h = Harness(tmp_path)
    # same pid, but a different holder identity: a second "process" on this host that is alive
    second = SessionManager(tmp_path)
    with pytest.raises(SessionBusyError):
        second.open(h.agent.session_id)
    await h.manager.close()
    assert second.open(h.agent.session_id).session_id == h.agent.session_id


def test_lossless_json_validation() -> None:
    for bad in (float("nan"), float("inf"), -0.0, {1: "x"}, {"a": {1, 2}}, b"bytes"):
        with pytest.raises(NotJsonError):
            freeze_json({"v": bad})
    cyclic: list = []
    cyclic.append(cyclic)
    with pytest.raises(NotJsonError, match="cycle"):
        freeze_json(cyclic)
    frozen = freeze_json({"a": [1, {"b": 2.5}]})
    with pytest.raises(TypeError):
        frozen["a"] = 1
    assert json.loads(dumps(frozen)) == {"a": [1, {"b": 2.5}]}


def test_message_sources_are_validated() -> None:
    from dsh_daemon.model.messages import InvalidMessageError, UserMessage

    assert UserMessage.create("x").source == {"kind": "user"}
    with pytest.raises(InvalidMessageError, match="contextKind"):
        UserMessage.create("x", {"kind": "editor", "uri": "file:///a", "contextKind": "bogus"})
    with pytest.raises(InvalidMessageError, match="plugin"):
        UserMessage.create("x", {"kind": "plugin"})
    with pytest.raises(InvalidMessageError, match="id"):
        UserMessage.create("x", id="")
    assert UserMessage.create("x", {"kind": "goal", "round": 2}).source["round"] == 2  # open union
    m = UserMessage.create([{"type": "text", "text": "a"}, {"type": "image", "ref": "r"}])
    assert UserMessage.from_json(m.to_json()) == m


def test_state_dir_comes_from_dsh_home(tmp_path: Path) -> None:
    from dsh_daemon.session.paths import default_state_dir

    env = {**os.environ, "DSH_HOME": str(tmp_path / "home")}
    out = subprocess.run(
        [sys.executable, "-c", "from dsh_daemon.session.paths import default_state_dir as d; print(d())"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == str(tmp_path / "home")
    assert default_state_dir()  # the platform default resolves without touching it


async def test_sessions_row_counts_pending_items_at_each_acknowledged_change(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    sid = h.agent.session_id
    reader = SessionStore(tmp_path)  # another process's view: only what is committed
    first, second = msg("a"), msg("b")
    h.agent.send(first, target="next-turn", wakeup=False)
    assert reader.session_info(sid).pending == 1
    h.agent.inject(second)
    assert reader.session_info(sid).pending == 2
    h.agent.inbox.remove(first.id)
    assert reader.session_info(sid).pending == 1
    h.agent.cancel()
    assert reader.session_info(sid).pending == 0
