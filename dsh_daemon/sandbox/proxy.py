"""The sandbox's egress proxy: the only way out of a confined command's network.

Confined commands can open TCP connections to this proxy alone (Landlock's port rule in layer 0, their
own network namespace in layer 1) and have no DNS, so every name they reach is resolved here. The proxy
speaks HTTP/1.1 proxying: `CONNECT host:port` tunnels (HTTPS and anything else on an allowed port) and
absolute-form plain HTTP requests (`GET http://host/path`), forwarded with their bodies and the response
streamed back.

What it promises:
- A request reaches `host:port` only if the allowlist (`tools.sandbox.network.allow`) has an entry for
  it: an exact name, or `*.example.com` for the names beneath example.com (any depth, never the bare
  apex); names compare case-insensitively, without a trailing dot, in their IDNA (punycode) form. An
  entry without a port allows ports 80 and 443; `host:port` allows that port alone. An IP literal is
  allowed only when the allowlist names that address exactly; a listed address is reached as written,
  even a loopback or private one (the person typed it: no name can be rebound onto it).
- A name is resolved here and the connection goes to an address that was checked, never to the name
  again. Addresses that are not global (loopback, private, link-local, multicast, unspecified,
  reserved, shared/CGNAT, IPv4-mapped forms of those) are dropped, so a listed name that resolves (or
  is rebound) onto the host's own services or its local network is refused.
- Anything else gets a `403` whose plain-text body names the refused entry and says only the person
  can widen the sandbox; `on_denied` is called once with the allowlist entry that would allow it.
- Hostile clients get a typed `400` (garbage, oversized request line or headers, bad framing), never a
  crash; heads must arrive within a timeout, idle connections are closed, concurrent clients and
  upstream connections are bounded. Neither request lines (paths and queries carry tokens) nor headers
  (`Proxy-Authorization`, cookies) are logged; `Proxy-Authorization` never goes upstream.
- `update` swaps the allowlist live and closes open connections the new list no longer allows.

What it does not promise: it does not look inside tunnels (TLS is end to end; any protocol may run in a
tunnel to an allowed host:port), and an allowed host is reached with whatever the command sends it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import re
import socket
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

logger = logging.getLogger(__name__)

DEFAULT_PORTS = frozenset({80, 443})
SETTING = "tools.sandbox.network.allow"

Resolver = Callable[[str, int], Awaitable[Sequence[str]]]
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")
_TOKEN = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_CONTROL = bytes([*range(0x20), 0x7F]).replace(b"\t", b"")
_HEX = re.compile(rb"[0-9A-Fa-f]{1,16}")
_DIGITS = re.compile(r"[0-9]{1,19}")
_READ = 64 * 1024
_STREAM_LIMIT = 64 * 1024
# Hop-by-hop headers: they describe one connection, so they are not forwarded to the next one.
_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authorization",
        "proxy-authenticate",
        "te",
        "trailer",
        "upgrade",
    }
)


class InvalidAllowEntry(ValueError):
    """An allowlist entry that is not a domain, a `*.domain` wildcard or an IP literal (with an
    optional port)."""


@dataclass(frozen=True)
class ProxyLimits:
    """Bounds on what one client can make the proxy hold."""

    header_timeout: float = 30.0  # a request's head must arrive within this
    idle_timeout: float = 300.0  # a connection with no byte either way for this long is closed
    connect_timeout: float = 10.0  # resolving plus connecting upstream
    max_tunnels: int = 256  # concurrent upstream connections (CONNECT tunnels and plain requests)
    max_clients: int = 1024  # concurrent client connections
    max_line: int = 8 * 1024  # a request line or one header line
    max_head: int = 64 * 1024  # a whole request head
    max_header_lines: int = 100
    max_response_head: int = 256 * 1024  # an upstream's response head (cookies can be long)


@dataclass(frozen=True)
class Target:
    """Where a request wants to go: a canonical host (ASCII lowercase name, or an IP literal's
    compressed text) and a port."""

    host: str
    port: int
    is_ip: bool

    @property
    def entry(self) -> str:
        """The allowlist entry that would allow this target (what a widening would add)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port in DEFAULT_PORTS else f"{host}:{self.port}"

    @property
    def authority(self) -> str:
        """`host[:port]` for a Host header (the port only when it is not 80)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == 80 else f"{host}:{self.port}"


@dataclass(frozen=True)
class AllowRule:
    host: str  # canonical, as in Target; for a wildcard, the domain beneath which names match
    wildcard: bool
    is_ip: bool
    port: int | None  # None: ports 80 and 443

    def allows(self, target: Target) -> bool:
        port_allowed = target.port in DEFAULT_PORTS if self.port is None else target.port == self.port
        if not port_allowed:
            return False
        if self.is_ip or target.is_ip:
            return self.is_ip and target.is_ip and self.host == target.host
        if self.wildcard:
            return target.host.endswith("." + self.host)
        return target.host == self.host


@dataclass(frozen=True)
class AllowList:
    rules: tuple[AllowRule, ...] = ()

    @classmethod
    def parse(cls, entries: Sequence[str]) -> AllowList:
        """Every entry checked; the first bad one raises `InvalidAllowEntry` naming it."""
        if isinstance(entries, str):
            raise InvalidAllowEntry(f"{SETTING} is a list of domains, not one string")
        return cls(tuple(parse_allow_entry(entry) for entry in entries))

    def allows(self, target: Target) -> bool:
        return any(rule.allows(target) for rule in self.rules)


def canonical_host(text: str) -> tuple[str, bool]:
    """(canonical host, is an IP literal) for a host as a request or an entry writes it (IPv6
    without brackets). Raises `ValueError` for anything that is not a valid name or address."""
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        pass
    else:
        if isinstance(address, ipaddress.IPv6Address) and address.scope_id:
            raise ValueError("an IPv6 address with a scope")
        return str(address), True
    name = text[:-1] if text.endswith(".") else text
    if not name or len(name) > 253 or any(c.isspace() for c in name):
        raise ValueError("not a host name")
    try:
        # Python's codec splits on the IDNA dots (。．｡ too) and nameprep folds case and width.
        ascii_name = name.encode("idna").decode("ascii").lower()
    except UnicodeError as error:
        raise ValueError("not a valid internationalized name") from error
    labels = ascii_name.split(".")
    if len(ascii_name) > 253 or not all(_LABEL.fullmatch(label) for label in labels):
        raise ValueError("not a host name")
    if labels[-1].isdigit():
        # `127.1`, `2130706433`: getaddrinfo would read them as addresses, dodging the IP rule.
        raise ValueError("a numeric name that is not a complete IP address")
    return ascii_name, False


def _split_host_port(text: str) -> tuple[str, str | None]:
    """`host`, `host:port`, `[v6]`, `[v6]:port`, or a bare IPv6 address."""
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise ValueError("an unclosed [")
        rest = text[end + 1 :]
        if rest and not rest.startswith(":"):
            raise ValueError("junk after ]")
        host = text[1:end]
        if ":" not in host:
            raise ValueError("brackets around something that is not an IPv6 address")
        return host, rest[1:] if rest else None
    if text.count(":") > 1:
        return text, None  # a bare IPv6 address (only allowlist entries get here)
    host, colon, port = text.partition(":")
    return host, port if colon else None


def _port(text: str) -> int:
    if not _DIGITS.fullmatch(text) or not 0 < int(text) < 65536:
        raise ValueError("not a port number")
    return int(text)


def parse_allow_entry(entry: str) -> AllowRule:
    """One allowlist entry: `example.com`, `*.example.com`, `example.com:8443`, `10.0.0.5`,
    `[2001:db8::1]:8080`. Raises `InvalidAllowEntry` naming the entry and what is wrong."""
    if not isinstance(entry, str):
        raise InvalidAllowEntry(f"{SETTING}: {entry!r} is not a string")
    text = entry.strip()
    try:
        if "://" in text or "/" in text:
            raise ValueError("a domain (example.com), not a URL")
        host, port_text = _split_host_port(text)
        port = None if port_text is None else _port(port_text)
        wildcard = host.startswith("*.")
        if "*" in (host[2:] if wildcard else host):
            raise ValueError("a wildcard is written *.example.com")
        canonical, is_ip = canonical_host(host[2:] if wildcard else host)
        if wildcard and is_ip:
            raise ValueError("a wildcard over an IP address")
    except ValueError as error:
        raise InvalidAllowEntry(f"{SETTING}: {entry!r} is not a valid entry: {error}") from None
    return AllowRule(canonical, wildcard, is_ip, port)


def parse_target(authority: str, default_port: int | None) -> Target:
    """A request's `host[:port]` (CONNECT's must have the port). Raises `ValueError`."""
    if not authority or "@" in authority:
        raise ValueError("no host, or credentials in the authority")
    if not authority.startswith("[") and authority.count(":") > 1:
        raise ValueError("an IPv6 address must be in brackets")
    host, port_text = _split_host_port(authority)
    if port_text is None:
        if default_port is None:
            raise ValueError("CONNECT needs host:port")
        port = default_port
    else:
        port = _port(port_text)
    canonical, is_ip = canonical_host(host)
    return Target(canonical, port, is_ip)


def is_public_address(address: IPAddress) -> bool:
    """Only a global unicast address may be reached by name; anything that can land on this host or
    its local network is not."""
    if isinstance(address, ipaddress.IPv6Address):
        mapped = address.ipv4_mapped or address.sixtofour
        if mapped is not None and not is_public_address(mapped):
            return False
        if address.is_site_local:
            return False
    return address.is_global and not (
        address.is_multicast
        or address.is_loopback
        or address.is_link_local
        or address.is_private
        or address.is_reserved
        or address.is_unspecified
    )


async def resolve(host: str, port: int) -> Sequence[str]:
    """The addresses of a name, in the system resolver's order."""
    infos = await asyncio.get_running_loop().getaddrinfo(
        host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
    )
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def denial_text(entry: str) -> str:
    """What a refused command (and the model) reads: which domain, and who can widen."""
    ports = "" if ":" not in entry.rsplit("]", 1)[-1] else " (an entry without a port allows 80 and 443)"
    return f"dsh sandbox: {entry} is not in {SETTING}{ports}; only the person can widen the sandbox"


