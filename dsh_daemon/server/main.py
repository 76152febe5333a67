"""Serve the daemon on stdio: stdout carries the protocol only, logs go to stderr (or a file).

fd 1 is moved to a private descriptor for the protocol and stderr is put in its place, so a stray
print, a C extension or a child process can never write into the JSON-RPC stream.

pygls is imported only once the first frame is read: an `initialize` is answered before it, when
server/early_init.py can vouch for it (issue 40.2).
"""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import BinaryIO

from dsh_daemon.host.stdio import configure_logging as configure_stdio_logging
from dsh_daemon.host.stdio import protect_stdout, stop_on_signals
from dsh_daemon.server.early_init import answer_initialize_early, answer_session_new_early
from dsh_daemon.server.settings import Settings
from dsh_daemon.server.stdinreader import StdinReader
from dsh_daemon.server.stdout import CoalescingWriter

logger = logging.getLogger(__name__)


def configure_logging(level: str, log_file: str | None) -> None:
    handler = configure_stdio_logging(level, log_file)
    logging.getLogger("pygls").setLevel(logging.WARNING)  # pygls logs message bodies at INFO
    handler.addFilter(_drop_typed_client_errors)


def _drop_typed_client_errors(record: logging.LogRecord) -> bool:
    """pygls logs every error response with a traceback; a typed DshError is an answer, not a fault."""
    from dsh_daemon.server.errors import DshError

    return not (record.exc_info and isinstance(record.exc_info[1], DshError))


async def serve(settings: Settings, stdin: BinaryIO, stdout: BinaryIO, *, code_cache: bool = False) -> int:
    """Serve until the client ends the connection. `code_cache`: lsprotocol's generated methods come
    from the state directory's cache (server/codecache.py), as for a daemon an editor starts."""
    writer = CoalescingWriter(stdout)
    reader = StdinReader(stdin)
    stop_on_signals(reader.stop)
    early = await answer_initialize_early(reader, writer, settings)
    session = None if early is None else await answer_session_new_early(reader, writer, settings, early)
    if code_cache:
        from dsh_daemon.server.codecache import install_for_start

        install_for_start(settings.state_dir)
    from dsh_daemon.server.app import FIRST_PRELOADED_ONLY, Daemon
    from dsh_daemon.server.codecache import finish_start
    from dsh_daemon.server.transport import dispatch, read_loop

    daemon = Daemon(settings)
    protocol = daemon.server.protocol
    protocol.set_writer(writer)
    if early is not None:
        daemon.adopt_early_initialize(early)
    if session is not None:
        # `initialized` as the read loop would dispatch it (the preload starts), then the session
        # answered early is wired, as after `Daemon.new_early`'s reply.
        dispatch(protocol, session.initialized, is_shut_down=lambda: False, is_initialized=lambda: True)
        daemon.adopt_early_sessions(session.sessions)
    if early is not None:
        # What the start compiled is all compiled now (the read loop's first frame would be later).
        asyncio.get_running_loop().call_soon(finish_start)
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
    return asyncio.run(serve(settings, sys.stdin.buffer, stdout, code_cache=True))
