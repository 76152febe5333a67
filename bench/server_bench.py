"""Daemon benchmark over real pipes. Every figure is a median with its spread (min-max over rounds)
beside a baseline measured in the same run, the two interleaved round by round so a slow moment of a
shared machine hits both.

    .venv/bin/python -m bench.server_bench [--starts N] [--runs N] [--deltas N] [--events N] [--only-startup]
        [--only-streaming] [--codex-acp PATH]

1. start-up, spawn -> `initialize` reply: dsh-daemon (LSP) vs a bare pygls server (goal <= 0.5x),
   `dsh-daemon acp` vs codex-acp (goal <= 1.0x), and spawn -> the first `session/new` reply (sent
   the moment `initialize` is answered) of both ACP agents (goal <= 1.0x); `--starts` rounds each
   running them all in a rotating order; the first session's round trip sent right after the reply
   (ACP) or `initialized` (LSP), each beside the same request sent `--pause` seconds later (the
   session machinery preloaded; goal <= 50 ms for both); RSS with one session, once a
   `session/list` (which waits for everything a session loads) is answered (goal <= 60 MiB);
   codex-acp is the npm package's `codex-acp` command (`--codex-acp`, default: on PATH; install it
   with `npm install --prefix DIR @zed-industries/codex-acp`), with its native binary beside it when
   the package has one; skipped, with the reason printed, when absent or when it does not start;
   `dsh-daemon --version` and `dsh-daemon sessions` (spawn -> exit) vs `python -c pass`;
2. added latency, provider SSE write -> client `assistant/delta` (p50/p99 at ~2k deltas/s) vs the same
   bytes read raw from the socket in this process;
3. end-to-end deltas/s at full speed vs a bare pygls server notifying the same number of messages, and
   the server's CPU time per delta (all threads, the scheduler's count: steadier than the rate on a
   loaded machine) against bare pygls' per notification, with how many notifications carried them;
4. wire bytes per output byte for a command printing 1 MB (goal <= 1.3);
5. resume of a 100,000-event session over the wire: `dsh/session/attach {replay: "none"}` plus the
   first `dsh/session/transcript` page (goal < 100 ms) vs a `dsh/session/list` round trip.
2-5 run `--runs` rounds (at least 5 for a figure worth reading).
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import contextlib
import json
import os
import signal
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
        return _rss_mib(self.proc.pid)

    def cpu_s(self) -> float:
        """CPU time the process has run so far, all its threads (the scheduler's nanoseconds: a
        loaded machine's waits are not in it, so it reads steadier than a rate)."""
        total = 0
        for task in Path(f"/proc/{self.proc.pid}/task").iterdir():
            with contextlib.suppress(OSError):  # a thread that ended meanwhile
                total += int((task / "schedstat").read_text().split()[0])
        return total / 1e9


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


INIT = {"processId": None, "rootUri": None, "capabilities": {}}


def daemon_argv(*command: str) -> list[str]:
    return [sys.executable, "-m", "dsh_daemon", *command]


def base_env(state: Path, base_url: str = "http://127.0.0.1:9") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DSH_", "DEEPSEEK_"))}
    env.update({"DSH_HOME": str(state), "DEEPSEEK_API_KEY": "bench", "DEEPSEEK_BASE_URL": base_url})
    return env


class AcpPeer:
    """A spawned ACP agent (`dsh-daemon acp` unless told) and a minimal NDJSON reader."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self._ids = 0

    @classmethod
    async def spawn(cls, env: dict[str, str], argv: list[str] | None = None, cwd: Path = ROOT) -> AcpPeer:
        proc = await asyncio.create_subprocess_exec(
            *(argv or daemon_argv("acp")), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL, env=env, cwd=cwd, limit=1 << 24,
            start_new_session=True,  # codex-acp's Node launcher runs the binary as its child
        )  # fmt: skip
        return cls(proc)

    def rss_mib(self) -> float:
        """The agent's and its children's (codex-acp's launcher and binary)."""
        pids = [self.proc.pid]
        with contextlib.suppress(OSError):
            children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text()
            pids += [int(pid) for pid in children.split()]
        return sum(_rss_mib(pid) for pid in pids)

    async def call(self, method: str, params: Any) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._ids += 1
        self.proc.stdin.write(
            json.dumps({"jsonrpc": "2.0", "id": self._ids, "method": method, "params": params}).encode()
            + b"\n"
        )
        while True:
            line = await self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"dsh-daemon acp ended before answering {method}")
            message = json.loads(line)
            if message.get("id") == self._ids and "method" not in message:
                if "error" in message:
                    raise RuntimeError(message["error"])
                return message["result"]

    async def close(self) -> None:
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):  # the whole group: a child holds the pipes
                os.killpg(self.proc.pid, signal.SIGKILL)
            await self.proc.wait()