class _Refusal(Exception):
    """A request answered by the proxy itself (an error status with a plain-text reason)."""

    def __init__(self, status: int, reason: str, text: str) -> None:
        super().__init__(text)
        self.status, self.reason, self.text = status, reason, text


def _bad(text: str) -> _Refusal:
    return _Refusal(400, "Bad Request", f"dsh sandbox proxy: bad request: {text}")


class _UpstreamError(Exception):
    """The upstream broke HTTP (a bad response head or body framing)."""


@dataclass(frozen=True)
class _Head:
    start: str
    headers: tuple[tuple[str, str], ...]

    def values(self, name: str) -> list[str]:
        return [value for key, value in self.headers if key.lower() == name]

    def tokens(self, name: str) -> set[str]:
        return {t.strip().lower() for v in self.values(name) for t in v.split(",") if t.strip()}


async def _read_line(reader: asyncio.StreamReader, limit: int, idle: float) -> bytes:
    """One line with its ending (b"" at EOF). Raises `ValueError` when longer than `limit`."""
    try:
        line = await asyncio.wait_for(reader.readuntil(b"\n"), idle)
    except asyncio.LimitOverrunError as error:
        raise ValueError("line too long") from error
    except asyncio.IncompleteReadError as error:
        if error.partial:
            raise ValueError("connection closed in the middle of a line") from error
        return b""
    if len(line) > limit:
        raise ValueError("line too long")
    return line


