"""A client that falls behind (issue 40.1, protocol.md §7): the real daemon over real pipes, fed by a
timestamping SSE provider on loopback. Each figure is printed beside its same-run baseline and its goal.

    .venv/bin/python -m bench.coalesce_bench [--runs N] [--rate N] [--deltas N] [--burst N] [--cost-ms X]

1. added latency at model speed: provider SSE write -> client `assistant/delta`, `--deltas` deltas
   at `--rate` deltas/s read by a client that keeps up, vs the same stream read raw off the socket
   in this process (goals: added p50 < 1 ms, p99 < 5 ms);
2. a `--burst`-delta burst at full speed read by a client that spends `--cost-ms` per notification
   (as an editor decoding and re-highlighting each one): the notifications it gets and their rate vs
   what it can drain (goal: no more than it drains), and when the whole reply has reached it vs the
   soonest it could at one notification per delta (the daemon before this change: baseline).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.server_bench import (
    INIT,
    ROOT,
    Peer,
    SseProvider,
    base_env,
    daemon_argv,
    deltas_of,
    pct,
    raw_socket_latency,
    spread,
    turn,
)


class SlowReader:
    """The daemon spoken to in LSP frames from a thread that spends `cost_s` on each delta it reads
    (a blocking sleep: the provider, on this process's event loop, keeps streaming meanwhile)."""

    def __init__(self, env: dict[str, str], cost_s: float) -> None:
        self.proc = subprocess.Popen(
            daemon_argv(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env=env, cwd=ROOT,
        )  # fmt: skip
        self.cost_s = cost_s
        self.messages: list[tuple[float, dict[str, Any]]] = []
        self.changed = threading.Condition()
        self._ids = 0
        self._scanned = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            length = None
            while True:
                line = out.readline()
                if not line:
                    return
                if line == b"\r\n":
                    break
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            assert length is not None
            message = json.loads(out.read(length))
            params = message.get("params") or {}
            if params.get("type") == "assistant/delta":
                time.sleep(self.cost_s)  # decoding it, drawing it
            with self.changed:
                self.messages.append((time.perf_counter(), message))
                self.changed.notify_all()

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        body = json.dumps(message).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def _wait(self, predicate: Any) -> dict[str, Any]:
        """The first message from now on that `predicate` accepts (each message looked at once)."""
        with self.changed:
            seen = self._scanned
            while True:
                while seen < len(self.messages):
                    message = self.messages[seen][1]
                    seen += 1
                    if predicate(message):
                        return message
                self.changed.wait(60)

    async def call(self, method: str, params: Any) -> Any:
        self._ids += 1
        msg_id = self._ids
        self._scanned = len(self.messages)  # the answer cannot have come before the request
        self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        answer = await asyncio.to_thread(self._wait, lambda m: m.get("id") == msg_id and "method" not in m)
        return answer["result"]

    async def turn_end(self) -> None:
        """Until the next `turn/end` from the last request on."""
        await asyncio.to_thread(self._wait, lambda m: (m.get("params") or {}).get("type") == "turn/end")

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


async def model_speed(tmp: Path, provider: SseProvider, args: argparse.Namespace) -> None:
    env = base_env(tmp / "state-model", f"http://127.0.0.1:{provider.port}")
    peer = await Peer.spawn(daemon_argv(), env)
    await peer.call("initialize", {**INIT, "initializationOptions": {"thinking": False}})
    peer.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    sid = (await peer.call("dsh/session/new", {"cwd": str(tmp)}))["sessionId"]
    p50, p99, base_p50, base_p99, per_delta = [], [], [], [], []
    for _ in range(args.runs):
        provider.deltas, provider.interval = args.deltas, 1 / args.rate
        provider.writes.clear()
        mark = len(peer.messages)
        await turn(peer, sid, "model speed")
        received = deltas_of(peer, mark)
        lat = [stamp - provider.writes[i] for stamp, i in received]
        notifications = sum(
            1 for _, m, _ in peer.messages[mark:] if (m.get("params") or {}).get("type") == "assistant/delta"
        )
        per_delta.append(notifications / len(received))
        base = await raw_socket_latency(provider, args.deltas)
        p50.append(pct(lat, 0.5))
        p99.append(pct(lat, 0.99))
        base_p50.append(pct(base, 0.5))
        base_p99.append(pct(base, 0.99))
    await peer.close()
    added50 = [a - b for a, b in zip(p50, base_p50, strict=True)]
    added99 = [a - b for a, b in zip(p99, base_p99, strict=True)]
    print(
        f"1. model speed: {args.deltas} deltas at {args.rate:g} deltas/s, a client that keeps up, {args.runs} rounds:"
    )
    print(f"  SSE write -> client assistant/delta: p50 {spread(p50, digits=2)}, p99 {spread(p99, digits=2)}")
    print(
        f"  baseline, the same stream read raw off the socket: p50 {spread(base_p50, digits=2)}, p99 {spread(base_p99, digits=2)}"
    )
    print(
        f"  added: p50 {spread(added50, digits=2)} (goal < 1 ms), p99 {spread(added99, digits=2)} (goal < 5 ms)"
    )
    print(f"  notifications per delta: {spread(per_delta, 1, '', 3)} (one per delta, as before: 1.000)")


async def burst(tmp: Path, provider: SseProvider, args: argparse.Namespace) -> None:
    env = base_env(tmp / "state-burst", f"http://127.0.0.1:{provider.port}")
    cost = args.cost_ms / 1000
    reader = SlowReader(env, cost)
    await reader.call("initialize", {**INIT, "initializationOptions": {"thinking": False}})
    reader.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    sid = (await reader.call("dsh/session/new", {"cwd": str(tmp)}))["sessionId"]
    counts, rates, whole, drains = [], [], [], []
    for _ in range(args.runs):
        provider.deltas, provider.interval = args.burst, 0.0
        provider.writes.clear()
        mark = len(reader.messages)
        await reader.call("dsh/followup", {"sessionId": sid, "message": {"content": "burst"}})
        await reader.turn_end()
        got = [
            (stamp, m["params"]["data"]["delta"]["text"])
            for stamp, m in reader.messages[mark:]
            if (m.get("params") or {}).get("type") == "assistant/delta"
        ]
        numbers = [int(word[1:]) for _, text in got for word in text.split()]
        assert numbers == list(range(args.burst)), "the reply did not arrive whole and in order"
        first_write = min(provider.writes.values())
        span = max(got[-1][0] - got[0][0], 1e-9)
        counts.append(len(got))
        rates.append(len(got) / span)
        whole.append(got[-1][0] - first_write)
        # what the reader's own handling of the notifications it got took (the rest is waiting)
        drains.append(len(got) * cost / span)
    reader.close()
    capacity = 1 / cost
    print(
        f"2. a {args.burst:,}-delta burst at full speed, the client spending {args.cost_ms:g} ms per notification "
        f"(it drains at most {capacity:,.0f}/s), {args.runs} rounds:"
    )
    print(
        f"  notifications: {spread(counts, 1, '', 0)} for {args.burst:,} deltas "
        f"(baseline, one per delta as before: {args.burst:,})"
    )
    print(
        f"  notifications/s during the burst: {spread(rates, 1, '/s')} "
        f"(goal <= {capacity:,.0f}/s, what the client drains); its busy share {spread(drains, 100, '%')}"
    )
    print(
        f"  the whole reply reached the client after {spread(whole, digits=0)}; at one notification per delta "
        f"it could not before {args.burst * cost * 1e3:,.0f} ms (baseline)"
    )


async def main_async(args: argparse.Namespace) -> None:
    provider = SseProvider()
    await provider.start()
    with tempfile.TemporaryDirectory(prefix="dsh-bench-") as tmp:
        await model_speed(Path(tmp), provider, args)
        await burst(Path(tmp), provider, args)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--rate", type=float, default=50.0, help="model speed, deltas/s")
    parser.add_argument("--deltas", type=int, default=200, help="deltas per model-speed round")
    parser.add_argument("--burst", type=int, default=5000)
    parser.add_argument("--cost-ms", type=float, default=0.5, help="the slow client's time per notification")
    args = parser.parse_args()
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
