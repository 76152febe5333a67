"""The values of the dsh wire (protocol.md §2–§8, §12), declared once as frozen dataclasses.

Events (`model/payloads.py`) and methods (`model/methods.py`) are built from these; the JSON Schema
(`model/schema.py`, `dsh-daemon schema`) and the checks of the clients' own declarations are made from
them; `model/codec.py` turns JSON into them and back (camelCase on the wire). Shapes the daemon keeps
as JSON (a message's content, a tool's arguments) are declared here for the schema and carried as
`JsonObject` where they travel (`SchemaAs`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal, TypeAlias

from dsh_daemon.model.codec import JsonObject, JsonValue, NonNegativeInt, PositiveInt, SchemaAs, UriStr
from dsh_daemon.model.sharedmethods import share_generated_methods

Target: TypeAlias = Literal["next-turn", "next-step"]
Verb: TypeAlias = Literal["followup", "steer", "inject", "send", "context"]
ContextKind: TypeAlias = Literal["file", "selection", "diagnostics", "snapshot", "gitDiff", "terminal"]
ClientContextKind: TypeAlias = Literal["file", "selection", "diagnostics", "gitDiff", "terminal"]
Delivery: TypeAlias = Literal["inject", "steer", "followup"]
SessionStatus: TypeAlias = Literal["idle", "running"]
PermissionOutcome: TypeAlias = Literal["allow-once", "allow-always", "reject", "cancelled"]
TurnEndKind: TypeAlias = Literal[
    "completed", "blocked", "max-tokens", "aborted", "error", "interrupted", "budget"
]
SessionMode: TypeAlias = Literal["ask", "accept-edits", "plan"]
SESSION_MODES: tuple[SessionMode, ...] = ("ask", "accept-edits", "plan")
CancelCause: TypeAlias = Literal["user", "shutdown", "disposed", "hook", "handover", "parent"]
SpliceOutcome: TypeAlias = Literal["canceled", "replaced", "moved"]


# ---- editor positions (LSP) ------------------------------------------------------------------------


@dataclass(frozen=True)
class Position:
    line: NonNegativeInt
    character: NonNegativeInt


@dataclass(frozen=True)
class Range:
    start: Position
    end: Position


@dataclass(frozen=True)
class Diagnostic:
    """An LSP Diagnostic as far as the daemon reads it."""

    range: Range
    message: str
    severity: Literal[1, 2, 3, 4] | None = None
    source: str | None = None
    code: JsonValue = None


# ---- messages (§2) ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class TextBlock:
    type: Literal["text"]
    text: str


@dataclass(frozen=True)
class ReasoningBlock:
    type: Literal["reasoning"]
    text: str


@dataclass(frozen=True)
class ToolCallBlock:
    type: Literal["tool-call"]
    id: str
    name: str
    arguments: str  # the raw JSON text the model produced


@dataclass(frozen=True)
class ToolResultBlock:
    type: Literal["tool-result"]
    tool_call_id: str
    content: tuple[Annotated[JsonObject, SchemaAs("ContentBlock")], ...]
    is_error: bool | None = None


@dataclass(frozen=True)
class OtherBlock:
    """A block of another type: kept verbatim, not interpreted."""

    type: str


ContentBlock: TypeAlias = TextBlock | ReasoningBlock | ToolCallBlock | ToolResultBlock | OtherBlock


@dataclass(frozen=True)
class UserSource:
    kind: Literal["user"]


@dataclass(frozen=True)
class EditorSource:
    kind: Literal["editor"]
    uri: str
    context_kind: ContextKind | None = None
    range: Range | None = None
    language_id: str | None = None
    version: int | None = None


@dataclass(frozen=True)
class PluginSource:
    kind: Literal["plugin"]
    plugin: str
    form: str | None = None


@dataclass(frozen=True)
class ToolSource:
    kind: Literal["tool"]
    call_id: str


@dataclass(frozen=True)
class ModelSource:
    kind: Literal["model"]
    provider: str
    model: str


@dataclass(frozen=True)
class HookSource:
    """Context or a reason a configured hook gave (protocol.md "Hooks"): `event` is the hook's event,
    `hook` its name (or its command, cut short)."""

    kind: Literal["hook"]
    event: str
    hook: str


@dataclass(frozen=True)
class OtherSource:
    """A source of another kind: passed through verbatim."""

    kind: str


Source: TypeAlias = (
    UserSource | EditorSource | PluginSource | ToolSource | ModelSource | HookSource | OtherSource
)
ContentJson: TypeAlias = Annotated[JsonObject, SchemaAs(ContentBlock)]
SourceJson: TypeAlias = Annotated[JsonObject, SchemaAs(Source)]


@dataclass(frozen=True)
class Message:
    """A frozen message as the daemon sends it (a `UserMessage`, or an assistant message)."""

    id: str
    role: Literal["user", "assistant"]
    content: tuple[ContentJson, ...]
    source: SourceJson


@dataclass(frozen=True)
class OutgoingMessage:
    """A message as a client writes it: `content` a string (one text block) or content blocks."""

    content: str | tuple[ContentJson, ...]
    id: str | None = None
    source: SourceJson | None = None


@dataclass(frozen=True)
class InboxItem:
    """A pending message: its own fields plus what the queue knows about it (§5)."""

    id: str
    role: Literal["user"]
    content: tuple[ContentJson, ...]
    source: SourceJson
    context: tuple[Annotated[JsonObject, SchemaAs(Message)], ...] | None = None
    wakeup: bool | None = None
    verb: Verb | None = None
    queued_at: int | None = None
    target: Target | None = None


MessageJson: TypeAlias = Annotated[JsonObject, SchemaAs(Message)]
InboxItemJson: TypeAlias = Annotated[JsonObject, SchemaAs(InboxItem)]


@dataclass(frozen=True)
class Inbox:
    next_turn: tuple[InboxItemJson, ...]
    next_step: tuple[InboxItemJson, ...]


# ---- turns and the model (§7) ---------------------------------------------------------------------


@dataclass(frozen=True)
class Usage:
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int | None = None
    reasoning_tokens: int | None = None
    cost_usd: float | None = None


UsageJson: TypeAlias = Annotated[JsonObject, SchemaAs(Usage)]


@dataclass(frozen=True)
class ErrorInfo:
    """A typed failure: `code` (`AUTH`, `RATE_LIMIT`, `LEASE_LOST`, …) and what happened."""

    code: str
    message: str
    status: int | None = None
    retry_after_ms: int | None = None
    request_id: str | None = None
    provider_body: str | None = None  # a failed model request's answer body, redacted and cut (§7)


ErrorJson: TypeAlias = Annotated[JsonObject, SchemaAs(ErrorInfo)]


@dataclass(frozen=True)
class BudgetStop:
    """Why a turn ended `budget` (`agent.budget`, protocol.md §7): the cap that the next model request
    would have passed, and what the turn had used of it (`used` is null for `costUsd` when the model
    has no price: the cost cannot be counted, so the turn is not let run unmetered)."""

    limit: Literal["costUsd", "tokens", "steps"]
    cap: float
    used: float | None = None


BudgetStopJson: TypeAlias = Annotated[JsonObject, SchemaAs(BudgetStop)]


@dataclass(frozen=True)
class TurnEndReason:
    kind: TurnEndKind
    cause: str | None = None  # for `aborted` (the first cause wins): a CancelCause
    error: ErrorJson | None = None  # for `error`
    budget: BudgetStopJson | None = None  # for `budget`


@dataclass(frozen=True)
class TextDelta:
    type: Literal["text", "reasoning"]
    text: str


@dataclass(frozen=True)
class ToolCallDelta:
    type: Literal["tool-call"]
    index: int
    arguments: str
    id: str | None = None
    name: str | None = None


StreamDelta: TypeAlias = TextDelta | ToolCallDelta


@dataclass(frozen=True)
class ToolErrorInfo:
    name: str
    code: str


@dataclass(frozen=True)
class ReportedProblem:
    """One problem the editor's language server reported, as the model was told it (§9): the path as
    shown to the model, 1-based line and column."""

    path: str
    line: PositiveInt
    col: PositiveInt
    severity: Literal["error", "warning", "info", "hint"]
    message: str
    source: str | None = None
    code: str | int | None = None


@dataclass(frozen=True)
class EditMeta:
    """What an edit's `tool/result` carries for clients."""

    path: str
    diff: str
    before_hash: str | None
    after_hash: str
    created: bool
    # The person changed the proposal before allowing it (`newText`, §8): `diff` is what was written.
    edited_by_user: bool | None = None
    # Errors the editor's language server reported after the edit that were not there before (§9):
    # how many, and the first of them as the model was told (at most 10). Absent: none, or no report.
    new_errors: PositiveInt | None = None
    new_error_list: tuple[ReportedProblem, ...] | None = None