async def _read_head(
    reader: asyncio.StreamReader, *, max_line: int, max_head: int, max_lines: int, idle: float
) -> _Head | None:
    """A request or response head, checked: no control characters, token header names, no obs-fold,
    bounded size. None at a clean EOF before the first byte. Raises `ValueError` with the reason."""
    total = 0
    lines: list[str] = []
    blank_lines = 0
    while True:
        raw = await _read_line(reader, max_line, idle)
        if not raw:
            if not lines and not total:
                return None
            raise ValueError("connection closed in the middle of the head")
        total += len(raw)
        if total > max_head:
            raise ValueError("head too large")
        content = raw[:-2] if raw.endswith(b"\r\n") else raw[:-1]
        if not content:
            if not lines:
                blank_lines += 1  # a stray CRLF after a previous body: tolerated, a few times
                if blank_lines > 4:
                    raise ValueError("empty lines instead of a request")
                continue
            break
        if content.translate(None, _CONTROL) != content:
            raise ValueError("control characters in the head")
        if lines:
            field, colon, _ = content.partition(b":")
            if not colon or not _TOKEN.fullmatch(field):
                raise ValueError("a malformed header line")
            if len(lines) > max_lines:
                raise ValueError("too many header lines")
        lines.append(content.decode("latin-1"))
    headers: list[tuple[str, str]] = []
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers.append((name, value.strip(" \t")))
    return _Head(lines[0], tuple(headers))


