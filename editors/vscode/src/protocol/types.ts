// Wire types of the dsh daemon protocol (protocol.md, version 1). No `vscode` import here: this module
// is shared by the extension host, the webview bundle and the tests.

export type Target = 'next-turn' | 'next-step';

export interface Position { line: number; character: number }
export interface Range { start: Position; end: Position }

export type ContentBlock =
  | { type: 'text'; text: string }
  | { type: 'reasoning'; text: string }
  | { type: 'tool-call'; id: string; name: string; arguments: string }
  | { type: 'tool-result'; toolCallId: string; content: ContentBlock[]; isError?: boolean }
  | { type: string; [key: string]: unknown };

export type ContextKind = 'file' | 'selection' | 'diagnostics' | 'snapshot';

export type Source =
  | { kind: 'user' }
  | { kind: 'editor'; uri: string; contextKind?: ContextKind; range?: Range; languageId?: string; version?: number }
  | { kind: 'plugin'; plugin: string; form?: string }
  | { kind: 'tool'; callId: string }
  | { kind: 'model'; provider: string; model: string }
  | { kind: string; [key: string]: unknown };

export interface UserMessage {
  id: string;
  role: 'user' | 'assistant' | string;
  content: ContentBlock[];
  source: Source;
}

/** What a client writes when it sends a message. */
export interface OutgoingMessage { id?: string; content: string | ContentBlock[]; source?: Source }

export type Verb = 'followup' | 'steer' | 'inject' | 'send' | 'context';

/** The agent's whole plan (`plan/updated`, protocol.md §7); an empty `steps` clears it. */
export interface Plan {
  turn: number; steps: { title: string; status: 'pending' | 'in_progress' | 'done' }[]; note?: string; callId?: string;
}

/** What a review reads (`dsh/review/start`, protocol.md "Review"); a commit as its full id. */
export interface ReviewTarget { kind: 'uncommitted' | 'base' | 'commit'; ref?: string }
/** One finding of a review (`review/finding`): `path` relative to the session's cwd (absolute when
 * outside it), 1-based inclusive lines; `suggestedPatch` a unified diff. */
export interface ReviewFinding {
  reviewId: string; findingId: string; turn: number; path: string; startLine: number; endLine: number;
  severity: 'error' | 'warning' | 'info'; title: string; body: string; suggestedPatch?: string; callId?: string;
}

export type SandboxMode = 'read-only' | 'workspace-write' | 'full-access';
/** Where a session's commands run (`sandbox/status`, protocol.md §16): the mode now (read-only in plan
 *  mode), the one configured, the level this machine gives in words, whether commands run confined
 *  now, whether this machine can confine at all, why a layer is missing, what is allowed. */
export interface SandboxStatus {
  mode: SandboxMode; configuredMode: SandboxMode; level: string; confined: boolean; available: boolean;
  reasons: string[]; network: string[]; writable: string[];
}

/** A background process of the session (`dsh/process/list`, `process/started` / `process/exited`,
 *  protocol.md §12, flag `processes`). */
export type StoppedBy = 'agent' | 'person' | 'cancel' | 'session-close' | 'shutdown' | 'daemon-stopped';
export interface ProcessInfo {
  processId: string; name: string; command: string; pid: number; confined: boolean; running: boolean;
  turn?: number; callId?: string; exitCode?: number | null; signal?: number | null; stoppedBy?: StoppedBy | string | null;
}
/** `dsh/process/output`: the newest characters of its output file. */
export interface ProcessOutput { processId: string; text: string; truncated: boolean; running: boolean }

/** A project's hooks waiting for the person's trust (`hooks/untrusted`, attach `hooksUntrusted`, §17). */
export interface HooksUntrusted { root: string; path: string; events: string[]; hooks: number; changed?: boolean; problems?: string[] }

/** A custom slash command of the session (`dsh/commands/list`, §18, flag `customCommands`). */
export interface CustomCommandInfo {
  name: string; description: string; source: 'project' | 'user' | string; argumentHint?: string; allowedTools?: string[]; model?: string;
}
/** What the person typed, on a message the daemon expanded from a custom command (`source.command`). */
export interface InvokedCommand { name: string; arguments: string; origin?: string; path?: string; allowedTools?: string[]; model?: string }

