"""Shutdown races: `shutdown` followed at once by EOF or `exit`, while a turn streams. The running turn
must still end `aborted{shutdown}` on disk, with the store closed only after it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from dsh_daemon.agent.invariants import check_log
from dsh_daemon.model import events as ev
from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.test_pipelining import _frame, _stored, _until
from tests.server.test_robustness import spawn


@pytest.mark.parametrize("then", ["eof", "exit", "exit+eof"])
async def test_shutdown_then_at_once_eof_or_exit_still_ends_the_turn_on_disk(
    tmp_path: Path, fake: FakeDeepSeek, then: str
) -> None:
    state = tmp_path / "state"
    fake.script(Reply.stream(text_stream(["slow"] * 400), delay=0.02))
    pipe = await spawn(state, fake, keep_stderr=True)
    await pipe.call(0, "initialize", {"capabilities": {}, "initializationOptions": {"thinking": False}})
    pipe.frame({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    sid = (await pipe.call(1, "dsh/session/new", {}))["result"]["sessionId"]
    await pipe.call(2, "dsh/followup", {"sessionId": sid, "message": {"id": "a", "content": "go"}})
    await _until(pipe, ev.ASSISTANT_DELTA, 1)

    data = _frame(3, "shutdown", None)
    if "exit" in then:
        data += b'Content-Length: 33\r\n\r\n{"jsonrpc":"2.0","method":"exit"}'
    pipe.write(data)
    if "eof" in then:
        assert pipe.proc.stdin is not None
        pipe.proc.stdin.close()
    code = await asyncio.wait_for(pipe.proc.wait(), 30)
    assert pipe.proc.stderr is not None
    stderr = (await pipe.proc.stderr.read()).decode()
    assert "closed database" not in stderr and "Traceback" not in stderr, stderr
    if "exit" in then:
        assert code == 0, stderr  # the shutdown it followed counts, though its reply was not awaited

    log = _stored(state, sid)
    ends = [e.data["reason"] for e in log if e.type == ev.TURN_END]
    assert ends == [{"kind": "aborted", "cause": "shutdown"}]
    assert check_log(log, []) == []
