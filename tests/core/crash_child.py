"""Child process for the crash test: drives a session and prints `ACK <id>` after each acknowledged
send (the send has returned, so its splice is committed), and `EV <seq> <type> <digest>` for each
durable event the moment it is published (what a client would have seen). The parent kills it with
SIGKILL."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import sys
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from dsh_daemon.agent.hooks import Hooks, PreStepContext, PreStepDecision
from dsh_daemon.agent.loop import AgentOptions
from dsh_daemon.agent.tools import ToolContext, ToolOutcome, ToolRegistry
from dsh_daemon.host.manager import SessionManager
from dsh_daemon.llm.scripted import ScriptedProvider, Sleep, reply
from dsh_daemon.model.events import Event
from dsh_daemon.model.jsonvalue import dumps
from dsh_daemon.model.messages import UserMessage
from dsh_daemon.model.provider import Finish, TextDelta
from tests.core.harness import FnTool

SLOW = [
    TextDelta("slow "),
    Sleep(0.01),
    TextDelta("stream "),
    Sleep(0.01),
    TextDelta("reply"),
    Finish("stop"),
]
TOOL = reply("", tool_calls=[("c1", "work", "{}"), ("c2", "work", "{}")])


async def work(args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
    await asyncio.sleep(0.02)
    return ToolOutcome.text("worked")


class Cycle(list):  # type: ignore[type-arg]
    def __init__(self) -> None:
        super().__init__([None])
        self._cycle = itertools.cycle([SLOW, TOOL, SLOW])

    def pop(self, index: int = -1):  # type: ignore[no-untyped-def, override]
        return next(self._cycle)


def digest(data: object) -> str:
    return hashlib.sha256(dumps(data).encode()).hexdigest()[:16]


def _print_published(event: Event) -> None:
    if event.seq is not None:
        print("EV", event.seq, event.type, digest(event.data), flush=True)


async def gather_context(
    ctx: PreStepContext, proceed: Callable[[], Awaitable[PreStepDecision]]
) -> PreStepDecision:
    """A pre-step hook that takes a while (as MCP servers starting or editor context being read do):
    the turn's opening events are published, not yet committed, while it runs."""
    await asyncio.sleep(0.02)
    return await proceed()


def hooks() -> Hooks:
    made = Hooks()
    made.pre_step.append(gather_context)
    return made


async def main(state_dir: str, session_id: str, tag: str) -> None:
    provider = ScriptedProvider()
    provider.script = Cycle()  # type: ignore[assignment]
    registry = ToolRegistry()
    registry.add(FnTool("work", work, parallel_safe=False))
    manager = SessionManager(
        Path(state_dir),
        provider=provider,
        options=lambda: AgentOptions(model="m"),
        tools=lambda _s: registry,
        hooks=lambda _s: hooks(),
    )
    agent = (
        manager.open(session_id)
        if manager.store.has_session(session_id)
        else manager.create(session_id=session_id)
    )
    agent.subscribe(_print_published)
    print("OPEN", agent.turn, flush=True)
    for i in itertools.count():
        message = UserMessage.create(f"{tag}-{i}")
        if i % 3 == 2:
            agent.inject(message)
        else:
            agent.followup(message)
        print("ACK", message.id, flush=True)
        await asyncio.sleep(0.015)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