/** A pending inbox entry: the message's own fields plus what the queue knows about it (all optional:
 *  an older daemon sends bare UserMessages). `context`: the editor messages that travel with it. */
export interface InboxItem extends UserMessage {
  context?: UserMessage[]; wakeup?: boolean; verb?: Verb | string; queuedAt?: number; target?: Target;
}

export interface Inbox { nextTurn: InboxItem[]; nextStep: InboxItem[] }

/** What `context` on a send refers to; read by the daemon at send time (protocol.md §4). */
export interface ContextRef { uri: string; kind: 'file' | 'selection' | 'diagnostics' | 'gitDiff' | 'terminal'; range?: Range; diagnostics?: unknown[]; diff?: string; terminal?: TerminalOutput }

/** `terminal` context: a command run in one of the editor's terminals and what it printed (protocol.md §6). */
export interface TerminalOutput { name: string; command: string; output: string; cwd?: string; exitCode?: number; truncated?: boolean }

/** The reply of a send: the message id, plus the ids of the editor messages attached with `context`. */
export interface SendResult { messageId: string; contextIds?: string[] }

/** Where a fork came from (`session/notice {kind: "fork", forkOf}`, §15): the original and the turn it was cut after. */
export interface ForkOrigin { sessionId: string; atTurn: number; title: string }

export interface SessionInfo {
  sessionId: string; title: string; cwd: string; createdAt: number; updatedAt: number;
  status: 'idle' | 'running'; pending: number;
  /** The latest human prompt, cut (daemons with `sessionManagement`). */
  lastPrompt?: string;
  /** A subagent's session: the session whose `run_subagent` call started it. */
  parentId?: string;
  /** A fork (`dsh/session/fork`): the session it was cut from, the turn and that session's title then. */
  forkOf?: { sessionId: string; atTurn: number; title: string };
}

export interface AttachResult {
  sessionId: string; status: 'idle' | 'running'; lastSeq: number; inbox: Inbox;
  /** The session's title ("" when it has none yet); absent from older daemons. */
  title?: string;
  readOnly?: boolean; holder?: Record<string, unknown>;
  /** The session's mode (daemons with `modes`). */
  mode?: 'ask' | 'accept-edits' | 'plan';
  /** The agent's current plan (`plan/updated`'s data), whatever was replayed; absent: none. */
  plan?: Plan;
  /** The last `sandbox/status` of the session (daemons with a sandbox, protocol.md §16). */
  sandbox?: SandboxStatus;
  /** The session's open permission requests (daemons with `permissionEvents`). */
  permissionRequests?: PermissionRequest[];
  /** The project's hooks, while they wait for the person's trust (§17). */
  hooksUntrusted?: HooksUntrusted;
}

/** A page of `dsh/session/transcript` (daemons with `transcript`): turns newest first. */
export interface TranscriptPage { turns: TranscriptTurn[]; lastSeq: number; hasMore: boolean }

export interface TranscriptTurn {
  turn: number; startSeq: number; startedAt: number; items: TranscriptItem[];
  endSeq?: number; endedAt?: number; end?: TurnEndReason; usage?: Usage;
  /** A turn that ended in error: how many times its failing request was retried. */
  retries?: number;
}

export type TranscriptItem =
  | { type: 'message'; seq: number; step: number; id: string; source: Source; text: string; truncated?: boolean; length?: number; queued?: true }
  | { type: 'assistant'; seq: number; step: number; text: string; reasoning?: string; finishReason?: string; interrupted?: true; partial?: true }
  | {
    type: 'tool'; seq: number; step: number; callId: string; name: string; arguments: string; synthetic?: true;
    result?: { seq: number; output: string; isError?: boolean; error?: ToolError; meta?: ToolResultMeta; truncated?: boolean; length?: number };
  }
  /** A durable event shown as a line of its own (`process/*`, `session/notice`), as logged. */
  | { type: 'event'; seq: number; step: number | null; event: string; data: Record<string, unknown> };

