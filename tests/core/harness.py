"""A real agent (real SQLite store in a temp dir, scripted provider) plus event recording and checks."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsh_daemon.agent.derive import rebuild_requests
from dsh_daemon.agent.hooks import Hooks
from dsh_daemon.agent.invariants import check_log, requests_match_log
from dsh_daemon.agent.loop import Agent, AgentOptions
from dsh_daemon.agent.retry import RetryPolicy
from dsh_daemon.agent.tools import Approver, ToolContext, ToolOutcome, ToolRegistry
from dsh_daemon.host.manager import SNAPSHOT_EVERY, SessionManager
from dsh_daemon.llm.scripted import Script, ScriptedProvider
from dsh_daemon.model import events as ev
from dsh_daemon.model.events import Event
from dsh_daemon.model.jsonvalue import FrozenDict
from dsh_daemon.model.messages import UserMessage
from dsh_daemon.model.provider import ToolSpec

FAST_RETRY = RetryPolicy(base_s=0.001, cap_s=0.01)
# No wall-clock wait at all: a retry's sleep costs a few loop ticks, so how far the driver gets in N ticks
# depends only on what happened, never on how fast the machine is (the property test relies on it).
NO_WAIT_RETRY = RetryPolicy(base_s=0.0, cap_s=0.0, jitter=0.0)


def msg(text: str, source: Mapping[str, Any] | None = None, *, id: str | None = None) -> UserMessage:
    return UserMessage.create(text, source, id=id)


def plugin_msg(text: str, plugin: str = "test-plugin") -> UserMessage:
    return UserMessage.create(text, {"kind": "plugin", "plugin": plugin})


@dataclass
class FnTool:
    """A tool whose body is a test function."""

    name: str
    body: Callable[[Mapping[str, Any], ToolContext], Awaitable[ToolOutcome]]
    parallel_safe: bool = True

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, f"test tool {self.name}", FrozenDict({"type": "object"}))

    async def execute(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        return await self.body(args, ctx)


def echo_tool(name: str = "echo", *, parallel_safe: bool = True) -> FnTool:
    async def body(args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        return ToolOutcome.text(f"{name}:{args.get('x', '')}")

    return FnTool(name, body, parallel_safe)


class Harness:
    def __init__(
        self,
        state_dir: Path,
        script: Sequence[Script] = (),
        *,
        hooks: Hooks | None = None,
        tools: Sequence[Any] = (),
        approver: Approver | None = None,
        max_tokens: int | None = None,
        session_id: str | None = None,
        retry: RetryPolicy = FAST_RETRY,
        snapshot_every: int = SNAPSHOT_EVERY,
    ) -> None:
        self.state_dir = state_dir
        self.provider = ScriptedProvider(script)
        self.hooks = hooks or Hooks()
        self.registry = ToolRegistry()
        for tool in tools:
            self.registry.add(tool)
        self.approver = approver
        self.max_tokens = max_tokens
        self.retry = retry
        self.snapshot_every = snapshot_every
        self.manager = self._manager()
        self.agent: Agent = (
            self.manager.open(session_id) if session_id else self.manager.create(cwd=str(state_dir))
        )
        self.events: list[Event] = []
        self.agent.subscribe(self.events.append)
        self.prior_requests = len(rebuild_requests(self.agent.log.events))

    def _manager(self) -> SessionManager:
        return SessionManager(
            self.state_dir,
            provider=self.provider,
            options=lambda: AgentOptions(model="m1", retry=self.retry, max_tokens=self.max_tokens),
            tools=lambda _sid: self.registry,
            hooks=lambda _sid: self.hooks,
            approver=lambda _sid: self.approver,
            write_delay=0.005,
            snapshot_every=self.snapshot_every,
        )

    # ---- views ---------------------------------------------------------------------------------------

    @property
    def log(self) -> list[Event]:
        return self.agent.log.events

    def durable(self, *types: str) -> list[Event]:
        return [e for e in self.log if not types or e.type in types]

    def provider_id(self, call_id: str) -> str:
        """The id the scripted provider gave the daemon's call `call_id` (scripts name calls by it)."""
        for event in self.durable(ev.ASSISTANT_MESSAGE):
            for block in event.data["message"]["content"]:
                if block["type"] == "tool-call" and block["id"] == call_id:
                    return str(block.get("providerId", call_id))
        raise KeyError(call_id)

    def types(self, *, skip: Sequence[str] = (ev.ASSISTANT_CHUNK,)) -> list[str]:
        return [e.type for e in self.log if e.type not in skip]

    def live(self, *types: str) -> list[Event]:
        return [e for e in self.events if e.seq is None and (not types or e.type in types)]

    def statuses(self) -> list[str]:
        return [str(e.data["status"]) for e in self.live(ev.STATUS)]

    def user_messages(self) -> list[tuple[int, str]]:
        """(turn, text) of each logged user/message."""
        out: list[tuple[int, str]] = []
        turn = 0
        for event in self.log:
            if event.type == ev.TURN_START:
                turn = int(event.data["turn"])
            elif event.type == ev.USER_MESSAGE:
                out.append((turn, UserMessage.from_json(event.data).text))
        return out

    def turn_ends(self) -> list[dict[str, Any]]:
        return [dict(e.data["reason"]) for e in self.durable(ev.TURN_END)]

    def request_texts(self, index: int) -> list[str]:
        """The text of each message of the provider's request `index` (tool results as 'result:...')."""
        out: list[str] = []
        for message in self.provider.requests[index].messages:
            parts = []
            for block in message.content:
                if block.type == "tool-result":
                    parts.append(f"result:{block.text}")  # type: ignore[union-attr]
                elif block.type in ("text", "reasoning"):
                    parts.append(block.text)  # type: ignore[union-attr]
                elif block.type == "tool-call":
                    parts.append(f"call:{block.name}")  # type: ignore[union-attr]
            out.append("|".join(parts))
        return out

    def check(self) -> None:
        problems = check_log(self.log, self.agent.inbox.pending_ids())
        problems += requests_match_log(self.log, self.provider.requests, self.prior_requests)
        statuses = self.statuses()
        problems += [
            f"status repeated at {i}" for i in range(1, len(statuses)) if statuses[i] == statuses[i - 1]
        ]
        assert problems == [], problems

    async def idle(self) -> None:
        await self.agent.when_idle()

    async def reopen(self) -> Harness:
        """Shut this process's view down (D6) and open the session again from the store."""
        await self.manager.close()
        return Harness(
            self.state_dir,
            hooks=self.hooks,
            approver=self.approver,
            session_id=self.agent.session_id,
            tools=list(self.registry.tools.values()),
            retry=self.retry,
        )
