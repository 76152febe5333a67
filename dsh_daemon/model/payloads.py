"""The payload of every event type (protocol.md §7), declared once: what `data` holds.

Each payload is a frozen dataclass naming its event type (`TYPE`); the agent writes events from them
(`payload.data()`) and readers take them apart with `Payload.of(event)` instead of indexing dicts.
`PAYLOADS` maps every type of `model/events.py` to its payload; the JSON Schema of `dsh/event` is made
from it. `user/message`'s payload is the message itself (`model.messages.UserMessage` reads it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeVar

from dsh_daemon.model import events as ev
from dsh_daemon.model.codec import JsonObject, structure, unstructure
from dsh_daemon.model.events import Event
from dsh_daemon.model.jsonvalue import FrozenDict, freeze_json
from dsh_daemon.model.sharedmethods import share_generated_methods
from dsh_daemon.model.wire import (
    EditMeta,
    ErrorJson,
    InboxItemJson,
    LanguageToolMeta,
    LeaseHolder,
    Message,
    MessageJson,
    PermissionAsked,
    PermissionOutcome,
    RequestHeader,
    RewindAction,
    RewindProblem,
    SandboxMode,
    SandboxState,
    SessionMode,
    SessionStatus,
    SpliceOutcome,
    StreamDelta,
    Target,
    ToolErrorInfo,
    TurnDiffFileSummary,
    TurnEndReason,
    UsageJson,
)

P = TypeVar("P", bound="Payload")


class Payload:
    """Base of every payload: `TYPE` is the event type it is the data of."""

    __slots__ = ()
    TYPE: ClassVar[str]

    def data(self) -> dict[str, Any]:
        """The event's `data` (camelCase; optional fields that are `None` left out)."""
        out: dict[str, Any] = unstructure(self)
        return out

    def event(self) -> Event:
        """A live event of this payload."""
        return Event(self.TYPE, freeze_json(self.data()))

    @classmethod
    def of(cls: type[P], event: Event) -> P:
        """The payload of `event` (which must be of this type); `WireValueError` when its data does
        not fit (a stored event of the wrong shape)."""
        return structure(event.data, cls)


def entry(payload: Payload) -> tuple[str, dict[str, Any]]:
    """`(type, data)` for `SessionLog.append(*entry(payload))`."""
    return payload.TYPE, payload.data()


# ---- durable -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class InboxSpliced(Payload):
    """One durable change of an inbox list; no `outcome`: a claim by a turn."""

    TYPE: ClassVar[str] = ev.INBOX_SPLICED
    target: Target
    start: int
    inserted: tuple[InboxItemJson, ...]
    removed_count: int | None = None
    removed_ids: tuple[str, ...] | None = None  # attachments' ids included
    outcome: SpliceOutcome | None = None


@dataclass(frozen=True, slots=True)
class TurnStarted(Payload):
    TYPE: ClassVar[str] = ev.TURN_START
    turn: int


@dataclass(frozen=True, slots=True)
class TurnEnded(Payload):
    TYPE: ClassVar[str] = ev.TURN_END
    turn: int
    reason: TurnEndReason


@dataclass(frozen=True, slots=True)
class StepStarted(Payload):
    TYPE: ClassVar[str] = ev.STEP_START
    turn: int
    step: int


@dataclass(frozen=True, slots=True)
class StepEnded(Payload):
    TYPE: ClassVar[str] = ev.STEP_END
    turn: int
    step: int


@dataclass(frozen=True, slots=True)
class RequestHeaderLogged(Payload):
    TYPE: ClassVar[str] = ev.REQUEST_HEADER
    header: RequestHeader
    reason: Literal["initial", "resume", "change"]