export interface Usage {
  inputTokens: number; outputTokens: number; cacheReadTokens?: number; reasoningTokens?: number; costUsd?: number;
}

/** The subagents' part of a session's spend (`dsh/session/usage`'s `subagents`): the same sums over
 *  every session it started as a subagent; `sessions`: how many. */
export interface SubagentUsageSum {
  sessions: number;
  turns: number;
  usage: { inputTokens: number; outputTokens: number; cacheReadTokens?: number; reasoningTokens?: number };
  costUsd: number | null;
  unpricedTurns: number;
}

/** `dsh/session/usage` (§3): the session's turns that reported usage, their tokens, and their cost
 *  by the configured prices (null: none had a price; `unpricedTurns`: how many had none); its
 *  subagents' apart, once it has started one. */
export interface SessionUsage {
  turns: number;
  usage: { inputTokens: number; outputTokens: number; cacheReadTokens?: number; reasoningTokens?: number };
  costUsd: number | null;
  unpricedTurns: number;
  subagents?: SubagentUsageSum;
}

export type TurnEndKind = 'completed' | 'blocked' | 'max-tokens' | 'aborted' | 'error' | 'interrupted' | 'budget';
export interface TurnEndReason {
  kind: TurnEndKind; cause?: 'user' | 'shutdown' | 'disposed' | 'hook' | string;
  error?: { code: string; message: string; [k: string]: unknown };
  /** `budget`: the agent.budget cap the next request would have passed (protocol.md §7). */
  budget?: { limit: 'costUsd' | 'tokens' | 'steps'; cap: number; used?: number | null };
}

export type StreamDelta =
  | { type: 'text' | 'reasoning'; text: string }
  | { type: 'tool-call'; index: number; id?: string; name?: string; arguments: string };

export interface ToolError { name?: string; code: string; message?: string }
export interface EditMeta {
  path: string; diff: string; beforeHash?: string; afterHash?: string; created?: boolean;
  /** The person changed the proposal before allowing it: `diff` is what was written (§8). */
  editedByUser?: boolean;
  /** Errors the language server reported after the edit that were not there before (§9): how many,
   *  and those the model was shown. Absent: none. */
  newErrors?: number; newErrorList?: ReportedProblem[];
}

/** A problem as the model was told it: the path as shown to the model, 1-based line and column (§9). */
export interface ReportedProblem {
  path: string; line: number; col: number; severity: 'error' | 'warning' | 'info' | 'hint'; message: string;
  source?: string; code?: string | number;
}

/** definition / references / symbols / hover results: no language server answered for the file (§9). */
export interface LanguageToolMeta { noLanguageServer?: boolean }

/** A `tool/result`'s meta: its tool's declared shape (schema `x-toolResultMeta`), other tools' JSON.
 *  What the language server told the agent is read here, never from the text the model got. */
export type ToolResultMeta = Partial<EditMeta> & LanguageToolMeta & Record<string, unknown>;

