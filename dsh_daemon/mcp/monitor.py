"""What an MCP server does wrong, counted per server so a chatty or broken one cannot flood the log.

A server that writes garbage on stdout (a tool printing into the protocol stream, a crashed encoder)
used to cost one traceback per line: 65,947 tracebacks (59 MB of log) in 12 s. Now:
- the first `LOG_FIRST` malformed messages of each `WINDOW_S` window are logged, one line each with a
  short sample; the rest are counted and summarised once per window ("calc: 20,000 malformed lines
  dropped in the last 10 s");
- a server that sends `FAIL_AFTER` malformed messages within one window keeps violating the protocol:
  `ProtocolViolationError`, and the connection marks it `failed` and stops it;
- its stderr is kept as a bounded tail (`StderrTail`, for `mcp/status` and error messages), never
  logged line by line.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable

log = logging.getLogger("dsh_daemon.mcp")

WINDOW_S = 10.0
LOG_FIRST = 3
FAIL_AFTER = 1_000
SAMPLE_CHARS = 120
STDERR_TAIL_CHARS = 4_000
STDERR_LINE_CHARS = 500


class ProtocolViolationError(ConnectionError):
    """The server keeps sending what is not MCP: it is stopped and marked failed."""


def sample(data: bytes | str) -> str:
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    text = " ".join(text.split())
    return text if len(text) <= SAMPLE_CHARS else text[: SAMPLE_CHARS - 1] + "…"


class ProtocolMonitor:
    """Malformed messages of one server: rate-limited logging, a summary per window, a limit."""

    def __init__(self, server: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.server = server
        self._clock = clock
        self._window_start = clock()
        self._in_window = 0
        self.total = 0

    def malformed(self, data: bytes | str, why: str) -> None:
        """Count one malformed message; raises `ProtocolViolationError` at `FAIL_AFTER` in a window."""
        self._roll()
        self._in_window += 1
        self.total += 1
        if self._in_window <= LOG_FIRST:
            log.warning("MCP server %s: malformed message dropped (%s): %s", self.server, why, sample(data))
        if self._in_window >= FAIL_AFTER:
            self.flush()
            raise ProtocolViolationError(
                f"it keeps violating the protocol: {FAIL_AFTER:,} malformed messages on its stdout "
                f"within {WINDOW_S:g} s (last: {why}: {sample(data)!r})"
            )

    def _roll(self) -> None:
        if self._clock() - self._window_start >= WINDOW_S:
            self.flush()

    def flush(self) -> None:
        """Log the summary of the current window (if anything was dropped unlogged) and start anew."""
        now = self._clock()
        if self._in_window > LOG_FIRST:
            seconds = max(1, round(now - self._window_start))
            log.warning(
                "MCP server %s: %s malformed lines dropped in the last %d s",
                self.server,
                f"{self._in_window:,}",
                seconds,
            )
        self._window_start = now
        self._in_window = 0


class StderrTail:
    """The last lines a server wrote on stderr, bounded in characters (a partial line included)."""

    def __init__(self, max_chars: int = STDERR_TAIL_CHARS) -> None:
        self._lines: deque[str] = deque()
        self._chars = 0
        self._partial = ""
        self._max = max_chars
        self.bytes_seen = 0

    def feed(self, chunk: bytes) -> None:
        self.bytes_seen += len(chunk)
        text = self._partial + chunk.decode("utf-8", "replace")
        *complete, self._partial = text.split("\n")
        self._partial = self._partial[-STDERR_LINE_CHARS:]
        for line in complete:
            self._add(line)

    def _add(self, line: str) -> None:
        line = line.rstrip("\r")
        if not line.strip():
            return
        if len(line) > STDERR_LINE_CHARS:
            line = line[: STDERR_LINE_CHARS - 1] + "…"
        self._lines.append(line)
        self._chars += len(line)
        while self._chars > self._max and len(self._lines) > 1:
            self._chars -= len(self._lines.popleft())

    def lines(self, limit: int = 20) -> list[str]:
        out = list(self._lines)[-limit:]
        if self._partial.strip():
            out.append(self._partial.rstrip("\r"))
        return out[-limit:]
