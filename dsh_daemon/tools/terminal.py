"""The command-runner seam (issue 24.6): `run_command` through the editor's own terminal.

An editor that runs commands itself (ACP's `terminal/*`: Zed embeds the live terminal in the tool
call) implements `Terminals`; the tool then starts the command there instead of as a child of the
daemon. Everything else stays the tool's: the permission was asked before, the command runs in the
session directory with the same non-interactive environment, the tool's timeout and the turn's
cancel kill it, and the output the editor kept becomes the tool result (so the model and the session
log get it as with a local run). The seam speaks plain values, so the tools need no wire library.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


class TerminalUnavailable(Exception):
    """The editor could not start the command in a terminal (an error reply, no answer, gone): the
    tool runs it itself instead."""


@dataclass(frozen=True)
class TerminalExit:
    exit_code: int | None  # None when a signal ended it
    signal: str | None = None


@dataclass(frozen=True)
class TerminalOutput:
    text: str
    truncated: bool  # the editor dropped the beginning to stay within the limit it was given
    exit: TerminalExit | None = None


class Terminal(Protocol):
    """One command running in the editor's terminal."""

    @property
    def terminal_id(self) -> str: ...

    async def output(self) -> TerminalOutput: ...

    async def wait_for_exit(self) -> TerminalExit: ...

    async def kill(self) -> None: ...

    async def release(self) -> None:
        """Free the terminal (the editor may keep showing it); kills the command if still running."""
        ...

    def abandon(self) -> None:
        """The command did not run in this terminal after all (a confined command whose wrapper never
        reached the daemon): the call no longer shows it; the tool runs the command itself."""
        ...


class Terminals(Protocol):
    async def create(
        self,
        call_id: str,
        command: str,
        args: Sequence[str],
        cwd: Path,
        env: Mapping[str, str],
        output_limit: int,
    ) -> Terminal:
        """Start `command args` for tool call `call_id` (raises `TerminalUnavailable`)."""
        ...