@dataclass(frozen=True, slots=True)
class LlmRequested(Payload):
    """A model request is about to be sent; a compaction's summarising request adds what its
    rebuild needs (protocol.md §14)."""

    TYPE: ClassVar[str] = ev.LLM_REQUEST
    turn: int
    step: int
    attempt: int
    purpose: Literal["compaction"] | None = None
    kept_from_seq: int | None = None
    system: str | None = None
    prompt: str | None = None
    max_tokens: int | None = None
    tool_output_chars: int | None = None
    transcript_chars: int | None = None


@dataclass(frozen=True, slots=True)
class AssistantChunk(Payload):
    TYPE: ClassVar[str] = ev.ASSISTANT_CHUNK
    turn: int
    step: int
    deltas: tuple[StreamDelta, ...]


@dataclass(frozen=True, slots=True)
class AssistantMessageLogged(Payload):
    TYPE: ClassVar[str] = ev.ASSISTANT_MESSAGE
    turn: int
    step: int
    message: MessageJson
    source_event_seqs: tuple[int, ...] = ()  # the chunks it was built from
    finish_reason: str | None = None  # stop, tool-calls, max-tokens, …
    usage: UsageJson | None = None
    interrupted: bool | None = None


@dataclass(frozen=True, slots=True)
class ToolCalled(Payload):
    TYPE: ClassVar[str] = ev.TOOL_CALL
    turn: int
    step: int
    call_id: str
    name: str
    arguments: str  # the model's raw JSON text
    synthetic: bool | None = None  # never executed


@dataclass(frozen=True, slots=True)
class ToolResulted(Payload):
    TYPE: ClassVar[str] = ev.TOOL_RESULT
    turn: int
    step: int
    call_id: str
    name: str
    message: MessageJson  # a tool-result UserMessage
    error: ToolErrorInfo | None = None
    meta: JsonObject | None = None  # what clients render; its shape by tool: TOOL_RESULT_META
    source_event_seqs: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class LlmRetried(Payload):
    TYPE: ClassVar[str] = ev.LLM_RETRY
    turn: int
    step: int
    retry: int
    delay_ms: int
    error: ErrorJson
    purpose: Literal["compaction"] | None = None


@dataclass(frozen=True, slots=True)
class TurnUsage(Payload):
    TYPE: ClassVar[str] = ev.USAGE
    turn: int
    usage: UsageJson  # summed over the turn


@dataclass(frozen=True, slots=True)
class SessionTitled(Payload):
    TYPE: ClassVar[str] = ev.SESSION_TITLE
    title: str


@dataclass(frozen=True, slots=True)
class SessionSettingsSet(Payload):
    """The session's own settings after a change (ACP config options, `/model`): its model settings
    and its sandbox mode, each null where the session follows the daemon's configuration. The latest
    one is the session's choice, in any process that drives it next (a take-over or a load keeps it)."""

    TYPE: ClassVar[str] = ev.SESSION_SETTINGS
    model: str | None = None
    thinking: bool | None = None
    reasoning_effort: str | None = None
    sandbox: SandboxMode | None = None


@dataclass(frozen=True, slots=True)
class SessionModeSet(Payload):
    """The session's mode (`dsh/session/setMode`, ACP `session/set_mode`): which tools are offered and
    which ask (protocol.md §3)."""

    TYPE: ClassVar[str] = ev.SESSION_MODE
    mode: SessionMode
    plan_call_id: str | None = None  # set by approving a plan (`propose_plan`'s call), §3


@dataclass(frozen=True, slots=True)
class ForkOrigin:
    """The session a fork was made from, and the turn it was cut after (its title then)."""

    session_id: str
    at_turn: int
    title: str


@dataclass(frozen=True, slots=True)
class SessionNoticed(Payload):
    """Words for the person about the session itself, kept so a replay shows them where they happened:
    an MCP server that failed or died (`mcp`), the session taken over by another process (`lease`), a
    widening that could not be saved to config.json (`sandbox`), the session made as a fork of
    another (`fork`, with `forkOf`: where it came from, so a client can open the original)."""

    TYPE: ClassVar[str] = ev.SESSION_NOTICE
    kind: Literal["mcp", "lease", "sandbox", "fork"]
    level: Literal["info", "warning"]
    message: str
    fork_of: ForkOrigin | None = None