/** dsh/event params, by type. */
export interface EventDataMap {
  'agent/inbox/spliced': { target: Target; start: number; inserted: InboxItem[]; removedCount?: number; removedIds?: string[]; outcome?: 'canceled' | 'replaced' | 'moved' };
  'turn/start': { turn: number };
  'step/start': { turn: number; step: number };
  'step/end': { turn: number; step: number };
  'user/message': UserMessage;
  'request/header': { header: unknown; reason: string };
  'llm/request': { turn: number; step: number; attempt: number };
  'assistant/chunk': { turn: number; step: number; deltas: StreamDelta[] };
  'assistant/message': { turn: number; step: number; message: UserMessage; finishReason?: string; usage?: unknown; interrupted?: true; sourceEventSeqs?: number[] };
  'tool/call': { turn: number; step: number; callId: string; name: string; arguments: unknown; synthetic?: true };
  'tool/result': { turn: number; step: number; callId?: string; name?: string; message: UserMessage; error?: ToolError; meta?: ToolResultMeta; sourceEventSeqs?: number[] };
  'llm/retry': { turn: number; step: number; retry: number; delayMs: number; error: { code: string; message: string; status?: number; retryAfterMs?: number } };
  'turn/usage': { turn: number; usage: Usage };
  'turn/end': { turn: number; reason: TurnEndReason };
  'agent/status': { status: 'idle' | 'running' };
  'agent/inbox/inserted': { message: InboxItem; target: Target; index?: number };
  'agent/inbox/claimed': { message: UserMessage; turn: number };
  'agent/inbox/discarded': { message: UserMessage };
  /** `offset`: where the delta's text starts in its block (UTF-16 code units); absent from older daemons. */
  'assistant/delta': { turn: number; step: number; offset?: number; delta: StreamDelta };
  'tool/output': { turn: number; step: number; callId: string; text: string };
  'agent/error': { turn?: number; step?: number; error: { code: string; message: string } };
  /** Live, for a session attached read-only (daemons with `liveReadOnly`): who drives it now. */
  'session/mode': { mode: 'ask' | 'accept-edits' | 'plan' };
  /** The session's own model settings after a change (null: the daemon's configuration). */
  'session/settings': { model?: string | null; thinking?: boolean | null; reasoningEffort?: string | null };
  /** Words about the session itself, stored (an MCP server that failed, a take-over, a sandbox
   *  widening that could not be saved or a protected folder that appeared). */
  'session/notice': { kind: 'mcp' | 'lease' | 'sandbox' | string; level: 'info' | 'warning'; message: string };
  /** Stored: a widening of the commands' sandbox the person granted (protocol.md "Sandbox"). */
  'sandbox/widened': { callId: string; command: string; reason: string; writable: string[]; network: string[]; unconfined: boolean; scope: 'once' | 'session' };
  'session/lease': { holder: { pid: number; host: string } | null; readOnly: boolean };
  'session/handover': { requester: { pid: number; host: string }; force: boolean };
  'session/title': { title: string };
  'context/usage': { turn: number; step: number; used: number; window: number | null };
  'permission/requested': Omit<PermissionRequest, 'sessionId'>;
  'permission/resolved': { callId: string; outcome: PermissionOutcome };
  /** From here on the model's history is `message` (the summary) and what was logged from `keptFromSeq`. */
  'context/compacted': { turn: number; reason: 'ratio' | 'overflow' | 'manual'; summary: string; keptFromSeq: number; tokensBefore: number; tokensAfter: number; message: UserMessage };
  /** A rewind of files (daemons with `rewind`): `started` with its plan, then `done`, or `interrupted` after a crash. */
  'rewind/files': { rewindId: string; phase: 'started' | 'done' | 'interrupted'; beforeTurn: number; plan?: { path: string; action: 'restore' | 'delete'; sha256?: string }[]; conversation?: boolean; restored?: string[]; deleted?: string[]; failed?: { reason: string; path?: string; turn?: number }[]; untouched?: string[] };
  /** From here on the model's history is what it was when turn `beforeTurn` began (daemons with `rewind`). */
  'conversation/cut': { beforeTurn: number };
  /** The agent's whole plan after an `update_plan` call; a `conversation/cut` takes back the cut turns' plans. */
  'plan/updated': Plan;
  /** A background process `run_command` started (daemons with `processes`); its output: `dsh/process/output`. */
  'process/started': { processId: string; name: string; command: string; pid: number; confined: boolean; turn?: number; callId?: string };
  /** A background process ended; `stoppedBy` absent: it ended by itself. */
  'process/exited': { processId: string; exitCode?: number; signal?: number; stoppedBy?: 'agent' | 'person' | 'cancel' | 'session-close' | 'shutdown' | 'daemon-stopped' };
  /** The person kept or undid hunks of a file a turn changed (daemons with `turnDiff`); hunks [] = the file as a whole. */
  'turn/review': { turn: number; path: string; action: 'keep' | 'undo'; hunks: number[]; diff?: string };
  /** Live: the files a turn changed so far (daemons with `turnDiff`); the hunks: `dsh/turn/diff`. */
  'turn/diff': { turn: number; files: { path: string; status: 'modified' | 'created' | 'deleted'; by: 'edit' | 'command'; added: number; removed: number; hunks: number; pending: number }[]; final: boolean };
  /** A review's finding (daemons with `review`); `dsh/review/list` folds the live ones. */
  'review/finding': ReviewFinding;
  /** A review turn finished: how many findings it reported. */
  'review/completed': { reviewId: string; turn: number; target: ReviewTarget; findings: number };
  /** The person dismissed a finding (`dsh/review/dismiss`). */
  'review/dismissed': { findingId: string };
  /** A seq a crashed daemon may have sent but never stored: an event seen with it never happened. */
  'log/gap': { from: number; to: number };
  /** The `run_subagent` call `callId` started the child session `childId` (protocol.md §12). */
  'subagent/started': { callId: string; childId: string; description: string; tools: 'explore' | 'edit' | 'all'; maxSteps: number; agent?: string };
  /** The child of `callId` ended; `summary` is what the parent's model got as the call's result. */
  'subagent/finished': { callId: string; childId: string; status: 'completed' | 'budget' | 'error' | 'cancelled' | 'interrupted'; summary: string };
  /** Live: one event of a child session (`{type, data, seq?}` as its own stream has it). */
  'subagent/event': { callId: string; childId: string; event: Record<string, unknown> };
  /** An MCP server of the session started, failed to start or died (daemons with `mcpServers`). */
  /** Live: where the session's commands run (protocol.md "Sandbox"). */
  'sandbox/status': SandboxStatus;
  'hook/failed': { hook: string; event: string; reason: string; origin?: 'user' | 'project' };
  'hooks/untrusted': HooksUntrusted;
  'mcp/status': { server: string; state: 'starting' | 'ready' | 'failed' | 'exited'; transport: 'stdio' | 'http'; tools?: string[]; error?: string; stderr?: string[]; malformed?: number };
}
export type EventType = keyof EventDataMap;

