"""The checkpoint seam: what the file-changing tools tell the session's checkpoints (host/checkpoints.py
keeps them in the session store), so a rewind can restore what they changed."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Protocol

from dsh_daemon.agent.tools import ToolCall
from dsh_daemon.tools.edits import ComputedEdit


class Checkpointer(Protocol):
    def edit_applied(self, call: ToolCall, edit: ComputedEdit) -> None:
        """`edit` was applied by `call`: keep the file's content before it."""

    def command(self, call: ToolCall) -> AbstractAsyncContextManager[None]:
        """Around a command: the work tree is snapshotted before and after (git), or the command is
        noted as not restorable."""
