"""ACP mode as a hostile client drives it (issue 18): deeply nested JSON, signals, and a soak of bad
lines like the LSP one (tests/server/test_hostile_input.py), with the process checked after each."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path
from typing import Any

import pytest

from dsh_daemon.session.store import SessionStore
from tests.acp.harness import RawAcp, raw_acp
from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream


async def initialized(raw: RawAcp, state: Path) -> str:
    init = await raw.call("initialize", {"protocolVersion": 1, "_meta": {"dsh": {"thinking": False}}})
    assert init["result"]["protocolVersion"] == 1
    new = await raw.call("session/new", {"cwd": str(state / "work"), "mcpServers": []})
    return str(new["result"]["sessionId"])


def log_of(state: Path) -> str:
    return (state / "daemon.log").read_text(errors="replace")


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def prompt(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text}]


# ---- item 1: deep JSON never ends the process ---------------------------------------------------------


async def test_deeply_nested_lines_are_refused_with_their_own_id_and_the_daemon_lives(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    state = tmp_path / "state"
    fake.script(Reply.stream(text_stream(["still ", "alive"])))
    async with raw_acp(state, fake) as raw:
        sid = await initialized(raw, state)
        for depth in (1_000, 5_000, 100_000):
            # a request whose params nest too deep: answered with its own id, whichever side it is on
            raw.send_line(
                b'{"jsonrpc":"2.0","id":"d%d","method":"session/list","params":{"x":%s}}'
                % (depth, nested(depth))
            )
            first = await raw.response(f"d{depth}")
            assert first["error"]["code"] == -32600 and "nested" in first["error"]["message"], first
            raw.send_line(
                b'{"jsonrpc":"2.0","method":"session/list","params":{"x":%s},"id":%d}'
                % (nested(depth), depth)
            )
            tail = await raw.response(depth)
            assert tail["error"]["code"] == -32600, tail
            # a notification nested too deep is dropped (no answer), a deep non-message gets id null
            raw.send_line(b'{"jsonrpc":"2.0","method":"session/cancel","params":{"x":%s}}' % nested(depth))
            raw.send_line(nested(depth))
            assert (await raw.response(None))["error"]["code"] in (-32600, -32700)
        # nesting under the limit is still a message: kept verbatim in a resource's _meta
        ok = await raw.call("session/list", {"x": json.loads(nested(100))})
        assert "sessions" in ok["result"], ok
        done = await raw.call("session/prompt", {"sessionId": sid, "prompt": prompt("are you there?")})
        assert done["result"] == {"stopReason": "end_turn"}
        assert raw.process.stdin is not None
        raw.process.stdin.close()
        assert await asyncio.wait_for(raw.process.wait(), 15) == 0
    log = log_of(state)
    assert "Traceback" not in log and "Fatal Python error" not in log, log[-3000:]
    # every answer to a deep line came back on its own, nothing else was answered with id null
    assert [m for m in raw.received if m.get("id") is None and "error" in m].__len__() == 3


# ---- item 8: SIGTERM and SIGINT end the process with 0, after the orderly shutdown ---------------------


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
async def test_a_signal_shuts_down_in_order_and_exits_0(
    tmp_path: Path, fake: FakeDeepSeek, signum: signal.Signals
) -> None:
    state = tmp_path / "state"
    fake.script(Reply.stream(text_stream(["working"])[:2], tail="stall"))
    async with raw_acp(state, fake) as raw:
        sid = await initialized(raw, state)
        raw.request("session/prompt", {"sessionId": sid, "prompt": prompt("run long")})
        await raw.until(
            lambda m: (
                m.get("method") == "session/update"
                and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
            )
        )
        queued = raw.request("session/prompt", {"sessionId": sid, "prompt": prompt("queued")})
        await asyncio.sleep(0.2)  # the queued prompt is acknowledged durably before it is answered
        raw.process.send_signal(signum)
        assert await asyncio.wait_for(raw.process.wait(), 30) == 0
        answers = [m for m in raw.received if m.get("id") == queued]
        assert answers == [] or answers[0]["result"] == {"stopReason": "cancelled"}, answers
    log = log_of(state)
    assert "Fatal Python error" not in log and "Traceback" not in log, log[-3000:]
    store = SessionStore(state)
    turn_ends = [e for e in store.load_events(sid) if e.type == "turn/end"]
    assert turn_ends[-1].data["reason"] == {"kind": "aborted", "cause": "shutdown"}
    pending = [e for e in store.load_events(sid) if e.type == "agent/inbox/spliced"]
    assert pending[-1].data["inserted"] and pending[-1].data["inserted"][0]["content"][0]["text"] == "queued"
    store.close()
