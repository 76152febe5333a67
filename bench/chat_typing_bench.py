"""Terminal chat benchmark: how long a typed key takes to show while a reply streams and ends.

    .venv/bin/python -m bench.chat_typing_bench [--keys N]

The real `dsh-daemon chat` runs in a tmux pane (110x36) against the fake provider on 127.0.0.1,
exactly as tests/chat drives it. A key is sent with `tmux send-keys` and the pane is read until it
shows; the time between is the echo latency a person feels. Scenarios, each in the same run:

1. idle: no reply streaming (the baseline: tmux, the pty and prompt_toolkit themselves);
2. big reply: a 200 KB reply streamed in ~140-byte deltas, 5 ms apart (goal: p95 <= 50 ms, issue 38.6);
3. burst: 5,000 short deltas at once (goal: p95 <= 50 ms);
4. reply end: keys typed all through a 200 KB reply until a second after the turn is idle; the worst
   key sent from a second before the end on (the finished reply's markdown is rendered then);
5. Enter -> idle: Enter on a prompt whose reply is 200 KB (sent at once) until the status line says
   idle and the rendered reply is printed above the input line (issue 38.6: not slower than 1.57 s);
6. Esc -> cancelled: Esc while a reply streams until "[cancelled" is on the screen (issue 38.1:
   within 100 ms), several times in one chat, with the time of each stage on the way (the key read,
   the chat's Esc binding, `dsh/cancel` written and handled, the turn end logged, committed and
   sent, the provider's response closed, the chat's handling and painting), taken by
   bench/esc_trace/sitecustomize.py in both processes; the idle echo is its baseline.

Figures are printed, never asserted: tests do not time things. Each key is a fresh letter typed at
the end of the input line; the pane is polled every 2 ms. The machine's load averages are printed
with them (a loaded machine's figures say less).
"""

from __future__ import annotations

import argparse
import os
import statistics
import string
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.chat.screen import Screen, endless
from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.harness import daemon_env

GOAL_MS = 50.0
ENTER_IDLE_BEFORE_S = 1.57  # issue 38, turn 3's figure
ESC_GOAL_MS = 100.0
END_WORD = "THE-END"


def big_reply() -> list[str]:
    """~200 KB of prose in 1,450 deltas: 5 lines of ~140 characters per paragraph line break."""
    pieces = [f"word{n % 97} " * 20 + ("\n" if n % 5 == 4 else "") for n in range(1450)]
    return [*pieces, f"\n\n{END_WORD}\n"]


def _poll(chat: Screen, test: Callable[[str], bool], limit_s: float = 30) -> float:
    """Seconds until the visible screen passes `test` (inf past `limit_s`)."""
    start = time.perf_counter()
    while True:
        if test(chat.screen()):
            return time.perf_counter() - start
        if time.perf_counter() - start > limit_s:
            return float("inf")
        time.sleep(0.002)


def _echo_ms(chat: Screen, typed: str, key: str) -> float:
    chat.type(key)
    expected = "› " + typed + key
    return 1000 * _poll(
        chat, lambda s: any(row.rstrip().endswith(expected) for row in s.splitlines()), limit_s=10
    )


def _idle(screen: str) -> bool:
    return "● idle" in screen


@contextmanager
def _chat(reply: Reply | None, env: dict[str, str] | None = None) -> Iterator[Screen]:
    with FakeDeepSeek(default=reply) as fake, tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp)
        chat = Screen(
            path, {**daemon_env(path / "state", fake), **(env or {})}, ["--no-thinking", "chat"], cwd=path
        )
        try:
            chat.wait(lambda s: "›" in s and _idle(s), whole=False)
            yield chat
        finally:
            chat.close()


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


def _typing(reply: Reply | None, keys: int) -> list[float]:
    with _chat(reply) as chat:
        if reply is not None:
            chat.type("go")
            chat.keys("Enter")
            chat.wait(lambda s: "running" in s, whole=False)
            time.sleep(0.3)  # well into the stream
        return _measure(chat, keys)