export type DshEvent = {
  [T in EventType]: { sessionId: string; seq?: number; type: T; data: EventDataMap[T] }
}[EventType];

/** An event whose type this client does not know: kept, never interpreted. */
export interface UnknownEvent { sessionId: string; seq?: number; type: string; data: unknown }
export type AnyEvent = DshEvent | UnknownEvent;

/** An "allow always" answer: a whole tool, or one exact command (`scope` names it for revoke). */
export interface PermissionGrant { scope: string; tool: string; command?: string }

export type PermissionOutcome = 'allow-once' | 'allow-always' | 'reject' | 'cancelled';
/** The reply to dsh/requestPermission. `newText` (daemons with `editedAccept`, beside an allowing
 *  outcome, for a request previewing a whole edit): the file as the person accepted it (§8). */
export interface PermissionAnswer {
  outcome: PermissionOutcome; newText?: string;
  /** With `allow-always` on a sandbox escalation (daemons with `persistWidening`): the widening is
   *  written into the person's config.json and applies to every later session (§16). */
  persist?: boolean;
  /** Beside an allowing outcome, for an edit overlapping the person's unsaved changes
   *  (`preview.unsaved: "overlaps"`): save them with it, or keep the edit in the buffer only (§8). */
  unsaved?: UnsavedChoice;
  /** A plan's approval (`preview.kind: "plan"`, §3): the mode it runs in, with an allowing outcome. */
  mode?: PlanMode;
  /** A plan sent back (`reject`): the person's words for the model's revision. */
  feedback?: string;
}
export type UnsavedChoice = 'both' | 'buffer-only';
/** The modes a plan's approval may switch the session to. */
export type PlanMode = 'accept-edits' | 'ask';
/** What a command's escalation asks for (`preview.escalation`, §16): exactly this widening. */
export interface Escalation { reason: string; writable: string[]; network: string[]; unconfined: boolean }
export interface PermissionPreview {
  path?: string; diff?: string; command?: string; cwd?: string;
  /** run_command: the sandbox mode it would run in; with `escalation`, a request to widen it. */
  sandbox?: string; escalation?: Escalation;
  /** The whole text before and after an edit (newer daemons; capped, `truncated` says so). */
  oldText?: string; newText?: string; created?: boolean; truncated?: boolean;
  /** The edited file has unsaved changes in the editor: they stay unsaved (`apart`), or the edit
   *  overlaps them and the person chooses (`overlaps`; protocol.md §8, §9). */
  unsaved?: 'apart' | 'overlaps';
  /** `propose_plan`: the plan, markdown, for the person to approve (§3 "Plan approval"). */
  kind?: 'plan'; plan?: string;
}
export interface PermissionRequest {
  sessionId: string; callId: string; tool: string; title: string; arguments: Record<string, unknown>;
  preview?: PermissionPreview;
  /** A subagent's call, asked through its parent's session: which child asks. */
  subagent?: { childId: string; callId: string; description: string };
}