@dataclass(frozen=True)
class LanguageToolMeta:
    """What a `definition` / `references` / `symbols` / `hover` `tool/result` carries for clients."""

    # The editor has no language server for the file: the model was told to use grep instead (§9).
    no_language_server: bool | None = None


@dataclass(frozen=True)
class ToolSpecJson:
    name: str
    description: str
    parameters: JsonObject  # a JSON Schema


@dataclass(frozen=True)
class RequestHeader:
    config: JsonObject  # provider, model, maxTokens, thinking, …
    system: str | None = None
    tools: tuple[ToolSpecJson, ...] | None = None


# ---- permissions (§8) ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Escalation:
    """A `run_command` request to widen the sandbox (§16): the model's reason and the exact widening."""

    reason: str
    writable: tuple[str, ...]
    network: tuple[str, ...]
    unconfined: bool


@dataclass(frozen=True)
class PermissionPreview:
    """An edit's diff (`path`, `diff`, `oldText`, `newText`, `created`, `truncated?`), a command
    (`command`, `cwd`, the `sandbox` mode it would run in, and an `escalation` when it asks to widen it)
    or a plan to approve (`kind: "plan"`, `plan`)."""

    path: str | None = None
    diff: str | None = None
    old_text: str | None = None
    new_text: str | None = None
    created: bool | None = None
    truncated: bool | None = None
    command: str | None = None
    cwd: str | None = None
    sandbox: str | None = None
    escalation: Escalation | None = None
    unsaved: str | None = None  # an edit of a file with unsaved changes: "apart" | "overlaps" (§9)
    kind: Literal["plan"] | None = None  # a plan's approval (`propose_plan`, §3): `plan` is the plan
    plan: str | None = None


