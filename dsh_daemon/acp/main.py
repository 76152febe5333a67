"""Serve ACP on stdio: stdout carries protocol lines only, logs go to stderr (or a file).

fd 1 is moved to a private descriptor for the protocol and stderr takes its place, so a stray print,
a C extension or a child process can never write into the stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from typing import BinaryIO

from dsh_daemon.acp.handlers import Handlers, Settings
from dsh_daemon.acp.rpc import Connection
from dsh_daemon.acp.transport import LineReader, LineWriter

logger = logging.getLogger(__name__)


def protect_stdout() -> BinaryIO:
    sys.stdout.flush()
    proto_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(proto_fd, "wb", buffering=0)


def configure_logging(level: str, log_file: str | None) -> None:
    handler: logging.Handler = (
        logging.FileHandler(log_file) if log_file else logging.StreamHandler(sys.stderr)
    )
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


async def serve(settings: Settings, stdin: BinaryIO, stdout: BinaryIO) -> int:
    writer = LineWriter(stdout)
    connection = Connection(writer)
    handlers = Handlers(connection, settings)
    reader = LineReader(stdin)
    with contextlib.suppress(NotImplementedError, RuntimeError):
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, reader.stop)
    try:
        await connection.serve(reader)
    finally:
        # D6: running turns end aborted{shutdown}; queued prompts stay parked for the next load.
        await handlers.shutdown()
        await connection.drain()
        commands = sys.modules.get("dsh_daemon.tools.proctree")
        if commands is not None:  # processes commands left running in the background die with us
            commands.kill_all()
    return 0


def run(settings: Settings) -> int:
    stdout = protect_stdout()
    try:
        return asyncio.run(serve(settings, sys.stdin.buffer, stdout))
    except KeyboardInterrupt:
        return 130


__all__ = ["Settings", "configure_logging", "run", "serve"]