# ---- figures: every one a median with its spread over interleaved rounds ------------------------------


def spread(values: list[float], scale: float = 1e3, unit: str = "ms", digits: int = 0) -> str:
    """`median unit [min-max, n]`."""
    med, low, high = statistics.median(values), min(values), max(values)
    return f"{med * scale:,.{digits}f} {unit} [{low * scale:,.{digits}f}-{high * scale:,.{digits}f}, n={len(values)}]"


def ratio(ours: list[float], theirs: list[float]) -> str:
    """The ratio of the medians, and the spread of the rounds' own ratios (each round measured both
    within seconds of each other, so a slow moment of a loaded machine hits both)."""
    rounds = [a / b for a, b in zip(ours, theirs, strict=True)]
    return (
        f"ratio {statistics.median(ours) / statistics.median(theirs):.2f} "
        f"[per round {min(rounds):.2f}-{max(rounds):.2f}, median {statistics.median(rounds):.2f}]"
    )


async def start_bare(bare: Path, env: dict[str, str]) -> tuple[float, float]:
    start = time.perf_counter()
    peer = await Peer.spawn([sys.executable, str(bare)], env)
    await peer.call("initialize", INIT)
    elapsed = time.perf_counter() - start
    await asyncio.sleep(0.3)
    rss = peer.rss_mib()
    await peer.close()
    return elapsed, rss


async def start_lsp(env: dict[str, str], cwd: Path, pause: float = 0.0) -> tuple[float, float, float]:
    """Spawn -> `initialize` reply, then `initialized` and, `pause` seconds later (at once by default),
    `dsh/session/new`: its round trip."""
    start = time.perf_counter()
    peer = await Peer.spawn(daemon_argv(), env)
    await peer.call("initialize", INIT)
    elapsed = time.perf_counter() - start
    peer.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    if pause:
        await asyncio.sleep(pause)
    start = time.perf_counter()
    await peer.call("dsh/session/new", {"cwd": str(cwd)})
    new = time.perf_counter() - start
    await peer.call("dsh/session/list", {})  # answered once everything is loaded (host/preload.py)
    await asyncio.sleep(0.3)
    rss = peer.rss_mib()
    await peer.close()
    return elapsed, new, rss


async def start_acp(
    env: dict[str, str], cwd: Path, pause: float, argv: list[str] | None = None
) -> tuple[float, float, float, float]:
    """Spawn -> `initialize` reply; then, `pause` seconds later, the `session/new` round trip; spawn
    -> that reply (when sent at once); RSS 0.3 s after (NaN when paused)."""
    start = time.perf_counter()
    peer = await AcpPeer.spawn(env, argv, cwd)
    await peer.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    elapsed = time.perf_counter() - start
    if pause:
        await asyncio.sleep(pause)
    sent = time.perf_counter()
    await peer.call("session/new", {"cwd": str(cwd), "mcpServers": []})
    done = time.perf_counter()
    rss = float("nan")
    if not pause:
        await peer.call("session/list", {})  # (dsh: answered once everything is loaded)
        await asyncio.sleep(0.3)
        rss = peer.rss_mib()
    await peer.close()
    return elapsed, done - sent, done - start, rss


