"""Bad input never goes unanswered, a killed daemon loses nothing acknowledged, stdout is protocol only."""

from __future__ import annotations

import asyncio
import json
import random
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.harness import ROOT, daemon_env, start_daemon, stop_daemon


class RawPipe:
    """A byte-level client: writes arbitrary frames, reads framed replies."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.messages: list[dict[str, Any]] = []
        self._reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        while True:
            header = await self.proc.stdout.readline()
            if not header:
                return
            length = None
            while header not in (b"\r\n", b""):
                if header.lower().startswith(b"content-length:"):
                    length = int(header.split(b":")[1])
                header = await self.proc.stdout.readline()
            assert length is not None, "a reply without Content-Length"
            self.messages.append(json.loads(await self.proc.stdout.readexactly(length)))

    def write(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)

    def frame(self, body: bytes | dict[str, Any]) -> None:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.write(b"Content-Length: %d\r\n\r\n" % len(raw) + raw)

    async def call(self, msg_id: Any, method: str, params: Any = None, timeout: float = 60) -> dict[str, Any]:
        self.frame({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        return await self.reply(msg_id, timeout)

    async def reply(self, msg_id: Any, timeout: float = 60) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            for message in self.messages:
                if message.get("id") == msg_id and ("result" in message or "error" in message):
                    return message
            await asyncio.sleep(0.01)
        raise AssertionError(f"no reply to {msg_id!r}; got {self.messages[-5:]}")


async def spawn(state: Path, fake: FakeDeepSeek, *, keep_stderr: bool = False) -> RawPipe:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "dsh_daemon",
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE if keep_stderr else subprocess.DEVNULL,
        env=daemon_env(state, fake), cwd=ROOT,
    )  # fmt: skip
    (state / "home").mkdir(parents=True, exist_ok=True)
    return RawPipe(proc)


def bad_frames(rng: random.Random, session_id: str, n: int) -> list[tuple[bytes, Any]]:
    """(frame bytes, id expecting an error reply or None) for malformed, truncated-in-JSON, oversized,
    wrong-typed and out-of-order input. Every frame is well delimited, so the stream stays in sync."""
    frames: list[tuple[bytes, Any]] = []
    methods = ["dsh/send", "dsh/followup", "dsh/inject", "dsh/cancel", "dsh/session/attach", "dsh/inbox/move",
               "dsh/context/add", "initialize", "textDocument/hover", "dsh/wake", "dsh/nope"]  # fmt: skip
    junk_values: list[Any] = [None, 1, -1.5, "x", [], {}, [1, 2], {"a": None}, True, "\u0000", "é" * 50]
    for i in range(n):
        kind = rng.randrange(8)
        msg_id = f"bad-{i}"
        if kind == 0:  # not JSON at all / truncated JSON
            body = rng.choice([b"{", b'{"jsonrpc": "2.0", "id": 1,', b"\xff\xfe\x00", b"nul", b"]["])
            frames.append((body, None))
        elif kind == 1:  # JSON but not a message
            body = json.dumps(rng.choice([[1, 2], "text", 42, None, [{"jsonrpc": "2.0"}]])).encode()
            frames.append((body, None))
        elif kind == 2:  # wrong jsonrpc version or missing method
            body = json.dumps(
                {"jsonrpc": rng.choice(["1.0", 2, None]), "id": msg_id, "method": "dsh/wake"}
            ).encode()
            frames.append((body, msg_id))
        elif kind == 3:  # wrong-typed params for a real method
            params = {"sessionId": rng.choice([5, None, "nope", "", [session_id]]), "message": rng.choice(junk_values),
                      "target": rng.choice(junk_values), "wakeup": rng.choice(junk_values)}  # fmt: skip
            body = json.dumps(
                {"jsonrpc": "2.0", "id": msg_id, "method": rng.choice(methods), "params": params}
            )
            frames.append((body.encode(), msg_id))
        elif kind == 4:  # params of the wrong JSON type
            body = json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": rng.choice(methods),
                               "params": rng.choice(["s", 3, True])})  # fmt: skip
            frames.append((body.encode(), msg_id))
        elif kind == 5:  # out of order: a response nobody asked for, a stray cancel
            body = json.dumps(rng.choice([{"jsonrpc": "2.0", "id": 999_999, "result": {}},
                                          {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 12345}},
                                          {"jsonrpc": "2.0", "id": "x", "error": {"code": 1, "message": "m"}}]))  # fmt: skip
            frames.append((body.encode(), None))
        elif kind == 6:  # oversized but valid: a huge string in a wrong place
            body = json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": "dsh/wake",
                               "params": {"sessionId": "x" * rng.randrange(10_000, 200_000)}})  # fmt: skip
            frames.append((body.encode(), msg_id))
        else:  # bad id types
            body = json.dumps(
                {"jsonrpc": "2.0", "id": rng.choice([[1], {"a": 1}, 1.5, True]), "method": "dsh/wake"}
            )
            frames.append((body.encode(), None))
    return frames


async def test_a_thousand_bad_frames_then_normal_service_and_nothing_lost(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    rng = random.Random(7)
    state = tmp_path / "state"
    pipe = await spawn(state, fake)
    init = await pipe.call(
        1, "initialize", {"capabilities": {}, "initializationOptions": {"thinking": False}}
    )
    assert "result" in init
    pipe.frame({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    sid = (await pipe.call(2, "dsh/session/new", {}))["result"]["sessionId"]
    acked = []
    for i in range(5):
        reply = await pipe.call(f"ok-{i}", "dsh/send", {"sessionId": sid, "message": {"content": f"keep {i}"},
                                                        "target": "next-turn", "wakeup": False})  # fmt: skip
        acked.append(reply["result"]["messageId"])
    frames = bad_frames(rng, sid, 1200)
    for body, _ in frames:
        pipe.frame(body)
    # headers that do not parse, then a clean frame: the loop resynchronises
    pipe.write(b"Content-Type: nothing\r\n\r\n")
    pipe.write(b"X-Garbage\r\n\r\n")
    for _body, msg_id in frames:
        if msg_id is not None:
            answer = await pipe.reply(msg_id)
            assert "error" in answer, (msg_id, answer)
            assert isinstance(answer["error"]["code"], int) and answer["error"]["message"]
    parse_errors = [m for m in pipe.messages if m.get("error", {}).get("code") == -32700]
    assert parse_errors and all(m["id"] is None for m in parse_errors)
    listing = await pipe.call("after", "dsh/inbox/list", {"sessionId": sid})
    assert [m["id"] for m in listing["result"]["nextTurn"]] == acked
    assert all("method" in m or "id" in m for m in pipe.messages)
    await pipe.call("bye", "shutdown")
    pipe.frame({"jsonrpc": "2.0", "method": "exit"})
    assert await asyncio.wait_for(pipe.proc.wait(), 10) == 0


async def test_requests_after_shutdown_get_an_error(tmp_path: Path, fake: FakeDeepSeek) -> None:
    pipe = await spawn(tmp_path / "state", fake)
    await pipe.call(1, "initialize", {"capabilities": {}})
    await pipe.call(2, "shutdown")
    late = await pipe.call(3, "dsh/session/list", {})
    assert late["error"]["code"] == -32600
    pipe.frame({"jsonrpc": "2.0", "method": "exit"})
    assert await asyncio.wait_for(pipe.proc.wait(), 10) == 0


async def test_stdin_eof_shuts_down_cleanly_and_keeps_the_queue(tmp_path: Path, fake: FakeDeepSeek) -> None:
    state = tmp_path / "state"
    pipe = await spawn(state, fake)
    await pipe.call(1, "initialize", {"capabilities": {}})
    sid = (await pipe.call(2, "dsh/session/new", {}))["result"]["sessionId"]
    await pipe.call(
        3, "dsh/send", {"sessionId": sid, "message": {"content": "q"}, "target": "next-turn", "wakeup": False}
    )
    assert pipe.proc.stdin is not None
    pipe.proc.stdin.close()
    assert await asyncio.wait_for(pipe.proc.wait(), 10) == 0
    again = await start_daemon(state, fake)
    attached = await again.request("dsh/session/attach", {"sessionId": sid})
    assert [m["content"][0]["text"] for m in attached["inbox"]["nextTurn"]] == ["q"]
    await stop_daemon(again)


async def test_sigkill_mid_turn_then_attach_shows_the_repaired_turn_and_queue(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    state = tmp_path / "state"
    fake.script(Reply.stream(text_stream(["slow"] * 100), delay=0.1))
    first = await start_daemon(state, fake)
    sid = await first.new_session()
    await first.request("dsh/followup", {"sessionId": sid, "message": {"content": "long task"}})
    queued = await first.request("dsh/followup", {"sessionId": sid, "message": {"content": "next"}})
    await first.wait_event(sid, "assistant/delta", 3)
    server = first.client._server
    assert server is not None
    server.send_signal(signal.SIGKILL)
    await server.wait()
    await first.client.stop()

    second = await start_daemon(state, fake)
    attached = await second.request("dsh/session/attach", {"sessionId": sid})
    types = [e["type"] for e in second.of(sid)]
    assert types[-1] == "turn/end"
    assert second.of(sid, "turn/end")[-1]["data"]["reason"] == {"kind": "interrupted"}
    assert [m["id"] for m in attached["inbox"]["nextTurn"]] == [queued["messageId"]]
    assert attached["status"] == "idle"
    await second.request("dsh/wake", {"sessionId": sid})
    await second.wait_for(lambda: len(second.of(sid, "turn/end")) >= 2)
    assert [e["data"]["turn"] for e in second.of(sid, "turn/start")] == [1, 2]
    await stop_daemon(second)


def test_stdout_is_protocol_only(tmp_path: Path) -> None:
    """Even a print() inside the daemon process lands on stderr (fd 1 is moved away)."""
    code = (
        "import sys; from dsh_daemon.server.main import protect_stdout; out = protect_stdout(); "
        "print('stray print'); import os; os.write(1, b'raw fd write\\n'); out.write(b'PROTOCOL'); out.flush()"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, cwd=ROOT, timeout=30)
    assert result.stdout == b"PROTOCOL"
    assert b"stray print" in result.stderr and b"raw fd write" in result.stderr


async def test_api_key_never_reaches_events_or_store(tmp_path: Path, fake: FakeDeepSeek) -> None:
    state = tmp_path / "state"
    fake.script(
        Reply.error(
            401,
            '{"error":{"message":"Authentication Fails, Your api key: sk-test-secret-key-0000 is invalid","type":"authentication_error"}}',
        )
    )
    d = await start_daemon(state, fake)
    sid = await d.new_session()
    await d.request("dsh/followup", {"sessionId": sid, "message": {"content": "hi"}})
    reasons = await d.wait_idle_turn(sid)
    assert reasons[0]["kind"] == "error" and reasons[0]["error"]["code"] == "AUTH"
    await stop_daemon(d)
    assert "sk-test-secret-key-0000" not in json.dumps(d.events)
    for path in state.rglob("*"):
        if path.is_file():
            assert b"sk-test-secret-key-0000" not in path.read_bytes(), path
