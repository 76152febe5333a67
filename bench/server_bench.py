"""Daemon benchmark over real pipes. Every figure is printed beside a baseline from the same run.

    .venv/bin/python -m bench.server_bench [--runs N] [--deltas N]

1. cold start, spawn -> `initialize` response: dsh-daemon vs a bare pygls server;
2. added latency, provider SSE write -> client `assistant/delta` (p50/p99 at ~2k deltas/s) vs the same
   bytes read raw from the socket in this process;
3. end-to-end deltas/s at full speed vs a bare pygls server notifying the same number of messages;
4. wire bytes per output byte for a command printing 1 MB (goal <= 1.3);
5. idle RSS after initialize (+ one session) vs the bare pygls server;
6. resume of a 100,000-event session over the wire: `dsh/session/attach {replay: "none"}` plus the
   first `dsh/session/transcript` page (goal < 100 ms) vs a `dsh/session/list` round trip.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

BARE_SERVER = textwrap.dedent(
    """
    import sys
    from pygls.lsp.server import LanguageServer
    server = LanguageServer("bare", "0.1")

    @server.feature("bench/burst")
    def burst(ls, params):
        for i in range(params.count):
            ls.protocol.notify("bench/event", {"sessionId": "s", "type": "assistant/delta",
                "data": {"turn": 1, "step": 1, "delta": {"type": "text", "text": "d%d " % i}}})
        return {"sent": params.count}

    server.start_io()
    """
)


class Peer:
    """A spawned server and a minimal Content-Length reader that timestamps every message."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.messages: list[tuple[float, dict[str, Any], int]] = []
        self.responses: dict[int, dict[str, Any]] = {}
        self.turn_ends = 0
        self.changed = asyncio.Event()
        self.bytes = 0
        self._ids = 0
        self._reader = asyncio.ensure_future(self._read())
        self.on_request: Any = None

    @classmethod
    async def spawn(cls, argv: list[str], env: dict[str, str]) -> Peer:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL, env=env, cwd=ROOT, limit=1 << 24,
        )  # fmt: skip
        return cls(proc)

    async def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            length = None
            size = 0
            while True:
                line = await out.readline()
                if not line:
                    return
                size += len(line)
                if line == b"\r\n":
                    break
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            assert length is not None
            body = await out.readexactly(length)
            self.bytes += size + length
            message = json.loads(body)
            self.messages.append((time.perf_counter(), message, size + length))
            if "id" in message and "method" not in message:
                self.responses[message["id"]] = message
                self.changed.set()
            elif (message.get("params") or {}).get("type") == "turn/end":
                self.turn_ends += 1
                self.changed.set()
            if "method" in message and "id" in message and self.on_request is not None:
                self.send({"jsonrpc": "2.0", "id": message["id"], "result": self.on_request(message)})

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        body = json.dumps(message).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    async def call(self, method: str, params: Any = None) -> Any:
        self._ids += 1
        msg_id = self._ids
        self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        while msg_id not in self.responses:
            await self.wait_change()
        message = self.responses.pop(msg_id)
        if "error" in message:
            raise RuntimeError(message["error"])
        return message["result"]

    async def wait_change(self) -> None:
        self.changed.clear()
        await self.changed.wait()

    async def close(self) -> None:
        if self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()
        self._reader.cancel()

    def rss_mib(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")


INIT = {"processId": None, "rootUri": None, "capabilities": {}}


def daemon_argv() -> list[str]:
    return [sys.executable, "-m", "dsh_daemon"]


def base_env(state: Path, base_url: str = "http://127.0.0.1:9") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DSH_", "DEEPSEEK_"))}
    env.update({"DSH_HOME": str(state), "DEEPSEEK_API_KEY": "bench", "DEEPSEEK_BASE_URL": base_url})
    return env


async def cold_start(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    start = time.perf_counter()
    peer = await Peer.spawn(argv, env)
    await peer.call("initialize", INIT)
    elapsed = time.perf_counter() - start
    await asyncio.sleep(1.0)
    rss = peer.rss_mib()
    await peer.close()
    return elapsed, rss


# ---- a timestamping SSE provider -------------------------------------------------------------------


class SseProvider:
    """An OpenAI-style streaming endpoint that records when it wrote each delta (perf_counter)."""

    def __init__(self) -> None:
        self.writes: dict[int, float] = {}
        self.deltas = 0
        self.interval = 0.0
        self.port = 0
        self.tool_command: str | None = None

    async def start(self) -> None:
        server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            length = int(
                next(
                    line.split(b":")[1]
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                )
            )
            body = json.loads(await reader.readexactly(length))
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
            )
            has_tool_result = any(m.get("role") == "tool" for m in body["messages"])
            start = time.perf_counter()
            for index, event in enumerate(self._events(has_tool_result)):
                if self.interval:  # paced by the clock, so the loop's sleep granularity cannot slow the rate
                    due = start + index * self.interval - time.perf_counter()
                    if due > 0:
                        await writer.drain()
                        await asyncio.sleep(due)
                data = event.encode()
                writer.write(b"%x\r\n%s\r\n" % (len(data), data))
            writer.write(b"0\r\n\r\n")
            await writer.drain()

    def _events(self, after_tool: bool) -> Any:
        def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
            return (
                "data: "
                + json.dumps({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
                + "\n\n"
            )

        if self.tool_command and not after_tool:
            call = {"index": 0, "id": "c1", "type": "function",
                    "function": {"name": "run_command", "arguments": json.dumps({"command": self.tool_command})}}  # fmt: skip
            yield chunk({"tool_calls": [call]})
            yield chunk({}, "tool_calls")
        else:
            for i in range(self.deltas):
                text = chunk({"content": f"d{i} "})
                self.writes[i] = time.perf_counter()  # stamped as the bytes are handed to the socket
                yield text
            yield chunk({}, "stop")
        yield "data: [DONE]\n\n"


async def turn(peer: Peer, sid: str, text: str) -> None:
    done = peer.turn_ends
    await peer.call("dsh/followup", {"sessionId": sid, "message": {"content": text}})
    while peer.turn_ends <= done:
        await peer.wait_change()


def deltas_of(peer: Peer, since: int = 0) -> list[tuple[float, int]]:
    out = []
    for stamp, message, _ in peer.messages[since:]:
        params = message.get("params") or {}
        if message.get("method") == "dsh/event" and params.get("type") == "assistant/delta":
            out.append((stamp, int(params["data"]["delta"]["text"][1:])))
    return out


async def raw_socket_latency(provider: SseProvider, n: int) -> list[float]:
    """Baseline: read the same SSE stream straight off the socket in this process."""
    reader, writer = await asyncio.open_connection("127.0.0.1", provider.port)
    body = b'{"messages": []}'
    writer.write(b"POST /chat/completions HTTP/1.1\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))
    latencies = []
    buffer = b""
    seen = 0
    while seen < n:
        buffer += await reader.read(65536)
        while b'"content": "d' in buffer:
            index = buffer.index(b'"content": "d')
            end = buffer.index(b" ", index + 13)
            number = int(buffer[index + 13 : end])
            latencies.append(time.perf_counter() - provider.writes[number])
            buffer = buffer[end:]
            seen += 1
    writer.transport.abort()
    return latencies


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main_async(args: argparse.Namespace) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="dsh-bench-"))
    bare = tmp / "bare_server.py"
    bare.write_text(BARE_SERVER)
    env = base_env(tmp / "state")

    # 1 + 5: cold start and idle RSS
    ours, theirs, ours_rss, theirs_rss = [], [], [], []
    for _ in range(args.runs):
        t, r = await cold_start([sys.executable, str(bare)], env)
        theirs.append(t)
        theirs_rss.append(r)
        t, r = await cold_start(daemon_argv(), env)
        ours.append(t)
        ours_rss.append(r)
    print(
        f"cold start to initialize: dsh-daemon {statistics.median(ours) * 1e3:.0f} ms, "
        f"bare pygls {statistics.median(theirs) * 1e3:.0f} ms, ratio {statistics.median(ours) / statistics.median(theirs):.2f}"
    )

    provider = SseProvider()
    await provider.start()
    env = base_env(tmp / "state2", f"http://127.0.0.1:{provider.port}")
    peer = await Peer.spawn(daemon_argv(), env)
    await peer.call(
        "initialize",
        {
            **INIT,
            "initializationOptions": {"thinking": False, "tools": {"permissions": {"run_command": "allow"}}},
        },
    )
    sid = (await peer.call("dsh/session/new", {"cwd": str(tmp)}))["sessionId"]
    await asyncio.sleep(1.0)
    print(
        f"idle RSS: dsh-daemon {peer.rss_mib():.1f} MiB (one session open), bare pygls {statistics.median(theirs_rss):.1f} MiB, "
        f"after initialize only {statistics.median(ours_rss):.1f} MiB"
    )

    # 2: latency at ~2k deltas/s
    provider.deltas, provider.interval = args.deltas, 0.0005
    mark = len(peer.messages)
    await turn(peer, sid, "latency")
    lat = [stamp - provider.writes[i] for stamp, i in deltas_of(peer, mark)]
    rate = len(lat) / (max(provider.writes.values()) - min(provider.writes.values()))
    base = await raw_socket_latency(provider, args.deltas)
    print(
        f"SSE write -> client assistant/delta at {rate:,.0f} deltas/s: p50 {pct(lat, 0.5) * 1e3:.2f} ms, "
        f"p99 {pct(lat, 0.99) * 1e3:.2f} ms; raw socket read p50 {pct(base, 0.5) * 1e3:.2f} ms, "
        f"p99 {pct(base, 0.99) * 1e3:.2f} ms; added p50 {(pct(lat, 0.5) - pct(base, 0.5)) * 1e3:.2f} ms"
    )

    # 3: full-speed throughput vs bare pygls notify
    provider.deltas, provider.interval = args.burst, 0.0
    mark = len(peer.messages)
    start = time.perf_counter()
    await turn(peer, sid, "throughput")
    ours_rate = len(deltas_of(peer, mark)) / (time.perf_counter() - start)
    bare_peer = await Peer.spawn([sys.executable, str(bare)], env)
    await bare_peer.call("initialize", INIT)
    start = time.perf_counter()
    await bare_peer.call("bench/burst", {"count": args.burst})
    bare_rate = args.burst / (time.perf_counter() - start)
    await bare_peer.close()
    print(
        f"end-to-end deltas/s: dsh-daemon {ours_rate:,.0f}, bare pygls notify {bare_rate:,.0f}, ratio {ours_rate / bare_rate:.2f}"
    )

    # 4: wire bytes per output byte, a command printing 1 MB
    provider.tool_command = (
        f"{sys.executable} -c \"import sys; sys.stdout.write(('x' * 99 + chr(10)) * 10486)\""
    )
    provider.deltas = 3
    before = peer.bytes
    await turn(peer, sid, "print a lot")
    wire = peer.bytes - before
    output = 100 * 10486
    print(
        f"wire bytes per output byte, 1 MB command output: {wire / output:.3f} (goal <= 1.3; {wire:,} wire bytes)"
    )
    await peer.close()


async def resume_big_session(tmp: Path, events: int, runs: int) -> None:
    from bench.core_bench import build_big_session

    state = tmp / "big-state"
    sid = build_big_session(state, events)
    times, base = [], []
    for _ in range(runs):
        peer = await Peer.spawn(daemon_argv(), base_env(state))
        await peer.call("initialize", {**INIT, "initializationOptions": {"thinking": False}})
        peer.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        await peer.call("dsh/session/list", {"limit": 1})  # the first request builds the session hub
        start = time.perf_counter()
        await peer.call("dsh/session/list", {"limit": 1})
        base.append(time.perf_counter() - start)
        start = time.perf_counter()
        attached = await peer.call("dsh/session/attach", {"sessionId": sid, "replay": "none"})
        page = await peer.call("dsh/session/transcript", {"sessionId": sid})
        times.append(time.perf_counter() - start)
        assert attached["lastSeq"] == events + 1 and len(page["turns"]) == 20, (attached, len(page["turns"]))
        await peer.close()
    ours, theirs = statistics.median(times), statistics.median(base)
    print(
        f"resume {events:,}-event session (attach replay none + first transcript page): {ours * 1e3:.0f} ms "
        f"(goal < 100 ms)   dsh/session/list round trip: {theirs * 1e3:.1f} ms   ratio {ours / theirs:.1f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--deltas", type=int, default=2000)
    parser.add_argument("--burst", type=int, default=20000)
    parser.add_argument("--events", type=int, default=100_000)
    args = parser.parse_args()
    asyncio.run(main_async(args))
    with tempfile.TemporaryDirectory(prefix="dsh-bench-") as tmp:
        asyncio.run(resume_big_session(Path(tmp), args.events, min(args.runs, 3)))


if __name__ == "__main__":
    main()
