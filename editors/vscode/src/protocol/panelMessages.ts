// Messages between the extension host and the chat webview (both directions). No vscode import.
import type { Action, SessionModel } from './reducer';
import type { CustomCommandInfo, ModelInfo, PermissionOutcome, ProcessOutput, Range, SandboxMode, Target, TranscriptPage, UnsavedChoice, PlanMode } from './types';

/** Context attached to the next prompt: a selection, a file, or problems (diagnostics of a file). */
/** `gitDiff`: the uncommitted changes of the work tree at `uri` (a folder), read when the prompt is sent. */
/** `terminal`: a command of an integrated terminal (`terminalCommand`, the recorder's id; terminalOutput.ts),
 *  its output read when the prompt is sent. */
export interface Chip { kind: 'selection' | 'file' | 'diagnostics' | 'gitDiff' | 'terminal'; uri: string; range?: Range; label: string; diagnostics?: unknown[]; terminalCommand?: number }

/** A row of the @ picker: what is offered, and the chip(s) it becomes. */
export interface MentionItem { kind: 'selection' | 'problems' | 'changes' | 'terminal' | 'editor' | 'folder' | 'file' | 'symbol'; label: string; detail?: string; chips: Chip[] }

/** What a person can do about an error shown in the panel (each is a WebviewToHost message). */
export type PanelAction = 'openSettings' | 'showLog' | 'setApiKey' | 'installDaemon' | 'restartDaemon';

export type HostToWebview =
  | { type: 'snapshot'; model: SessionModel; connection: ConnectionState }
  | { type: 'actions'; actions: Action[] }
  | { type: 'connection'; connection: ConnectionState }
  /** A `dsh/session/transcript` page the webview asked for (`history`); not part of the model. */
  | { type: 'history'; sessionId: string; beforeTurn: number; limit: number; page: TranscriptPage | null }
  | { type: 'chip'; chip: Chip }
  | { type: 'chips'; chips: Chip[] }
  | { type: 'focusComposer' }
  /** The outcome of a `send`: a failed one gives its text back to the composer. */
  /** `daemonDown`: not sent because the daemon is not running (the note goes when it runs again). */
  | { type: 'sendResult'; id: number; ok: boolean; error?: string; actions?: PanelAction[]; daemonDown?: boolean }
  | { type: 'mentions'; id: number; items: MentionItem[] }
  /** The proposed side of a request's diff now differs from the proposal (`edited`), or no longer. */
  | { type: 'proposalEdited'; callId: string; edited: boolean }
  /** The sandbox mode the person picked was not applied (full-access not confirmed, or the setting
   *  could not be written): the picker shows the mode in force again. */
  | { type: 'sandboxModeDeclined' }
  /** A background process's newest output, asked for with `processOutput` (not part of the model). */
  | { type: 'processOutput'; sessionId: string; processId: string; output?: ProcessOutput; error?: string }
  /** The session's custom slash commands (`dsh/commands/list`), asked for with `commands`. */
  | { type: 'commands'; id: number; commands: CustomCommandInfo[]; problems: string[] }
  /** What a keep or an undo of the last turn's changes did, in words (a conflict: `warning`). */
  | { type: 'turnDiffNote'; sessionId: string; text: string; warning: boolean }
  /** Something the person asked for failed: said under the composer. */
  | { type: 'error'; message: string; actions?: PanelAction[] }
  /** The models and the session's model and effort (`dsh/models/list`); `settable`: the picker may change them. */
  | { type: 'models'; models: ModelInfo[]; current: string; reasoningEffort?: string; settable: boolean }
  /** What editing turn `turn`'s prompt takes back (the files a rewind restores, the prompts after it). */
  | { type: 'editPreview'; turn: number; files: string[]; laterPrompts: number; canRewind: boolean }
  /** A word for the person under the composer (what a `/` command did). */
  | { type: 'note'; text: string };

export interface ConnectionState {
  state: 'starting' | 'ready' | 'stopped' | 'error';
  /** One short sentence for a person (never a stack, an id or a pid). */
  message?: string;
  /** A second line: what was tried (e.g. the command). */
  detail?: string;
  /** `notFound`: no dsh-daemon was found (the panel offers to install it). */
  kind?: 'notFound' | 'startFailed';
  /** Changed settings need a restart of the running daemon: the panel offers it until answered. */
  restartOffer?: boolean;
  hasKey?: boolean;
  /** No key is stored and the configured endpoint needs one: Set API key is offered. */
  needsKey?: boolean;
  /** The daemon can make another window let go of a session (`experimental.dsh.takeOver`). */
  takeOver?: boolean;
  /** The driving window can let a session go at once to a window that asked for it (`experimental.dsh.handOver`). */
  handOver?: boolean;
  /** The daemon has session modes (`experimental.dsh.modes`): the mode picker is shown. */
  modes?: boolean;
  /** The daemon keeps checkpoints: Restore checkpoint and Fork from here are offered (`experimental.dsh.rewind`). */
  rewind?: boolean;
  /** An escalation may be saved to config.json (`experimental.dsh.persistWidening`): "Always" is offered. */
  persistWidening?: boolean;
  /** The daemon runs background processes (`experimental.dsh.processes`): "Stop and stop processes" is offered. */
  processes?: boolean;
  /** The window's first workspace folder: paths under it are shown relative to it. */
  root?: string;
}