@dataclass(frozen=True, slots=True)
class SandboxWidened(Payload):
    """A widening of the sandbox the person granted when a command asked for it (`run_command`'s
    `escalate`): for that command (`once`), the rest of the session (`session`), or saved in the
    person's config.json for every later session too (`config`)."""

    TYPE: ClassVar[str] = ev.SANDBOX_WIDENED
    call_id: str
    command: str
    reason: str
    writable: tuple[str, ...]
    network: tuple[str, ...]
    unconfined: bool
    scope: Literal["once", "session", "config"]


@dataclass(frozen=True, slots=True)
class ContextUsage(Payload):
    TYPE: ClassVar[str] = ev.CONTEXT_USAGE
    turn: int
    step: int
    used: int
    window: int | None  # null: unknown


@dataclass(frozen=True, slots=True)
class ContextCompacted(Payload):
    TYPE: ClassVar[str] = ev.CONTEXT_COMPACTED
    turn: int
    reason: Literal["ratio", "overflow", "manual"]
    summary: str
    kept_from_seq: int
    tokens_before: int
    tokens_after: int
    message: MessageJson  # the summary as a UserMessage


@dataclass(frozen=True, slots=True)
class FilesRewound(Payload):
    """A rewind of files, in two durable steps: `started` with its plan before any file is written,
    then `done` (what was written) — or `interrupted`, logged when the session is next opened after
    a crash between the two: which files of the plan hold their restored content and which do not."""

    TYPE: ClassVar[str] = ev.REWIND_FILES
    rewind_id: str
    phase: Literal["started", "done", "interrupted"]
    before_turn: int
    plan: tuple[RewindAction, ...] | None = None  # started
    conversation: bool | None = None  # started: the conversation is cut too, with `done`
    restored: tuple[str, ...] | None = None  # done, interrupted
    deleted: tuple[str, ...] | None = None  # done, interrupted
    failed: tuple[RewindProblem, ...] | None = None  # done: planned but not written
    untouched: tuple[str, ...] | None = None  # interrupted: planned, not written before the crash


@dataclass(frozen=True, slots=True)
class ConversationCut(Payload):
    """From here on the history is what it was when turn `beforeTurn` began: the next request is
    built as if the turns from `beforeTurn` up to this event never happened (they stay in the log)."""

    TYPE: ClassVar[str] = ev.CONVERSATION_CUT
    before_turn: int


PlanStatus = Literal["pending", "in_progress", "done"]


@dataclass(frozen=True, slots=True)
class PlanStep:
    title: str
    status: PlanStatus


@dataclass(frozen=True, slots=True)
class PlanUpdated(Payload):
    """The agent's whole plan after an `update_plan` call (its `callId`), in its order. The current
    plan is the latest one a `conversation/cut` has not taken back (`model/plan.py`)."""

    TYPE: ClassVar[str] = ev.PLAN_UPDATED
    turn: int
    steps: tuple[PlanStep, ...]
    note: str | None = None
    call_id: str | None = None


ReviewSeverity = Literal["error", "warning", "info"]
ReviewTargetKind = Literal["uncommitted", "base", "commit"]


@dataclass(frozen=True, slots=True)
class ReviewTarget:
    """What a review reads: the work tree's uncommitted changes (against HEAD, untracked files
    included), the branch's changes since it left `ref` (a base branch), or one commit `ref`."""

    kind: ReviewTargetKind
    ref: str | None = None  # base: the branch as the person named it; commit: its full id