@dataclass(frozen=True)
class SubagentOrigin:
    """Which child session of the parent asks (a subagent's call, asked through its parent's clients):
    the child session, the parent's `run_subagent` call that started it, and its short description."""

    child_id: str
    call_id: str
    description: str


@dataclass(frozen=True)
class PermissionRequest:
    """`dsh/requestPermission` params (the daemon asks the client)."""

    session_id: str
    call_id: str
    tool: str
    title: str
    arguments: JsonValue
    preview: Annotated[JsonObject, SchemaAs(PermissionPreview)] | None = None
    subagent: SubagentOrigin | None = None  # a child session's call, asked through this session


@dataclass(frozen=True)
class PermissionAsked:
    """A permission request as an event and in lists: the request without `sessionId`."""

    call_id: str
    tool: str
    title: str
    arguments: JsonValue
    preview: Annotated[JsonObject, SchemaAs(PermissionPreview)] | None = None
    subagent: SubagentOrigin | None = None  # a child session's call, asked through this session


@dataclass(frozen=True)
class PermissionGrant:
    """An "allow always" answer: a whole tool, or one exact command (`scope` names it for revoke)."""

    scope: str
    tool: str
    command: str | None = None


# ---- sessions (§3) ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class SessionSummary:
    session_id: str
    title: str | None
    cwd: str | None
    created_at: int
    updated_at: int
    status: SessionStatus
    pending: int
    last_prompt: str | None = None
    parent_id: str | None = None  # a subagent's session: the session that started it
    worktree: JsonObject | None = None  # a session in its own worktree: methods.WorktreeState
    fork_of: JsonObject | None = None  # a fork: `{sessionId, atTurn, title}` of what it was cut from (§15)


@dataclass(frozen=True)
class LeaseHolder:
    pid: int
    host: str


SandboxMode: TypeAlias = Literal["read-only", "workspace-write", "full-access"]


@dataclass(frozen=True)
class SandboxState:
    """Where a session's commands run (protocol.md "Sandbox"): the mode now (plan mode runs them
    read-only), the one configured, the level this machine gives and why a layer could not be had."""

    mode: SandboxMode
    configured_mode: SandboxMode
    level: str  # "Landlock 7 + seccomp + namespaces", "…; namespaces refused: …", "unconfined; …"
    confined: bool  # commands run confined now (false: full-access, or no confinement to be had)
    available: bool  # this machine can confine (false: confined modes refuse to run commands)
    reasons: tuple[str, ...]  # why a layer could not be had
    network: tuple[str, ...]  # domains reachable through the proxy (configured and granted)
    writable: tuple[str, ...]  # paths writable besides the roots (configured and granted)


@dataclass(frozen=True)
class McpServerStatus:
    server: str
    state: Literal["starting", "ready", "failed", "exited"]
    transport: Literal["stdio", "http"]
    tools: tuple[str, ...] | None = None
    error: str | None = None


@dataclass(frozen=True)
class ToolResultView:
    seq: int
    output: str
    truncated: bool | None = None
    length: int | None = None
    is_error: bool | None = None
    error: ToolErrorInfo | None = None
    meta: JsonObject | None = None


@dataclass(frozen=True)
class TranscriptMessage:
    type: Literal["message"]
    seq: int
    step: int | None
    id: str
    source: SourceJson
    text: str
    truncated: bool | None = None
    length: int | None = None


@dataclass(frozen=True)
class TranscriptAssistant:
    type: Literal["assistant"]
    seq: int
    step: int | None
    text: str
    reasoning: str | None = None
    finish_reason: str | None = None
    interrupted: bool | None = None
    partial: bool | None = None


@dataclass(frozen=True)
class TranscriptTool:
    type: Literal["tool"]
    seq: int
    step: int | None
    call_id: str
    name: str
    arguments: str | None = None
    arguments_truncated: bool | None = None
    arguments_length: int | None = None
    synthetic: bool | None = None
    result: ToolResultView | None = None


