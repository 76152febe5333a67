"""The tool seam: what a tool is, what it may do while it runs, and the hooks around it.

Pipeline per call (run by `agent/toolrun.py`): `pre-execute` hooks (allow / deny / ask) -> `execute`
-> `post-execute` hooks (accept / replace, each with optional `additional_contexts`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias

from dsh_daemon.model.jsonvalue import FrozenDict
from dsh_daemon.model.messages import ContentBlock, TextBlock, UserMessage
from dsh_daemon.model.payloads import Payload
from dsh_daemon.model.provider import ToolSpec
from dsh_daemon.model.wire import SubagentOrigin

if TYPE_CHECKING:
    from dsh_daemon.agent.signal import AbortSignal


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A call as the model made it. `arguments` is the raw text; `args` its parse ({} when empty;
    None when it is not a JSON object, and the tool then gets an error result)."""

    call_id: str
    name: str
    arguments: str
    args: Mapping[str, Any] | None
    turn: int
    step: int


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    content: tuple[ContentBlock, ...]
    is_error: bool = False
    error_code: str | None = None  # typed code for errors, e.g. "NOT_FOUND", "DENIED", "TIMEOUT"
    meta: FrozenDict | None = None  # structured extras for clients (e.g. an edit's diff)

    @classmethod
    def text(cls, text: str, *, meta: Mapping[str, Any] | None = None) -> ToolOutcome:
        return cls((TextBlock(text),), meta=FrozenDict(meta) if meta is not None else None)

    @classmethod
    def error(
        cls, text: str, code: str = "TOOL_ERROR", *, meta: Mapping[str, Any] | None = None
    ) -> ToolOutcome:
        return cls((TextBlock(text),), True, code, FrozenDict(meta) if meta is not None else None)


class ToolContext(Protocol):
    """What a running tool body can reach."""

    call: ToolCall
    signal: AbortSignal
    approved_preview: Mapping[str, Any] | None  # what the person saw and allowed, if they were asked
    accepted_text: str | None  # the file's whole new text as the person accepted it (an edited proposal)
    persist_approved: bool  # the person chose to keep what they allowed in their configuration
    # for an edit overlapping the person's unsaved changes: "both" (save them with it) or
    # "buffer-only" (protocol.md §8, §9); None when they were not asked
    unsaved_choice: str | None
    # a plan's approval (`propose_plan`): the mode the person chose to carry it out in ("ask" or
    # "accept-edits"); None when they were not asked or chose none
    approved_mode: str | None

    def emit_output(self, text: str) -> None:
        """Live `tool/output` with only the new text (never the whole output again)."""

    def defer_context(self, message: UserMessage) -> None:
        """Context that enters next-step after this call's result commits."""

    def conclude_turn(self) -> None:
        """The step counts as completed after this batch: no further request for the tool results."""

    def log_event(self, payload: Payload, *, ignorable: bool = False) -> None:
        """Append a durable event of this call to the session's log now (before its result)."""


class Tool(Protocol):
    """Optionally `truncation_hint: str`: how to read what the result cap elided (protocol.md §12)."""

    spec: ToolSpec
    parallel_safe: bool  # may run concurrently with other parallel-safe calls of the same batch

    async def execute(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome: ...


# ---- hooks ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Allow:
    kind: Literal["allow"] = "allow"


@dataclass(frozen=True, slots=True)
class Deny:
    message: str
    kind: Literal["deny"] = "deny"
    # why, as data for clients (the `DENIED` result's `meta.denied`, protocol.md §11): the words are
    # the model's and may change
    reason: DenyReason | None = None


# Who refused a call: the session's plan mode, the permission policy (config), one of the person's
# hooks, a subagent's tool set, a review turn, a custom command's allowed tools, or no client to ask.
DenyReason = Literal["plan-mode", "policy", "hook", "toolset", "review", "command", "no-client"]


@dataclass(frozen=True, slots=True)
class Ask:
    """Ask the approver (the editor) before running. `title` is shown to the person; `preview` is
    what the call would do, for the editor to render (an edit's `diff`, a command and its `cwd`)."""

    title: str
    preview: Mapping[str, Any] | None = None
    # What an "allow-always" answer covers (default: the tool). A command tool narrows it to the
    # exact command, so "always allow `pytest -q`" does not also allow `rm -rf`.
    scope: str | None = None
    # False: an "allow-always" answer counts as "allow-once" (a plan's approval is for this plan).
    rememberable: bool = True
    # Appended to the error the model gets when the person rejects the call (with their feedback).
    reject_note: str | None = None
    kind: Literal["ask"] = "ask"


PreExecuteDecision: TypeAlias = Allow | Deny | Ask
PreExecuteHook = Callable[[ToolCall, "AbortSignal"], Awaitable[PreExecuteDecision | None]]

PermissionOutcome: TypeAlias = Literal["allow-once", "allow-always", "reject", "cancelled"]


@dataclass(frozen=True, slots=True)
class PermissionRequest:
    call: ToolCall
    title: str
    preview: Mapping[str, Any] | None = None
    subagent: SubagentOrigin | None = None  # a child session's call, asked through its parent


@dataclass(frozen=True, slots=True)
class PermissionReply:
    """An answer that carries more than its outcome: `new_text`, the whole text of the file as the
    person accepted an edit after changing the proposal (only with an allowing outcome, and only for
    a request whose preview is an edit); `persist`, an `allow-always` of a sandbox widening the person
    chose to keep in their configuration (only for a request whose preview is an escalation)."""

    outcome: PermissionOutcome
    new_text: str | None = None
    persist: bool = False
    unsaved: str | None = None  # "both" | "buffer-only", for a preview with `unsaved: "overlaps"`
    mode: str | None = None  # a plan's approval: "ask" | "accept-edits", the mode to carry it out in
    feedback: str | None = None  # a rejection's words for the model (a plan to revise)


# Answers a permission question before the person is asked (the person's `permissionRequest` hooks):
# Allow runs the call once, Deny refuses it with the message, None leaves the question to the next
# hook and then to the approver.
PermissionHook = Callable[[PermissionRequest, "AbortSignal"], Awaitable[Allow | Deny | None]]


class Approver(Protocol):
    async def request_permission(
        self, request: PermissionRequest, signal: AbortSignal
    ) -> PermissionOutcome | PermissionReply: ...


@dataclass(frozen=True, slots=True)
class PostExecuteDecision:
    """`outcome` replaces the tool's outcome when set; `additional_contexts` enter next-step after the
    whole tool batch's results (D3), in call order, keeping their sources."""

    outcome: ToolOutcome | None = None
    additional_contexts: tuple[UserMessage, ...] = ()


PostExecuteHook = Callable[[ToolCall, ToolOutcome], Awaitable[PostExecuteDecision | None]]


DEFAULT_RESULT_MAX_CHARS = 64_000


@dataclass
class ToolRegistry:
    """The tools offered to the model. `result_max_chars` caps every tool result's text (head and
    tail kept, the middle elided; a tool's `truncation_hint` says how to read the rest)."""

    tools: dict[str, Tool] = field(default_factory=dict)
    result_max_chars: int = DEFAULT_RESULT_MAX_CHARS
    offered: Callable[[str], bool] | None = None  # which tools the model is offered now (None: all)

    def add(self, tool: Tool) -> None:
        self.tools[tool.spec.name] = tool

    def get(self, name: str) -> Tool | None:
        return self.tools.get(name)

    def specs(self) -> tuple[ToolSpec, ...]:
        offered = self.offered
        return tuple(t.spec for name, t in self.tools.items() if offered is None or offered(name))