def _reply_end(reply: Reply) -> tuple[float, int, float]:
    """(worst echo ms of the keys sent from 1 s before the turn went idle on, how many, the p95 of all
    keys typed through the reply)."""
    with _chat(reply) as chat:
        chat.type("go")
        chat.keys("Enter")
        chat.wait(lambda s: "running" in s, whole=False)
        typed = ""
        sent: list[tuple[float, float]] = []  # (when sent, echo ms)
        idle_at: float | None = None
        index = 0
        while idle_at is None or time.perf_counter() - idle_at < 1.0:
            if len(typed) >= 60:
                chat.keys("C-u")
                typed = ""
                time.sleep(0.05)
            key = string.ascii_lowercase[index % 26]
            index += 1
            when = time.perf_counter()
            sent.append((when, _echo_ms(chat, typed, key)))
            typed += key
            if idle_at is None and _idle(chat.screen()):
                idle_at = time.perf_counter()
            time.sleep(0.03)
        around = [ms for when, ms in sent if when >= idle_at - 1.0]
        everything = sorted(ms for _, ms in sent)
        return max(around), len(around), everything[max(0, int(len(everything) * 0.95) - 1)]


def _enter_to_idle(reply: Reply) -> float:
    with _chat(reply) as chat:
        chat.type("go")
        start = time.perf_counter()
        chat.keys("Enter")
        _poll(chat, lambda s: "running" in s)
        _poll(chat, lambda s: _idle(s) and _printed(s))
        return time.perf_counter() - start


def _printed(screen: str) -> bool:
    """The finished reply printed above the input line (the live area, "… N more lines" over the
    reply's tail, is gone)."""
    rows = [row.rstrip() for row in screen.splitlines() if row.strip()]
    return "more line" not in screen and len(rows) > 3 and rows[-3] == END_WORD and rows[-2].startswith("›")


STAGES = (
    "esc_read",
    "esc_handler",
    "cancel_written",
    "cancel_received",
    "turn_end_logged",
    "turn_end_committing",
    "turn_end_committed",
    "stream_closed",
    "turn_end_sent",
    "message_received",
    "turn_end_received",
    "cancelled_printed",
    "render_start",
    "render_done",
    "cancelled_written",
)  # bench/esc_trace/sitecustomize.py says where each is taken


def _esc_to_cancelled(tries: int) -> list[dict[str, float]]:
    """Esc during a reply that never ends, until "[cancelled" is on the screen, `tries` times in one
    chat (each turn cancelled, then a new one started): per try, ms from the key (`tmux send-keys`
    called) to each stage the tracer saw and to `seen` (the pane shows it)."""
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp, "trace")
        env = {"DSH_BENCH_TRACE": str(trace), "PYTHONPATH": str(Path(__file__).parent / "esc_trace")}
        # ~15 s of deltas 5 ms apart, then a stall: the Esc comes while the reply streams
        pieces = [f"word{n} " * 5 + ("\n" if n % 8 == 7 else "") for n in range(3000)]
        reply = Reply.stream(text_stream(pieces)[:-2], delay=0.005, tail="stall")
        with _chat(reply, env) as chat:
            out = []
            for attempt in range(tries):
                chat.type(f"go {attempt}")
                chat.keys("Enter")
                chat.wait(lambda s: "running" in s, whole=False)
                time.sleep(0.5)  # well into the stream
                trace.write_text("")
                start = time.monotonic_ns()
                chat.keys("Escape")
                seen = _poll(chat, _just_cancelled)
                stamps: dict[str, float] = {}
                time.sleep(0.2)  # the stream's close may come after the screen says so
                for line in trace.read_text().splitlines():
                    when, stage = line.split()
                    stamps.setdefault(stage, (int(when) - start) / 1e6)
                stamps["seen"] = 1000 * seen
                out.append(stamps)
                chat.wait(lambda s: _idle(s), whole=False)
            return out


