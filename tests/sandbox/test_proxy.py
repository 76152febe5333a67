"""The sandbox's egress proxy against real sockets on 127.0.0.1: a real upstream HTTP server
(http.server in a thread), a TLS-free CONNECT echo upstream, and real clients (raw sockets,
http.client, urllib and curl through HTTP_PROXY as a confined command would use it).

The test names (`*.test`) resolve only through the resolver handed to the proxy, so a client that
reaches them at all went through the proxy."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import ipaddress
import logging
import os
import random
import shutil
import socket
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from dsh_daemon.sandbox.proxy import (
    AllowList,
    EgressProxy,
    InvalidAllowEntry,
    ProxyLimits,
    Target,
    _no_delay,
    is_public_address,
    parse_allow_entry,
    parse_target,
)

TEST_NAMES = {"web.test", "echo.test", "wild.test", "api.wild.test", "deep.api.wild.test", "other.test"}
WAIT = 15.0
BIG = 32 * 1024 * 1024  # more than the loopback socket buffers hold on both sides


async def _resolver(host: str, port: int) -> Sequence[str]:
    if host in TEST_NAMES:
        return ["127.0.0.1"]
    raise socket.gaierror(socket.EAI_NONAME, "unknown test name")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Upstream

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _record(self) -> None:
        self.server.seen.append((self.command, self.path, list(self.headers.items())))

    def _send(self, body: bytes, status: int = 200) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_GET(self) -> None:
        self._record()
        if self.path.startswith("/hello"):
            self._send(b"hello from upstream")
        elif self.path == "/chunked":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for part in (b"one ", b"two ", b"three"):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\n\r\n")
        elif self.path == "/until-close":
            self.send_response(200)
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(b"streamed until the upstream closes")
            self.close_connection = True
        elif self.path == "/big":
            self._send(b"x" * BIG)
        else:
            self._send(b"no such page", 404)

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_POST(self) -> None:
        self._record()
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            body = b""
            while size := int(self.rfile.readline().split(b";")[0], 16):
                body += self.rfile.read(size)
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b""):
                pass
        else:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self._send(b"echo: " + body)


class _Upstream(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.seen: list[tuple[str, str, list[tuple[str, str]]]] = []

    @property
    def port(self) -> int:
        return int(self.server_address[1])


@pytest.fixture
def web() -> Iterator[_Upstream]:
    server = _Upstream()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(5)


class _Echo:
    """A TLS-free CONNECT upstream: echoes every byte, half-closes when its client does."""

    def __init__(self) -> None:
        self.connections = 0
        self.server: asyncio.Server | None = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except OSError:
            pass
        finally:
            writer.close()

    @property
    def port(self) -> int:
        assert self.server is not None
        return int(self.server.sockets[0].getsockname()[1])


@pytest.fixture
async def echo() -> AsyncIterator[_Echo]:
    upstream = _Echo()
    upstream.server = await asyncio.start_server(upstream._serve, "127.0.0.1", 0)
    yield upstream
    upstream.server.close()


StartProxy = Callable[..., Awaitable[tuple[EgressProxy, list[str]]]]


@pytest.fixture
async def start_proxy() -> AsyncIterator[StartProxy]:
    made: list[EgressProxy] = []

    async def start(allow: Sequence[str], **options: Any) -> tuple[EgressProxy, list[str]]:
        denied: list[str] = []
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        options.setdefault("resolver", _resolver)
        proxy = await EgressProxy.start(sock, allow, on_denied=denied.append, **options)
        made.append(proxy)
        return proxy, denied

    yield start
    for proxy in made:
        await proxy.aclose()


async def _exchange(port: int, data: bytes) -> bytes:
    """Send `data` on a fresh connection, read until the proxy closes it."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        await writer.drain()
        return await asyncio.wait_for(reader.read(), WAIT)
    finally:
        writer.close()


async def _tunnel(port: int, authority: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n".encode())
    await writer.drain()
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), WAIT)
    return reader, writer, head


def _status(response: bytes) -> int:
    return int(response.split(b" ", 2)[1])


def _body(response: bytes) -> bytes:
    return response.split(b"\r\n\r\n", 1)[1]


# -- CONNECT -------------------------------------------------------------------------------------