@dataclass(frozen=True, slots=True)
class ReviewFinding(Payload):
    """One finding the model reported in a review turn (`report_finding`, its `callId`): a file of the
    workspace (`path`, relative to the session's cwd), 1-based inclusive lines, and a suggested fix as
    a unified diff when it has one. `findingId` names it for `dsh/review/dismiss`."""

    TYPE: ClassVar[str] = ev.REVIEW_FINDING
    review_id: str
    finding_id: str
    turn: int
    path: str
    start_line: int
    end_line: int
    severity: ReviewSeverity
    title: str
    body: str
    suggested_patch: str | None = None
    call_id: str | None = None


@dataclass(frozen=True, slots=True)
class ReviewCompleted(Payload):
    """A review turn finished (its model reply ended; not written when the turn was aborted or
    failed): how many findings it reported."""

    TYPE: ClassVar[str] = ev.REVIEW_COMPLETED
    review_id: str
    turn: int
    target: ReviewTarget
    findings: int


@dataclass(frozen=True, slots=True)
class ReviewDismissed(Payload):
    """The person dismissed a finding (`dsh/review/dismiss`): it is no longer listed."""

    TYPE: ClassVar[str] = ev.REVIEW_DISMISSED
    finding_id: str


ProcessStopper = Literal["agent", "person", "cancel", "session-close", "shutdown", "daemon-stopped"]


@dataclass(frozen=True, slots=True)
class ProcessStarted(Payload):
    """A background process `run_command` started (`background: true`): `processId` names it for the
    process tools and `dsh/process/*`; its output stays out of the log (a bounded file of the
    session's, `dsh/process/output`). Written between its call's `tool/call` and `tool/result`."""

    TYPE: ClassVar[str] = ev.PROCESS_STARTED
    process_id: str
    name: str
    command: str
    pid: int
    confined: bool
    turn: int | None = None
    call_id: str | None = None


@dataclass(frozen=True, slots=True)
class ProcessExited(Payload):
    """A background process ended: `exitCode` (None when a signal ended it: `signal`), and who stopped
    it (`stoppedBy`; None: it ended by itself): the agent (`process_stop`), the person
    (`dsh/process/stop`), a cancel that stopped processes, the session's close here, the daemon's
    shutdown, or `daemon-stopped`: the daemon that ran it ended without saying so (killed); the next
    driver writes this for it."""

    TYPE: ClassVar[str] = ev.PROCESS_EXITED
    process_id: str
    exit_code: int | None = None
    signal: int | None = None
    stopped_by: ProcessStopper | None = None


@dataclass(frozen=True, slots=True)
class LogGap(Payload):
    """This seq (one of `from`..`to`) was reserved by a driver that stopped before storing it: an event
    sent with it, if any, never happened (`session/gaps.py`)."""

    TYPE: ClassVar[str] = ev.LOG_GAP
    from_: int
    to: int


SubagentTools = Literal["explore", "edit", "all"]
SubagentStatus = Literal["completed", "budget", "error", "cancelled", "interrupted"]


@dataclass(frozen=True, slots=True)
class SubagentStarted(Payload):
    """The `run_subagent` call `callId` started the child session `childId` (dsh_daemon/subagents):
    its short description, the tool set the parent gave it and its step budget."""

    TYPE: ClassVar[str] = ev.SUBAGENT_STARTED
    call_id: str
    child_id: str
    description: str
    tools: SubagentTools
    max_steps: int
    agent: str | None = None  # the named agent definition it runs (`.dsh/agents/NAME.md`), if any


@dataclass(frozen=True, slots=True)
class SubagentFinished(Payload):
    """The child session of `callId` ended: how (`completed`; stopped by its `budget`; an `error`;
    `cancelled` with its parent; `interrupted` by a crash, written by the parent's repair) and its
    final summary, which the parent's model got as the call's result."""

    TYPE: ClassVar[str] = ev.SUBAGENT_FINISHED
    call_id: str
    child_id: str
    status: SubagentStatus
    summary: str