def _just_cancelled(screen: str) -> bool:
    """ "[cancelled" right above the input line (an earlier turn's is above that turn's reply)."""
    rows = [row for row in screen.splitlines() if row.strip()]
    prompt = next((i for i in range(len(rows) - 1, -1, -1) if rows[i].startswith("›")), 0)
    return any("[cancelled" in row for row in rows[max(0, prompt - 3) : prompt])


def _esc_report(tries: list[dict[str, float]], idle: list[float]) -> list[str]:
    lines = []
    for stage in (*STAGES, "seen"):
        figures = [t[stage] for t in tries if stage in t]
        if figures:
            lines.append(
                f"  {stage:<18} {statistics.median(figures):7.1f} ms (median from the key; "
                f"{min(figures):.1f}-{max(figures):.1f})"
            )
    seen = [t["seen"] for t in tries]
    lines.append(
        f"Esc->cancel  seen p50 {statistics.median(seen):.0f} ms, max {max(seen):.0f} ms over {len(seen)} tries"
        f" ({statistics.median(seen) / max(statistics.median(idle), 0.1):.1f}x idle echo p50 of"
        f" {statistics.median(idle):.1f} ms); goal <= {ESC_GOAL_MS:.0f} ms: "
        f"{'met' if max(seen) <= ESC_GOAL_MS else 'NOT met'}"
    )
    return lines


def _p95(figures: list[float]) -> float:
    return sorted(figures)[max(0, int(len(figures) * 0.95) - 1)]


def _line(name: str, figures: list[float], baseline: list[float] | None) -> str:
    p50, p95 = statistics.median(figures), _p95(figures)
    ratio = f" ({p95 / max(_p95(baseline), 0.1):.1f}x idle p95)" if baseline else ""
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
    parser.add_argument("--esc-tries", type=int, default=8)
    parser.add_argument(
        "--only",
        default="reply,burst,end,enter,esc",
        help="the scenarios after the idle baseline (comma-separated; default: all)",
    )
    args = parser.parse_args()
    only = set(args.only.split(","))
    print("load averages (1, 5, 15 min): {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()), flush=True)
    big = big_reply()
    print(f"reply size: {sum(map(len, big)) / 1000:.0f} KB in {len(big)} deltas", flush=True)
    idle = _typing(None, args.keys)
    print(_line("idle", idle, None), flush=True)
    if "reply" in only:
        streaming = _typing(Reply.stream(text_stream(big), delay=0.005), args.keys)
        print(_line("big reply", streaming, idle), flush=True)
    if "burst" in only:
        burst = _typing(endless([f"t{n} " for n in range(5000)]), args.keys)
        print(_line("burst", burst, idle), flush=True)
    if "end" in only:
        worst, count, p95 = _reply_end(Reply.stream(text_stream(big), delay=0.002))
        print(
            f"reply end    worst echo {worst:7.1f} ms of {count} keys from 1 s before idle on"
            f" ({worst / max(_p95(idle), 0.1):.1f}x idle p95; all keys through the reply: p95 {p95:.1f} ms)"
            f"  goal <= {GOAL_MS:.0f} ms: {'met' if worst <= GOAL_MS else 'NOT met'}",
            flush=True,
        )
    if "enter" in only:
        enter = _enter_to_idle(Reply.stream(text_stream(big)))
        print(
            f"Enter->idle  {enter:.2f} s for the 200 KB reply (turn 3: {ENTER_IDLE_BEFORE_S} s):"
            f" {'not slower' if enter <= ENTER_IDLE_BEFORE_S else 'SLOWER'}",
            flush=True,
        )
    if "esc" in only:
        for line in _esc_report(_esc_to_cancelled(args.esc_tries), idle):
            print(line, flush=True)
    print("load averages (1, 5, 15 min): {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()), flush=True)


if __name__ == "__main__":
    sys.exit(main())