async def test_an_allowed_connect_tunnels_bytes_both_ways_and_half_closes(
    start_proxy: StartProxy, echo: _Echo
) -> None:
    proxy, denied = await start_proxy([f"echo.test:{echo.port}"], allow_private_upstreams=True)
    reader, writer, head = await _tunnel(proxy.port, f"echo.test:{echo.port}")
    assert head.startswith(b"HTTP/1.1 200 ")
    writer.write(b"ping")
    await writer.drain()
    assert await asyncio.wait_for(reader.readexactly(4), WAIT) == b"ping"
    payload = os.urandom(2 * 1024 * 1024)  # more than any buffer: backpressure both ways

    async def send() -> None:
        writer.write(payload)
        await writer.drain()
        writer.write_eof()  # half-close: the echo answers everything, then closes

    sender = asyncio.create_task(send())
    echoed = await asyncio.wait_for(reader.read(), WAIT)
    await sender
    assert echoed == payload
    writer.close()
    assert denied == []


async def test_a_connect_with_pipelined_bytes_after_its_head_delivers_them(
    start_proxy: StartProxy, echo: _Echo
) -> None:
    proxy, _ = await start_proxy([f"echo.test:{echo.port}"], allow_private_upstreams=True)
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    writer.write(f"CONNECT echo.test:{echo.port} HTTP/1.1\r\n\r\nearly bytes".encode())
    await writer.drain()
    await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), WAIT)
    assert await asyncio.wait_for(reader.readexactly(11), WAIT) == b"early bytes"
    writer.close()


# -- plain HTTP ----------------------------------------------------------------------------------


async def test_an_allowed_plain_get_is_forwarded_without_proxy_headers(
    start_proxy: StartProxy, web: _Upstream, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    proxy, denied = await start_proxy([f"web.test:{web.port}"], allow_private_upstreams=True)
    response = await _exchange(
        proxy.port,
        f"GET http://WEB.test:{web.port}/hello?token=s3cret-query HTTP/1.1\r\n"
        "Host: somewhere-else.example\r\n"
        "Proxy-Authorization: Basic c2VjcmV0LXByb3h5\r\n"
        "Proxy-Connection: keep-alive\r\n"
        "Connection: close, X-Hop\r\nX-Hop: dropped\r\nX-Kept: kept\r\n\r\n".encode(),
    )
    assert _status(response) == 200 and _body(response) == b"hello from upstream"
    [(method, path, headers)] = web.seen
    names = {name.lower(): value for name, value in headers}
    assert (method, path) == ("GET", "/hello?token=s3cret-query")
    assert names["host"] == f"web.test:{web.port}"  # the URL's authority, not the client's Host
    assert names["x-kept"] == "kept" and names["connection"] == "close"
    assert not {"proxy-authorization", "proxy-connection", "x-hop"} & names.keys()
    assert "c2VjcmV0LXByb3h5" not in caplog.text and "s3cret-query" not in caplog.text
    assert denied == []


async def test_a_client_keeps_its_connection_across_requests_and_bodies_stream_both_ways(
    start_proxy: StartProxy, web: _Upstream
) -> None:
    """http.client reuses the connection; chunked and sized bodies go up, sized, chunked and
    until-close bodies come back."""
    proxy, _ = await start_proxy([f"web.test:{web.port}"], allow_private_upstreams=True)
    base = f"http://web.test:{web.port}"

    def client() -> list[tuple[int, bytes, bool]]:
        connection = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=WAIT)
        results = []
        first_socket = None
        for method, path, body, chunked in [
            ("GET", "/hello", None, False),
            ("GET", "/chunked", None, False),
            ("POST", "/echo", b"sized body", False),
            ("POST", "/echo", iter([b"chunked ", b"body"]), True),
            ("HEAD", "/hello", None, False),
            ("GET", "/big", None, False),
            ("GET", "/until-close", None, False),
        ]:
            connection.request(method, base + path, body=body, encode_chunked=chunked)
            response = connection.getresponse()
            data = response.read()
            first_socket = first_socket or connection.sock
            results.append((response.status, data[:40], connection.sock is first_socket))
        connection.close()
        return results

    results = await asyncio.to_thread(client)
    assert [(status, data) for status, data, _ in results] == [
        (200, b"hello from upstream"),
        (200, b"one two three"),
        (200, b"echo: sized body"),
        (200, b"echo: chunked body"),
        (200, b""),
        (200, b"x" * 40),
        (200, b"streamed until the upstream closes"),
    ]
    # one client connection carried them all; a body sent until close ends it
    assert [same for _, _, same in results] == [True] * 6 + [False]


