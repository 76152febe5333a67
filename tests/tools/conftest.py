"""Shared fixtures: a real temp workspace and a minimal ToolContext that records live output."""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from dsh_daemon.agent.signal import AbortSignal
from dsh_daemon.agent.tools import ToolCall, ToolOutcome
from dsh_daemon.model.messages import UserMessage
from dsh_daemon.tools.factory import ToolKit, build_tool_registry
from dsh_daemon.tools.workspace import Workspace


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Nothing here may read or write the real home; DSH_HOME moves all daemon state.
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "dsh-home"))


@dataclass
class FakeContext:
    call: ToolCall = field(default_factory=lambda: ToolCall("c1", "tool", "{}", {}, 1, 1))
    signal: AbortSignal = field(default_factory=AbortSignal)
    agent: Any = None
    outputs: list[str] = field(default_factory=list)
    deferred: list[UserMessage] = field(default_factory=list)
    on_output: Callable[[str], None] | None = None
    concluded: bool = False

    def emit_output(self, text: str) -> None:
        self.outputs.append(text)
        if self.on_output is not None:
            self.on_output(text)

    def defer_context(self, message: UserMessage) -> None:
        self.deferred.append(message)

    def conclude_turn(self) -> None:
        self.concluded = True


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    path = tmp_path / "outside"
    path.mkdir()
    (path / "secret.txt").write_text("top secret\n")
    return path


@pytest.fixture
def workspace(root: Path) -> Workspace:
    return Workspace([root])


@pytest.fixture
def kit(workspace: Workspace) -> ToolKit:
    return build_tool_registry(workspace)


async def run_tool(
    kit: ToolKit, name: str, args: Mapping[str, Any], ctx: FakeContext | None = None
) -> ToolOutcome:
    tool = kit.registry.get(name)
    assert tool is not None, name
    return await tool.execute(args, ctx or FakeContext())


def text_of(outcome: ToolOutcome) -> str:
    return "".join(getattr(block, "text", "") for block in outcome.content)


def alive(pid: int) -> bool:
    """A zombie (killed, not yet reaped by init) counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state != "Z"


async def gone(pid: int) -> bool:
    """Polls (bounded) because a SIGKILLed process disappears asynchronously."""
    for _ in range(500):
        if not alive(pid):
            return True
        await asyncio.sleep(0.01)
    return False


def pid_in(text: str) -> int:
    match = re.search(r"PID=(\d+)", text)
    assert match, text
    return int(match.group(1))