def _body_length(head: _Head) -> int | None:
    """Content-Length, None without one. Raises `ValueError` when it is invalid or contradicts
    itself (a request-smuggling shape)."""
    values = {v.strip() for value in head.values("content-length") for v in value.split(",")}
    if not values:
        return None
    if len(values) != 1 or not _DIGITS.fullmatch(next(iter(values))):
        raise ValueError("an invalid Content-Length")
    return int(next(iter(values)))


async def _relay_exact(
    src: asyncio.StreamReader, dst: asyncio.StreamWriter, length: int, idle: float
) -> None:
    while length > 0:
        data = await asyncio.wait_for(src.read(min(length, _READ)), idle)
        if not data:
            raise ValueError("closed in the middle of a body")
        dst.write(data)
        await asyncio.wait_for(dst.drain(), idle)  # a peer that stops reading is idle too
        length -= len(data)


async def _relay_chunked(src: asyncio.StreamReader, dst: asyncio.StreamWriter, idle: float) -> None:
    """A chunked body, re-framed as it is checked (chunk extensions and trailers are dropped)."""
    while True:
        line = await _read_line(src, 4096, idle)
        size_text = line.split(b";", 1)[0].strip()
        if not _HEX.fullmatch(size_text):
            raise ValueError("a malformed chunk size")
        size = int(size_text, 16)
        if size == 0:
            for _ in range(100):
                if (await _read_line(src, 8192, idle)).strip(b"\r\n") == b"":
                    dst.write(b"0\r\n\r\n")
                    await asyncio.wait_for(dst.drain(), idle)
                    return
            raise ValueError("too many trailer lines")
        dst.write(b"%x\r\n" % size)
        await _relay_exact(src, dst, size, idle)
        if (await _read_line(src, 2, idle)) not in (b"\r\n", b"\n"):
            raise ValueError("a chunk without its line ending")
        dst.write(b"\r\n")
        await asyncio.wait_for(dst.drain(), idle)


async def _relay_to_eof(src: asyncio.StreamReader, dst: asyncio.StreamWriter, idle: float) -> None:
    while data := await asyncio.wait_for(src.read(_READ), idle):
        dst.write(data)
        await asyncio.wait_for(dst.drain(), idle)


