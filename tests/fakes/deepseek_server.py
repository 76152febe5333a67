"""A faithful fake DeepSeek server: a real HTTP/1.1 server on 127.0.0.1 that plays scripted replies byte
for byte (provider.md §3) and records every request.

It runs its own event loop in a thread, so sync tests, async tests and a daemon in a subprocess can
all talk to it. Typical use::

    with FakeDeepSeek() as fake:                    # or `async with`, or start()/stop()
        fake.script(Reply.stream(STREAM_C), Reply.stream(STREAM_A))
        fake.fail_next(2, 503)                      # the next two requests get DeepSeek's 503 first
        ...  # point the client at fake.base_url
        fake.requests[-1].json["messages"]          # what the client sent

A reply is a status, headers and a list of actions: `Write` (one chunk of the chunked body, one TCP
write), `Sleep`, `Stall` (send nothing until the client leaves), `Reset` (abort the socket with a RST),
`Close` (FIN without the chunked terminator). After the actions the chunked terminator is sent unless
an action ended the connection. Unscripted requests get `default` (stream A).

Every recorded request has `completed` (the whole reply was written) and `disconnected` (the client
went away before that) events, so a test can prove that cancelling a stream closed the connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import ssl
import struct
import threading
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Literal, TypeAlias

# ---- byte-level streams (provider.md §3.2) -------------------------------------------------------

E = (
    '{"id":"3f0c1b6e-1d2a-4f7e-9c1a-5b8d2e7f9a01","object":"chat.completion.chunk","created":1764460800,'
    '"model":"deepseek-v4-flash","system_fingerprint":"fp_fake_prod","choices":['
)
KEEP_ALIVE = ": keep-alive"
DONE = "data: [DONE]"


def _data(choice: str, usage: str = "null") -> str:
    return f'data: {E}{choice}],"usage":{usage}}}'


def _choice(delta: str, finish: str = "null") -> str:
    return f'{{"index":0,"delta":{delta},"logprobs":null,"finish_reason":{finish}}}'


USAGE_A = (
    '{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15,"prompt_tokens_details":{"cached_tokens":0},'
    '"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":12}'
)
USAGE_B = (
    '{"prompt_tokens":20,"completion_tokens":9,"total_tokens":29,"prompt_tokens_details":{"cached_tokens":0},'
    '"completion_tokens_details":{"reasoning_tokens":6},"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":20}'
)
USAGE_C = (
    '{"prompt_tokens":180,"completion_tokens":41,"total_tokens":221,"prompt_tokens_details":{"cached_tokens":128},'
    '"completion_tokens_details":{"reasoning_tokens":12},"prompt_cache_hit_tokens":128,"prompt_cache_miss_tokens":52}'
)

# A. Text, non-thinking, usage on the last chunk.
STREAM_A: tuple[str, ...] = (
    _data(_choice('{"role":"assistant","content":""}')),
    _data(_choice('{"content":"Hello"}')),
    _data(_choice('{"content":" there"}')),
    _data(_choice('{"content":"!"}')),
    _data(_choice('{"content":""}', '"stop"'), USAGE_A),
    DONE,
)

# B. Thinking mode: reasoning, then the answer.
STREAM_B: tuple[str, ...] = (
    _data(_choice('{"role":"assistant","content":null,"reasoning_content":""}')),
    _data(_choice('{"content":null,"reasoning_content":"The user"}')),
    _data(_choice('{"content":null,"reasoning_content":" greets me."}')),
    _data(_choice('{"content":"Hi","reasoning_content":null}')),
    _data(_choice('{"content":"!","reasoning_content":null}')),
    _data(_choice('{"content":"","reasoning_content":null}', '"stop"'), USAGE_B),
    DONE,
)

# C. Queued under load (keep-alives), then thinking and two parallel tool calls, with a cache hit.
STREAM_C: tuple[str, ...] = (
    KEEP_ALIVE,
    KEEP_ALIVE,
    _data(_choice('{"role":"assistant","content":null,"reasoning_content":""}')),
    _data(_choice('{"content":null,"reasoning_content":"Need weather for both cities."}')),
    _data(
        _choice(
            '{"content":null,"reasoning_content":null,"tool_calls":[{"index":0,"id":"call_00_Qk3v8mZ1",'
            '"type":"function","function":{"name":"get_weather","arguments":""}}]}'
        )
    ),
    _data(_choice('{"tool_calls":[{"index":0,"function":{"arguments":"{\\"city\\""}}]}')),
    _data(_choice('{"tool_calls":[{"index":0,"function":{"arguments":": \\"Paris\\"}"}}]}')),
    _data(
        _choice(
            '{"tool_calls":[{"index":1,"id":"call_01_Wn7pR2cX","type":"function",'
            '"function":{"name":"get_weather","arguments":""}}]}'
        )
    ),
    _data(_choice('{"tool_calls":[{"index":1,"function":{"arguments":"{\\"city\\": \\"Berlin\\"}"}}]}')),
    _data(_choice('{"content":""}', '"tool_calls"'), USAGE_C),
    DONE,
)

# D. OpenAI / llama-server variant: a trailing usage-only chunk with "choices": [].
STREAM_D: tuple[str, ...] = (
    _data(_choice('{"role":"assistant","content":""}')),
    _data(_choice('{"content":"Hello"}')),
    _data(_choice("{}", '"stop"')),
    f'data: {E}],"usage":{USAGE_A}}}',
    DONE,
)


def stream_e(finish_reason: str) -> tuple[str, ...]:
    """E. Stream A with another finish_reason on its last chunk."""
    return (*STREAM_A[:4], _data(_choice('{"content":""}', json.dumps(finish_reason)), USAGE_A), DONE)


# F. Truncation: A's first two events; the reply then ends the body, closes or resets (a Reply option).
STREAM_F: tuple[str, ...] = STREAM_A[:2]

# A stop with no content at all (-> EMPTY_RESPONSE).
STREAM_EMPTY: tuple[str, ...] = (
    _data(_choice('{"role":"assistant","content":""}')),
    _data(_choice('{"content":""}', '"stop"'), USAGE_A),
    DONE,
)


def text_stream(pieces: Sequence[str], *, finish: str = "stop", usage: str = USAGE_A) -> tuple[str, ...]:
    """A stream A-like reply with the given content deltas (JSON-escaped here)."""
    deltas = [_data(_choice(json.dumps({"content": p}, ensure_ascii=False))) for p in pieces]
    return (
        _data(_choice('{"role":"assistant","content":""}')),
        *deltas,
        _data(_choice('{"content":""}', json.dumps(finish)), usage),
        DONE,
    )


def wire(lines: Iterable[str]) -> bytes:
    """The body bytes of a stream: each event line followed by a blank line."""
    return "".join(line + "\n\n" for line in lines).encode("utf-8")


# ---- error bodies (provider.md §3.3) ---------------------------------------------------------------


def _err(message: str, kind: str) -> str:
    return json.dumps(
        {"error": {"message": message, "type": kind, "param": None, "code": "invalid_request_error"}},
        separators=(",", ":"),
    )


CONTEXT_LENGTH_400 = _err(
    "This model's maximum context length is 131072 tokens. However, you requested 131134 tokens (122942 in "
    "the messages, 8192 in the completion). Please reduce the length of the messages or completion.",
    "invalid_request_error",
)
REASONING_MISSING_400 = _err(
    "The reasoning_content in the thinking mode must be passed back to the API.", "invalid_request_error"
)
ERROR_BODIES: dict[int, str] = {
    400: CONTEXT_LENGTH_400,
    401: _err("Authentication Fails, Your api key: ****abcd is invalid", "authentication_error"),
    402: _err("Insufficient Balance", "unknown_error"),
    422: _err(
        "Failed to deserialize the JSON body into the target type: temperature: invalid type",
        "invalid_request_error",
    ),
    429: _err("Rate Limit Reached", "rate_limit_error"),
    500: _err("Internal Server Error", "internal_error"),
    503: _err("Server Overloaded", "server_error"),
}
BAD_GATEWAY_502 = "Bad Gateway"  # text/plain, from a proxy


# ---- replies --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Write:
    data: bytes


@dataclass(frozen=True)
class Raw:
    """Bytes written as they are, chunked framing included (one TCP write): for tests of the framing
    itself. The chunked terminator still follows the actions unless one ended the connection."""

    data: bytes


@dataclass(frozen=True)
class Sleep:
    seconds: float


@dataclass(frozen=True)
class Stall:
    """Send nothing more until the client goes away (or the server stops)."""


@dataclass(frozen=True)
class Gate:
    """Send nothing more until the test opens the gate (`FakeDeepSeek.open_gate(name)`), so a test
    can hold a reply mid-stream for as long as it needs, however loaded the machine is."""

    name: str


@dataclass(frozen=True)
class Reset:
    """Abort the connection with a TCP RST."""


@dataclass(frozen=True)
class Close:
    """Close the connection (FIN) without the chunked terminator: a body cut mid-message."""


Action: TypeAlias = Write | Raw | Sleep | Stall | Gate | Reset | Close
Tail: TypeAlias = Literal["end", "close", "reset", "stall"]
SSE_HEADERS: tuple[tuple[str, str], ...] = (
    ("content-type", "text/event-stream; charset=utf-8"),
    ("cache-control", "no-cache"),
)


@dataclass(frozen=True)
class Reply:
    status: int = 200
    headers: tuple[tuple[str, str], ...] = SSE_HEADERS
    actions: tuple[Action, ...] = ()
    chunked: bool = True  # False: one Content-Length body made of the Write actions

    @classmethod
    def stream(
        cls,
        lines: Iterable[str] | bytes,
        *,
        split: int | None = None,
        delay: float = 0.0,
        tail: Tail = "end",
        keepalives: int = 0,
        keepalive_every: float = 0.0,
        request_id: str | None = None,
        gate_after: tuple[int, str] | None = None,
    ) -> Reply:
        """An SSE reply. One write per event, or `split`-byte writes (which cut UTF-8 sequences);
        `delay` seconds between writes (a slow drip); `keepalives` comments first, `keepalive_every`
        seconds apart; `gate_after=(n, name)` holds the reply after its first `n` pieces until the gate
        `name` is opened; then `tail`: "end" (chunked terminator), "close", "reset" or "stall"."""
        actions: list[Action] = []
        for _ in range(keepalives):
            actions.append(Write(wire([KEEP_ALIVE])))
            if keepalive_every:
                actions.append(Sleep(keepalive_every))
        if isinstance(lines, bytes):
            pieces = [lines]
        else:
            pieces = [wire([line]) for line in lines]
        if split:
            raw = b"".join(pieces)
            pieces = [raw[i : i + split] for i in range(0, len(raw), split)]
        for i, piece in enumerate(pieces):
            if gate_after is not None and i == gate_after[0]:
                actions.append(Gate(gate_after[1]))
            if delay and i:
                actions.append(Sleep(delay))
            actions.append(Write(piece))
        if tail == "close":
            actions.append(Close())
        elif tail == "reset":
            actions.append(Reset())
        elif tail == "stall":
            actions.append(Stall())
        headers = SSE_HEADERS + ((("x-request-id", request_id),) if request_id else ())
        return cls(200, headers, tuple(actions))

    @classmethod
    def error(
        cls,
        status: int,
        body: str | None = None,
        *,
        retry_after: str | float | None = None,
        content_type: str | None = None,
        request_id: str | None = None,
    ) -> Reply:
        """An error reply: DeepSeek's body for `status` (§3.3) unless `body` is given."""
        if body is None:
            body = (
                BAD_GATEWAY_502
                if status == 502
                else ERROR_BODIES.get(status, _err(f"error {status}", "error"))
            )
        if content_type is None:
            content_type = (
                "application/json" if body.lstrip().startswith("{") else "text/plain; charset=utf-8"
            )
        headers: list[tuple[str, str]] = [("content-type", content_type)]
        if retry_after is not None:
            headers.append(("retry-after", str(retry_after)))
        if request_id:
            headers.append(("x-request-id", request_id))
        return cls(status, tuple(headers), (Write(body.encode("utf-8")),), chunked=False)

    @classmethod
    def json(cls, payload: Mapping[str, Any], *, blank_lines: int = 2) -> Reply:
        """§3.2 G: a non-streaming reply, preceded by the empty lines DeepSeek sends while queued."""
        actions = [Write(b"\n") for _ in range(blank_lines)]
        actions.append(Write(json.dumps(payload).encode("utf-8")))
        return cls(200, (("content-type", "application/json"),), tuple(actions))

    @classmethod
    def reset_before_headers(cls) -> Reply:
        return cls(0, (), (Reset(),))


