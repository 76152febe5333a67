"""What the parent asks of a child (`SubagentTask`), what comes back (`SubagentResult`), and the seam
through which the host starts and drives the child session (`Launcher`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from dsh_daemon.agent.tools import ToolContext
from dsh_daemon.model.payloads import SubagentStatus, SubagentTools


@dataclass(frozen=True, slots=True)
class SubagentTask:
    description: str  # a few words the person sees on the child's card and its permission questions
    prompt: str  # the child's first message, with the files the parent chose (`briefing.py`)
    tools: SubagentTools
    max_steps: int
    agent: str | None = None  # the named definition it runs (`definitions.py`)
    model: str | None = None  # the definition's model (None: the parent's)


@dataclass(frozen=True, slots=True)
class SubagentResult:
    child_id: str
    status: SubagentStatus
    summary: str


class Launcher(Protocol):
    async def run_child(self, task: SubagentTask, ctx: ToolContext) -> SubagentResult:
        """Start the child session for `task` under the call of `ctx`, drive its one turn to its end
        (cancelled with the call's signal), and return its final summary."""
        ...