def _format_head(start: str, headers: Sequence[tuple[str, str]]) -> bytes:
    lines = [start, *(f"{name}: {value}" for name, value in headers)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def _linger(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """After an error response: half-close, then read and drop what the client is still sending for
    a moment, so that closing with unread input (a TCP reset) does not destroy the response before
    the client reads it."""
    if writer.can_write_eof():
        writer.write_eof()
    with contextlib.suppress(TimeoutError, OSError):
        async with asyncio.timeout(2.0):
            while await reader.read(_READ):
                pass


class _UpstreamProtocol(asyncio.StreamReaderProtocol):
    """An upstream that answers early (a 413 to an upload) and closes makes the proxy's next write
    fail; asyncio then hands that error to the reader too, which would drop the answer already
    buffered. Here the reader sees EOF after what was buffered; the write still fails."""

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(None)


async def _open_upstream(address: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """`asyncio.open_connection` with `_UpstreamProtocol`."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=_STREAM_LIMIT, loop=loop)
    protocol = _UpstreamProtocol(reader, loop=loop)
    transport, _ = await loop.create_connection(lambda: protocol, address, port)
    return reader, asyncio.StreamWriter(transport, protocol, reader, loop)


def _no_delay(writer: asyncio.StreamWriter) -> None:
    """asyncio sets TCP_NODELAY only on sockets whose proto is IPPROTO_TCP, and a listening socket made
    with `socket.socket()` has proto 0 (so do the connections it accepts): without it, a response's head
    and body written apart wait on the client's delayed ACK (40 ms a response on a kept-alive
    connection, measured)."""
    sock = writer.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


async def _close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(Exception):
        await asyncio.wait_for(writer.wait_closed(), 1.0)


class EgressProxy:
    """One session's proxy, serving on a listening socket it takes over (in layer 1 the socket lives
    in the session's network namespace; the proxy's own connections leave from the daemon's)."""

    def __init__(
        self,
        allow: AllowList,
        *,
        on_denied: Callable[[str], None] | None,
        resolver: Resolver,
        allow_private_upstreams: bool,
        limits: ProxyLimits,
    ) -> None:
        self._allow = allow
        self._on_denied = on_denied
        self._resolver = resolver
        self._allow_private = allow_private_upstreams
        self._limits = limits
        self._server: asyncio.Server | None = None
        # every client connection's task, and the upstream it is connected to (None: not yet)
        self._clients: dict[asyncio.Task[None], Target | None] = {}
        self._upstreams = 0
        self._closed = False

    @classmethod
    async def start(
        cls,
        sock: socket.socket,
        allow: Sequence[str],
        *,
        on_denied: Callable[[str], None] | None = None,
        resolver: Resolver | None = None,
        allow_private_upstreams: bool = False,
        limits: ProxyLimits | None = None,
    ) -> EgressProxy:
        """Serve on `sock` (bound; listening or not). Raises `InvalidAllowEntry` for a bad entry.
        `resolver` and `allow_private_upstreams` exist for tests: production resolves with the
        system resolver and never connects to a non-global address by name."""
        proxy = cls(
            AllowList.parse(allow),
            on_denied=on_denied,
            resolver=resolver or resolve,
            allow_private_upstreams=allow_private_upstreams,
            limits=limits or ProxyLimits(),
        )
        proxy._server = await asyncio.start_server(proxy._serve, sock=sock, limit=_STREAM_LIMIT)
        return proxy

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def allow(self) -> AllowList:
        return self._allow

    @property
    def connections(self) -> int:
        """Client connections open now."""
        return len(self._clients)

    async def update(self, allow: Sequence[str]) -> None:
        """Swap the allowlist live (raises `InvalidAllowEntry` and keeps the old one for a bad
        entry); connections the new list does not allow are closed."""
        self._allow = AllowList.parse(allow)
        for task, target in list(self._clients.items()):
            if target is not None and not self._allow.allows(target):
                task.cancel()

    async def aclose(self) -> None:
        """Stop listening (the socket is closed) and close every connection."""
        self._closed = True  # a connection accepted just before, whose task has not run yet, ends too
        if self._server is not None:
            self._server.close()
        tasks = list(self._clients)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    # -- one client connection ------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        if self._closed or len(self._clients) >= self._limits.max_clients:
            writer.transport.abort()
            return
        self._clients[task] = None
        _no_delay(writer)
        try:
            while await self._one_request(task, reader, writer):
                self._clients[task] = None
        except _Refusal as refusal:
            with contextlib.suppress(Exception):
                await self._refuse(writer, refusal)
                await _linger(reader, writer)
        except (OSError, TimeoutError, ValueError, asyncio.IncompleteReadError, _UpstreamError):
            pass  # a broken or hostile peer: the connection ends, the proxy goes on
        except asyncio.CancelledError:
            pass  # aclose, or update narrowing the list
        except Exception:
            logger.exception("sandbox proxy: unexpected error on a connection")
        finally:
            self._clients.pop(task, None)
            await _close(writer)

    async def _refuse(self, writer: asyncio.StreamWriter, refusal: _Refusal) -> None:
        body = (refusal.text + "\n").encode()
        head = _format_head(
            f"HTTP/1.1 {refusal.status} {refusal.reason}",
            [
                ("Content-Type", "text/plain; charset=utf-8"),
                ("Content-Length", str(len(body))),
                ("Connection", "close"),
            ],
        )
        writer.write(head + body)
        await asyncio.wait_for(writer.drain(), self._limits.connect_timeout)

    async def _one_request(
        self, task: asyncio.Task[None], reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        """Serve one request; True when the connection may carry another."""
        limits = self._limits
        try:
            head = await asyncio.wait_for(
                _read_head(
                    reader,
                    max_line=limits.max_line,
                    max_head=limits.max_head,
                    max_lines=limits.max_header_lines,
                    idle=limits.header_timeout,
                ),
                limits.header_timeout,
            )
        except ValueError as error:
            raise _bad(str(error)) from None
        if head is None:
            return False
        parts = head.start.split(" ")
        if len(parts) != 3 or not _TOKEN.fullmatch(parts[0].encode("latin-1")):
            raise _bad("a malformed request line")
        method, request_target, version = parts
        if version not in ("HTTP/1.1", "HTTP/1.0"):
            raise _bad("only HTTP/1.0 and HTTP/1.1 are spoken here")
        if method.upper() == "CONNECT":
            target = self._target(request_target, None)
            await self._tunnel(task, target, reader, writer)
            return False
        if request_target[:7].lower() != "http://":
            if request_target[:8].lower() == "https://":
                raise _bad("an https:// URL goes through CONNECT")
            raise _bad("not a proxy request: send an absolute http:// URL, or CONNECT host:port")
        authority, path = _split_url(request_target[7:])
        target = self._target(authority, 80)
        return await self._forward(task, target, method, path, version, head, reader, writer)

    def _target(self, authority: str, default_port: int | None) -> Target:
        try:
            target = parse_target(authority, default_port)
        except ValueError as error:
            raise _bad(f"not a valid host and port ({error})") from None
        if not self._allow.allows(target):
            logger.info("sandbox proxy refused %s (not in the allowlist)", target.entry)
            if self._on_denied is not None:
                try:
                    self._on_denied(target.entry)
                except Exception:
                    logger.exception("sandbox proxy: on_denied failed")
            # the reason phrase too: clients that hide a CONNECT refusal's body show the status line
            reason = f"Forbidden by the dsh sandbox: {target.entry} is not in {SETTING}"
            raise _Refusal(403, reason, denial_text(target.entry))
        return target

    async def _connect(
        self, task: asyncio.Task[None], target: Target
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """Resolve and connect within the connect timeout, counted against `max_tunnels`; the caller
        releases the slot with `_release`."""
        if self._upstreams >= self._limits.max_tunnels:
            raise _Refusal(
                503, "Service Unavailable", "dsh sandbox proxy: too many open connections; try again"
            )
        self._upstreams += 1
        self._clients[task] = target
        try:
            return await asyncio.wait_for(self._open(target), self._limits.connect_timeout)
        except TimeoutError:
            self._upstreams -= 1
            raise _Refusal(
                504, "Gateway Timeout", f"dsh sandbox proxy: {target.entry} did not answer in time"
            ) from None
        except BaseException:
            self._upstreams -= 1
            raise

    def _release(self) -> None:
        self._upstreams -= 1

    async def _open(self, target: Target) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if target.is_ip:
            addresses = [target.host]  # listed exactly: reached as the person wrote it
        else:
            try:
                found = await self._resolver(target.host, target.port)
            except (OSError, UnicodeError):
                raise _Refusal(
                    502, "Bad Gateway", f"dsh sandbox proxy: could not resolve {target.host}"
                ) from None
            addresses = [a for a in found if self._allow_private or _public(a)]
            if not addresses:
                logger.info("sandbox proxy refused %s (resolves to non-global addresses)", target.host)
                raise _Refusal(
                    403,
                    "Forbidden",
                    f"dsh sandbox: {target.host} resolves to a loopback, private or otherwise local "
                    "address; the sandbox reaches only public addresses by name",
                )
        failure: OSError | None = None
        for address in addresses:
            try:
                return await _open_upstream(address, target.port)
            except OSError as error:
                failure = error
        logger.info("sandbox proxy could not connect to %s: %s", target.entry, failure)
        raise _Refusal(502, "Bad Gateway", f"dsh sandbox proxy: could not connect to {target.entry}")

    async def _tunnel(
        self,
        task: asyncio.Task[None],
        target: Target,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        up_reader, up_writer = await self._connect(task, target)
        try:
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await asyncio.wait_for(writer.drain(), self._limits.idle_timeout)
            last = [time.monotonic()]
            await _both(self._pump(reader, up_writer, last), self._pump(up_reader, writer, last))
        finally:
            self._release()
            await _close(up_writer)

    async def _pump(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, last: list[float]) -> None:
        """One direction of a tunnel; idle only when neither direction moved for the idle timeout."""
        idle = self._limits.idle_timeout
        while True:
            try:
                data = await asyncio.wait_for(src.read(_READ), idle)
            except TimeoutError:
                if time.monotonic() - last[0] < idle:
                    continue
                raise
            if not data:
                break
            last[0] = time.monotonic()
            dst.write(data)
            await asyncio.wait_for(dst.drain(), idle)
        if dst.can_write_eof():
            dst.write_eof()

    async def _forward(
        self,
        task: asyncio.Task[None],
        target: Target,
        method: str,
        path: str,
        version: str,
        head: _Head,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> bool:
        """A plain HTTP request, sent on a fresh upstream connection (Connection: close); the client's
        connection stays open for another request when its framing allows."""
        transfer = head.tokens("transfer-encoding")
        try:
            length = _body_length(head)
        except ValueError as error:
            raise _bad(str(error)) from None
        if transfer and (transfer != {"chunked"} or length is not None):
            raise _bad("only Transfer-Encoding: chunked, and never with Content-Length")
        dropped = _HOP_BY_HOP | head.tokens("connection") | {"host", "content-length", "transfer-encoding"}
        headers = [(name, value) for name, value in head.headers if name.lower() not in dropped]
        headers.insert(0, ("Host", target.authority))
        if transfer:
            headers.append(("Transfer-Encoding", "chunked"))
        elif length is not None:
            headers.append(("Content-Length", str(length)))
        headers.append(("Connection", "close"))
        up_reader, up_writer = await self._connect(task, target)
        idle = self._limits.idle_timeout
        try:
            up_writer.write(_format_head(f"{method} {path} {version}", headers))

            async def send_body() -> None:
                if transfer:
                    await _relay_chunked(reader, up_writer, idle)
                elif length:
                    await _relay_exact(reader, up_writer, length, idle)
                else:
                    await asyncio.wait_for(up_writer.drain(), idle)

            keep_alive = _client_keeps_alive(head, version)
            response = _ResponseRelay(method, up_reader, writer, self._limits, keep_alive=keep_alive)
            body = asyncio.create_task(send_body())
            answer = asyncio.create_task(response.run())
            try:
                done, _ = await asyncio.wait({body, answer}, return_when=asyncio.FIRST_COMPLETED)
                failure = body.exception() if body in done else None
                if isinstance(failure, ValueError) or (failure is not None and writer.transport.is_closing()):
                    # the client's body is malformed or cut short, or the client is gone
                    answer.cancel()
                    if not response.started and isinstance(failure, ValueError):
                        raise _bad("a malformed or incomplete request body")
                    return False
                # else the upstream stopped taking the body (an early 413, a reset): its answer, if
                # it gave one, still goes to the client
                reusable = await answer
                if not body.done() or body.exception() is not None:
                    # answered before the whole body went up: the client may still be sending it
                    body.cancel()
                    await asyncio.gather(body, return_exceptions=True)
                    await _linger(reader, writer)
                    return False
                return reusable and keep_alive
            finally:
                for side in (body, answer):
                    side.cancel()
                await asyncio.gather(body, answer, return_exceptions=True)
        finally:
            self._release()
            await _close(up_writer)


class _ResponseRelay:
    """An upstream's response streamed back: interim 1xx heads, then the final head without its
    hop-by-hop headers, then the body in its framing."""

    def __init__(
        self,
        method: str,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        limits: ProxyLimits,
        *,
        keep_alive: bool,
    ) -> None:
        self._method, self._reader, self._writer, self._limits = method, reader, writer, limits
        self._keep_alive = keep_alive  # the client may send another request on its connection
        self.started = False  # a byte of the response reached the client: no error status any more

    async def run(self) -> bool:
        """Relay the response; True when the client connection may carry another request."""
        limits = self._limits
        while True:
            try:
                head = await _read_head(
                    self._reader,
                    max_line=limits.max_response_head,
                    max_head=limits.max_response_head,
                    max_lines=1000,
                    idle=limits.idle_timeout,
                )
            except TimeoutError:
                if self.started:
                    raise
                raise _Refusal(
                    504, "Gateway Timeout", "dsh sandbox proxy: the upstream did not answer in time"
                ) from None
            except ValueError as error:
                if self.started:
                    raise _UpstreamError(str(error)) from None
                raise _Refusal(
                    502, "Bad Gateway", f"dsh sandbox proxy: the upstream's response is broken ({error})"
                ) from None
            if head is None:
                if self.started:
                    raise _UpstreamError("closed after an interim response")
                raise _Refusal(502, "Bad Gateway", "dsh sandbox proxy: the upstream closed without answering")
            status = _status_of(head.start)
            if status is None or status == 101:  # 101: Upgrade is never forwarded, so never granted
                if self.started:
                    raise _UpstreamError("a malformed status line")
                raise _Refusal(502, "Bad Gateway", "dsh sandbox proxy: the upstream's response is broken")
            if status >= 200:
                break
            self._writer.write(_format_head(head.start, head.headers))
            await asyncio.wait_for(self._writer.drain(), limits.idle_timeout)
            self.started = True
        no_body = self._method.upper() == "HEAD" or status in (204, 304)
        chunked = False
        length: int | None = None
        if not no_body:
            transfer = [t.strip().lower() for v in head.values("transfer-encoding") for t in v.split(",")]
            if transfer:
                chunked = transfer[-1] == "chunked"
            else:
                try:
                    length = _body_length(head)
                except ValueError as error:
                    raise _Refusal(
                        502, "Bad Gateway", f"dsh sandbox proxy: the upstream's response is broken ({error})"
                    ) from None
        until_close = not no_body and not chunked and length is None
        dropped = _HOP_BY_HOP | head.tokens("connection")
        if head.values("transfer-encoding"):
            dropped = dropped | {"content-length"}
        headers = [(name, value) for name, value in head.headers if name.lower() not in dropped]
        if until_close or not self._keep_alive:
            headers.append(("Connection", "close"))
        self._writer.write(_format_head(head.start, headers))
        self.started = True
        await asyncio.wait_for(self._writer.drain(), limits.idle_timeout)
        idle = limits.idle_timeout
        if no_body:
            pass
        elif chunked:
            await _relay_chunked(self._reader, self._writer, idle)
        elif length is not None:
            await _relay_exact(self._reader, self._writer, length, idle)
        else:
            await _relay_to_eof(self._reader, self._writer, idle)
        return not until_close


def _status_of(line: str) -> int | None:
    parts = line.split(" ", 2)
    if len(parts) < 2 or parts[0] not in ("HTTP/1.0", "HTTP/1.1"):
        return None
    if not re.fullmatch("[1-5][0-9]{2}", parts[1]):
        return None
    return int(parts[1])


def _client_keeps_alive(head: _Head, version: str) -> bool:
    return version == "HTTP/1.1" and "close" not in head.tokens("connection") | head.tokens(
        "proxy-connection"
    )


def _split_url(rest: str) -> tuple[str, str]:
    """`host[:port]/path?query` after `http://` -> (authority, origin-form target)."""
    cut = min((i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
    authority, path = rest[:cut], rest[cut:].split("#", 1)[0]
    if not path.startswith("/"):
        path = "/" + path
    return authority, path


def _public(text: str) -> bool:
    try:
        return is_public_address(ipaddress.ip_address(text))
    except ValueError:
        return False  # a scoped IPv6 address ("fe80::1%eth0") and anything odd


async def _both(first: Awaitable[None], second: Awaitable[None]) -> None:
    """Run both directions until both end; the first failure ends the other."""
    tasks = [asyncio.ensure_future(first), asyncio.ensure_future(second)]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
