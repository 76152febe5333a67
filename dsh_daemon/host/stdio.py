"""Stdio for a front end: stdout carries the protocol only, logs go to stderr (or a file).

fd 1 is moved to a private descriptor for the protocol and stderr is put in its place, so a stray
print, a C extension or a child process can never write into the protocol stream.

Every write to that descriptor hands over all its bytes (`WholeWrites`): write(2) on a pipe may
take only part of them when a signal reaches the daemon while it waits for the client to read (a
stop and continue: Ctrl-Z, a debugger attaching, a frozen container), and a frame cut short makes
the client read the next frame's header as the rest of its body, for the rest of the connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import os
import select
import signal
import sys
from collections.abc import Callable
from typing import Any, BinaryIO


class WholeWrites(io.FileIO):
    """An unbuffered file whose `write` returns only once every byte is written. `io.FileIO.write`
    is one write(2): on a pipe whose reader is behind, a signal that comes while it waits for room
    (SIGSTOP then SIGCONT included) ends it with what fit, and on a non-blocking descriptor it
    takes what fits now (None when nothing does); the rest is written here, waiting for room."""

    def write(self, data: Any, /) -> int:  # any buffer, as FileIO's (its stub type is typeshed's own)
        view = memoryview(data).cast("B")
        written = 0
        while written < len(view):
            count = super().write(view[written:])
            if count is None:  # non-blocking and full: wait for the reader
                select.select([], [self.fileno()], [])
                continue
            written += count
        return written


def protect_stdout() -> BinaryIO:
    """Return a private binary stream for the protocol; fd 1 and sys.stdout become stderr."""
    sys.stdout.flush()
    proto_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return WholeWrites(proto_fd, "wb")


def configure_logging(level: str, log_file: str | None) -> logging.Handler:
    """The root logger writes to stderr (or `log_file`) only; returns the handler for filters."""
    handler: logging.Handler = (
        logging.FileHandler(log_file) if log_file else logging.StreamHandler(sys.stderr)
    )
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    return handler


def stop_on_signals(stop: Callable[[], None]) -> None:
    """SIGTERM (an editor giving up on a graceful exit) and SIGINT (Ctrl-C in a terminal) end the
    input like EOF: running turns end aborted{shutdown}, the queue stays parked, the log is flushed,
    and the process exits 0. A second signal while that runs changes nothing."""
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signum, stop)