async def test_urllib_and_curl_reach_an_allowed_name_through_http_proxy_as_a_command_would(
    start_proxy: StartProxy, web: _Upstream
) -> None:
    proxy, denied = await start_proxy([f"web.test:{web.port}"], allow_private_upstreams=True)
    url = f"http://127.0.0.1:{proxy.port}"
    env = {**os.environ, "HTTP_PROXY": url, "http_proxy": url, "HTTPS_PROXY": url, "https_proxy": url}
    env.pop("NO_PROXY", None)
    env.pop("no_proxy", None)
    code = (
        "import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=15).read().decode())"
    )
    commands = [[sys.executable, "-c", code, f"http://web.test:{web.port}/hello"]]
    if shutil.which("curl"):
        commands.append(["curl", "-sS", "--max-time", "15", f"http://web.test:{web.port}/hello"])
        # -p: CONNECT through the proxy, then HTTP inside the tunnel
        commands.append(["curl", "-sS", "-p", "--max-time", "15", f"http://web.test:{web.port}/hello"])
    for command in commands:
        process = await asyncio.create_subprocess_exec(
            *command, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        out, err = await asyncio.wait_for(process.communicate(), WAIT)
        assert (process.returncode, out.strip()) == (0, b"hello from upstream"), (command, err)
    assert denied == []


# -- refusals ------------------------------------------------------------------------------------


async def test_a_domain_not_in_the_list_gets_a_403_naming_it_and_on_denied_once(
    start_proxy: StartProxy, web: _Upstream, echo: _Echo
) -> None:
    proxy, denied = await start_proxy([f"web.test:{web.port}"], allow_private_upstreams=True)
    response = await _exchange(proxy.port, f"CONNECT other.test:{echo.port} HTTP/1.1\r\n\r\n".encode())
    assert _status(response) == 403
    assert f"other.test:{echo.port} is not in tools.sandbox.network.allow".encode() in _body(response)
    assert b"only the person can widen the sandbox" in _body(response)
    status_line = response.split(b"\r\n", 1)[0]  # what urllib and pip print for a refused tunnel
    assert (
        status_line
        == f"HTTP/1.1 403 Forbidden by the dsh sandbox: other.test:{echo.port} is not in tools.sandbox.network.allow".encode()
    )
    response = await _exchange(proxy.port, b"GET http://other.test/ HTTP/1.1\r\n\r\n")
    assert _status(response) == 403 and b"dsh sandbox: other.test is not in" in _body(response)
    # an allowed name on a port its entry does not name
    response = await _exchange(proxy.port, f"CONNECT web.test:{echo.port} HTTP/1.1\r\n\r\n".encode())
    assert _status(response) == 403
    assert denied == [f"other.test:{echo.port}", "other.test", f"web.test:{echo.port}"]
    assert echo.connections == 0 and web.seen == []


async def test_curl_sees_the_refusal_text(start_proxy: StartProxy) -> None:
    if not shutil.which("curl"):
        pytest.skip("curl is not installed")
    proxy, denied = await start_proxy(["web.test"])
    process = await asyncio.create_subprocess_exec(
        *["curl", "-sS", "--max-time", "15", "-w", "\n%{http_code}", "-x", f"http://127.0.0.1:{proxy.port}"],
        "http://denied.test/",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, _ = await asyncio.wait_for(process.communicate(), WAIT)
    assert out.decode().splitlines() == [
        "dsh sandbox: denied.test is not in tools.sandbox.network.allow; only the person can widen the sandbox",
        "",
        "403",
    ]
    assert denied == ["denied.test"]


async def test_an_allowed_name_resolving_to_loopback_is_refused_without_connecting(
    start_proxy: StartProxy, web: _Upstream, echo: _Echo
) -> None:
    """DNS rebinding and the host's own services: a listed name that resolves to 127.0.0.1."""
    proxy, denied = await start_proxy([f"web.test:{web.port}", f"echo.test:{echo.port}"])
    response = await _exchange(proxy.port, f"CONNECT echo.test:{echo.port} HTTP/1.1\r\n\r\n".encode())
    assert _status(response) == 403 and b"echo.test resolves to a loopback" in _body(response)
    response = await _exchange(proxy.port, f"GET http://web.test:{web.port}/hello HTTP/1.1\r\n\r\n".encode())
    assert _status(response) == 403
    assert echo.connections == 0 and web.seen == []
    assert denied == []  # listed: widening the list would not help, so no widening is proposed


async def test_a_mixed_answer_connects_only_to_the_public_address(
    start_proxy: StartProxy, echo: _Echo
) -> None:
    """A rebinding answer with a local address among public ones: the local one is never tried (the
    public one is unreachable here, so the request fails with 502, and the echo saw nothing)."""
    tried: list[str] = []

    async def rebinding(host: str, port: int) -> Sequence[str]:
        tried.append(host)
        return ["127.0.0.1", "::ffff:127.0.0.1", "169.254.169.254", "192.0.2.10"]

    proxy, _ = await start_proxy(
        [f"echo.test:{echo.port}"], resolver=rebinding, limits=ProxyLimits(connect_timeout=1.0)
    )
    response = await _exchange(proxy.port, f"CONNECT echo.test:{echo.port} HTTP/1.1\r\n\r\n".encode())
    assert _status(response) == 403  # 192.0.2.10 is documentation space: not global either
    assert tried == ["echo.test"] and echo.connections == 0


async def test_an_ip_literal_is_refused_unless_listed_exactly(start_proxy: StartProxy, echo: _Echo) -> None:
    proxy, denied = await start_proxy(["*.test", f"127.0.0.2:{echo.port}"])
    for authority in (f"127.0.0.1:{echo.port}", f"[::1]:{echo.port}", f"127.0.0.1:{echo.port + 1}"):
        response = await _exchange(proxy.port, f"CONNECT {authority} HTTP/1.1\r\n\r\n".encode())
        assert _status(response) == 403, authority
    # numeric spellings a resolver would read as an address are not names
    for authority in (f"127.1:{echo.port}", f"2130706433:{echo.port}", f"0x7f.1:{echo.port}"):
        response = await _exchange(proxy.port, f"CONNECT {authority} HTTP/1.1\r\n\r\n".encode())
        assert _status(response) == 400, authority
    assert denied == [f"127.0.0.1:{echo.port}", f"[::1]:{echo.port}", f"127.0.0.1:{echo.port + 1}"]
    await proxy.update(["*.test", f"127.0.0.1:{echo.port}"])
    reader, writer, head = await _tunnel(proxy.port, f"127.0.0.1:{echo.port}")
    assert head.startswith(b"HTTP/1.1 200 ")  # listed exactly: reached as written
    writer.write(b"hi")
    assert await asyncio.wait_for(reader.readexactly(2), WAIT) == b"hi"
    writer.close()


async def test_a_wildcard_allows_names_beneath_the_domain_but_not_the_apex(
    start_proxy: StartProxy, echo: _Echo
) -> None:
    proxy, denied = await start_proxy([f"*.wild.test:{echo.port}"], allow_private_upstreams=True)
    for name in ("api.wild.test", "DEEP.api.Wild.test."):
        _, writer, head = await _tunnel(proxy.port, f"{name}:{echo.port}")
        assert head.startswith(b"HTTP/1.1 200 "), name
        writer.close()
    response = await _exchange(proxy.port, f"CONNECT wild.test:{echo.port} HTTP/1.1\r\n\r\n".encode())
    assert _status(response) == 403
    assert denied == [f"wild.test:{echo.port}"]


async def test_update_widens_live_and_a_narrowing_closes_open_tunnels(
    start_proxy: StartProxy, echo: _Echo
) -> None:
    proxy, denied = await start_proxy([], allow_private_upstreams=True)
    response = await _exchange(proxy.port, f"CONNECT echo.test:{echo.port} HTTP/1.1\r\n\r\n".encode())
    assert _status(response) == 403
    await proxy.update([f"echo.test:{echo.port}"])
    reader, writer, head = await _tunnel(proxy.port, f"echo.test:{echo.port}")
    assert head.startswith(b"HTTP/1.1 200 ")
    with pytest.raises(InvalidAllowEntry):
        await proxy.update(["https://not-an-entry.test/"])
    writer.write(b"still open")  # the bad update kept the list
    assert await asyncio.wait_for(reader.readexactly(10), WAIT) == b"still open"
    await proxy.update([])
    assert await asyncio.wait_for(reader.read(), WAIT) == b""  # the proxy closed the tunnel
    writer.close()
    assert denied == [f"echo.test:{echo.port}"]


# -- hostile clients -----------------------------------------------------------------------------


async def test_garbage_and_oversized_heads_get_a_typed_400_and_the_proxy_keeps_serving(
    start_proxy: StartProxy, web: _Upstream
) -> None:
    proxy, denied = await start_proxy([f"web.test:{web.port}"], allow_private_upstreams=True)
    url = f"http://web.test:{web.port}/hello"
    hostile = {
        "tls hello": b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + os.urandom(64) + b"\r\n\r\n",
        "binary": b"\x00\xff\xfe garbage \x07\r\n\r\n",
        "no target": b"GET\r\n\r\n",
        "origin form": b"GET /hello HTTP/1.1\r\nHost: web.test\r\n\r\n",
        "https url": b"GET https://web.test/ HTTP/1.1\r\n\r\n",
        "http/2": b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
        "long request line": f"GET {url}?{'a' * 10_000} HTTP/1.1\r\n\r\n".encode(),
        "huge header": f"GET {url} HTTP/1.1\r\nX-Big: {'b' * 100_000}\r\n\r\n".encode(),
        "huge head": f"GET {url} HTTP/1.1\r\n".encode()
        + b"".join(b"X-%d: %s\r\n" % (i, b"c" * 1000) for i in range(80))
        + b"\r\n",
        "many headers": f"GET {url} HTTP/1.1\r\n".encode()
        + b"".join(b"X-%d: c\r\n" % i for i in range(300))
        + b"\r\n",
        "obs-fold": f"GET {url} HTTP/1.1\r\nX-A: a\r\n folded\r\n\r\n".encode(),
        "space before colon": f"GET {url} HTTP/1.1\r\nX-A : a\r\n\r\n".encode(),
        "control in header": f"GET {url} HTTP/1.1\r\nX-A: a\x00b\r\n\r\n".encode(),
        "credentials": f"GET http://user:pw@web.test:{web.port}/ HTTP/1.1\r\n\r\n".encode(),
        "bad port": b"CONNECT web.test:99999 HTTP/1.1\r\n\r\n",
        "no port": b"CONNECT web.test HTTP/1.1\r\n\r\n",
        "bad name": b"CONNECT we_b..test:443 HTTP/1.1\r\n\r\n",
        "smuggling": f"POST {url} HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n".encode(),
        "two lengths": f"POST {url} HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd".encode(),
        "bad chunk": f"POST {url} HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n".encode(),
    }
    for name, data in hostile.items():
        response = await _exchange(proxy.port, data)
        assert _status(response) == 400, name
        assert _body(response).startswith(b"dsh sandbox proxy: bad request: "), name
    response = await _exchange(proxy.port, f"GET {url} HTTP/1.1\r\nConnection: close\r\n\r\n".encode())
    assert _status(response) == 200 and _body(response) == b"hello from upstream"
    assert denied == []
    # only the bad-chunk POST (its head was fine: it was cut off in its body) and the good GET got through
    seen = [(method, path) for method, path, _ in web.seen]
    assert ("GET", "/hello") in seen and set(seen) <= {("GET", "/hello"), ("POST", "/hello")}


async def test_mutated_requests_never_break_the_proxy(
    start_proxy: StartProxy, web: _Upstream, echo: _Echo, caplog: pytest.LogCaptureFixture
) -> None:
    """Valid requests with bytes flipped, cut, repeated or spliced (a seeded fuzz): every one gets an
    answer or a close, none an unexpected error, and the proxy serves a good request afterwards."""
    caplog.set_level(logging.WARNING)
    proxy, _ = await start_proxy(
        [f"web.test:{web.port}", f"echo.test:{echo.port}", "*.wild.test"],
        allow_private_upstreams=True,
        limits=ProxyLimits(header_timeout=0.5, idle_timeout=0.5, connect_timeout=1.0),
    )
    seeds = [
        f"GET http://web.test:{web.port}/hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode(),
        f"POST http://web.test:{web.port}/echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n".encode(),
        f"POST http://web.test:{web.port}/echo HTTP/1.0\r\nContent-Length: 4\r\n\r\nabcd".encode(),
        f"CONNECT echo.test:{echo.port} HTTP/1.1\r\nProxy-Authorization: Basic eA==\r\n\r\nhello".encode(),
        b"CONNECT [::1]:443 HTTP/1.1\r\n\r\n",
    ]
    alphabet = b" :\r\n\x00\xff[]@%/.*-0123456789abcdefHTTP"
    rng = random.Random(41)
    for _ in range(150):
        data = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(1, 4)):
            where = rng.randrange(len(data))
            match rng.randrange(4):
                case 0:
                    data[where] = rng.choice(alphabet)
                case 1:
                    del data[where : where + rng.randint(1, 8)]
                case 2:
                    data[where:where] = bytes(rng.choice(alphabet) for _ in range(rng.randint(1, 8)))
                case _:
                    data[where:where] = data[where : where + rng.randint(1, 40)] * rng.randint(2, 50)
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        with contextlib.suppress(ConnectionError):
            writer.write(bytes(data))
            writer.write_eof()
            await asyncio.wait_for(reader.read(), WAIT)
        writer.close()
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    response = await _exchange(
        proxy.port, f"GET http://web.test:{web.port}/hello HTTP/1.1\r\nConnection: close\r\n\r\n".encode()
    )
    assert _status(response) == 200


async def test_a_silent_or_trickling_client_is_closed_after_the_head_timeout(start_proxy: StartProxy) -> None:
    proxy, _ = await start_proxy(["web.test"], limits=ProxyLimits(header_timeout=0.3))
    for first_bytes in (b"", b"GET http://web.test/ HT"):
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        writer.write(first_bytes)
        assert await asyncio.wait_for(reader.read(), WAIT) == b""
        writer.close()


async def test_an_idle_tunnel_is_closed(start_proxy: StartProxy, echo: _Echo) -> None:
    proxy, _ = await start_proxy(
        [f"echo.test:{echo.port}"], allow_private_upstreams=True, limits=ProxyLimits(idle_timeout=0.3)
    )
    reader, writer, head = await _tunnel(proxy.port, f"echo.test:{echo.port}")
    assert head.startswith(b"HTTP/1.1 200 ")
    assert await asyncio.wait_for(reader.read(), WAIT) == b""
    writer.close()


async def test_a_client_that_stops_reading_a_download_is_closed_after_the_idle_timeout(
    start_proxy: StartProxy, web: _Upstream
) -> None:
    proxy, _ = await start_proxy(
        [f"web.test:{web.port}"], allow_private_upstreams=True, limits=ProxyLimits(idle_timeout=0.3)
    )
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", proxy.port))
    reader, writer = await asyncio.open_connection(sock=sock)
    writer.write(f"GET http://web.test:{web.port}/big HTTP/1.1\r\n\r\n".encode())
    for _ in range(300):  # reads nothing until the proxy gave up on it
        await asyncio.sleep(0.05)
        if proxy.connections == 0:
            break
    assert proxy.connections == 0
    with contextlib.suppress(ConnectionResetError):
        received = await asyncio.wait_for(reader.read(), WAIT)
        assert received.startswith(b"HTTP/1.1 200 ") and len(received) < BIG
    writer.close()


async def test_an_http_1_0_client_gets_its_response_and_the_connection_closes(
    start_proxy: StartProxy, web: _Upstream
) -> None:
    proxy, _ = await start_proxy([f"web.test:{web.port}"], allow_private_upstreams=True)
    response = await _exchange(proxy.port, f"GET http://web.test:{web.port}/hello HTTP/1.0\r\n\r\n".encode())
    assert _status(response) == 200 and _body(response) == b"hello from upstream"
    assert b"\r\nConnection: close\r\n" in response.split(b"\r\n\r\n")[0] + b"\r\n"
    assert web.seen[0][1] == "/hello"


async def test_concurrent_tunnels_are_bounded_and_a_closed_one_frees_its_slot(
    start_proxy: StartProxy, echo: _Echo
) -> None:
    proxy, _ = await start_proxy(
        [f"echo.test:{echo.port}"], allow_private_upstreams=True, limits=ProxyLimits(max_tunnels=2)
    )
    open_tunnels = [await _tunnel(proxy.port, f"echo.test:{echo.port}") for _ in range(2)]
    assert all(head.startswith(b"HTTP/1.1 200 ") for _, _, head in open_tunnels)
    response = await _exchange(proxy.port, f"CONNECT echo.test:{echo.port} HTTP/1.1\r\n\r\n".encode())
    assert _status(response) == 503
    _, first_writer, _ = open_tunnels[0]
    first_writer.close()
    for _ in range(100):
        _, writer, head = await _tunnel(proxy.port, f"echo.test:{echo.port}")
        writer.close()
        if head.startswith(b"HTTP/1.1 200 "):
            break
        await asyncio.sleep(0.05)
    assert head.startswith(b"HTTP/1.1 200 ")
    for _, other, _ in open_tunnels[1:]:
        other.close()


async def test_client_connections_are_bounded(start_proxy: StartProxy, web: _Upstream) -> None:
    proxy, _ = await start_proxy(
        [f"web.test:{web.port}"], allow_private_upstreams=True, limits=ProxyLimits(max_clients=2)
    )
    idle = [await asyncio.open_connection("127.0.0.1", proxy.port) for _ in range(2)]
    for _ in range(300):
        if proxy.connections == 2:
            break
        await asyncio.sleep(0.01)
    with contextlib.suppress(ConnectionResetError):
        assert (
            await _exchange(proxy.port, f"GET http://web.test:{web.port}/hello HTTP/1.0\r\n\r\n".encode())
            == b""
        )
    for _, writer in idle:
        writer.close()
    for _ in range(300):
        if proxy.connections == 0:
            break
        await asyncio.sleep(0.01)
    response = await _exchange(proxy.port, f"GET http://web.test:{web.port}/hello HTTP/1.0\r\n\r\n".encode())
    assert _status(response) == 200
    assert [path for _, path, _ in web.seen] == ["/hello"]


async def test_an_on_denied_that_raises_does_not_stop_the_refusal_nor_the_proxy() -> None:
    def broken(entry: str) -> None:
        raise RuntimeError("a broken session callback")

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    proxy = await EgressProxy.start(sock, [], on_denied=broken, resolver=_resolver)
    try:
        for _ in range(2):
            response = await _exchange(proxy.port, b"CONNECT other.test:443 HTTP/1.1\r\n\r\n")
            assert _status(response) == 403
    finally:
        await proxy.aclose()


async def test_aclose_closes_open_tunnels_and_the_listening_socket(
    start_proxy: StartProxy, echo: _Echo
) -> None:
    proxy, _ = await start_proxy([f"echo.test:{echo.port}"], allow_private_upstreams=True)
    port = proxy.port
    reader, writer, _ = await _tunnel(port, f"echo.test:{echo.port}")
    await proxy.aclose()
    assert await asyncio.wait_for(reader.read(), WAIT) == b""
    writer.close()
    with pytest.raises(OSError):
        await asyncio.open_connection("127.0.0.1", port)


async def test_an_upstream_that_breaks_http_gets_a_502(start_proxy: StartProxy) -> None:
    async def broken(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"NOT HTTP AT ALL\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(broken, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        proxy, _ = await start_proxy([f"web.test:{port}"], allow_private_upstreams=True)
        response = await _exchange(proxy.port, f"GET http://web.test:{port}/ HTTP/1.1\r\n\r\n".encode())
        assert _status(response) == 502
        response = await _exchange(proxy.port, f"GET http://web.test:{port + 1}/ HTTP/1.1\r\n\r\n".encode())
        assert _status(response) == 403
    finally:
        server.close()


async def test_an_upstream_that_answers_before_reading_an_upload_gets_its_answer_through(
    start_proxy: StartProxy,
) -> None:
    """An early 413 (or 401) to a large upload: the upstream answers and closes without reading the
    body, so sending the body upstream fails; the client still gets the answer."""

    async def early(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(
            b"HTTP/1.1 413 Payload Too Large\r\nContent-Length: 8\r\nConnection: close\r\n\r\ntoo big!"
        )
        await writer.drain()
        writer.close()  # the body the proxy still sends is refused (a reset)

    server = await asyncio.start_server(early, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        proxy, _ = await start_proxy([f"web.test:{port}"], allow_private_upstreams=True)
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        size = 16 * 1024 * 1024
        writer.write(
            f"POST http://web.test:{port}/upload HTTP/1.1\r\nContent-Length: {size}\r\n\r\n".encode()
        )

        async def upload() -> None:
            with contextlib.suppress(OSError):
                for _ in range(size // 65536):
                    writer.write(b"u" * 65536)
                    await writer.drain()

        uploading = asyncio.create_task(upload())
        response = await asyncio.wait_for(reader.readuntil(b"too big!"), WAIT)
        assert response.startswith(b"HTTP/1.1 413 Payload Too Large\r\n")
        uploading.cancel()
        await asyncio.gather(uploading, return_exceptions=True)
        writer.close()
    finally:
        server.close()


async def test_an_unknown_name_gets_a_502_saying_it_could_not_be_resolved(start_proxy: StartProxy) -> None:
    proxy, _ = await start_proxy(["unknown.test"])
    response = await _exchange(proxy.port, b"CONNECT unknown.test:443 HTTP/1.1\r\n\r\n")
    assert _status(response) == 502 and b"could not resolve unknown.test" in _body(response)


async def test_client_connections_get_tcp_nodelay_even_on_a_proto_0_listening_socket() -> None:
    """Without TCP_NODELAY a kept-alive client waited ~40 ms a response (head and body written apart,
    Nagle against the client's delayed ACK); asyncio sets it only when the socket's proto is
    IPPROTO_TCP, and `socket.socket()` (how a session makes the proxy's socket) gives proto 0."""
    accepted: list[int] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        _no_delay(writer)
        accepted.append(writer.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        writer.close()

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    server = await asyncio.start_server(serve, sock=sock)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.sockets[0].getsockname()[1])
        await asyncio.wait_for(reader.read(), WAIT)
        writer.close()
    finally:
        server.close()
    assert accepted == [1]


# -- the allowlist's rules -----------------------------------------------------------------------


def _allows(entries: Sequence[str], authority: str, default_port: int | None = None) -> bool:
    return AllowList.parse(entries).allows(parse_target(authority, default_port))


def test_wildcards_match_names_beneath_the_domain_only() -> None:
    rules = ["*.example.com"]
    assert _allows(rules, "a.example.com:443")
    assert _allows(rules, "a.b.example.com:80")
    assert not _allows(rules, "example.com:443")
    assert not _allows(rules, "badexample.com:443")
    assert not _allows(rules, "a.example.com.evil.net:443")
    assert not _allows(rules, "example.com.:443")
    assert _allows(["*.example.com", "example.com"], "example.com:443")


def test_names_compare_case_insensitively_without_a_trailing_dot_in_idna_form() -> None:
    assert _allows(["Example.COM."], "example.com:443")
    assert _allows(["example.com"], "EXAMPLE.com.:443")
    assert _allows(["bücher.de"], "xn--bcher-kva.de:443")
    assert _allows(["xn--bcher-kva.de"], "BÜCHER.de:443")
    assert _allows(["*.bücher.de"], "www.xn--bcher-kva.de:443")
    assert _allows(["example.com"], "example\u3002com:443")  # the ideographic full stop is a dot
    assert not _allows(["example.com"], "exаmple.com:443")  # a Cyrillic а is another name


def test_ports_default_to_80_and_443_unless_the_entry_names_one() -> None:
    assert _allows(["example.com"], "example.com:443")
    assert _allows(["example.com"], "example.com", 80)
    assert not _allows(["example.com"], "example.com:8443")
    assert _allows(["example.com:8443"], "example.com:8443")
    assert not _allows(["example.com:8443"], "example.com:443")
    assert _allows(["*.example.com:22"], "git.example.com:22")


def test_ip_literals_match_only_the_exact_address() -> None:
    assert _allows(["10.0.0.5"], "10.0.0.5:443")
    assert not _allows(["10.0.0.5"], "10.0.0.6:443")
    assert not _allows(["*.example.com"], "10.0.0.5:443")
    assert _allows(["[2001:db8::1]:8080"], "[2001:db8:0::1]:8080")
    assert _allows(["2001:db8::1"], "[2001:db8::1]:443")
    assert not _allows(["2001:db8::1"], "[2001:db8::2]:443")
    assert Target("2001:db8::1", 8080, True).entry == "[2001:db8::1]:8080"


@pytest.mark.parametrize(
    "entry",
    [
        "",
        "*",
        "*.",
        "https://pypi.org",
        "pypi.org/simple",
        "exa*mple.com",
        "*.*.example.com",
        "*.10.0.0.1",
        "example.com:0",
        "example.com:65536",
        "example.com:http",
        "a b.com",
        "[::1",
        "[example.com]",
        "fe80::1%eth0",
        "127.1",
        "-bad-.com",
        "a" * 64 + ".com",
    ],
)
def test_an_invalid_entry_is_refused_naming_it(entry: str) -> None:
    with pytest.raises(InvalidAllowEntry, match=r"tools\.sandbox\.network\.allow"):
        parse_allow_entry(entry)


def test_only_global_unicast_addresses_count_as_public() -> None:
    public = ["93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946", "1.1.1.1"]
    local = [
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "169.254.169.254",
        "100.64.0.1",
        "0.0.0.0",
        "224.0.0.251",
        "239.255.255.250",
        "255.255.255.255",
        "192.0.2.1",
        "::1",
        "::",
        "fe80::1",
        "fc00::1",
        "ff02::1",
        "::ffff:127.0.0.1",
        "::ffff:10.0.0.1",
        "2002:7f00:1::1",
        "fec0::1",
    ]
    assert all(is_public_address(ipaddress.ip_address(a)) for a in public)
    assert not any(is_public_address(ipaddress.ip_address(a)) for a in local)
