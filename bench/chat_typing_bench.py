"""Terminal chat benchmark: how long a typed key takes to show while a reply streams.

    .venv/bin/python -m bench.chat_typing_bench [--keys N]

The real `dsh-daemon chat` runs in a tmux pane (110x36) against the fake provider on 127.0.0.1,
exactly as tests/chat drives it. A key is sent with `tmux send-keys` and the pane is read until it
shows; the time between is the echo latency a person feels. Scenarios, each in the same run:

1. idle: no reply streaming (the baseline: tmux, the pty and prompt_toolkit themselves);
2. big reply: a 200 KB reply streamed in 200-byte deltas, 5 ms apart (goal: p95 <= 50 ms, issue 38.6);
3. burst: 5,000 short deltas at once (goal: p95 <= 50 ms).

Figures are printed, never asserted: tests do not time things. Each key is a fresh letter typed at
the end of the input line; the pane is polled every 2 ms.
"""

from __future__ import annotations

import argparse
import statistics
import string
import sys
import tempfile
import time
from pathlib import Path

from tests.chat.screen import Screen, endless
from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.harness import daemon_env

GOAL_MS = 50.0


def _echo_ms(chat: Screen, typed: str, key: str) -> float:
    start = time.perf_counter()
    chat.type(key)
    expected = "› " + typed + key
    while True:
        if any(row.rstrip().endswith(expected) for row in chat.screen().splitlines()):
            return (time.perf_counter() - start) * 1000
        if time.perf_counter() - start > 10:
            return float("inf")
        time.sleep(0.002)


def _measure(chat: Screen, keys: int) -> list[float]:
    typed = ""
    out = []
    for index in range(keys):
        key = string.ascii_lowercase[index % 26]
        out.append(_echo_ms(chat, typed, key))
        typed += key
        time.sleep(0.03)  # a fast typist
    chat.keys("C-u")
    return out


def _scenario(name: str, reply: Reply | None, keys: int) -> list[float]:
    with FakeDeepSeek() as fake, tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp)
        if reply is not None:
            fake.script(reply)
        chat = Screen(path, daemon_env(path / "state", fake), ["chat"], cwd=path)
        try:
            chat.wait(lambda s: "›" in s, whole=False)
            if reply is not None:
                chat.type("go")
                chat.keys("Enter")
                chat.wait(lambda s: "running" in s, whole=False)
                time.sleep(0.3)  # well into the stream
            return _measure(chat, keys)
        finally:
            chat.close()


def _line(name: str, figures: list[float], baseline: list[float] | None) -> str:
    p50 = statistics.median(figures)
    p95 = sorted(figures)[max(0, int(len(figures) * 0.95) - 1)]
    ratio = (
        f" ({p95 / max(sorted(baseline)[int(len(baseline) * 0.95) - 1], 0.1):.1f}x idle p95)"
        if baseline
        else ""
    )
    goal = (
        ""
        if baseline is None
        else f"  goal p95 <= {GOAL_MS:.0f} ms: {'met' if p95 <= GOAL_MS else 'NOT met'}"
    )
    return f"{name:<12} echo p50 {p50:7.1f} ms  p95 {p95:7.1f} ms  max {max(figures):7.1f} ms{ratio}{goal}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--keys", type=int, default=40)
    args = parser.parse_args()
    big = [f"word{n % 97} " * 20 + ("\n" if n % 5 == 4 else "") for n in range(1000)]  # ~200 KB
    idle = _scenario("idle", None, args.keys)
    print(_line("idle", idle, None), flush=True)
    streaming = _scenario("big reply", Reply.stream(text_stream(big), delay=0.005), args.keys)
    print(_line("big reply", streaming, idle), flush=True)
    burst = _scenario("burst", endless([f"t{n} " for n in range(5000)]), args.keys)
    print(_line("burst", burst, idle), flush=True)


if __name__ == "__main__":
    sys.exit(main())
