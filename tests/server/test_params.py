"""Params as clients really send them: missing, invalid, holding lone surrogates; each gets a typed
answer (each test failed before its fix)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pygls.exceptions import JsonRpcException

from tests.fakes.deepseek_server import FakeDeepSeek
from tests.server.harness import Daemon
from tests.server.test_robustness import spawn


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
    # JSON nested too deep is refused with the request's own id (issue 18), not a dead daemon
    deep = b'{"jsonrpc":"2.0","id":4,"method":"dsh/wake","params":' + b"[" * 5000 + b"]" * 5000 + b"}"
    pipe.frame(deep)
    listed = await pipe.call(5, "dsh/session/list", {})
    assert len(listed["result"]["sessions"]) == 1
    assert (await pipe.reply(4))["error"]["code"] == -32600
    pipe.frame({"jsonrpc": "2.0", "method": "exit"})
    await pipe.proc.wait()


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