@dataclass(frozen=True)
class TranscriptEvent:
    """A durable event a client draws as a line of its own (`process/*`, `session/notice`,
    `subagent/started|finished`), as logged."""

    type: Literal["event"]
    seq: int
    step: int | None
    event: str
    data: JsonObject


TranscriptItem: TypeAlias = TranscriptMessage | TranscriptAssistant | TranscriptTool | TranscriptEvent


@dataclass(frozen=True)
class TranscriptTurn:
    turn: int
    start_seq: int
    started_at: int
    items: tuple[TranscriptItem, ...]
    end_seq: int | None = None
    ended_at: int | None = None
    end: TurnEndReason | None = None
    usage: UsageJson | None = None
    retries: int | None = None  # ended in error after its failing request was retried this often


@dataclass(frozen=True)
class TerminalOutput:
    """A command the person ran in one of the editor's terminals and what it printed, as the editor
    recorded it (`terminal` context): sent as is, the daemon reads nothing for it."""

    name: str  # the terminal's name ("bash")
    command: str  # the command line as the shell reported it
    output: str  # what it printed, escape sequences stripped by the editor (its tail when cut)
    cwd: str | None = None  # the directory it ran in, as the shell reported it
    exit_code: int | None = None  # absent: still running, or the shell reported none
    truncated: bool | None = None  # the editor kept only the output's tail


@dataclass(frozen=True)
class ContextRef:
    """Editor context a client asks for (`context` on a send, `dsh/context/add`)."""

    uri: UriStr
    kind: ClientContextKind
    range: Range | None = None
    diagnostics: tuple[Diagnostic, ...] | None = None
    diff: str | None = None  # `gitDiff`: the uncommitted changes the editor read (`git diff HEAD`)
    terminal: TerminalOutput | None = None  # `terminal`: a command's output the editor recorded


# ---- checkpoints, rewind, fork (§15) -----------------------------------------------------------------


@dataclass(frozen=True)
class RewindAction:
    """One file a rewind writes: `restore` (its content before the turn) or `delete` (the agent
    created it)."""

    path: str
    action: Literal["restore", "delete"]
    sha256: str | None = None  # restore: the content's hash (what a crash check compares)


@dataclass(frozen=True)
class RewindProblem:
    """A file a rewind leaves alone, and why (a conflict, a lost checkpoint, a failed write); `turn`:
    the turn whose change it concerns, when known."""

    reason: str
    path: str | None = None
    turn: int | None = None


@dataclass(frozen=True)
class CheckpointFile:
    path: str
    created: bool  # the agent created it in this turn (a rewind deletes it)
    by: Literal["edit", "command"]  # an edit tool, or a command (seen in a git snapshot)
    dropped: bool | None = None  # its checkpoint went over the session's budget: not restorable


@dataclass(frozen=True)
class CheckpointTurn:
    turn: int
    files: tuple[CheckpointFile, ...]
    commands: int  # run_command calls in the turn
    unrestorable_commands: int | None = None  # commands outside a git work tree: their changes are unknown


# ---- a turn's diff, kept or undone by hunk (§15) -------------------------------------------------------

HunkState = Literal["pending", "kept", "undone"]


@dataclass(frozen=True)
class TurnDiffHunk:
    """One changed region of a file between its content before the turn and after it (lines 1-based,
    as a unified diff counts them); `diff` is the hunk as unified-diff text with 3 lines of context,
    its `@@` line first."""

    index: int  # 1, 2, … in the file, stable: derived from the stored before and after contents
    old_start: int
    old_lines: int
    new_start: int
    new_lines: int
    diff: str
    state: HunkState


@dataclass(frozen=True)
class TurnDiffFile:
    path: str
    status: Literal["modified", "created", "deleted"]
    by: Literal["edit", "command"]  # the last change of the turn to it
    added: int  # lines
    removed: int
    hunks: tuple[TurnDiffHunk, ...]
    binary: bool | None = None  # not UTF-8 text: no hunks; kept or undone as a whole
    unavailable: str | None = None  # why there are no hunks (a dropped checkpoint, a pruned git blob)
    state: HunkState | None = None  # binary or unavailable: kept or undone as a whole


@dataclass(frozen=True)
class TurnDiffFileSummary:
    path: str
    status: Literal["modified", "created", "deleted"]
    by: Literal["edit", "command"]
    added: int
    removed: int
    hunks: int
    pending: int  # hunks neither kept nor undone


@dataclass(frozen=True)
class TurnHunkProblem:
    """A hunk an undo left alone, and why (its lines changed since the turn, already undone, …)."""

    reason: str
    path: str
    hunk: int | None = None  # None: the file as a whole


share_generated_methods(globals())  # (last: model/sharedmethods.py)
