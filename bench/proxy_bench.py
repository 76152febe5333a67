"""The sandbox egress proxy's added latency for a small GET. Each figure is printed beside a direct
request measured in the same run.

    .venv/bin/python -m bench.proxy_bench [--requests N]

An HTTP upstream (5-byte body) and the proxy (`dsh_daemon/sandbox/proxy.py`, its allowlist naming the
upstream) each run in their own process, as the daemon and a server would; the client is a blocking
socket, as a confined command's would be. Measured, interleaved: a GET on a fresh connection direct,
the same through the proxy as an absolute-form request, through a CONNECT tunnel, and GETs on one
kept-alive connection direct and through the proxy (which opens a fresh upstream connection for each).
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

_UPSTREAM = r"""
import asyncio
async def handle(reader, writer):
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nhello")
            await writer.drain()
            if b"connection: close" in head.lower():
                break
    except Exception:
        pass
    writer.close()
async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await asyncio.Event().wait()
asyncio.run(main())
"""

_PROXY = r"""
import asyncio, socket, sys
from dsh_daemon.sandbox.proxy import EgressProxy
async def resolver(host, port):
    return ["127.0.0.1"]
async def main():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    proxy = await EgressProxy.start(
        sock, [f"web.test:{sys.argv[1]}"], resolver=resolver, allow_private_upstreams=True
    )
    print(proxy.port, flush=True)
    await asyncio.Event().wait()
asyncio.run(main())
"""


def _start(code: str, *args: str) -> tuple[subprocess.Popen[str], int]:
    process = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    return process, int(process.stdout.readline())


def _read_response(sock: socket.socket) -> None:
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, body = data.split(b"\r\n\r\n", 1)
    while len(body) < 5:
        body += sock.recv(65536)
    assert head.startswith(b"HTTP/1.1 200") and body == b"hello", data


def _fresh(port: int, request: bytes) -> float:
    started = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(request)
        _read_response(sock)
    return time.perf_counter() - started


def _tunnelled(port: int, upstream: int) -> float:
    started = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(f"CONNECT web.test:{upstream} HTTP/1.1\r\n\r\n".encode())
        data = b""
        while b"\r\n\r\n" not in data:
            data += sock.recv(4096)
        sock.sendall(b"GET / HTTP/1.1\r\nHost: web.test\r\nConnection: close\r\n\r\n")
        _read_response(sock)
    return time.perf_counter() - started


def _kept_alive(port: int, request: bytes, count: int) -> list[float]:
    times = []
    with socket.create_connection(("127.0.0.1", port)) as sock:
        for _ in range(count):
            started = time.perf_counter()
            sock.sendall(request)
            _read_response(sock)
            times.append(time.perf_counter() - started)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=500)
    args = parser.parse_args()
    upstream, upstream_port = _start(_UPSTREAM)
    proxy, proxy_port = _start(_PROXY, str(upstream_port))
    try:
        direct = b"GET /x HTTP/1.1\r\nHost: web.test\r\nConnection: close\r\n\r\n"
        proxied = f"GET http://web.test:{upstream_port}/x HTTP/1.1\r\nConnection: close\r\n\r\n".encode()
        runs: dict[str, list[float]] = {"direct": [], "proxy": [], "tunnel": []}
        measure: dict[str, Callable[[], float]] = {
            "direct": lambda: _fresh(upstream_port, direct),
            "proxy": lambda: _fresh(proxy_port, proxied),
            "tunnel": lambda: _tunnelled(proxy_port, upstream_port),
        }
        for _ in range(20):  # warm up both processes
            for run in measure.values():
                run()
        for _ in range(args.requests):
            for name, run in measure.items():
                runs[name].append(run())
        kept_direct = _kept_alive(upstream_port, direct.replace(b"Connection: close\r\n", b""), args.requests)
        kept_proxy = _kept_alive(proxy_port, proxied.replace(b"Connection: close\r\n", b""), args.requests)
    finally:
        upstream.kill()
        proxy.kill()

    def line(label: str, times: list[float], base: list[float] | None) -> str:
        median = statistics.median(times) * 1000
        p90 = statistics.quantiles(times, n=10)[-1] * 1000
        text = f"  {label:34} median {median:6.3f} ms  p90 {p90:6.3f} ms"
        if base is not None:
            base_median = statistics.median(base) * 1000
            text += f"  (+{median - base_median:.3f} ms, {median / base_median:.1f}x baseline)"
        return text

    print(f"a 5-byte GET, {args.requests} of each, interleaved:")
    print(line("direct, fresh connection (baseline)", runs["direct"], None))
    print(line("proxy, absolute-form GET", runs["proxy"], runs["direct"]))
    print(line("proxy, CONNECT then GET", runs["tunnel"], runs["direct"]))
    print(line("direct, kept-alive (baseline)", kept_direct, None))
    print(line("proxy, kept-alive", kept_proxy, kept_direct))


if __name__ == "__main__":
    main()
