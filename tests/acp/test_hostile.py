"""ACP mode as a hostile client drives it (issue 18): deeply nested JSON, signals, and a soak of bad
lines like the LSP one (tests/server/test_hostile_input.py), with the process checked after each."""

from __future__ import annotations

import asyncio
import json
import random
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
        # the soak may have closed the session (a session/close with its id is no mistake): resume it
        resumed = await raw.call(
            "session/resume", {"sessionId": sid, "cwd": str(state / "work"), "mcpServers": []}
        )
        assert "result" in resumed, resumed
        done = await raw.call("session/prompt", {"sessionId": sid, "prompt": prompt("are you there?")})
        assert done["result"]["stopReason"] == "end_turn"
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
        assert answers == [] or answers[0]["result"]["stopReason"] == "cancelled", answers
    log = log_of(state)
    assert "Fatal Python error" not in log and "Traceback" not in log, log[-3000:]
    store = SessionStore(state)
    turn_ends = [e for e in store.load_events(sid) if e.type == "turn/end"]
    assert turn_ends[-1].data["reason"] == {"kind": "aborted", "cause": "shutdown"}
    pending = [e for e in store.load_events(sid) if e.type == "agent/inbox/spliced"]
    assert pending[-1].data["inserted"] and pending[-1].data["inserted"][0]["content"][0]["text"] == "queued"
    store.close()


# ---- the hostile-line soak (the ACP counterpart of tests/server/test_hostile_input.py) ----------------

METHODS = [
    "session/new", "session/load", "session/resume", "session/list", "session/close", "session/prompt",
    "_session/steering", "_dsh/inject", "_dsh/wake", "_dsh/inbox/list", "_dsh/inbox/remove",
    "_dsh/inbox/replace", "_dsh/inbox/move", "initialize", "no/such/method",
]  # fmt: skip
JUNK: list[Any] = [None, 1, -1.5, "x", [], {}, [1, 2], {"a": None}, True, "\u0000", "é" * 50, "y" * 5000]


def bad_lines(rng: random.Random, sid: str, cwd: str, n: int) -> list[tuple[bytes, Any]]:
    """(line, id that must get exactly one answer, or None) for malformed, truncated, oversized,
    wrong-typed, deeply nested and out-of-order input. (Lone surrogates are issue 18 item 2's.)"""
    lines: list[tuple[bytes, Any]] = []
    for i in range(n):
        kind = rng.randrange(9)
        msg_id = f"bad-{i}"
        if kind == 0:  # not JSON, or JSON cut short
            lines.append(
                (rng.choice([b"{", b'{"jsonrpc": "2.0", "id": 1,', b"\xff\xfe\x00", b"nul", b"]["]), None)
            )
        elif kind == 1:  # JSON that is no message
            lines.append(
                (json.dumps(rng.choice([[1, 2], "text", 42, None, [{"jsonrpc": "2.0"}]])).encode(), None)
            )
        elif kind == 2:  # wrong version, or no method
            body = {"jsonrpc": rng.choice(["1.0", 2, None]), "id": msg_id, "method": "session/list"}
            lines.append((json.dumps(body).encode(), msg_id))
        elif kind == 3:  # wrong-typed params for a real method
            params = {
                "sessionId": rng.choice([5, None, "nope", "", [sid], sid]),
                "cwd": rng.choice([cwd, 5, "relative", None, "/nonexistent/dir"]),
                "prompt": rng.choice(
                    [*JUNK, [{"type": "text"}], [{"type": "image", "data": 1}], [{"type": 5}]]
                ),
                "mcpServers": rng.choice([[], None, 5, [{"name": 1}], {}]),
                "messageId": rng.choice(JUNK),
                "target": rng.choice(JUNK),
                "cursor": rng.choice(JUNK),
            }
            body = {"jsonrpc": "2.0", "id": msg_id, "method": rng.choice(METHODS), "params": params}
            lines.append((json.dumps(body).encode(), msg_id))
        elif kind == 4:  # params of the wrong JSON type
            body = {
                "jsonrpc": "2.0",
                "id": msg_id,
                "method": rng.choice(METHODS),
                "params": rng.choice(["s", 3, True]),
            }
            lines.append((json.dumps(body).encode(), msg_id))
        elif kind == 5:  # out of order: responses nobody asked for, notifications with junk
            body = rng.choice([
                {"jsonrpc": "2.0", "id": 999_999, "result": {}},
                {"jsonrpc": "2.0", "id": "dsh-77", "error": {"code": 1, "message": "m"}},
                {"jsonrpc": "2.0", "method": "session/cancel", "params": rng.choice(JUNK)},
                {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": rng.choice(JUNK)}},
            ])  # fmt: skip
            lines.append((json.dumps(body).encode(), None))
        elif kind == 6:  # huge values in the wrong place
            body = {"jsonrpc": "2.0", "id": msg_id, "method": "_dsh/wake",
                    "params": {"sessionId": "x" * rng.randrange(10_000, 200_000)}}  # fmt: skip
            lines.append((json.dumps(body).encode(), msg_id))
        elif kind == 7:  # nested too deep: answered with its own id
            depth = rng.choice([200, 1_000, 20_000])
            body = b'{"jsonrpc":"2.0","id":"%s","method":"session/list","params":{"x":%s}}' % (
                msg_id.encode(),
                nested(depth),
            )
            lines.append((body, msg_id))
        else:  # bad id types
            body = {"jsonrpc": "2.0", "id": rng.choice([[1], {"a": 1}, 1.5, True]), "method": "session/list"}
            lines.append((json.dumps(body).encode(), None))
    return lines


async def test_hundreds_of_hostile_lines_are_each_answered_once_without_a_traceback(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    state = tmp_path / "state"
    rng = random.Random(18)
    fake.script(Reply.stream(text_stream(["after all that"])))
    async with raw_acp(state, fake) as raw:
        sid = await initialized(raw, state)
        lines = bad_lines(rng, sid, str(state / "work"), 600)
        for line, _ in lines:
            raw.send_line(line)
        final = await raw.call("session/list", {})
        assert "sessions" in final["result"], final
        # the soak may have closed the session (a session/close with its id is no mistake): resume it
        resumed = await raw.call(
            "session/resume", {"sessionId": sid, "cwd": str(state / "work"), "mcpServers": []}
        )
        assert "result" in resumed, resumed
        done = await raw.call("session/prompt", {"sessionId": sid, "prompt": prompt("are you there?")})
        assert (done.get("result") or {}).get("stopReason") == "end_turn", done
        expected = [msg_id for _, msg_id in lines if msg_id is not None]
        answers: dict[Any, int] = {}
        for message in raw.received:
            if "method" not in message and message.get("id") in expected:
                answers[message["id"]] = answers.get(message["id"], 0) + 1
        assert {i for i in expected if answers.get(i) != 1} == set()  # each exactly once
        internal = [m for m in raw.received if m.get("error", {}).get("code") == -32603]
        assert internal == [], internal[:3]
        assert raw.process.stdin is not None
        raw.process.stdin.close()
        assert await asyncio.wait_for(raw.process.wait(), 15) == 0
    log = log_of(state)
    assert "Traceback" not in log and "Fatal Python error" not in log, log[-3000:]
