"""Extension points of the loop: waterfalls (outermost first, each may call `next()`) and serial hooks.

- `pre_step(ctx, next) -> Enter | Reject`: the complete batch for the proposed step (D3).
- `request(ctx, next) -> RequestConfig`: the call configuration (cannot touch messages).
- `request_error(ctx, next) -> Retry | None`: recovery for a failed model attempt; innermost is D8.
- `turn_stopping(ctx)`: before a turn closes normally; a steer or inject here causes another step.
- `pre_execute` / `post_execute`: the tool pipeline (see tools.py).
- `permission_request`: may answer a permission question before the approver is asked.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias, TypeVar

from dsh_daemon.agent.tools import PermissionHook, PostExecuteHook, PreExecuteHook
from dsh_daemon.model.inbox import Target
from dsh_daemon.model.jsonvalue import FrozenDict
from dsh_daemon.model.messages import MessageId, UserMessage
from dsh_daemon.model.provider import LlmFailure, ToolSpec

if TYPE_CHECKING:
    from dsh_daemon.agent.signal import AbortSignal

T = TypeVar("T")
C = TypeVar("C")


class PendingView(Protocol):
    """The inbox as a hook sees it: what is pending, read-only."""

    @property
    def next_turn(self) -> tuple[UserMessage, ...]: ...

    @property
    def next_step(self) -> tuple[UserMessage, ...]: ...


class AgentControl(Protocol):
    """What a hook may do with the agent it runs in (the `Agent` is one): send, cancel, wake, and read
    what is pending. Hooks get this, not the agent, so they cannot reach into the turn they run in."""

    @property
    def session_id(self) -> str: ...

    @property
    def inbox(self) -> PendingView: ...

    def send(
        self,
        message: UserMessage,
        *,
        target: Target,
        wakeup: bool,
        attachments: Sequence[UserMessage] = (),
        verb: str | None = None,
    ) -> MessageId: ...

    def followup(self, message: UserMessage) -> MessageId: ...

    def steer(self, message: UserMessage) -> MessageId: ...

    def inject(self, message: UserMessage) -> MessageId: ...

    def cancel(self, cause: str = "user", *, keep_inbox: bool = False) -> None: ...

    def wake(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class Enter:
    messages: tuple[UserMessage, ...]
    kind: Literal["enter"] = "enter"


@dataclass(frozen=True, slots=True)
class Reject:
    kind: Literal["reject"] = "reject"


PreStepDecision: TypeAlias = Enter | Reject


@dataclass(frozen=True, slots=True)
class PreStepContext:
    agent: AgentControl
    messages: tuple[UserMessage, ...]
    turn: int
    step: int
    signal: AbortSignal


@dataclass(frozen=True, slots=True)
class RequestConfig:
    config: FrozenDict  # provider, model, maxTokens, thinking, ...
    system: str | None
    tools: tuple[ToolSpec, ...]


@dataclass(frozen=True, slots=True)
class RequestContext:
    agent: AgentControl
    turn: int
    step: int
    signal: AbortSignal
    base: RequestConfig


@dataclass(frozen=True, slots=True)
class Retry:
    delay_s: float


@dataclass(frozen=True, slots=True)
class RequestErrorContext:
    agent: AgentControl
    turn: int
    step: int
    failure: LlmFailure
    retries_so_far: int
    signal: AbortSignal


@dataclass(frozen=True, slots=True)
class TurnStoppingContext:
    agent: AgentControl
    turn: int
    signal: AbortSignal


Waterfall = Callable[[C, Callable[[], Awaitable[T]]], Awaitable[T]]
PreStepHook = Waterfall[PreStepContext, PreStepDecision]
RequestHook = Waterfall[RequestContext, RequestConfig]
RequestErrorHook = Waterfall[RequestErrorContext, "Retry | None"]
TurnStoppingHook = Callable[[TurnStoppingContext], Awaitable[None]]


@dataclass
class Hooks:
    pre_step: list[PreStepHook] = field(default_factory=list)
    request: list[RequestHook] = field(default_factory=list)
    request_error: list[RequestErrorHook] = field(default_factory=list)
    turn_stopping: list[TurnStoppingHook] = field(default_factory=list)
    pre_execute: list[PreExecuteHook] = field(default_factory=list)
    post_execute: list[PostExecuteHook] = field(default_factory=list)
    permission_request: list[PermissionHook] = field(default_factory=list)


async def run_waterfall(
    hooks: Sequence[Callable[[Any, Callable[[], Awaitable[Any]]], Awaitable[Any]]],
    ctx: Any,
    innermost: Callable[[], Awaitable[T]],
) -> T:
    """Call hooks outermost-first; each may short-circuit or await `next()` and post-process."""

    async def call(index: int) -> Any:
        if index == len(hooks):
            return await innermost()
        return await hooks[index](ctx, lambda: call(index + 1))

    result: T = await call(0)
    return result
