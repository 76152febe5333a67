"""MCP tool results of 5, 10, 20 and 100 MB from a stdio server (issue 18 item 4). Every figure is
printed beside a baseline from the same run: the same bytes read raw from the same server's pipe.

    .venv/bin/python -m bench.mcp_bench [--sizes 5,10,20,100] [--sdk-timeout 120]

For each size, seconds from `tools/call` to its result:
- `sdk`: the `mcp` SDK's `stdio_client` (what the daemon used before): its reader joins its whole
  buffer to every chunk, so the cost grows with the square of the size (given up after
  `--sdk-timeout` seconds);
- `dsh`: the daemon's transport (`dsh_daemon/mcp/stdio.py`) with the default 16 MiB cap (a larger
  result is cut with a marker, so its cost stops growing with the result);
- `dsh uncapped`: the same transport with the cap above the size, reading the whole message (linear);
- `raw pipe`: reading the server's bytes and finding the newline, nothing more (the baseline).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SERVER = ROOT / "tests" / "mcp" / "hostile_server.py"
MB = 1024 * 1024


async def with_session(open_transport: Callable[[], Any], size: int) -> float:
    from mcp import ClientSession

    async with open_transport() as streams:
        read, write = streams[0], streams[1]
        async with ClientSession(read, write) as session:
            await session.initialize()
            start = time.perf_counter()
            result = await session.call_tool("big", {"size": size})
            took = time.perf_counter() - start
            assert result.content, result
            return took


async def sdk(size: int) -> float:
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=[str(SERVER)])
    return await with_session(lambda: stdio_client(params), size)


async def dsh(size: int, max_bytes: int) -> float:
    from dsh_daemon.mcp.monitor import ProtocolMonitor
    from dsh_daemon.mcp.stdio import stdio_transport

    return await with_session(
        lambda: stdio_transport(
            sys.executable, [str(SERVER)], {}, None, max_bytes=max_bytes, monitor=ProtocolMonitor("bench")
        ),
        size,
    )


async def raw_pipe(size: int) -> float:
    """The server's bytes for one `big` answer, read from its pipe until the newline."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(SERVER), stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert proc.stdin is not None and proc.stdout is not None
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "big", "arguments": {"size": size}},
    }
    start = time.perf_counter()
    proc.stdin.write(json.dumps(call).encode() + b"\n")
    await proc.stdin.drain()
    while True:
        chunk = await proc.stdout.read(1 << 16)
        if not chunk or chunk.endswith(b"\n") or b"\n" in chunk:
            break
    took = time.perf_counter() - start
    proc.stdin.close()
    await proc.wait()
    return took


async def timed(label: str, run: Callable[[], Awaitable[float]], limit: float) -> float | None:
    try:
        return await asyncio.wait_for(run(), limit)
    except TimeoutError:
        print(f"  {label}: gave up after {limit:.0f} s")
        return None


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="5,10,20,100")
    parser.add_argument("--sdk-timeout", type=float, default=120.0)
    args = parser.parse_args()
    print(
        f"{'size':>7}  {'raw pipe':>9}  {'sdk':>9}  {'dsh':>9}  {'dsh uncapped':>13}  sdk/raw  dsh/raw  uncapped/raw"
    )
    for size_mb in (int(s) for s in args.sizes.split(",")):
        size = size_mb * MB
        base = await raw_pipe(size)
        before = await timed(f"sdk {size_mb} MB", lambda size=size: sdk(size), args.sdk_timeout)  # type: ignore[misc]
        capped = await dsh(size, 16 * MB)
        whole = await dsh(size, size + MB)
        shown = f"{before:8.2f}s" if before is not None else f"  >{args.sdk_timeout:.0f}s"
        ratio = f"{before / base:7.1f}" if before is not None else "      -"
        print(
            f"{size_mb:>5}MB  {base:8.2f}s  {shown}  {capped:8.2f}s  {whole:12.2f}s  {ratio}  "
            f"{capped / base:7.1f}  {whole / base:12.1f}"
        )


if __name__ == "__main__":
    asyncio.run(main())
