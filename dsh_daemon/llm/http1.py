"""A minimal HTTP/1.1 client for the provider's one streamed POST (issue 40).

httpx reads a streamed body through httpcore and h11, pure-Python layers that cost about a third of
the daemon's time per delta. This client writes one request on an asyncio stream and hands back the
body's bytes as each read returns them, the chunked framing taken off in one pass (`llm/chunked.py`);
the SSE parser splits events itself. It does only what the provider needs: a POST with its body known
up front, keep-alive with one idle connection kept per origin, no redirects, no compression and no
proxies (the provider streams through httpx whenever a proxy applies: `llm/deepseek.py`). TLS verifies
the certificate and the host name (`ssl.create_default_context`, with httpx's choice of CA file).

Timeouts are httpx's: a connect timeout covering the TCP and TLS handshakes, and an idle timeout on
every wait for the socket (sending the request, the response head, each body read) that any bytes
re-arm, with no total deadline. One timer per response checks it lazily, so a read costs two
attribute writes rather than a timer of its own.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from dsh_daemon.llm.chunked import ChunkedDecoder, ChunkedError

if TYPE_CHECKING:
    import ssl

READ_SIZE = 65536
MAX_HEAD = 64 * 1024
WRITE_PIECE = 64 * 1024  # a large body is sent in pieces so that each re-arms the idle timer


class HttpError(Exception):
    """The exchange failed: refused, reset, closed early, or not HTTP/1.1."""


class HttpTimeout(HttpError):
    """No progress within the connect or idle timeout."""


class BadTarget(HttpError):
    """The request cannot be sent as configured (found before any connection)."""


class BadUrl(BadTarget):
    """The URL is not an http or https URL with a host."""


class BadHeader(BadTarget):
    """A header cannot be sent; the message never shows its value (it may be a key)."""


@dataclass(frozen=True, slots=True)
class Target:
    scheme: str
    host: str
    port: int
    path: str  # with its query

    @property
    def origin(self) -> tuple[str, str, int]:
        return (self.scheme, self.host, self.port)

    @property
    def authority(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return host if self.port == default else f"{host}:{self.port}"


def parse_target(url: str) -> Target:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise BadUrl(str(exc)) from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise BadUrl(f"unsupported scheme {scheme or '(none)'!r}: only http and https")
    host = parts.hostname
    if not host:
        raise BadUrl("no host")
    path = parts.path or "/"
    if parts.query:
        path = f"{path}?{parts.query}"
    if any(c in path for c in " \r\n\0"):
        raise BadUrl("the path holds a space or control character")
    return Target(scheme, host, port or (443 if scheme == "https" else 80), path)


class Headers(Mapping[str, str]):
    """Response header fields, looked up without regard to case; repeated fields joined with ", "."""

    __slots__ = ("_fields",)

    def __init__(self, fields: Mapping[str, str]) -> None:
        self._fields = fields  # keys lower case

    def __getitem__(self, name: str) -> str:
        return self._fields[name.lower()]

    def __iter__(self) -> Iterator[str]:
        return iter(self._fields)

    def __len__(self) -> int:
        return len(self._fields)


class _Connection:
    __slots__ = ("origin", "reader", "writer")

    def __init__(
        self, origin: tuple[str, str, int], reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ):
        self.origin = origin
        self.reader = reader
        self.writer = writer

    @property
    def usable(self) -> bool:
        """Idle in the pool and not closed by the server meanwhile."""
        return not self.writer.transport.is_closing() and not self.reader.at_eof()

    def abort(self) -> None:
        self.writer.transport.abort()


class Http1Client:
    """Connections to any number of origins, one idle connection kept per origin. Bound to the event
    loop it is first used on (asyncio streams are)."""

    def __init__(
        self,
        *,
        connect_timeout_s: float,
        idle_timeout_s: float,
        trust_env: bool,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        """`ssl_context`: for tests; by default `default_ssl_context`, made at the first https request."""
        self.connect_timeout_s = connect_timeout_s
        self.idle_timeout_s = idle_timeout_s
        self._trust_env = trust_env
        self._idle: dict[tuple[str, str, int], _Connection] = {}
        self._ssl = ssl_context
        self.closed = False

    async def post_stream(self, url: str, headers: list[tuple[str, str]], body: bytes) -> StreamedResponse:
        """Send the request; the response's head has arrived when this returns. The caller must
        `aclose()` the response (or `finish()` it) in every case."""
        target = parse_target(url)
        head = _request_head(target, headers, len(body))
        conn = self._idle.pop(target.origin, None)
        if conn is not None and not conn.usable:
            conn.abort()
            conn = None
        if conn is None:
            conn = await self._connect(target)
        response = StreamedResponse(self, conn, self.idle_timeout_s)
        try:
            await response._send(head, body)
            await response._read_head()
        except BaseException:
            response.close()
            raise
        return response

    async def _connect(self, target: Target) -> _Connection:
        context = self._ssl_context() if target.scheme == "https" else None
        try:
            async with asyncio.timeout(self.connect_timeout_s):
                reader, writer = await asyncio.open_connection(
                    target.host,
                    target.port,
                    ssl=context,
                    server_hostname=target.host if context is not None else None,
                    limit=MAX_HEAD,
                )
        except TimeoutError:
            raise HttpTimeout(f"no connection within {self.connect_timeout_s:g} s") from None
        except OSError as exc:  # refused, unreachable, name not resolved, certificate not trusted
            raise HttpError(describe(exc)) from None
        return _Connection(target.origin, reader, writer)

    def _ssl_context(self) -> ssl.SSLContext:
        if self._ssl is None:
            self._ssl = default_ssl_context(trust_env=self._trust_env)
        return self._ssl

    def _release(self, conn: _Connection) -> None:
        old = self._idle.pop(conn.origin, None)
        if old is not None:
            old.abort()
        if self.closed:
            conn.abort()
        else:
            self._idle[conn.origin] = conn

    async def aclose(self) -> None:
        self.closed = True
        idle, self._idle = self._idle, {}
        for conn in idle.values():
            conn.abort()


def default_ssl_context(*, trust_env: bool) -> ssl.SSLContext:
    """Certificate and host name verification, with the CA file httpx would use: `SSL_CERT_FILE` or
    `SSL_CERT_DIR` when the environment is trusted, else certifi's bundle (the system's if certifi is
    missing)."""
    import ssl

    if trust_env and os.environ.get("SSL_CERT_FILE"):
        context = ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
    elif trust_env and os.environ.get("SSL_CERT_DIR"):
        context = ssl.create_default_context(capath=os.environ["SSL_CERT_DIR"])
    else:
        try:
            import certifi
        except ImportError:
            context = ssl.create_default_context()
        else:
            context = ssl.create_default_context(cafile=certifi.where())
    context.set_alpn_protocols(["http/1.1"])
    return context


class StreamedResponse:
    """One response, its body read as it arrives. Not reusable once closed."""

    def __init__(self, client: Http1Client, conn: _Connection, idle_timeout_s: float) -> None:
        self._client = client
        self._conn = conn
        self._reader = conn.reader
        self._idle = idle_timeout_s
        self._loop = asyncio.get_running_loop()
        self._waiting_since: float | None = None
        self._timed_out = False
        self._timer: asyncio.TimerHandle | None = self._loop.call_later(idle_timeout_s, self._watch)
        self.status = 0
        self.headers = Headers({})
        self._chunked: ChunkedDecoder | None = None
        self._left: int | None = None  # bytes left of a Content-Length body
        self._keep_alive = False
        self.complete = False  # the whole body was read
        self._closed = False

    # ---- the idle timer ------------------------------------------------------------------------

    def _watch(self) -> None:
        since = self._waiting_since
        now = self._loop.time()
        if since is not None and now - since >= self._idle:
            self._timed_out = True
            self._timer = None
            self._conn.abort()  # the pending read returns at once, and the check below raises
            return
        self._timer = self._loop.call_at((now if since is None else since) + self._idle, self._watch)

    def _check_timeout(self) -> None:
        if self._timed_out:
            raise HttpTimeout(f"no bytes for {self._idle:g} s")

    # ---- request and head ----------------------------------------------------------------------

    async def _send(self, head: bytes, body: bytes) -> None:
        writer = self._conn.writer
        try:
            if len(body) <= WRITE_PIECE:
                writer.write(head + body)
                self._waiting_since = self._loop.time()
                await writer.drain()
            else:
                writer.write(head)
                view = memoryview(body)
                for start in range(0, len(body), WRITE_PIECE):
                    writer.write(view[start : start + WRITE_PIECE])
                    self._waiting_since = self._loop.time()
                    await writer.drain()
        except OSError as exc:
            self._check_timeout()
            raise HttpError(f"sending the request failed: {describe(exc)}") from None
        finally:
            self._waiting_since = None
        self._check_timeout()

    async def _read_head(self) -> None:
        while True:
            self._waiting_since = self._loop.time()
            try:
                raw = await self._reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError as exc:
                self._check_timeout()
                what = "before a response" if not exc.partial else "in the middle of the response head"
                raise HttpError(f"the server closed the connection {what}") from None
            except asyncio.LimitOverrunError:
                raise HttpError(f"a response head longer than {MAX_HEAD} bytes") from None
            except OSError as exc:
                self._check_timeout()
                raise HttpError(describe(exc)) from None
            finally:
                self._waiting_since = None
            status, fields = _parse_head(raw)
            if 100 <= status < 200 and status != 101:
                continue  # an interim response; the final one follows
            break
        self.status = status
        self.headers = Headers(fields)
        if status == 101:
            raise HttpError("the server switched protocols")
        connection = fields.get("connection", "").lower()
        self._keep_alive = "close" not in connection
        encoding = fields.get("transfer-encoding")
        if status in (204, 304):
            self._left = 0
        elif encoding is not None:
            if encoding.lower().rsplit(",", 1)[-1].strip() == "chunked":
                self._chunked = ChunkedDecoder()
            else:  # another coding last: the body runs to the connection's end
                self._keep_alive = False
        elif "content-length" in fields:
            lengths = {v.strip() for v in fields["content-length"].split(",")}
            if len(lengths) != 1 or not (length := lengths.pop()).isdigit():
                raise HttpError(f"bad Content-Length {fields['content-length'][:40]!r}")
            self._left = int(length)
        else:
            self._keep_alive = False
        if self._left == 0:
            self._end()

    @property
    def is_success(self) -> bool:
        return 200 <= self.status < 300

    # ---- body ----------------------------------------------------------------------------------

    async def read(self) -> bytes:
        """The next bytes of the body (never empty), or b"" at its end."""
        while not self.complete:
            self._waiting_since = self._loop.time()
            try:
                data = await self._reader.read(READ_SIZE)
            except OSError as exc:
                self._check_timeout()
                raise HttpError(describe(exc)) from None
            finally:
                self._waiting_since = None
            if not data:
                self._check_timeout()
                if self._chunked is None and self._left is None:  # delimited by the connection's end
                    self._end()
                    return b""
                raise HttpError("the server closed the connection before the end of the body")
            chunked = self._chunked
            if chunked is not None:
                try:
                    data = chunked.feed(data)
                except ChunkedError as exc:
                    raise HttpError(str(exc)) from None
                if chunked.done:
                    if chunked.extra:
                        self._keep_alive = False
                    self._end()
            elif self._left is not None:
                if len(data) >= self._left:
                    if len(data) > self._left:
                        self._keep_alive = False
                        data = data[: self._left]
                    self._left = 0
                    self._end()
                else:
                    self._left -= len(data)
            if data:
                return data
        return b""

    async def read_up_to(self, limit: int) -> bytes:
        """The body, or its first `limit` bytes or a little more (an error page)."""
        parts: list[bytes] = []
        size = 0
        while size < limit:
            data = await self.read()
            if not data:
                break
            parts.append(data)
            size += len(data)
        return b"".join(parts)

    async def finish(self, within_s: float) -> None:
        """Read what is left of the body for at most `within_s`, so that the connection can be pooled,
        then close. A server that keeps sending only costs the connection."""
        try:
            async with asyncio.timeout(within_s):
                while await self.read():
                    pass
        except (HttpError, TimeoutError):
            pass
        finally:
            self.close()

    async def aclose(self) -> None:
        self.close()

    def _end(self) -> None:
        self.complete = True

    def close(self) -> None:
        """Pool the connection if the body was read to its end and the server keeps it open; drop it
        otherwise (so the server sees an abandoned stream go at once)."""
        if self._closed:
            return
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.complete and self._keep_alive and self._conn.usable:
            self._client._release(self._conn)
        else:
            self._conn.abort()


def _request_head(target: Target, headers: list[tuple[str, str]], length: int) -> bytes:
    lines = [f"POST {target.path} HTTP/1.1", f"host: {target.authority}"]
    for name, value in headers:
        if not _token(name) or any(c in value for c in "\r\n\0"):
            # The value may be a key: it is never shown.
            raise BadHeader(f"the header {name!r} cannot be sent (a line break or NUL in its value)")
        lines.append(f"{name}: {value}")
    lines.append(f"content-length: {length}")
    try:
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    except UnicodeEncodeError:
        raise BadHeader("a header value holds a character HTTP cannot carry (not Latin-1)") from None


def _token(name: str) -> bool:
    return bool(name) and name.isascii() and all(c.isalnum() or c in "!#$%&'*+-.^_`|~" for c in name)


def _parse_head(raw: bytes) -> tuple[int, dict[str, str]]:
    text = raw.decode("latin-1")
    lines = text.split("\r\n")
    version, _, rest = lines[0].partition(" ")
    code = rest[:3]
    if not version.startswith("HTTP/1.") or len(code) != 3 or not code.isdigit():
        raise HttpError(f"not an HTTP/1.1 response: {lines[0][:80]!r}")
    fields: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip():
            raise HttpError(f"a bad header line {line[:80]!r}")
        key = name.lower()
        value = value.strip(" \t")
        fields[key] = f"{fields[key]}, {value}" if key in fields else value
    return int(code), fields


def describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
