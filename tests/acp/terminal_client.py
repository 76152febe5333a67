"""An ACP client that offers `terminal/*` and answers them as an editor would: by really running the
command (as its own process group), keeping its output within the byte limit it was given (the
beginning dropped, at a character boundary), and killing it on `terminal/kill` or `terminal/release`."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from dataclasses import dataclass, field
from typing import Any

from acp.schema import (
    CreateTerminalResponse,
    EnvVariable,
    KillTerminalResponse,
    ReleaseTerminalResponse,
    TerminalExitStatus,
    TerminalOutputResponse,
    WaitForTerminalExitResponse,
)

from tests.acp.harness import RecordingClient


@dataclass
class RunningTerminal:
    process: asyncio.subprocess.Process
    limit: int | None
    output: bytearray = field(default_factory=bytearray)
    truncated: bool = False
    reader: asyncio.Task[None] | None = None
    killed: bool = False
    released: bool = False

    def add(self, chunk: bytes) -> None:
        self.output += chunk
        if self.limit is not None and len(self.output) > self.limit:
            cut = len(self.output) - self.limit
            while cut < len(self.output) and (self.output[cut] & 0xC0) == 0x80:
                cut += 1  # not inside a UTF-8 character
            del self.output[:cut]
            self.truncated = True

    def exit_status(self) -> TerminalExitStatus | None:
        code = self.process.returncode
        if code is None:
            return None
        if code < 0:
            return TerminalExitStatus(signal=signal.Signals(-code).name)
        return TerminalExitStatus(exit_code=code)


class TerminalClient(RecordingClient):
    def __init__(self) -> None:
        super().__init__()
        self.terminals: dict[str, RunningTerminal] = {}
        self.created: list[dict[str, Any]] = []
        self.killed: list[str] = []
        self.released: list[str] = []

    async def create_terminal(
        self,
        session_id: str,
        command: str,
        args: list[str] | None = None,
        env: list[EnvVariable] | None = None,
        cwd: str | None = None,
        output_byte_limit: int | None = None,
        **kwargs: Any,
    ) -> CreateTerminalResponse:
        self.created.append(
            {"command": command, "args": args, "cwd": cwd, "limit": output_byte_limit, "env": env}
        )
        process = await asyncio.create_subprocess_exec(
            command,
            *(args or []),
            cwd=cwd,
            env={**os.environ, **{v.name: v.value for v in env or []}},
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        terminal = RunningTerminal(process, output_byte_limit)
        terminal_id = f"term-{len(self.terminals) + 1}"
        self.terminals[terminal_id] = terminal

        async def read() -> None:
            assert process.stdout is not None
            while chunk := await process.stdout.read(65536):
                terminal.add(chunk)

        terminal.reader = asyncio.ensure_future(read())
        return CreateTerminalResponse(terminal_id=terminal_id)

    async def terminal_output(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> TerminalOutputResponse:
        terminal = self.terminals[terminal_id]
        if terminal.process.returncode is not None and terminal.reader is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(terminal.reader), 5)
        return TerminalOutputResponse(
            output=terminal.output.decode("utf-8", "replace"),
            truncated=terminal.truncated,
            exit_status=terminal.exit_status(),
        )

    async def wait_for_terminal_exit(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> WaitForTerminalExitResponse:
        terminal = self.terminals[terminal_id]
        await terminal.process.wait()
        status = terminal.exit_status()
        assert status is not None
        return WaitForTerminalExitResponse(exit_code=status.exit_code, signal=status.signal)

    def _kill(self, terminal: RunningTerminal) -> None:
        if terminal.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(terminal.process.pid, signal.SIGKILL)

    async def kill_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> KillTerminalResponse:
        self.killed.append(terminal_id)
        terminal = self.terminals[terminal_id]
        self._kill(terminal)
        await terminal.process.wait()
        return KillTerminalResponse()

    async def release_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> ReleaseTerminalResponse:
        self.released.append(terminal_id)
        terminal = self.terminals[terminal_id]
        self._kill(terminal)
        terminal.released = True
        return ReleaseTerminalResponse()

    async def close(self) -> None:
        for terminal in self.terminals.values():
            self._kill(terminal)
            await terminal.process.wait()