def codex_commands(given: str | None) -> tuple[dict[str, list[str]], str]:
    """The codex-acp commands to race: the npm package's `codex-acp` (a Node launcher that runs the
    native binary) and that binary, found beside it in node_modules; or why there are none."""
    import shutil

    path = given or shutil.which("codex-acp")
    if path is None:
        return (
            {},
            "no codex-acp on PATH (npm install --prefix DIR @zed-industries/codex-acp; --codex-acp DIR/node_modules/.bin/codex-acp)",
        )
    launcher = Path(path).resolve()
    if not launcher.is_file():
        return {}, f"{path} is not a file"
    commands = {"codex-acp": [str(launcher)]}
    for parent in launcher.parents:
        if parent.name == "node_modules":
            for native in sorted(parent.glob("@zed-industries/codex-acp-*/bin/codex-acp")):
                commands["codex-acp native"] = [str(native)]
            break
    return commands, ""


async def codex_ready(commands: dict[str, list[str]], tmp: Path) -> tuple[dict[str, str], str]:
    """codex-acp's environment: a home of its own under `tmp`, an API key that is not one and a base
    URL on a closed local port (nothing leaves the machine), logged in once by `authenticate` (its
    `session/new` refuses before), so every round then starts as a set-up installation does. Returns
    the environment, or why it cannot be used."""
    home = tmp / "codex-home"
    (home / ".codex").mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CODEX_"))}
    env.update({"HOME": str(home), "CODEX_HOME": str(home / ".codex"), "CODEX_API_KEY": "bench",
                "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"})  # fmt: skip
    cwd = tmp / "start-cwd"
    peer = await AcpPeer.spawn(env, next(iter(commands.values())), cwd)
    try:
        async with asyncio.timeout(30):
            await peer.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
            await peer.call("authenticate", {"methodId": "codex-api-key"})
            await peer.call("session/new", {"cwd": str(cwd), "mcpServers": []})
    except (RuntimeError, TimeoutError, OSError) as exc:
        return env, f"codex-acp did not start a session: {exc!r}"
    finally:
        await peer.close()
    return env, ""


async def startup_figures(tmp: Path, bare: Path, rounds: int, pause: float, codex_acp: str | None) -> None:
    """The start-ups interleaved, in an order that rotates each round."""
    env = base_env(tmp / "start-state")
    cwd = tmp / "start-cwd"
    cwd.mkdir()
    codex, why_not = codex_commands(codex_acp)
    codex_env: dict[str, str] = {}
    if codex:
        codex_env, why_not = await codex_ready(codex, tmp)
        if why_not:
            codex = {}
    bare_t, lsp_t, acp_t, lsp_new, acp_new, acp_new_later = [], [], [], [], [], []
    lsp_new_later: list[float] = []
    bare_rss, lsp_rss, acp_total, acp_rss = [], [], [], []
    peers: dict[str, tuple[list[float], list[float], list[float]]] = {name: ([], [], []) for name in codex}
    order = ["bare", "lsp", "acp", "acp-pause", "lsp-pause", *codex]
    for index in range(rounds):
        at = index % len(order)
        for which in order[at:] + order[:at]:
            if which == "bare":
                t, r = await start_bare(bare, env)
                bare_t.append(t)
                bare_rss.append(r)
            elif which == "lsp":
                t, new, r = await start_lsp(env, cwd)
                lsp_t.append(t)
                lsp_new.append(new)
                lsp_rss.append(r)
            elif which == "lsp-pause":
                _, new, _ = await start_lsp(env, cwd, pause)
                lsp_new_later.append(new)
            elif which == "acp":
                t, new, total, r = await start_acp(env, cwd, 0.0)
                acp_t.append(t)
                acp_new.append(new)
                acp_total.append(total)
                acp_rss.append(r)
            elif which == "acp-pause":
                _, new, _, _ = await start_acp(env, cwd, pause)
                acp_new_later.append(new)
            else:
                t, _, total, r = await start_acp(codex_env, cwd, 0.0, codex[which])
                for values, value in zip(peers[which], (t, total, r), strict=True):
                    values.append(value)
    print(f"start-up, spawn -> initialize reply, {rounds} interleaved rounds:")
    print(f"  bare pygls          {spread(bare_t)}")
    print(f"  dsh-daemon (LSP)    {spread(lsp_t)}   vs bare pygls: {ratio(lsp_t, bare_t)} (goal <= 0.5)")
    print(f"  dsh-daemon acp      {spread(acp_t)}   vs bare pygls: {ratio(acp_t, bare_t)}")
    for name, (t, _, _) in peers.items():
        print(f"  {name:<18}  {spread(t)}   dsh-daemon acp vs it: {ratio(acp_t, t)} (goal <= 1.0)")
    if not codex:
        print(f"  codex-acp skipped: {why_not}")
    print("  spawn -> first session/new reply (sent the moment initialize is answered):")
    print(f"    dsh-daemon acp      {spread(acp_total)}")
    for name, (_, total, _) in peers.items():
        print(
            f"    {name:<18}  {spread(total)}   dsh-daemon acp vs it: {ratio(acp_total, total)} (goal <= 1.0)"
        )
    print(
        f"  first session (goal <= 50 ms), sent at once vs sent {pause:g} s later (the machinery preloaded):"
    )
    print(
        f"    LSP dsh/session/new right after `initialized` {spread(lsp_new)}   "
        f"{pause:g} s after {spread(lsp_new_later)}   {ratio(lsp_new, lsp_new_later)}"
    )
    print(
        f"    ACP session/new right after the reply        {spread(acp_new)}   "
        f"{pause:g} s after {spread(acp_new_later)}   {ratio(acp_new, acp_new_later)}"
    )
    others = "".join(f", {name} {spread(rss, 1, 'MiB', 1)}" for name, (_, _, rss) in peers.items())
    print(
        f"  RSS with one session, 0.3 s after a session/list answered (goal <= 60 MiB): dsh-daemon (LSP) {spread(lsp_rss, 1, 'MiB', 1)}, "
        f"dsh-daemon acp {spread(acp_rss, 1, 'MiB', 1)}{others}; bare pygls, no session, {spread(bare_rss, 1, 'MiB', 1)}"
    )


