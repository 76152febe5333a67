"""Stdio for a front end: stdout carries the protocol only, logs go to stderr (or a file).

fd 1 is moved to a private descriptor for the protocol and stderr is put in its place, so a stray
print, a C extension or a child process can never write into the protocol stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Callable
from typing import BinaryIO


def protect_stdout() -> BinaryIO:
    """Return a private binary stream for the protocol; fd 1 and sys.stdout become stderr."""
    sys.stdout.flush()
    proto_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(proto_fd, "wb", buffering=0)


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
