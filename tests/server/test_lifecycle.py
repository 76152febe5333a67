"""The daemon's lifecycle and its stored logs: exit and SIGTERM end turns quietly and keep the queue;
cancel answers after the turn ended; a malformed stored event is session_unreadable; a thinking-mode
tool reply without reasoning keeps the session usable (each test failed before its fix)."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest
from pygls.exceptions import JsonRpcException

from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.harness import Daemon, start_daemon, stop_daemon, text_reply, tool_call_stream
from tests.server.test_robustness import RawPipe, spawn


async def test_thinking_mode_tool_reply_without_reasoning_keeps_the_session_usable(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    # no provider options: the defaults, thinking on
    d = await start_daemon(tmp_path / "state", fake, root=work, init_options={"permissionTimeoutS": 60})
    fake.script(
        Reply.stream(tool_call_stream([("c1", "run_command", {"command": "echo hi"})])),
        text_reply("ran it"),
        text_reply("still fine"),
    )
    sid = await d.new_session(cwd=str(work))
    await d.request("dsh/followup", {"sessionId": sid, "message": {"content": "run"}})
    await d.wait_idle_turn(sid)
    await d.request("dsh/followup", {"sessionId": sid, "message": {"content": "again"}})
    assert await d.wait_idle_turn(sid, 2) == [{"kind": "completed"}, {"kind": "completed"}]
    echoed = [m for m in fake.requests[-1].json["messages"] if m.get("tool_calls")]
    assert echoed and echoed[0]["reasoning_content"] == ""
    await stop_daemon(d)


async def test_cancel_answers_after_the_turn_ended(daemon: Daemon) -> None:
    daemon.fake.script(Reply.stream(text_stream(["x"] * 100), delay=0.1))
    sid = await daemon.new_session()
    await daemon.request("dsh/followup", {"sessionId": sid, "message": {"content": "go"}})
    await daemon.wait_event(sid, "assistant/delta")
    await daemon.request("dsh/cancel", {"sessionId": sid})
    assert [e["data"]["reason"]["kind"] for e in daemon.of(sid, "turn/end")] == ["aborted"]


async def streaming_with_a_queue(state: Path, fake: FakeDeepSeek) -> tuple[RawPipe, str]:
    """A raw daemon in the middle of a streamed turn, with one followup queued behind it."""
    fake.script(Reply.stream(text_stream(["x"] * 200), delay=0.02))
    pipe = await spawn(state, fake, keep_stderr=True)
    await pipe.call(1, "initialize", {"capabilities": {}})
    sid = (await pipe.call(2, "dsh/session/new", {}))["result"]["sessionId"]
    await pipe.call(3, "dsh/followup", {"sessionId": sid, "message": {"content": "stream"}})
    await pipe.call(4, "dsh/followup", {"sessionId": sid, "message": {"content": "queued"}})
    for _ in range(1000):
        if any((m.get("params") or {}).get("type") == "assistant/delta" for m in pipe.messages):
            break
        await asyncio.sleep(0.01)
    return pipe, sid


async def assert_shut_down_keeping_the_queue(state: Path, fake: FakeDeepSeek, sid: str) -> None:
    again = await start_daemon(state, fake)
    attached = await again.request("dsh/session/attach", {"sessionId": sid})
    assert again.of(sid, "turn/end")[-1]["data"]["reason"] == {"kind": "aborted", "cause": "shutdown"}
    assert [m["content"][0]["text"] for m in attached["inbox"]["nextTurn"]] == ["queued"]
    await stop_daemon(again)


async def test_exit_during_a_turn_stops_quietly_and_keeps_the_queue(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    state = tmp_path / "state"
    pipe, sid = await streaming_with_a_queue(state, fake)
    pipe.frame({"jsonrpc": "2.0", "method": "exit"})
    assert pipe.proc.stderr is not None
    stderr = await pipe.proc.stderr.read()
    assert await pipe.proc.wait() == 1  # exit without shutdown
    assert len(stderr) < 20_000, stderr[-2000:]
    await assert_shut_down_keeping_the_queue(state, fake, sid)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
async def test_sigterm_and_sigint_shut_down_like_eof(
    tmp_path: Path, fake: FakeDeepSeek, signum: signal.Signals
) -> None:
    state = tmp_path / "state"
    pipe, sid = await streaming_with_a_queue(state, fake)
    pipe.proc.send_signal(signum)
    assert await asyncio.wait_for(pipe.proc.wait(), 30) == 0
    await assert_shut_down_keeping_the_queue(state, fake, sid)


async def test_a_malformed_stored_event_is_session_unreadable(tmp_path: Path, fake: FakeDeepSeek) -> None:
    import sqlite3

    state = tmp_path / "state"
    first = await start_daemon(state, fake)
    sid = await first.new_session()
    await first.request("dsh/inject", {"sessionId": sid, "message": {"content": "x"}})
    await stop_daemon(first)
    db = sqlite3.connect(state / "sessions.sqlite3")
    (seq,) = db.execute("SELECT last_seq + 1 FROM sessions WHERE session_id=?", (sid,)).fetchone()
    db.execute(
        "INSERT INTO events VALUES (?, ?, 0, 'turn/start', '{\"turn\":\"not a number\"}', 0)", (sid, seq)
    )
    db.execute("UPDATE sessions SET last_seq=? WHERE session_id=?", (seq, sid))
    db.commit()
    second = await start_daemon(state, fake)
    with pytest.raises(JsonRpcException) as error:
        await second.request("dsh/session/attach", {"sessionId": sid})
    assert (error.value.code, error.value.data["code"]) == (-32803, "session_unreadable")
    await stop_daemon(second)


async def test_an_unreadable_session_reattached_without_replay_is_not_retried_forever(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    import sqlite3

    state = tmp_path / "state"
    first = await start_daemon(state, fake)
    sid = await first.new_session()
    await first.request("dsh/inject", {"sessionId": sid, "message": {"content": "x"}})
    await stop_daemon(first)
    db = sqlite3.connect(state / "sessions.sqlite3")
    (seq,) = db.execute("SELECT last_seq + 1 FROM sessions WHERE session_id=?", (sid,)).fetchone()
    db.execute(
        "INSERT INTO events VALUES (?, ?, 0, 'turn/start', '{\"turn\":\"not a number\"}', 0)", (sid, seq)
    )
    db.execute("UPDATE sessions SET last_seq=? WHERE session_id=?", (seq, sid))
    db.commit()
    pipe = await spawn(state, fake, keep_stderr=True)
    await pipe.call(0, "initialize", {"capabilities": {}, "initializationOptions": {"thinking": False}})
    pipe.frame({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    attached = await pipe.call(1, "dsh/session/attach", {"sessionId": sid, "replay": "none"})
    assert attached["result"]["lastSeq"] == seq  # answered from the store
    await asyncio.sleep(1.0)  # five follower polls
    woke = await pipe.call(2, "dsh/wake", {"sessionId": sid})
    assert woke["error"]["data"]["code"] == "session_unreadable"  # typed, when a request needs it
    await pipe.call(3, "shutdown")
    pipe.frame({"jsonrpc": "2.0", "method": "exit"})
    await pipe.proc.wait()
    assert pipe.proc.stderr is not None
    stderr = (await pipe.proc.stderr.read()).decode()
    assert stderr.count("stopped following session") == 1, stderr[-2000:]  # tried once, not every poll
    assert "Traceback" not in stderr, stderr[-2000:]
