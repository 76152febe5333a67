"""Provider adapter benchmark against the fake DeepSeek server on loopback.

1. Throughput: deltas/s the adapter parses from one large stream served at full speed, next to the
   same bytes read raw by httpx in the same run (the ratio is the adapter's share of the raw speed).
2. Added latency: from the first SSE byte reaching the adapter's HTTP transport to the first delta
   the adapter yields (median and p95 over many short streams).

Run: `.venv/bin/python bench/provider_bench.py [--deltas N] [--runs R] [--latency-runs L]`.
Prints results only; nothing here asserts on time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from dsh_daemon.llm.config import ProviderConfig  # noqa: E402
from dsh_daemon.llm.deepseek import DeepSeekProvider  # noqa: E402
from dsh_daemon.model.jsonvalue import freeze_json  # noqa: E402
from dsh_daemon.model.messages import UserMessage  # noqa: E402
from dsh_daemon.model.provider import Finish, ModelRequest  # noqa: E402
from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream, wire  # noqa: E402

KEY = "sk-bench-not-a-real-key"
REQUEST = ModelRequest(
    freeze_json({"provider": "deepseek", "model": "deepseek-v4-flash", "thinking": False}),
    None,
    (),
    (UserMessage.create("bench"),),
)


class FirstByteTransport(httpx.AsyncBaseTransport):
    """Wraps the real transport and notes when each response's first body bytes arrive."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.first_byte: float | None = None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        self.first_byte = None
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=_TimedStream(self, response.stream),  # type: ignore[arg-type]
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


class _TimedStream(httpx.AsyncByteStream):
    def __init__(self, owner: FirstByteTransport, inner: httpx.AsyncByteStream) -> None:
        self.owner = owner
        self.inner = inner

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.inner:
            if self.owner.first_byte is None and chunk:
                self.owner.first_byte = time.perf_counter()
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


async def adapter_run(provider: DeepSeekProvider) -> tuple[int, float]:
    deltas = 0
    start = time.perf_counter()
    async with contextlib.aclosing(provider.stream(REQUEST)) as stream:  # type: ignore[type-var]
        async for event in stream:
            if isinstance(event, Finish):
                break
            deltas += 1
    return deltas, time.perf_counter() - start


async def raw_run(client: httpx.AsyncClient, url: str) -> tuple[int, float]:
    received = 0
    start = time.perf_counter()
    async with client.stream("POST", url, content=b"{}", headers={"accept-encoding": "identity"}) as response:
        async for chunk in response.aiter_raw():
            received += len(chunk)
    return received, time.perf_counter() - start


async def throughput(fake: FakeDeepSeek, n_deltas: int, runs: int) -> None:
    pieces = [f"tok{i} " for i in range(n_deltas)]
    body = wire(text_stream(pieces))
    provider = DeepSeekProvider(ProviderConfig(base_url=fake.base_url, api_key=KEY))
    adapter_times: list[float] = []
    raw_times: list[float] = []
    async with httpx.AsyncClient(timeout=60.0, trust_env=False) as client:
        for _ in range(runs):  # interleaved, so both see the same machine state
            fake.script(Reply.stream(body))
            count, seconds = await adapter_run(provider)
            assert count == n_deltas, count  # a wrong parse would make the number meaningless
            adapter_times.append(seconds)
            fake.script(Reply.stream(body))
            size, seconds = await raw_run(client, f"{fake.base_url}/chat/completions")
            assert size == len(body), size
            raw_times.append(seconds)
    await provider.aclose()
    adapter_s, raw_s = statistics.median(adapter_times), statistics.median(raw_times)
    print(f"throughput: {n_deltas} deltas, {len(body) / 1e6:.2f} MB of SSE, median of {runs} runs")
    print(f"  adapter: {n_deltas / adapter_s:12,.0f} deltas/s  ({adapter_s * 1000:8.1f} ms)")
    print(
        f"  raw httpx: {n_deltas / raw_s:10,.0f} deltas/s  ({raw_s * 1000:8.1f} ms, same bytes, no parsing)"
    )
    print(f"  ratio adapter/raw: {raw_s / adapter_s:.2f}  (1.00 = the adapter costs nothing over reading)")


async def latency(fake: FakeDeepSeek, runs: int) -> None:
    transport = FirstByteTransport()
    provider = DeepSeekProvider(ProviderConfig(base_url=fake.base_url, api_key=KEY), transport=transport)
    lines = text_stream(["Hi", " there"])[1:]  # the first event already carries content
    samples: list[float] = []
    for _ in range(runs):
        fake.script(Reply.stream(lines))
        stream = provider.stream(REQUEST)
        await anext(stream)
        now = time.perf_counter()
        assert transport.first_byte is not None
        samples.append((now - transport.first_byte) * 1e6)
        async for _ in stream:
            pass
    await provider.aclose()
    samples.sort()
    p95 = samples[min(len(samples) - 1, int(len(samples) * 0.95))]
    print(f"added latency, first SSE byte -> first delta, {runs} streams:")
    print(f"  median {statistics.median(samples):8.1f} µs   p95 {p95:8.1f} µs   max {samples[-1]:8.1f} µs")


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--deltas", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--latency-runs", type=int, default=300)
    args = parser.parse_args()
    with FakeDeepSeek() as fake:
        await throughput(fake, args.deltas, args.runs)
        await latency(fake, args.latency_runs)


if __name__ == "__main__":
    asyncio.run(main())