def cli_figures(tmp: Path, rounds: int) -> None:
    """Issue 20.5: `dsh-daemon --version` and `dsh-daemon sessions` (a store holding 20 sessions) vs
    the interpreter starting and doing nothing, interleaved in a rotating order."""
    import subprocess

    from dsh_daemon.session.store import SessionStore

    state = tmp / "cli-state"
    store = SessionStore(state)
    for index in range(20):
        store.create_session(f"session-{index}", title=f"title {index}", cwd=str(tmp))
    store.close()
    env = {**base_env(state), "DSH_HOME": str(state)}
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "dsh-daemon --version": daemon_argv("--version"),
        "dsh-daemon sessions": daemon_argv("sessions"),
    }
    times: dict[str, list[float]] = {name: [] for name in commands}
    names = list(commands)
    for index in range(rounds):
        for name in names[index % 3 :] + names[: index % 3]:
            start = time.perf_counter()
            subprocess.run(commands[name], env=env, cwd=ROOT, stdout=subprocess.DEVNULL, check=True)
            times[name].append(time.perf_counter() - start)
    base = times["python -c pass"]
    print(f"printing commands, spawn -> exit, {rounds} interleaved rounds (goal < 100 ms; issue 20.5):")
    print(f"  python -c pass          {spread(base)}")
    for name in names[1:]:
        extra = statistics.median(times[name]) - statistics.median(base)
        figure = f"{spread(times[name])}   {ratio(times[name], base)}; +{extra * 1e3:.0f} ms over pass"
        print(f"  {name:<22}  {figure}")


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
        with contextlib.suppress(ConnectionError):  # the raw-socket baseline hangs up mid-stream
            await self._answer(reader, writer)

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
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
            # the tool's result answers the call just made (earlier rounds' results are history)
            has_tool_result = bool(body["messages"]) and body["messages"][-1].get("role") == "tool"
            start = time.perf_counter()
            for index, (number, event) in enumerate(self._events(has_tool_result)):
                if self.interval:  # paced by the clock, so the loop's sleep granularity cannot slow the rate
                    due = start + index * self.interval - time.perf_counter()
                    if due > 0:
                        await writer.drain()
                        await asyncio.sleep(due)
                data = event.encode()
                if number is not None:
                    self.writes[number] = time.perf_counter()  # stamped as the bytes go to the socket
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
            yield None, chunk({"tool_calls": [call]})
            yield None, chunk({}, "tool_calls")
        else:
            for i in range(self.deltas):
                yield i, chunk({"content": f"d{i} "})
            yield None, chunk({}, "stop")
        yield None, "data: [DONE]\n\n"