# ---- live ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StatusChanged(Payload):
    TYPE: ClassVar[str] = ev.STATUS
    status: SessionStatus


@dataclass(frozen=True, slots=True)
class InboxInserted(Payload):
    TYPE: ClassVar[str] = ev.INBOX_INSERTED
    message: InboxItemJson
    target: Target
    index: int  # its position in `target` after the change


@dataclass(frozen=True, slots=True)
class InboxClaimed(Payload):
    TYPE: ClassVar[str] = ev.INBOX_CLAIMED
    message: MessageJson
    turn: int


@dataclass(frozen=True, slots=True)
class InboxDiscarded(Payload):
    TYPE: ClassVar[str] = ev.INBOX_DISCARDED
    message: MessageJson


@dataclass(frozen=True, slots=True)
class AssistantDelta(Payload):
    TYPE: ClassVar[str] = ev.ASSISTANT_DELTA
    turn: int
    step: int
    offset: int  # where the delta's text starts in its block, in UTF-16 code units
    delta: StreamDelta

    @classmethod
    def fast_event(cls, turn: int, step: int, offset: int, delta: JsonObject) -> Event:
        """The event for one streamed delta (`delta`: its JSON), built without the codec: one per
        parsed provider delta, the daemon's hottest path (tests/core checks it against `event()`)."""
        return Event(cls.TYPE, FrozenDict({"turn": turn, "step": step, "offset": offset, "delta": delta}))


@dataclass(frozen=True, slots=True)
class ToolOutput(Payload):
    TYPE: ClassVar[str] = ev.TOOL_OUTPUT
    turn: int
    step: int
    call_id: str
    text: str  # only the new output


@dataclass(frozen=True, slots=True)
class AgentErrored(Payload):
    TYPE: ClassVar[str] = ev.AGENT_ERROR
    turn: int
    step: int | None
    error: ErrorJson


@dataclass(frozen=True, slots=True)
class LeaseChanged(Payload):
    TYPE: ClassVar[str] = ev.SESSION_LEASE
    holder: LeaseHolder | None  # null: nobody else drives it
    read_only: bool


@dataclass(frozen=True, slots=True)
class HandoverAsked(Payload):
    """To the connections driving a session: another process asked to take it over while a turn runs
    here (once per request); `dsh/session/handOver` lets it go at once."""

    TYPE: ClassVar[str] = ev.SESSION_HANDOVER
    requester: LeaseHolder
    force: bool  # true: the turn here is being ended for it (it asked with force)


@dataclass(frozen=True, slots=True)
class PermissionRequested(PermissionAsked, Payload):
    TYPE: ClassVar[str] = ev.PERMISSION_REQUESTED


@dataclass(frozen=True, slots=True)
class PermissionResolved(Payload):
    TYPE: ClassVar[str] = ev.PERMISSION_RESOLVED
    call_id: str
    outcome: PermissionOutcome


@dataclass(frozen=True, slots=True)
class McpStatusChanged(Payload):
    TYPE: ClassVar[str] = ev.MCP_STATUS
    server: str
    state: Literal["starting", "ready", "failed", "exited"]
    transport: Literal["stdio", "http"]
    tools: tuple[str, ...] | None = None
    error: str | None = None
    stderr: tuple[str, ...] | None = None  # the last lines it wrote on stderr (bounded)
    malformed: int | None = None  # messages of its dropped so far


@dataclass(frozen=True, slots=True)
class SandboxStatus(SandboxState, Payload):
    """Live, when it changes; a client attaching later finds it in the attach reply (`sandbox`)."""

    TYPE: ClassVar[str] = ev.SANDBOX_STATUS


@dataclass(frozen=True, slots=True)
class HookFailed(Payload):
    """Live: a configured hook failed, hung or answered garbage (it said nothing); once per hook per
    session."""

    TYPE: ClassVar[str] = ev.HOOK_FAILED
    hook: str  # its name, or its command cut short
    event_: str  # the hook's event, `event` on the wire (`event` is a Payload's method)
    reason: str
    origin: Literal["user", "project"] = "user"