export type ContextAddParams = {
  sessionId: string; uri: string; kind: 'file' | 'selection' | 'diagnostics' | 'gitDiff' | 'terminal'; range?: Range;
  diagnostics?: unknown[]; diff?: string; terminal?: TerminalOutput; delivery?: 'inject' | 'steer' | 'followup';
};

export interface ContextDidChangeParams {
  sessionId?: string; activeUri?: string; selection?: Range; visibleRange?: Range; diagnostics?: unknown[];
}

export interface InitializeDshCapabilities {
  protocolVersion: number; version: string; sessions?: boolean; inboxEdits?: boolean; editorContext?: string[];
  /** `context` on dsh/send, followup, steer, inject and inbox/replace (protocol.md §4). */
  sendContext?: boolean;
  /** Pending items carry verb, wakeup, queuedAt, target and context (§5). */
  inboxItems?: boolean;
  /** assistant/delta carries `offset` (§7). */
  deltaOffsets?: boolean;
  /** dsh/session/transcript and attach `replay` (§3). */
  transcript?: boolean;
  /** dsh/session/rename, dsh/session/delete, list paging and `lastPrompt` (§3). */
  sessionManagement?: boolean;
  /** dsh/session/detach (§3). */
  detach?: boolean;
  /** A read-only attach follows the store live and turns writable by itself (`session/lease`, §3). */
  liveReadOnly?: boolean;
  /** permission/requested and /resolved events, open requests on attach, dsh/permissions/* (§8). */
  permissionEvents?: boolean;
  /** workspace/didChangeConfiguration {settings: {dsh: {...}}} applies without a restart (§1). */
  configurationChange?: boolean;
  /** dsh/session/checkpoints, dsh/session/rewind, dsh/session/fork; `rewind/files` and `conversation/cut` events (§15). */
  rewind?: boolean;
  /** dsh/session/takeOver: asks the process that drives a session this connection follows to let go (§3). */
  takeOver?: boolean;
  /** dsh/session/handOver and the live `session/handover` event to the driving connection (§3). */
  handOver?: boolean;
  /** dsh/session/setMode, the `session/mode` event and the attach reply's `mode` (§3). */
  modes?: boolean;
  /** dsh/models/list (§1). */
  models?: boolean;
  /** dsh/session/setModel and dsh/models/list `{sessionId}`: a session's own model and effort (§1). */
  sessionModels?: boolean;
  /** A permission answer may carry `newText`: the edit as the person changed it (§8). */
  editedAccept?: boolean;
  /** `{outcome: "allow-always", persist: true}` on an escalation saves the widening to config.json (§16). */
  persistWidening?: boolean;
  /** Background processes: `dsh/process/*`, `process/started` / `process/exited`, `dsh/cancel {stopProcesses}` (§12). */
  processes?: boolean;
  /** Custom slash commands: `dsh/commands/list`, a `/NAME` send expanded by the daemon (§18). */
  customCommands?: boolean;
  /** Reviews: `dsh/review/start|list|dismiss`, `review/*` events (§19). */
  review?: boolean;
  /** A turn's diff: `dsh/turn/diff|keep|undo`, live `turn/diff`, durable `turn/review` (§15). */
  turnDiff?: boolean;
  /** Sessions in their own git worktree: `dsh/session/new {worktree}`, `dsh/worktree/*`, `worktree` in lists (§20). */
  worktrees?: boolean;
  /** Named agents: `dsh/agents/list` by session or by `cwd` before there is one (§12 "Subagents"). */
  namedAgents?: boolean;
  /** `dsh/session/usage`: the session's tokens and cost summed over all its turns (§3). */
  sessionUsage?: boolean;
  [flag: string]: unknown;
}