export type WebviewToHost =
  | { type: 'ready' }
  | { type: 'send'; id?: number; text: string; chips: Chip[]; mode: 'followup' | 'steer' }
  /** `stopProcesses`: the session's background processes are stopped too. */
  | { type: 'cancel'; keepInbox: boolean; stopProcesses?: boolean }
  /** A background process's newest output (answered with `processOutput`). */
  | { type: 'processOutput'; processId: string }
  | { type: 'processStop'; processId: string }
  /** The person asked to trust the project's hooks: the host shows them and asks before it trusts them. */
  | { type: 'trustHooks' }
  /** Opens the project's `.dsh/config.json` that holds the waiting hooks. */
  | { type: 'showHooks' }
  /** The custom slash commands of the session (answered with `commands`). */
  | { type: 'commands'; id: number }
  | { type: 'wake' }
  | { type: 'continue' }
  /** Sends `text` (the failed turn's prompt) again. */
  | { type: 'retry'; text: string }
  | { type: 'history'; beforeTurn: number; limit: number }
  | { type: 'newSession' }
  | { type: 'switchSession' }
  /** Opens another session by id (a fork's Open original). */
  | { type: 'openSession'; sessionId: string }
  /** `force`: Take over now (the other window's running turn ends). */
  | { type: 'takeOver'; force?: boolean }
  /** Hand over now: the take-over another window asked for happens at once. */
  | { type: 'handOver' }
  | { type: 'setMode'; mode: 'ask' | 'accept-edits' | 'plan' }
  /** The header's model picker: the list (answered with `models`), and a choice. */
  | { type: 'models' }
  | { type: 'setModel'; model: string; reasoningEffort?: string }
  /** The composer's own `/` commands that need the daemon (`cost`: answered with a `note`). */
  | { type: 'compact' }
  | { type: 'cost' }
  | { type: 'undo' }
  | { type: 'rewindPick' }
  | { type: 'forkLast' }
  /** Edit of a past prompt: what it takes back (answered with `editPreview`), then the rewind and the send. */
  | { type: 'editPreview'; turn: number }
  | { type: 'editResend'; id: number; turn: number; text: string; chips: Chip[] }
  /** Restore checkpoint: files and conversation back to before turn `turn`. */
  | { type: 'rewind'; turn: number }
  /** Fork from here: a new session with the conversation up to the end of turn `turn`. */
  | { type: 'fork'; turn: number }
  | { type: 'setApiKey' }
  | { type: 'showLog' }
  | { type: 'openSettings' }
  | { type: 'installDaemon' }
  | { type: 'restartDaemon' }
  /** Not now, to the restart that changed settings need. */
  | { type: 'declineRestart' }
  | { type: 'addSelection' }
  | { type: 'addFile' }
  | { type: 'mentions'; id: number; query: string }
  | { type: 'dropUris'; uris: string[] }
  | { type: 'inboxRemove'; messageId: string }
  | { type: 'inboxReplace'; messageId: string; text: string }
  | { type: 'inboxMove'; messageId: string; target: Target; index?: number }
  /** `persist` (with allow-always, on a sandbox escalation): save the widening to config.json. */
  | { type: 'permission'; callId: string; outcome: PermissionOutcome; persist?: boolean; unsaved?: UnsavedChoice; mode?: PlanMode; feedback?: string }
  /** The sandbox mode picked in the header (full-access is confirmed by the host first). */
  | { type: 'setSandboxMode'; mode: SandboxMode }
  | { type: 'viewDiff'; callId: string }
  /** A file of the last turn's "Changed files" bar: open its diff, keep or undo all its changes. */
  | { type: 'turnFile'; path: string; action: 'open' | 'keep' | 'undo' }
  | { type: 'openFile'; uri: string; range?: Range }
  | { type: 'copy'; text: string }
  | { type: 'insert'; text: string }
  /** A code block proposed for a file: shown as a diff first, applied when the person accepts. */
  | { type: 'apply'; text: string; lang: string; path?: string }
  | { type: 'newFile'; text: string; lang: string };
