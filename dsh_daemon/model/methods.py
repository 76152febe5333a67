"""The dsh methods (protocol.md §3–§8), declared once: method → params type → result type.

`METHODS` is the table the LSP front end serves: a handler is registered for each entry, its params
are structured into the entry's params type (a value that does not fit is `invalid_params` naming
the field), and its result is the entry's result type. `DAEMON_METHODS` are the ones the daemon sends
to the client. A new method is declared here first: its params and result types, then its handler
(`server/app.py`); the JSON Schema (`dsh-daemon schema`) and the clients' checks follow from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from dsh_daemon.model.codec import JsonObject, NonEmptyStr, PositiveInt, SchemaAs, UriStr
from dsh_daemon.model.payloads import (
    HooksUntrusted,
    PlanUpdated,
    ProcessStopper,
    ReviewCompleted,
    ReviewFinding,
    ReviewTarget,
    SubagentTools,
)
from dsh_daemon.model.sharedmethods import share_generated_methods
from dsh_daemon.model.wire import (
    CheckpointTurn,
    ClientContextKind,
    ContextRef,
    Delivery,
    Diagnostic,
    ErrorJson,
    Inbox,
    McpServerStatus,
    OutgoingMessage,
    PermissionGrant,
    PermissionOutcome,
    PermissionRequest,
    Position,
    Range,
    RewindProblem,
    SandboxState,
    SessionMode,
    SessionStatus,
    SessionSummary,
    Target,
    TerminalOutput,
    TranscriptTurn,
    TurnDiffFile,
    TurnHunkProblem,
)

SessionId = NonEmptyStr


@dataclass(frozen=True)
class Empty:
    """`{}`"""


@dataclass(frozen=True)
class SessionParams:
    """Requests that name only their session."""

    session_id: SessionId


# ---- sessions (§3) ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class WorktreeRequest:
    """A new session in a git worktree of its own (protocol.md "Worktrees")."""

    branch: NonEmptyStr | None = None  # default `dsh/<title words>-<8 of the session id>`
    base: NonEmptyStr | None = None  # a commit or branch to start from; default the repository's HEAD


@dataclass(frozen=True)
class SessionNewParams:
    cwd: str | None = None
    title: str | None = None
    mcp_servers: JsonObject | None = None  # {name: {command, args?, env?, cwd?} | {url, headers?} | null}
    worktree: WorktreeRequest | None = None


@dataclass(frozen=True)
class SessionNewResult:
    session_id: str


@dataclass(frozen=True)
class SessionListParams:
    cwd: str | None = None
    limit: PositiveInt | None = None  # above 1000: 1000
    before: int | None = None  # ms, exclusive


@dataclass(frozen=True)
class SessionDeleteParams:
    session_id: SessionId
    remove_worktree: bool | None = None  # true: its worktree's folder and branch go too


@dataclass(frozen=True)
class WorktreeState:
    """A worktree the daemon made, as lists show it (the figures only while its folder exists)."""

    path: str
    branch: str
    base: str  # as named when it was made ("HEAD": the repository's HEAD then)
    repo: str  # the main work tree it belongs to (where `dsh/worktree/apply` writes)
    exists: bool
    changed_files: int | None = None  # files that differ from the base (commits and uncommitted work)
    ahead: int | None = None  # commits on its branch that its base does not have
    base_commit: str | None = None  # dsh/worktree/list only
    session_id: str | None = None  # dsh/worktree/list only: null once its session was deleted


@dataclass(frozen=True)
class WorktreeListParams:
    repo: str | None = None  # only the worktrees of this repository (its main work tree's path)


@dataclass(frozen=True)
class WorktreeListResult:
    worktrees: tuple[WorktreeState, ...]


@dataclass(frozen=True)
class WorktreeParams:
    """A worktree named by its session, or by its path once its session is gone: one of the two."""

    session_id: str | None = None
    path: str | None = None


@dataclass(frozen=True)
class WorktreeFile:
    path: str
    status: Literal["added", "modified", "deleted"]
    added: int
    removed: int
    binary: bool | None = None


@dataclass(frozen=True)
class WorktreeDiffResult:
    path: str
    branch: str
    base: str
    base_commit: str
    files: tuple[WorktreeFile, ...]
    patch: str  # unified diff from the base (binary files as git's binary patches), cut at 2 MB
    truncated: bool


@dataclass(frozen=True)
class WorktreeConflict:
    path: str
    reason: str


@dataclass(frozen=True)
class WorktreeApplyResult:
    applied: bool  # false: nothing was written (`conflicts` says why)
    files: tuple[WorktreeFile, ...] | None = None
    conflicts: tuple[WorktreeConflict, ...] | None = None


@dataclass(frozen=True)
class WorktreeKeepResult:
    branch: str
    commit: str  # the branch's last commit (uncommitted work committed first)


@dataclass(frozen=True)
class WorktreeDiscardResult:
    branch: str  # deleted with the folder


@dataclass(frozen=True)
class SessionListResult:
    sessions: tuple[SessionSummary, ...]
    has_more: bool | None = None  # only when paging (`limit` or `before` given)


@dataclass(frozen=True)
class SessionAttachParams:
    session_id: SessionId
    after_seq: int | None = None
    replay: Literal["all", "none"] = "all"


@dataclass(frozen=True)
class SessionTakeOverParams:
    session_id: SessionId
    force: bool = False  # abort the holder's running turn (cause `handover`, its queue kept)


@dataclass(frozen=True)
class ModelInfo:
    id: str
    name: str | None = None
    context_window: int | None = None
    reasoning_efforts: tuple[str, ...] | None = None  # the efforts the model takes (DeepSeek V4)


@dataclass(frozen=True)
class ModelsListParams:
    session_id: SessionId | None = None  # `current` and `reasoningEffort` are that session's


@dataclass(frozen=True)
class ModelsListResult:
    """`dsh/models/list`: the configured models (the configured one first, DeepSeek's Flash and Pro),
    and the model new requests use (`current`; with `sessionId`, that session's model and effort)."""

    models: tuple[ModelInfo, ...]
    current: str
    reasoning_effort: str | None = None


@dataclass(frozen=True)
class SessionSetModelParams:
    """`dsh/session/setModel`: the session's own model and reasoning effort (each absent: unchanged)."""

    session_id: SessionId
    model: str | None = None
    reasoning_effort: Literal["high", "max"] | None = None


@dataclass(frozen=True)
class SessionSetModeParams:
    session_id: SessionId
    mode: SessionMode


@dataclass(frozen=True)
class HolderInfo:
    """Who drives a session attached read-only: `{pid, host}` and the `session_busy` data."""

    pid: int
    host: str
    holder_pid: int
    holder_host: str
    code: Literal["session_busy"]
    session_id: str


@dataclass(frozen=True)
class SessionAttachResult:
    session_id: str
    status: SessionStatus
    title: str | None
    last_seq: int
    inbox: Inbox
    permission_requests: tuple[Annotated[JsonObject, SchemaAs(PermissionRequest)], ...] | None = None
    mcp_servers: tuple[McpServerStatus, ...] | None = None
    read_only: bool | None = None
    holder: Annotated[JsonObject, SchemaAs(HolderInfo)] | None = None
    parent_id: str | None = None  # a subagent's session: read-only, its parent's call drives it
    mode: SessionMode | None = None  # flag `modes` (§3)
    sandbox: SandboxState | None = None  # where its commands run ("Sandbox"), once probed
    plan: PlanUpdated | None = None  # the current plan (§7 `plan/updated`); absent: none
    hooks_untrusted: HooksUntrusted | None = None  # the project's hooks waiting for trust (§17)


@dataclass(frozen=True)
class SessionTranscriptParams:
    session_id: SessionId
    before_turn: PositiveInt | None = None
    limit: PositiveInt | None = None  # default 20; above 100: 100


@dataclass(frozen=True)
class SessionTranscriptResult:
    turns: tuple[TranscriptTurn, ...]  # newest first
    last_seq: int
    has_more: bool


@dataclass(frozen=True)
class UsageSum:
    """Tokens summed over a session's turns (each turn's `turn/usage`)."""

    input_tokens: int
    output_tokens: int
    cache_read_tokens: int | None = None
    reasoning_tokens: int | None = None


@dataclass(frozen=True)
class SubagentUsageSum:
    """The subagents' part of a session's spend: the turns of every session it started as a subagent,
    summed as the session's own; `sessions`: how many."""

    sessions: int
    turns: int
    usage: UsageSum
    cost_usd: float | None
    unpriced_turns: int


@dataclass(frozen=True)
class SessionUsageResult:
    """`dsh/session/usage`: `turns` that reported usage, their tokens, and their cost in USD by the
    configured prices (null when none of them had a price; `unpricedTurns`: how many had none);
    `subagents`, once the session has started one: the same over its subagents' sessions."""

    turns: int
    usage: UsageSum
    cost_usd: float | None
    unpriced_turns: int
    subagents: SubagentUsageSum | None = None


@dataclass(frozen=True)
class SessionRenameParams:
    session_id: SessionId
    title: NonEmptyStr


@dataclass(frozen=True)
class ProjectTrustParams:
    """The folder whose `.dsh/config.json` hooks the person trusts (as `hooks/untrusted` named it)."""

    root: NonEmptyStr


@dataclass(frozen=True)
class CommandsListParams:
    """One of the two: a session (its folder), or a folder before there is a session."""

    session_id: SessionId | None = None
    cwd: NonEmptyStr | None = None


@dataclass(frozen=True)
class CustomCommandInfo:
    """A custom slash command (protocol.md "Custom commands and skills")."""

    name: str
    description: str
    source: Literal["project", "user"]
    argument_hint: str | None = None
    allowed_tools: tuple[str, ...] | None = None
    model: str | None = None


@dataclass(frozen=True)
class SkillInfo:
    name: str
    description: str
    source: Literal["project", "user"]


@dataclass(frozen=True)
class CommandsListResult:
    commands: tuple[CustomCommandInfo, ...]
    skills: tuple[SkillInfo, ...]
    problems: tuple[str, ...]  # files left out, each naming the file and why


@dataclass(frozen=True)
class ProjectTrustResult:
    root: str  # the folder as the trust is recorded (its real path)
    hooks: int  # how many hooks now run in its sessions
    events: tuple[str, ...]


@dataclass(frozen=True)
class SessionCompactResult:
    compacted: bool
    kept_from_seq: int | None = None
    tokens_before: int | None = None
    tokens_after: int | None = None
    scheduled: bool | None = None  # a turn runs: it compacts at its next boundary
    error: ErrorJson | None = None  # the compaction failed (the turn ended with it)


# ---- checkpoints, rewind, fork (§15) ---------------------------------------------------------------


@dataclass(frozen=True)
class SessionRewindParams:
    session_id: SessionId
    before_turn: PositiveInt
    files: bool = True
    conversation: bool = True
    force: bool = False  # overwrite files the person changed after the agent


@dataclass(frozen=True)
class SessionRewindResult:
    restored: tuple[str, ...]
    deleted: tuple[str, ...]
    conflicts: tuple[RewindProblem, ...]  # non-empty without force: nothing was done
    not_restorable: tuple[RewindProblem, ...]
    cut_seq: int | None = None  # the `conversation/cut` event's seq


@dataclass(frozen=True)
class SessionCheckpointsResult:
    turns: tuple[CheckpointTurn, ...]  # oldest first; turns that changed no file are left out
    stored_bytes: int
    max_bytes: int


@dataclass(frozen=True)
class TurnDiffParams:
    session_id: SessionId
    turn: PositiveInt | None = None  # absent: the last turn still in the conversation


@dataclass(frozen=True)
class TurnDiffResult:
    turn: int | None  # None: no turn yet
    files: tuple[TurnDiffFile, ...]  # in the order the turn first changed them
    final: bool  # the turn has ended


@dataclass(frozen=True)
class TurnReviewParams:
    session_id: SessionId
    turn: PositiveInt
    path: str
    hunks: tuple[PositiveInt, ...] | None = None  # absent: every hunk of the file


@dataclass(frozen=True)
class TurnKeepResult:
    kept: tuple[int, ...]


@dataclass(frozen=True)
class TurnUndoResult:
    undone: tuple[int, ...]  # the hunks taken back (empty with `wholeFile` for a binary file)
    conflicts: tuple[TurnHunkProblem, ...]  # left alone: nothing was written for them
    whole_file: bool | None = None  # a binary file (or a created/deleted one) taken back as a whole
    note_id: str | None = None  # the id of the note queued for the model (a `dsh/inject`)


@dataclass(frozen=True)
class SessionForkParams:
    session_id: SessionId
    at_turn: PositiveInt
    message: OutgoingMessage | None = None  # queued in the fork as a followup (it runs at once)


@dataclass(frozen=True)
class SessionForkResult:
    session_id: str


# ---- sending (§4) ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class SendParams:
    session_id: SessionId
    message: OutgoingMessage
    target: Target
    wakeup: bool
    context: tuple[ContextRef, ...] | None = None  # at most 20


@dataclass(frozen=True)
class PresetSendParams:
    """`dsh/followup`, `dsh/steer`, `dsh/inject`: presets of `dsh/send`."""

    session_id: SessionId
    message: OutgoingMessage
    context: tuple[ContextRef, ...] | None = None


@dataclass(frozen=True)
class SendResult:
    message_id: str
    context_ids: tuple[str, ...] | None = None


@dataclass(frozen=True)
class CancelParams:
    session_id: SessionId
    keep_inbox: bool = False
    cause: Literal["user", "hook"] = "user"
    stop_processes: bool = False  # the session's background processes are stopped too (§12)


@dataclass(frozen=True)
class WakeResult:
    started: bool


# ---- the inbox (§5) --------------------------------------------------------------------------------


@dataclass(frozen=True)
class InboxRemoveParams:
    session_id: SessionId
    message_id: NonEmptyStr


@dataclass(frozen=True)
class InboxRemoveResult:
    removed: bool


@dataclass(frozen=True)
class InboxReplaceParams:
    session_id: SessionId
    message_id: NonEmptyStr
    message: OutgoingMessage
    context: tuple[ContextRef, ...] | None = None  # given (even []): replaces the attachments


@dataclass(frozen=True)
class InboxMoveParams:
    session_id: SessionId
    message_id: NonEmptyStr
    target: Target
    index: int | None = None  # in the target list after removal; negative from the end; absent: the end


# ---- editor context (§6) ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ContextAddParams:
    session_id: SessionId
    uri: UriStr
    kind: ClientContextKind
    range: Range | None = None
    diagnostics: tuple[Diagnostic, ...] | None = None
    diff: str | None = None  # `gitDiff` (§6)
    terminal: TerminalOutput | None = None  # `terminal` (§6)
    delivery: Delivery = "inject"


@dataclass(frozen=True)
class MessageIdResult:
    message_id: str


@dataclass(frozen=True)
class ContextDidChangeParams:
    """The editor's current state, latest wins (without `sessionId`: every session followed)."""

    session_id: str | None = None
    active_uri: UriStr | None = None
    selection: Range | None = None
    visible_range: Range | None = None
    diagnostics: tuple[Diagnostic, ...] | None = None


# ---- permissions (§8) ------------------------------------------------------------------------------


@dataclass(frozen=True)
class PermissionsListResult:
    grants: tuple[PermissionGrant, ...]
    open: tuple[Annotated[JsonObject, SchemaAs(PermissionRequest)], ...]


@dataclass(frozen=True)
class PermissionsRevokeParams:
    session_id: SessionId
    scope: str | None = None  # absent: every grant


@dataclass(frozen=True)
class PermissionsRevokeResult:
    revoked: int


# For an edit that overlaps the person's unsaved changes (preview `unsaved: "overlaps"`): save them
# with it, or keep the edit in the editor's buffer only (§8, §9).
UnsavedChoice = Literal["both", "buffer-only"]
PlanApprovalMode = Literal["accept-edits", "ask"]


@dataclass(frozen=True)
class PermissionsRespondParams:
    session_id: SessionId
    call_id: NonEmptyStr
    outcome: PermissionOutcome
    new_text: str | None = None  # an edit accepted as changed by the person (§8)
    persist: bool | None = None  # an allow-always of a sandbox widening, saved to config.json (§16)
    unsaved: UnsavedChoice | None = None  # an edit overlapping the person's unsaved changes (§8)
    mode: PlanApprovalMode | None = None  # a plan's approval: the mode to carry it out in (§3)
    feedback: str | None = None  # a plan sent back for revision: the person's words for the model (§3)


@dataclass(frozen=True)
class PermissionsRespondResult:
    answered: bool


@dataclass(frozen=True)
class PermissionAnswer:
    """The client's answer to `dsh/requestPermission`."""

    outcome: PermissionOutcome
    new_text: str | None = None  # an edit accepted as changed by the person (§8)
    persist: bool | None = None  # an allow-always of a sandbox widening, saved to config.json (§16)
    unsaved: UnsavedChoice | None = None  # an edit overlapping the person's unsaved changes (§8)
    mode: PlanApprovalMode | None = None  # a plan's approval: the mode to carry it out in (§3)
    feedback: str | None = None  # a plan sent back for revision: the person's words for the model (§3)


# ---- the editor's abilities (§9): the daemon asks, the client answers -------------------------------


@dataclass(frozen=True)
class DocumentSaveParams:
    uris: tuple[str, ...]
    # to a client offering `documentSaveText`: for these uris write this text to the file instead of
    # saving the document, which keeps its unsaved changes (§9)
    texts: dict[str, str] | None = None


@dataclass(frozen=True)
class SaveFailure:
    uri: str
    message: str


@dataclass(frozen=True)
class DocumentSaveResult:
    saved: tuple[str, ...]
    failed: tuple[SaveFailure, ...] | None = None


@dataclass(frozen=True)
class EditorDiagnosticsParams:
    uris: tuple[str, ...] | None = None  # null: every document with problems
    # after an edit, to a client offering `diagnosticsSettle`: answer once the language servers
    # re-checked `uris`, after this many ms at most
    settle_ms: int | None = None


@dataclass(frozen=True)
class FileDiagnosticsJson:
    uri: str
    diagnostics: tuple[Annotated[JsonObject, SchemaAs(Diagnostic)], ...]  # LSP `Diagnostic`s, as sent
    settled: bool | None = None  # with `settleMs`: false when the wait ran out before a re-check


@dataclass(frozen=True)
class EditorDiagnosticsResult:
    items: tuple[FileDiagnosticsJson, ...]


@dataclass(frozen=True)
class Location:
    uri: str
    range: Range


@dataclass(frozen=True)
class EditorPositionParams:
    """`dsh/editor/definition`, `dsh/editor/hover`: a place in a document (UTF-16 characters)."""

    uri: str
    position: Position


@dataclass(frozen=True)
class EditorReferencesParams:
    uri: str
    position: Position
    include_declaration: bool | None = None


@dataclass(frozen=True)
class EditorSymbolsParams:
    """A document's symbols (`uri`), or the workspace's matching `query`."""

    uri: str | None = None
    query: str | None = None


@dataclass(frozen=True)
class LocationsResult:
    locations: tuple[Location, ...]
    no_language_server: bool | None = None  # no language server answers for this file


@dataclass(frozen=True)
class SymbolJson:
    name: str
    kind: int  # LSP SymbolKind
    location: Location
    container_name: str | None = None


@dataclass(frozen=True)
class EditorSymbolsResult:
    symbols: tuple[SymbolJson, ...]
    no_language_server: bool | None = None


@dataclass(frozen=True)
class EditorHoverResult:
    contents: str  # markdown
    no_language_server: bool | None = None


@dataclass(frozen=True)
class DshClientCapabilities:
    """`initialize` params `capabilities.experimental.dsh`: what the client offers the daemon."""

    document_save: bool | None = None
    diagnostics: bool | None = None
    diagnostics_settle: bool | None = None  # understands `settleMs` on dsh/editor/diagnostics
    language_features: tuple[Literal["definition", "references", "symbols", "hover"], ...] | None = None


# ---- background processes (§12) --------------------------------------------------------------------

PROCESS_OUTPUT_DEFAULT_CHARS = 20_000
PROCESS_OUTPUT_MAX_CHARS = 200_000


@dataclass(frozen=True)
class ProcessParams:
    session_id: SessionId
    process_id: NonEmptyStr


@dataclass(frozen=True)
class ProcessOutputParams:
    session_id: SessionId
    process_id: NonEmptyStr
    max_chars: PositiveInt | None = None  # default 20,000; above 200,000: 200,000


@dataclass(frozen=True)
class ProcessInfo:
    """A `process/started`'s data, `running`, and once it ended its `process/exited`'s."""

    process_id: str
    name: str
    command: str
    pid: int
    confined: bool
    running: bool
    turn: int | None = None
    call_id: str | None = None
    exit_code: int | None = None
    signal: int | None = None
    stopped_by: ProcessStopper | None = None


@dataclass(frozen=True)
class ProcessListResult:
    processes: tuple[ProcessInfo, ...]


@dataclass(frozen=True)
class AgentDefinitionInfo:
    """A named agent of the session (`.dsh/agents/NAME.md`, protocol.md §12 "Subagents")."""

    name: str
    description: str
    tools: SubagentTools
    model: str | None = None


@dataclass(frozen=True)
class AgentsListParams:
    """One of the two: a session (the agents its tools were wired with), or a folder before there is a
    session (its `.dsh/agents`, read now)."""

    session_id: SessionId | None = None
    cwd: NonEmptyStr | None = None


@dataclass(frozen=True)
class AgentListResult:
    agents: tuple[AgentDefinitionInfo, ...]


@dataclass(frozen=True)
class ProcessOutputResult:
    process_id: str
    text: str
    truncated: bool  # older output was left out (the file keeps the newest 256 KiB or more)
    running: bool


@dataclass(frozen=True)
class ProcessStopResult:
    stopped: bool  # false: it had ended already
    exit_code: int | None = None
    signal: int | None = None


# ---- reviews (protocol.md "Review") ------------------------------------------------------------------


@dataclass(frozen=True)
class ReviewStartParams:
    """Neither `base` nor `commit`: the uncommitted changes; at most one of the two."""

    session_id: SessionId
    base: NonEmptyStr | None = None  # a branch (any ref): the changes since the work tree's HEAD left it
    commit: NonEmptyStr | None = None  # one commit
    instructions: str | None = None  # what the person wants looked at, at most 20,000 characters


@dataclass(frozen=True)
class ReviewStartResult:
    review_id: str
    message_id: str  # the queued followup that runs the review turn
    target: ReviewTarget  # a commit as its full id
    files: tuple[str, ...]  # the changed files, relative to the work tree's top
    truncated: bool  # the diff was cut (the model reads the rest of the files with its tools)


@dataclass(frozen=True)
class ReviewListResult:
    findings: tuple[ReviewFinding, ...]  # not dismissed, not taken back by a rewind; in log order
    reviews: tuple[ReviewCompleted, ...]  # the finished reviews


@dataclass(frozen=True)
class ReviewDismissParams:
    session_id: SessionId
    finding_id: NonEmptyStr


@dataclass(frozen=True)
class ReviewDismissResult:
    dismissed: bool  # false: it was dismissed already


# ---- what the daemon sends -------------------------------------------------------------------------


@dataclass(frozen=True)
class EventParams:
    """`dsh/event`: `seq` exactly on durable events; `data` is the payload of `type`."""

    session_id: str
    type: str
    data: JsonObject
    seq: int | None = None


@dataclass(frozen=True)
class DshCapabilities:
    """`initialize` result `capabilities.experimental.dsh`: a flag per feature added within
    protocol version 1 (an absent flag means an older daemon without that feature)."""

    protocol_version: int
    version: str
    sessions: bool | None = None
    inbox_edits: bool | None = None
    editor_context: tuple[str, ...] | None = None
    send_context: bool | None = None
    inbox_items: bool | None = None
    delta_offsets: bool | None = None
    permission_events: bool | None = None
    transcript: bool | None = None
    session_management: bool | None = None
    detach: bool | None = None
    live_read_only: bool | None = None
    configuration_change: bool | None = None
    mcp_servers: bool | None = None
    rewind: bool | None = None
    editor_coherence: bool | None = None
    edited_accept: bool | None = None
    persist_widening: bool | None = None  # `persist` in a permission answer: a widening saved (§16)
    editor_diagnostics: bool | None = None
    language_features: bool | None = None
    take_over: bool | None = None
    modes: bool | None = None
    models: bool | None = None
    session_models: bool | None = None  # dsh/session/setModel, dsh/models/list `sessionId` (§1)
    processes: bool | None = None
    custom_commands: bool | None = None  # dsh/commands/list, `/NAME` expanded in sends, skills (§18)
    turn_diff: bool | None = None
    review: bool | None = None  # dsh/review/*, review/* events
    worktrees: bool | None = None  # dsh/session/new `worktree`, dsh/worktree/*
    hand_over: bool | None = None  # `session/handover` to the driver, dsh/session/handOver
    named_agents: bool | None = None  # dsh/agents/list by session or by cwd (§12 "Subagents")
    session_usage: bool | None = None  # dsh/session/usage: the session's summed tokens and cost (§3)


@dataclass(frozen=True)
class Method:
    """One method of the wire: what its params and its result are (`result` None: a notification)."""

    name: str
    params: Any
    result: Any | None
    summary: str

    @property
    def is_notification(self) -> bool:
        return self.result is None


def _table(*methods: Method) -> dict[str, Method]:
    return {m.name: m for m in methods}


METHODS: dict[str, Method] = _table(
    Method("dsh/session/new", SessionNewParams, SessionNewResult, "create a session and follow it"),
    Method("dsh/session/list", SessionListParams, SessionListResult, "sessions, most recently updated first"),
    Method("dsh/session/attach", SessionAttachParams, SessionAttachResult, "follow a session's events"),
    Method("dsh/session/detach", SessionParams, Empty, "stop following a session"),
    Method("dsh/models/list", ModelsListParams, ModelsListResult, "the configured models"),
    Method("dsh/session/setModel", SessionSetModelParams, Empty, "the session's model and effort"),
    Method("dsh/session/setMode", SessionSetModeParams, Empty, "ask, accept-edits or plan"),
    Method("dsh/session/takeOver", SessionTakeOverParams, Empty, "ask the process driving it to let go"),
    Method("dsh/session/handOver", SessionParams, Empty, "let a session another process asks for go now"),
    Method("dsh/session/transcript", SessionTranscriptParams, SessionTranscriptResult, "a page of turns"),
    Method("dsh/session/usage", SessionParams, SessionUsageResult, "tokens and cost of all its turns"),
    Method("dsh/session/rename", SessionRenameParams, Empty, "set the title"),
    Method("dsh/session/delete", SessionDeleteParams, Empty, "remove a session"),
    Method("dsh/session/compact", SessionParams, SessionCompactResult, "compact the history now"),
    Method("dsh/session/rewind", SessionRewindParams, SessionRewindResult, "undo files, cut the history"),
    Method("dsh/session/checkpoints", SessionParams, SessionCheckpointsResult, "the files each turn changed"),
    Method("dsh/session/fork", SessionForkParams, SessionForkResult, "a new session from a turn"),
    Method("dsh/turn/diff", TurnDiffParams, TurnDiffResult, "the files a turn changed, by hunk"),
    Method("dsh/turn/keep", TurnReviewParams, TurnKeepResult, "mark a turn's hunks reviewed"),
    Method("dsh/turn/undo", TurnReviewParams, TurnUndoResult, "take back a turn's hunks"),
    Method("dsh/send", SendParams, SendResult, "send(target × wakeup)"),
    Method("dsh/followup", PresetSendParams, SendResult, "a prompt: next-turn, waking"),
    Method("dsh/steer", PresetSendParams, SendResult, "redirect: next-step, waking"),
    Method("dsh/inject", PresetSendParams, SendResult, "context: next-step, not waking"),
    Method("dsh/cancel", CancelParams, Empty, "abort the running turn (keepInbox: keep the queue)"),
    Method("dsh/wake", SessionParams, WakeResult, "run parked work now"),
    Method("dsh/process/list", SessionParams, ProcessListResult, "the session's background processes"),
    Method("dsh/agents/list", AgentsListParams, AgentListResult, "named agents of a session or a folder"),
    Method("dsh/process/output", ProcessOutputParams, ProcessOutputResult, "a process's newest output"),
    Method("dsh/process/stop", ProcessParams, ProcessStopResult, "stop a background process"),
    Method("dsh/inbox/list", SessionParams, Inbox, "the pending items"),
    Method("dsh/inbox/remove", InboxRemoveParams, InboxRemoveResult, "remove a pending item"),
    Method("dsh/inbox/replace", InboxReplaceParams, SendResult, "replace a pending item in place"),
    Method("dsh/inbox/move", InboxMoveParams, Empty, "move a pending item"),
    Method("dsh/context/add", ContextAddParams, MessageIdResult, "send editor context"),
    Method("dsh/context/didChange", ContextDidChangeParams, None, "the editor's ambient state"),
    Method("dsh/permissions/list", SessionParams, PermissionsListResult, "grants and open requests"),
    Method("dsh/permissions/revoke", PermissionsRevokeParams, PermissionsRevokeResult, "forget grants"),
    Method("dsh/permissions/respond", PermissionsRespondParams, PermissionsRespondResult, "answer a request"),
    Method("dsh/project/trust", ProjectTrustParams, ProjectTrustResult, "run a project's hooks from now on"),
    Method("dsh/commands/list", CommandsListParams, CommandsListResult, "custom slash commands and skills"),
    Method("dsh/review/start", ReviewStartParams, ReviewStartResult, "queue a read-only review turn"),
    Method("dsh/review/list", SessionParams, ReviewListResult, "a session's live review findings"),
    Method("dsh/review/dismiss", ReviewDismissParams, ReviewDismissResult, "dismiss a finding durably"),
    Method("dsh/worktree/list", WorktreeListParams, WorktreeListResult, "the worktrees the daemon made"),
    Method("dsh/worktree/diff", WorktreeParams, WorktreeDiffResult, "a worktree's changes from its base"),
    Method("dsh/worktree/apply", WorktreeParams, WorktreeApplyResult, "its changes into your work tree"),
    Method(
        "dsh/worktree/keep",
        WorktreeParams,
        WorktreeKeepResult,
        "commit it, remove the folder, keep the branch",
    ),
    Method("dsh/worktree/discard", WorktreeParams, WorktreeDiscardResult, "remove folder and branch"),
)

DAEMON_METHODS: dict[str, Method] = _table(
    Method("dsh/event", EventParams, None, "an event of a session the connection follows"),
    Method("dsh/requestPermission", PermissionRequest, PermissionAnswer, "ask before a tool call"),
    Method("dsh/document/save", DocumentSaveParams, DocumentSaveResult, "save documents the agent edited"),
    Method("dsh/editor/diagnostics", EditorDiagnosticsParams, EditorDiagnosticsResult, "its problems"),
    Method("dsh/editor/definition", EditorPositionParams, LocationsResult, "where a symbol is defined"),
    Method("dsh/editor/references", EditorReferencesParams, LocationsResult, "where a symbol is used"),
    Method("dsh/editor/symbols", EditorSymbolsParams, EditorSymbolsResult, "a file's or workspace's symbols"),
    Method("dsh/editor/hover", EditorPositionParams, EditorHoverResult, "a symbol's type and documentation"),
)


share_generated_methods(globals())  # (last: model/sharedmethods.py)