/** One changed region of a file a turn changed (`dsh/turn/diff`, §15): 1-based lines before the turn
 *  (`old*`) and after it (`new*`); `diff` its unified-diff text, its `@@` line first. */
export interface TurnDiffHunk {
  index: number; oldStart: number; oldLines: number; newStart: number; newLines: number; diff: string;
  state: 'pending' | 'kept' | 'undone';
}
export interface TurnDiffFile {
  path: string; status: 'modified' | 'created' | 'deleted'; by: 'edit' | 'command'; added: number; removed: number;
  hunks: TurnDiffHunk[]; binary?: boolean; unavailable?: string; state?: 'pending' | 'kept' | 'undone';
}
/** `dsh/turn/diff`: `turn` null while the session has no turn; `final`: the turn has ended. */
export interface TurnDiffResult { turn: number | null; files: TurnDiffFile[]; final: boolean }
/** What a turn changed, per file, in counts (the live `turn/diff` event's data). */
export type TurnDiffSummary = EventDataMap['turn/diff'];
/** `dsh/turn/undo`: the hunks taken back; each one not taken back is a conflict, named with its reason. */
export interface TurnUndoResult { undone: number[]; conflicts: { reason: string; path: string; hunk?: number }[]; wholeFile?: boolean; noteId?: string }

/** A file a rewind leaves alone, and why (§15). */
export interface RewindProblem { reason: string; path?: string | null; turn?: number | null }
/** `dsh/session/rewind`: with conflicts (and no force) nothing was done. */
export interface RewindResult { restored: string[]; deleted: string[]; conflicts: RewindProblem[]; notRestorable: RewindProblem[]; cutSeq?: number | null; wroteNoFile?: boolean }
export interface CheckpointFile { path: string; created: boolean; by: 'edit' | 'command'; dropped?: boolean | null }
export interface CheckpointTurn { turn: number; files: CheckpointFile[]; commands: number; unrestorableCommands?: number | null }
/** `dsh/session/checkpoints`: per turn that changed files (oldest first), what a rewind would touch. */
export interface CheckpointsResult { turns: CheckpointTurn[]; storedBytes: number; maxBytes: number }

/** A row of `dsh/models/list` (§1): `reasoningEfforts` where the model thinks at an effort. */
export interface ModelInfo { id: string; name?: string | null; contextWindow?: number | null; reasoningEfforts?: string[] | null }
/** `dsh/models/list`: with `sessionId`, `current` and `reasoningEffort` are that session's. */
export interface ModelsList { models: ModelInfo[]; current: string; reasoningEffort?: string | null }

/** Typed `data.code` of daemon errors. */
export type DshErrorCode = 'invalid_params' | 'unknown_session' | 'duplicate_message_id' | 'unknown_message'
  | 'session_busy' | 'session_unreadable' | 'shutting_down' | 'not_initialized' | 'internal_error';

export function errorCode(err: unknown): string | undefined {
  const data = (err as { data?: { code?: unknown } } | undefined)?.data;
  return typeof data?.code === 'string' ? data.code : undefined;
}

export function textOf(content: ContentBlock[] | string | undefined, type: 'text' | 'reasoning' = 'text'): string {
  if (content === undefined) return '';
  if (typeof content === 'string') return type === 'text' ? content : '';
  return content.filter((b) => b.type === type).map((b) => String((b as { text?: unknown }).text ?? '')).join('');
}