async def turn(peer: Peer, sid: str, text: str) -> None:
    done = peer.turn_ends
    await peer.call("dsh/followup", {"sessionId": sid, "message": {"content": text}})
    while peer.turn_ends <= done:
        await peer.wait_change()


def deltas_of(peer: Peer, since: int = 0) -> list[tuple[float, int]]:
    """(when it arrived, its number) of every provider delta `d{n} ` received, merged ones included
    (a client that falls behind gets several in one notification: protocol.md §7)."""
    out = []
    for stamp, message, _ in peer.messages[since:]:
        params = message.get("params") or {}
        if message.get("method") == "dsh/event" and params.get("type") == "assistant/delta":
            out.extend((stamp, int(word[1:])) for word in params["data"]["delta"]["text"].split())
    return out


def notifications(peer: Peer, since: int) -> int:
    """How many `assistant/delta` notifications came (each may carry several merged deltas)."""
    return sum(
        1
        for _, message, _ in peer.messages[since:]
        if message.get("method") == "dsh/event"
        and (message.get("params") or {}).get("type") == "assistant/delta"
    )


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
    # As installed: pip compiles a package's bytecode at install time (pygls' and lsprotocol's are),
    # while an editable checkout under PYTHONDONTWRITEBYTECODE (as this machine sets) would compile
    # every module of ours from source at every start.
    compileall.compile_dir(ROOT / "dsh_daemon", quiet=1)

    # 1: start-up of both modes against bare pygls; the printing commands against `python -c pass`
    if not args.only_streaming:
        await startup_figures(tmp, bare, args.starts, args.pause, args.codex_acp)
        if args.only_startup:
            return
        cli_figures(tmp, args.starts)

    # 2-4: one daemon with a session and one bare pygls server, measured in alternating rounds
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
    peer.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    sid = (await peer.call("dsh/session/new", {"cwd": str(tmp)}))["sessionId"]
    bare_peer = await Peer.spawn([sys.executable, str(bare)], env)
    await bare_peer.call("initialize", INIT)
    p50, p99, base_p50, base_p99, rates = [], [], [], [], []
    ours_rate, bare_rate, wire_ratio = [], [], []
    ours_cpu, bare_cpu, notified = [], [], []
    for index in range(args.runs):
        # 2: latency at ~2k deltas/s, and the same stream read raw off the socket
        provider.tool_command = None
        provider.deltas, provider.interval = args.deltas, 0.0005
        provider.writes.clear()  # this turn's stamps only (the rate spans them)
        mark = len(peer.messages)
        await turn(peer, sid, "latency")
        lat = [stamp - provider.writes[i] for stamp, i in deltas_of(peer, mark)]
        rates.append(len(lat) / (max(provider.writes.values()) - min(provider.writes.values())))
        base = await raw_socket_latency(provider, args.deltas)
        p50.append(pct(lat, 0.5))
        p99.append(pct(lat, 0.99))
        base_p50.append(pct(base, 0.5))
        base_p99.append(pct(base, 0.99))

        # 3: full-speed deltas/s vs bare pygls notifying as many messages (which goes first alternates)
        provider.deltas, provider.interval = args.burst, 0.0

        async def ours() -> None:
            mark = len(peer.messages)
            cpu = peer.cpu_s()
            start = time.perf_counter()
            await turn(peer, sid, "throughput")
            received = deltas_of(peer, mark)
            ours_rate.append(len(received) / (time.perf_counter() - start))
            ours_cpu.append((peer.cpu_s() - cpu) / len(received))
            notified.append(notifications(peer, mark) / len(received))

        async def theirs() -> None:
            cpu = bare_peer.cpu_s()
            start = time.perf_counter()
            await bare_peer.call("bench/burst", {"count": args.burst})
            bare_rate.append(args.burst / (time.perf_counter() - start))
            bare_cpu.append((bare_peer.cpu_s() - cpu) / args.burst)

        for step in (ours, theirs) if index % 2 == 0 else (theirs, ours):
            await step()

        # 4: wire bytes per output byte, a command printing 1 MB
        provider.tool_command = (
            f"{sys.executable} -c \"import sys; sys.stdout.write(('x' * 99 + chr(10)) * 10486)\""
        )
        provider.deltas = 3
        before = peer.bytes
        await turn(peer, sid, "print a lot")
        wire_ratio.append((peer.bytes - before) / (100 * 10486))
    await bare_peer.close()
    await peer.close()
    print(f"streaming, {args.runs} interleaved rounds:")
    print(
        f"  SSE write -> client assistant/delta at {statistics.median(rates):,.0f} deltas/s: "
        f"p50 {spread(p50, digits=2)}, p99 {spread(p99, digits=2)}"
    )
    print(
        f"  the same stream read raw off the socket: p50 {spread(base_p50, digits=2)}, p99 {spread(base_p99, digits=2)}"
    )
    added = [a - b for a, b in zip(p50, base_p50, strict=True)]
    print(f"  added p50 {spread(added, digits=2)}")
    print(
        f"  end-to-end deltas/s: dsh-daemon {spread(ours_rate, 1, '/s')}, bare pygls notify "
        f"{spread(bare_rate, 1, '/s')}, {ratio(ours_rate, bare_rate)}"
    )
    print(
        f"  server CPU per delta at full speed: dsh-daemon {spread(ours_cpu, 1e6, 'us', 1)}, bare pygls per "
        f"notification {spread(bare_cpu, 1e6, 'us', 1)}, {ratio(bare_cpu, ours_cpu)} (as a rate: bare / ours); dsh-daemon notifications "
        f"per delta {spread(notified, 1, '', 3)} (below 1: merged for a client that fell behind)"
    )
    print(f"  wire bytes per output byte, 1 MB command output: {spread(wire_ratio, 1, '', 3)} (goal <= 1.3)")


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
        await peer.call("dsh/session/list", {"limit": 1})  # and the second can wait for the preload
        start = time.perf_counter()
        await peer.call("dsh/session/list", {"limit": 1})
        base.append(time.perf_counter() - start)
        start = time.perf_counter()
        attached = await peer.call("dsh/session/attach", {"sessionId": sid, "replay": "none"})
        page = await peer.call("dsh/session/transcript", {"sessionId": sid})
        times.append(time.perf_counter() - start)
        assert attached["lastSeq"] >= events - 1 and len(page["turns"]) == 20, (attached, len(page["turns"]))
        await peer.close()
    print(
        f"resume {events:,}-event session over the wire (attach replay none + first transcript page), "
        f"{runs} rounds: {spread(times)} (goal < 100 ms); dsh/session/list round trip {spread(base, digits=1)}; "
        f"{ratio(times, base)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--starts", type=int, default=10, help="start-up rounds (each: bare, LSP, ACP)")
    parser.add_argument("--pause", type=float, default=1.0, help="seconds before the later session/new")
    parser.add_argument("--runs", type=int, default=5, help="rounds of every other figure")
    parser.add_argument("--deltas", type=int, default=2000)
    parser.add_argument("--burst", type=int, default=20000)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument(
        "--codex-acp", help="the npm package's codex-acp command (default: codex-acp on PATH)"
    )
    parser.add_argument(
        "--only-startup", action="store_true", help="the start-up figures (1) only, without the CLI's"
    )
    parser.add_argument("--only-streaming", action="store_true", help="the streaming figures (2-4) only")
    args = parser.parse_args()
    asyncio.run(main_async(args))
    if args.only_startup or args.only_streaming:
        return
    with tempfile.TemporaryDirectory(prefix="dsh-bench-") as tmp:
        asyncio.run(resume_big_session(Path(tmp), args.events, args.runs))


if __name__ == "__main__":
    main()