# ---- recorded requests ----------------------------------------------------------------------------


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    body: bytes
    connection: int = 0  # which TCP connection carried it (1, 2, ... in accept order)
    completed: threading.Event = field(default_factory=threading.Event, repr=False)
    disconnected: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def json(self) -> Any:
        return json.loads(self.body)


# ---- the server -----------------------------------------------------------------------------------


class _Conn:
    def __init__(self, number: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.number = number
        self.reader = reader
        self.writer = writer
        self.buf = bytearray()
        self.eof = False

    async def fill(self) -> bool:
        try:
            data = await self.reader.read(65536)
        except ConnectionError:
            data = b""
        if not data:
            self.eof = True
            return False
        self.buf += data
        return True


def _first_user_text(request: RecordedRequest) -> str:
    """The text of a request's first user message ("" when it has none or is not JSON)."""
    try:
        messages = request.json.get("messages", [])
    except (ValueError, AttributeError):
        return ""
    for message in messages:
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            return str(content or "")
    return ""


class _ClientGone(Exception):
    pass


class FakeDeepSeek:
    def __init__(
        self, *, default: Reply | None = None, strict: bool = True, ssl_context: ssl.SSLContext | None = None
    ) -> None:
        """`strict`: answer 400 like DeepSeek when a thinking-mode request's assistant tool-call turn lacks
        `reasoning_content`, or an assistant message has null content and no tool calls. `ssl_context`:
        serve HTTPS with it (its certificate chain loaded)."""
        self.default = default or Reply.stream(STREAM_A)
        self.ssl_context = ssl_context
        self.strict = strict
        self.requests: list[RecordedRequest] = []
        self.connections = 0  # TCP connections accepted so far
        self._lock = threading.Lock()
        self._failures: deque[Reply] = deque()
        self._script: deque[Reply] = deque()
        self._routes: list[tuple[str, deque[Reply]]] = []  # see `script_for`
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._gates: dict[str, threading.Event] = {}
        self.port = 0

    # ---- control (any thread) -----------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        scheme = "https" if self.ssl_context is not None else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    def script(self, *replies: Reply) -> None:
        """Queue replies for the next requests, in order (after any `fail_next` failures)."""
        with self._lock:
            self._script.extend(replies)

    def script_for(self, first_user_contains: str, *replies: Reply) -> None:
        """Queue replies for the requests of one conversation: those whose first user message contains
        `first_user_contains` take these, in order, before the common script. Conversations that run
        at once (subagents) then each get their own replies, in whatever order their requests come."""
        with self._lock:
            for text, queue in self._routes:
                if text == first_user_contains:
                    queue.extend(replies)
                    return
            self._routes.append((first_user_contains, deque(replies)))

    def fail_next(
        self, n: int, status: int = 503, body: str | None = None, retry_after: str | float | None = None
    ) -> None:
        """The next `n` requests get this error (DeepSeek's body for `status` by default)."""
        with self._lock:
            self._failures.extend(Reply.error(status, body, retry_after=retry_after) for _ in range(n))

    def _gate(self, name: str) -> threading.Event:
        with self._lock:
            return self._gates.setdefault(name, threading.Event())

    def open_gate(self, name: str) -> None:
        """Let every reply held at gate `name` go on (now and later)."""
        self._gate(name).set()

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._failures) + len(self._script) + sum(len(q) for _, q in self._routes)

    async def wait_disconnect(self, index: int = -1, *, within_s: float = 10.0) -> bool:
        """Whether the client of request `index` went away before its reply was complete (waits up to
        `within_s` for it to happen)."""
        return await asyncio.to_thread(self.requests[index].disconnected.wait, within_s)

    # ---- lifecycle ----------------------------------------------------------------------------------

    def start(self) -> FakeDeepSeek:
        ready = threading.Event()
        errors: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                self._server = loop.run_until_complete(
                    asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.ssl_context)
                )
                self.port = self._server.sockets[0].getsockname()[1]
            except BaseException as exc:
                errors.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.close()

        self._thread = threading.Thread(target=run, name="fake-deepseek", daemon=True)
        self._thread.start()
        ready.wait(10)
        if errors:
            raise errors[0]
        return self

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None or not thread.is_alive():
            return
        asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        self._thread = None

    async def _shutdown(self) -> None:
        with self._lock:  # a reply still held at a gate must not keep its waiting thread alive
            for gate in self._gates.values():
                gate.set()
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def __enter__(self) -> FakeDeepSeek:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    async def __aenter__(self) -> FakeDeepSeek:
        return self.start()

    async def __aexit__(self, *_: object) -> None:
        await asyncio.to_thread(self.stop)

    # ---- serving (server thread) --------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)  # type: ignore[arg-type]
        self.connections += 1
        conn = _Conn(self.connections, reader, writer)
        try:
            while True:
                request = await self._read_request(conn)
                if request is None:
                    return
                self.requests.append(request)
                if not await self._respond(conn, request, self._next_reply(request)):
                    return
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self._tasks.discard(task)  # type: ignore[arg-type]
            with contextlib.suppress(Exception):
                writer.close()

    def _next_reply(self, request: RecordedRequest) -> Reply:
        with self._lock:
            if self._failures:
                return self._failures.popleft()
            rejection = self._validate(request) if self.strict else None
            if rejection is not None:
                return rejection
            first = _first_user_text(request)
            for text, queue in self._routes:
                if queue and text in first:
                    return queue.popleft()
            return self._script.popleft() if self._script else self.default

    def _validate(self, request: RecordedRequest) -> Reply | None:
        try:
            body = request.json
        except ValueError:
            return Reply.error(400, _err("Failed to parse the request body as JSON", "invalid_request_error"))
        thinking = (body.get("thinking") or {}).get("type", "enabled")  # V4 thinks unless told not to
        for message in body.get("messages", []):
            if message.get("role") != "assistant":
                continue
            if message.get("content") is None and not message.get("tool_calls"):
                return Reply.error(400, _err("content or tool_calls must be set", "invalid_request_error"))
            if thinking == "enabled" and message.get("tool_calls") and "reasoning_content" not in message:
                return Reply.error(400, REASONING_MISSING_400)
        return None

    async def _read_request(self, conn: _Conn) -> RecordedRequest | None:
        while b"\r\n\r\n" not in conn.buf:
            if not await conn.fill():
                return None
        head, _, rest = bytes(conn.buf).partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, path, _version = lines[0].split(" ", 2)
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        conn.buf = bytearray(rest)
        while len(conn.buf) < length:
            if not await conn.fill():
                return None
        body = bytes(conn.buf[:length])
        del conn.buf[:length]
        return RecordedRequest(method, path, headers, body, conn.number)

    async def _respond(self, conn: _Conn, request: RecordedRequest, reply: Reply) -> bool:
        """Play `reply`; whether the connection stays usable. A watcher reads the socket meanwhile: an
        HTTP/1.1 client sends nothing while its response is open, so EOF there means it went away."""
        player = asyncio.ensure_future(self._play(conn, reply))
        watcher = asyncio.ensure_future(self._watch(conn))
        try:
            await asyncio.wait({player, watcher}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            watcher.cancel()
            if not player.done():
                player.cancel()
            await asyncio.gather(player, watcher, return_exceptions=True)
        if player.done() and not player.cancelled() and player.exception() is None:
            keep = player.result()
            request.completed.set()
            return keep
        request.disconnected.set()
        return False

    async def _watch(self, conn: _Conn) -> None:
        while await conn.fill():
            pass  # bytes of a next request that came early stay in the buffer

    async def _play(self, conn: _Conn, reply: Reply) -> bool:
        writer = conn.writer
        if reply.status:
            writer.write(self._head(reply))
        if not reply.chunked:
            for action in reply.actions:
                if isinstance(action, Write):
                    writer.write(action.data)
            await writer.drain()
            return True
        for action in reply.actions:
            if isinstance(action, Write):
                if action.data:
                    writer.write(b"%x\r\n%s\r\n" % (len(action.data), action.data))
                    await writer.drain()
            elif isinstance(action, Raw):
                writer.write(action.data)
                await writer.drain()
            elif isinstance(action, Sleep):
                await asyncio.sleep(action.seconds)
            elif isinstance(action, Stall):
                await asyncio.Event().wait()  # until the watcher sees the client leave
            elif isinstance(action, Gate):
                # The gate is a threading.Event opened from the test's thread: wait for it off-loop.
                await asyncio.to_thread(self._gate(action.name).wait)
            elif isinstance(action, Reset):
                sock = writer.get_extra_info("socket")
                # SO_LINGER with a zero timeout turns close() into a RST.
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                writer.transport.abort()
                return False
            elif isinstance(action, Close):
                await writer.drain()
                writer.close()
                return False
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True

    @staticmethod
    def _head(reply: Reply) -> bytes:
        reason = (
            HTTPStatus(reply.status).phrase if reply.status in HTTPStatus._value2member_map_ else "Status"
        )
        lines = [f"HTTP/1.1 {reply.status} {reason}"]
        lines += [f"{name}: {value}" for name, value in reply.headers]
        if reply.chunked:
            lines.append("transfer-encoding: chunked")
        else:
            length = sum(len(a.data) for a in reply.actions if isinstance(a, Write))
            lines.append(f"content-length: {length}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
