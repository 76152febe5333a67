"""A stdio MCP server started through the session's sandbox (`mcpServers.NAME.sandbox`, issue 41.4).

The sandbox starts processes with the descriptors it is handed (`CommandSandbox.spawn_server`), so
the server's stdin, stdout and stderr are three pipes made here; `SandboxedServerProcess` then looks
like the `anyio` process the stdio transport (`stdio.py`) reads and writes: byte streams on the
pipes, `terminate`/`kill` for the whole tree (the sandbox's shepherd is its subreaper), `wait`, and
`aclose`, which also closes the server's own sandbox (whatever it left running is killed).

Promises: a server configured `sandbox` runs confined or not at all (`SandboxUnavailable` becomes the
start's error, so the server is `failed` with the reason; it is never started unconfined); its
environment is the transport's minimal one plus its own configured `env` (kept even where a name
looks like a credential: it is the server's, not the daemon's), with TMPDIR and the proxy variables
the sandbox's.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from dsh_daemon.tools.config import SandboxMode
from dsh_daemon.tools.sandboxing import CommandSandbox, SandboxUnavailable

__all__ = ["SandboxUnavailable", "SandboxedServerProcess", "start_sandboxed"]

READ_LIMIT = 1 << 20


class _PipeReader:
    """The read end of a pipe as the transport reads it (`receive`; anyio's errors at the end)."""

    def __init__(self, reader: asyncio.StreamReader, transport: asyncio.BaseTransport) -> None:
        self._reader = reader
        self._transport = transport

    async def receive(self, max_bytes: int = 65536) -> bytes:
        import anyio

        if self._transport.is_closing():
            raise anyio.ClosedResourceError
        data = await self._reader.read(max_bytes)
        if not data:
            raise anyio.EndOfStream
        return data

    async def aclose(self) -> None:
        self._transport.close()


class _PipeWriter:
    """The write end of a pipe as the transport writes it (`send`, `aclose`)."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def send(self, data: bytes) -> None:
        import anyio

        if self._writer.is_closing():
            raise anyio.ClosedResourceError
        try:
            self._writer.write(data)
            await self._writer.drain()
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise anyio.BrokenResourceError from exc

    async def aclose(self) -> None:
        self._writer.close()
        with contextlib.suppress(Exception):
            await self._writer.wait_closed()


class SandboxedServerProcess:
    """A server process in its own sandbox, shaped as the stdio transport uses an anyio process."""

    def __init__(
        self,
        process: Any,
        end_sandbox: Callable[[], Awaitable[None]],
        stdin: _PipeWriter,
        stdout: _PipeReader,
        stderr: _PipeReader,
    ) -> None:
        self._process = process
        self._end_sandbox = end_sandbox
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = stderr

    @property
    def pid(self) -> int:
        return int(self._process.pid)

    @property
    def returncode(self) -> int | None:
        code = self._process.returncode
        return None if code is None else int(code)

    def terminate(self) -> None:
        self._process.kill_tree(signal.SIGTERM)

    def kill(self) -> None:
        self._process.kill_tree(signal.SIGKILL)

    async def wait(self) -> int:
        return int(await self._process.wait())

    async def aclose(self) -> None:
        for stream in (self.stdin, self.stdout, self.stderr):
            with contextlib.suppress(Exception):
                await stream.aclose()
        await self._end_sandbox()  # kills whatever of the server's tree is left


def _protocol_for(reader: asyncio.StreamReader) -> Callable[[], asyncio.StreamReaderProtocol]:
    return lambda: asyncio.StreamReaderProtocol(reader)


async def start_sandboxed(
    sandbox: CommandSandbox,
    mode: SandboxMode,
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    own_env: Mapping[str, str],
    cwd: str,
) -> SandboxedServerProcess:
    """`argv` started confined in `mode` with pipes for its stdio. `SandboxUnavailable` (nothing
    started) when the confinement cannot be had."""
    loop = asyncio.get_running_loop()
    stdin_r, stdin_w = os.pipe()
    stdout_r, stdout_w = os.pipe()
    stderr_r, stderr_w = os.pipe()
    ours = [stdin_w, stdout_r, stderr_r]
    try:
        try:
            process, end = await sandbox.spawn_server(
                argv, mode=mode, cwd=Path(cwd), env=env, own_env=own_env,
                stdin=stdin_r, stdout=stdout_w, stderr=stderr_w,
            )  # fmt: skip
        finally:
            for fd in (stdin_r, stdout_w, stderr_w):  # the child has its own copies now
                os.close(fd)
        try:
            readers = []
            for fd in (stdout_r, stderr_r):
                reader = asyncio.StreamReader(limit=READ_LIMIT, loop=loop)
                pipe = os.fdopen(fd, "rb", buffering=0)
                ours.remove(fd)
                transport, _ = await loop.connect_read_pipe(_protocol_for(reader), pipe)
                readers.append(_PipeReader(reader, transport))
            pipe = os.fdopen(stdin_w, "wb", buffering=0)
            ours.remove(stdin_w)
            write_transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, pipe)
            writer = asyncio.StreamWriter(write_transport, protocol, None, loop)
        except BaseException:
            await end()  # the server's sandbox closed: the process is killed with it
            raise
    except BaseException:
        for fd in ours:
            with contextlib.suppress(OSError):
                os.close(fd)
        raise
    return SandboxedServerProcess(process, end, _PipeWriter(writer), readers[0], readers[1])
