"""Serve the daemon on stdio: stdout carries the protocol only, logs go to stderr (or a file).

fd 1 is moved to a private descriptor for the protocol and stderr is put in its place, so a stray
print, a C extension or a child process can never write into the JSON-RPC stream.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import BinaryIO

from dsh_daemon.host.stdio import configure_logging as configure_stdio_logging
from dsh_daemon.host.stdio import protect_stdout, stop_on_signals
from dsh_daemon.server.app import FIRST_PRELOADED_ONLY, Daemon, Settings
from dsh_daemon.server.stdout import CoalescingWriter
from dsh_daemon.server.transport import StdinReader, read_loop

logger = logging.getLogger(__name__)


def configure_logging(level: str, log_file: str | None) -> None:
    handler = configure_stdio_logging(level, log_file)
    logging.getLogger("pygls").setLevel(logging.WARNING)  # pygls logs message bodies at INFO
    handler.addFilter(_drop_typed_client_errors)


def _drop_typed_client_errors(record: logging.LogRecord) -> bool:
    """pygls logs every error response with a traceback; a typed DshError is an answer, not a fault."""
    from dsh_daemon.server.errors import DshError

    return not (record.exc_info and isinstance(record.exc_info[1], DshError))


async def serve(settings: Settings, stdin: BinaryIO, stdout: BinaryIO) -> int:
    daemon = Daemon(settings)
    protocol = daemon.server.protocol
    writer = CoalescingWriter(stdout)
    protocol.set_writer(writer)
    reader = StdinReader(stdin)
    stop_on_signals(reader.stop)
    code = 0
    try:
        await read_loop(
            reader,
            protocol,
            is_shut_down=lambda: bool(getattr(protocol, "_shutdown", False)),
            is_initialized=lambda: daemon.init is not None,
            first_preloaded_only=FIRST_PRELOADED_ONLY,
        )
    except SystemExit as exc:  # the `exit` notification: pygls has closed stdout already
        code = exc.code if isinstance(exc.code, int) else 0
        protocol.set_writer(_Discard())
    except BrokenPipeError:
        logger.info("client went away")
        protocol.set_writer(_Discard())
    finally:
        await daemon.close()
        writer.flush_all()  # the shutdown's last events, before the process ends
        reader.close()
        commands = sys.modules.get("dsh_daemon.tools.proctree")
        if commands is not None:  # processes commands left running in the background die with us
            commands.kill_all()
    return code


class _Discard:
    """The writer once the client is gone: the shutdown's last events have nowhere to go."""

    def write(self, data: bytes) -> None:
        return None

    def close(self) -> None:
        return None


def run(settings: Settings) -> int:
    stdout = protect_stdout()
    return asyncio.run(serve(settings, sys.stdin.buffer, stdout))