@dataclass(frozen=True, slots=True)
class HooksUntrusted(Payload):
    """Live, when the session opens: its project's `.dsh/config.json` has hooks the person has not
    trusted (or that changed since), so they do not run; `dsh/project/trust {root}` trusts them."""

    TYPE: ClassVar[str] = ev.HOOKS_UNTRUSTED
    root: str
    path: str
    events: tuple[str, ...]
    hooks: int
    changed: bool = False  # trusted before, with other hooks
    problems: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class TurnReviewed(Payload):
    """Durable (written ignorable): the person kept or undid hunks of a file a turn changed
    (`dsh/turn/keep`, `dsh/turn/undo`); `hunks` are the turn diff's hunk indices it applied to
    (empty: a binary file as a whole); an undo's `diff` is what was taken back, as the model is told."""

    TYPE: ClassVar[str] = ev.TURN_REVIEW
    turn: int
    path: str
    action: Literal["keep", "undo"]
    hunks: tuple[int, ...]
    diff: str | None = None


@dataclass(frozen=True, slots=True)
class TurnDiffChanged(Payload):
    """Live: the files turn `turn` changed so far, after each change of a file and once more at its
    end (`final`); the hunks themselves come from `dsh/turn/diff`."""

    TYPE: ClassVar[str] = ev.TURN_DIFF
    turn: int
    files: tuple[TurnDiffFileSummary, ...]
    final: bool


@dataclass(frozen=True, slots=True)
class SubagentEvent(Payload):
    """Live: one event of a child session, as its own stream has it (`type`, `data`, `seq` when
    durable), on its parent's stream, so the parent's clients show the child's steps as they happen."""

    TYPE: ClassVar[str] = ev.SUBAGENT_EVENT
    call_id: str
    child_id: str
    event_: JsonObject  # `event` on the wire


PAYLOADS: dict[str, Any] = {
    cls.TYPE: cls
    for cls in (
        InboxSpliced,
        TurnStarted,
        TurnEnded,
        StepStarted,
        StepEnded,
        RequestHeaderLogged,
        LlmRequested,
        AssistantChunk,
        AssistantMessageLogged,
        ToolCalled,
        ToolResulted,
        LlmRetried,
        TurnUsage,
        SessionTitled,
        SessionModeSet,
        SessionSettingsSet,
        SessionNoticed,
        SandboxWidened,
        ContextUsage,
        ContextCompacted,
        FilesRewound,
        ConversationCut,
        PlanUpdated,
        ProcessStarted,
        ProcessExited,
        TurnReviewed,
        ReviewFinding,
        ReviewCompleted,
        ReviewDismissed,
        LogGap,
        SubagentStarted,
        SubagentFinished,
        StatusChanged,
        InboxInserted,
        InboxClaimed,
        InboxDiscarded,
        AssistantDelta,
        ToolOutput,
        AgentErrored,
        LeaseChanged,
        HandoverAsked,
        PermissionRequested,
        PermissionResolved,
        McpStatusChanged,
        SandboxStatus,
        HookFailed,
        HooksUntrusted,
        TurnDiffChanged,
        SubagentEvent,
    )
}
PAYLOADS[ev.USER_MESSAGE] = Message  # the message itself

# The declared shape of a `tool/result`'s `meta`, by tool name (other tools' meta is plain JSON).
# Clients read what the language server said from here, never from the text the model got.
TOOL_RESULT_META: dict[str, type] = {
    "edit_file": EditMeta,
    "write_file": EditMeta,
    "definition": LanguageToolMeta,
    "references": LanguageToolMeta,
    "symbols": LanguageToolMeta,
    "hover": LanguageToolMeta,
}


share_generated_methods(globals())  # (last: model/sharedmethods.py)
