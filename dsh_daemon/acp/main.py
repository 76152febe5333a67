"""Serve ACP on stdio (stdout protocol lines only: `host/stdio.py`)."""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import BinaryIO

from dsh_daemon.acp.app import Daemon, Settings
from dsh_daemon.acp.rpc import Connection
from dsh_daemon.acp.transport import LineReader, LineWriter
from dsh_daemon.host.stdio import configure_logging as configure_stdio_logging
from dsh_daemon.host.stdio import protect_stdout, stop_on_signals

logger = logging.getLogger(__name__)


def configure_logging(level: str, log_file: str | None) -> None:
    configure_stdio_logging(level, log_file)


async def serve(settings: Settings, stdin: BinaryIO, stdout: BinaryIO) -> int:
    writer = LineWriter(stdout)
    connection = Connection(writer)
    daemon = Daemon(connection, settings)
    reader = LineReader(stdin)
    stop_on_signals(reader.stop)
    try:
        await connection.serve(reader)
    finally:
        # D6: running turns end aborted{shutdown}; queued prompts stay parked for the next load.
        await daemon.close()
        await connection.drain()
        writer.flush_held()  # a chunk still held leaves before the process ends
        commands = sys.modules.get("dsh_daemon.tools.proctree")
        if commands is not None:  # processes commands left running in the background die with us
            commands.kill_all()
    return 0


def run(settings: Settings) -> int:
    stdout = protect_stdout()
    return asyncio.run(serve(settings, sys.stdin.buffer, stdout))


__all__ = ["Settings", "configure_logging", "run", "serve"]
