"""Wire regressions found by black-box review: each failed before its fix."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest
from pygls.exceptions import JsonRpcException

from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.harness import Daemon, start_daemon, stop_daemon, text_reply, tool_call_stream
from tests.server.test_robustness import RawPipe, spawn


async def test_requests_without_a_params_member_are_answered_properly(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    pipe = await spawn(tmp_path / "state", fake)
    early = await pipe.call(0, "dsh/session/list")  # before initialize, no params member at all
    assert early["error"]["data"]["code"] == "not_initialized"
    pipe.frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}})
    await pipe.reply(1)
    pipe.frame({"jsonrpc": "2.0", "method": "initialized"})
    created = await pipe.call(2, "dsh/session/new")
    assert "sessionId" in created["result"]
    unknown = await pipe.call(3, "dsh/nope")
    assert unknown["error"]["code"] == -32601
    # JSON nested deeper than the parser can go is a parse error, not a dead daemon
    deep = b'{"jsonrpc":"2.0","id":4,"method":"dsh/wake","params":' + b"[" * 5000 + b"]" * 5000 + b"}"
    pipe.frame(deep)
    listed = await pipe.call(5, "dsh/session/list", {})
    assert len(listed["result"]["sessions"]) == 1
    assert any(m.get("error", {}).get("code") == -32700 for m in pipe.messages)
    pipe.frame({"jsonrpc": "2.0", "method": "exit"})
    await pipe.proc.wait()


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


async def test_invalid_inputs_get_typed_errors(daemon: Daemon) -> None:
    sid = await daemon.new_session()
    bad = [
        {"sessionId": sid, "message": {"content": "\ud800"}},
        {
            "sessionId": sid,
            "message": {"content": [{"type": "tool-result", "toolCallId": "zz", "content": []}]},
        },
        {"sessionId": sid, "message": {"content": "x"}, "target": "next-turn", "wakeup": None},
    ]
    for params, method in zip(bad, ["dsh/inject", "dsh/inject", "dsh/send"], strict=True):
        with pytest.raises(JsonRpcException) as error:
            await daemon.request(method, params)
        assert error.value.data["code"] == "invalid_params", params
    assert await daemon.request("dsh/cancel", {"sessionId": sid, "cause": None}) == {}


async def test_cancel_answers_after_the_turn_ended(daemon: Daemon) -> None:
    daemon.fake.script(Reply.stream(text_stream(["x"] * 100), delay=0.1))
    sid = await daemon.new_session()
    await daemon.request("dsh/followup", {"sessionId": sid, "message": {"content": "go"}})
    await daemon.wait_event(sid, "assistant/delta")
    await daemon.request("dsh/cancel", {"sessionId": sid})
    assert [e["data"]["reason"]["kind"] for e in daemon.of(sid, "turn/end")] == ["aborted"]


async def test_session_cwd_defaults_to_the_workspace_root(tmp_path: Path, fake: FakeDeepSeek) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    d = await start_daemon(tmp_path / "state", fake, root=folder)
    sid = await d.new_session()
    (listed,) = (await d.request("dsh/session/list", {}))["sessions"]
    assert listed["sessionId"] == sid and listed["cwd"] == str(folder)
    relative = await d.request("dsh/session/new", {"cwd": "sub/dir"})
    rows = {s["sessionId"]: s for s in (await d.request("dsh/session/list", {}))["sessions"]}
    assert Path(rows[relative["sessionId"]]["cwd"]).is_absolute()
    await stop_daemon(d)


async def test_lone_surrogates_anywhere_are_refused_at_the_wire(daemon: Daemon) -> None:
    with pytest.raises(JsonRpcException) as error:
        await daemon.request("dsh/session/new", {"title": "bad \udc00 title"})
    assert error.value.code == -32602
    sid = await daemon.new_session()
    daemon.notify(
        "dsh/context/didChange",
        {"sessionId": sid, "activeUri": "file:///x", "diagnostics": [{"message": "\ud800"}]},
    )
    await daemon.request("dsh/followup", {"sessionId": sid, "message": {"content": "still works"}})
    assert await daemon.wait_idle_turn(sid) == [{"kind": "completed"}]


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


async def test_relative_cwd_is_resolved_against_the_workspace(tmp_path: Path, fake: FakeDeepSeek) -> None:
    folder = tmp_path / "project"
    (folder / "sub").mkdir(parents=True)
    d = await start_daemon(tmp_path / "state", fake, root=folder)
    created = await d.request("dsh/session/new", {"cwd": "sub"})
    (listed,) = (await d.request("dsh/session/list", {"cwd": str(folder / "sub") + "/"}))["sessions"]
    assert listed["sessionId"] == created["sessionId"] and listed["cwd"] == str(folder / "sub")
    await stop_daemon(d)


async def test_sigterm_shuts_down_like_eof(tmp_path: Path, fake: FakeDeepSeek) -> None:
    state = tmp_path / "state"
    pipe, sid = await streaming_with_a_queue(state, fake)
    pipe.proc.send_signal(signal.SIGTERM)
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
