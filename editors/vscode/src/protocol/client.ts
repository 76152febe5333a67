// A typed client of the dsh protocol over a minimal Rpc seam (vscode-jsonrpc's MessageConnection or
// vscode-languageclient's LanguageClient both fit through a few lines of adapter).
import type {
  AnyEvent, AttachResult, CheckpointsResult, ContextAddParams, CustomCommandInfo, ModelsList, ProcessInfo, ProcessOutput, ContextDidChangeParams, ContextRef, Inbox, InitializeDshCapabilities,
  OutgoingMessage, PermissionAnswer, PermissionGrant, PermissionOutcome, PermissionRequest, ReviewFinding, ReviewTarget, RewindResult, SendResult, SessionInfo, SessionUsage, Target, TranscriptPage, TurnDiffResult, TurnUndoResult,
} from './types';

export interface Disposable { dispose(): void }

export interface Rpc {
  request<R>(method: string, params?: unknown): Promise<R>;
  notify(method: string, params?: unknown): void | Promise<void>;
  onNotification(method: string, handler: (params: any) => void): Disposable;
  onRequest(method: string, handler: (params: any) => unknown | Promise<unknown>): Disposable;
}

/** Answers a permission request: an outcome, or an answer carrying the person's version of the edit. */
export type PermissionHandler = (req: PermissionRequest) => Promise<PermissionOutcome | PermissionAnswer>;

export class DshClient {
  private readonly eventHandlers = new Set<(e: AnyEvent) => void>();
  private readonly subs: Disposable[] = [];
  private permissionHandler: PermissionHandler = async () => 'cancelled';
  /** `capabilities.experimental.dsh` of the initialize result (set by whoever ran initialize); an
   *  absent flag means a daemon without that feature. */
  features: InitializeDshCapabilities | undefined;

  constructor(readonly rpc: Rpc) {
    this.subs.push(rpc.onNotification('dsh/event', (e: AnyEvent) => {
      for (const h of [...this.eventHandlers]) h(e);
    }));
    this.subs.push(rpc.onRequest('dsh/requestPermission', async (p: PermissionRequest) => {
      try {
        const answer = await this.permissionHandler(p);
        return typeof answer === 'string' ? { outcome: answer } : answer;
      } catch {
        return { outcome: 'cancelled' as const };
      }
    }));
  }

  onEvent(handler: (e: AnyEvent) => void): Disposable {
    this.eventHandlers.add(handler);
    return { dispose: () => this.eventHandlers.delete(handler) };
  }

  setPermissionHandler(handler: PermissionHandler): void { this.permissionHandler = handler; }

  newSession(p: { cwd?: string; title?: string } = {}): Promise<{ sessionId: string }> {
    return this.rpc.request('dsh/session/new', p);
  }
  listSessions(p: { cwd?: string; limit?: number; before?: number } = {}): Promise<{ sessions: SessionInfo[]; hasMore?: boolean }> {
    return this.rpc.request('dsh/session/list', p);
  }
  attach(sessionId: string, afterSeq?: number, replay?: 'all' | 'none'): Promise<AttachResult> {
    const p: { sessionId: string; afterSeq?: number; replay?: 'all' | 'none' } = { sessionId };
    if (afterSeq !== undefined) p.afterSeq = afterSeq;
    if (replay !== undefined) p.replay = replay;
    return this.rpc.request('dsh/session/attach', p);
  }
  /** A page of turns rendered for a UI, newest first (daemons with `transcript`). */
  transcript(sessionId: string, p: { beforeTurn?: number; limit?: number } = {}): Promise<TranscriptPage> {
    return this.rpc.request('dsh/session/transcript', { sessionId, ...p });
  }
  /** Stops this connection's events of the session; the daemon releases it when idle (daemons with `detach`). */
  detach(sessionId: string): Promise<Record<string, never>> {
    return this.rpc.request('dsh/session/detach', { sessionId });
  }
  /** Asks the process that drives `sessionId` to let go, so this connection drives it (daemons with
   *  `takeOver`): `{}`, then the usual `session/lease {readOnly: false}` event once it does. */
  takeOver(sessionId: string, force = false): Promise<Record<string, never>> {
    return this.rpc.request('dsh/session/takeOver', force ? { sessionId, force } : { sessionId });
  }
  /** Lets a session this connection drives go at once to the window that asked for it (daemons with
   *  `handOver`): the running turn ends `aborted {cause: "handover"}`; `session/lease {readOnly: true}` follows. */
  handOver(sessionId: string): Promise<Record<string, never>> {
    return this.rpc.request('dsh/session/handOver', { sessionId });
  }
  /** Per turn, the files the agent changed (daemons with `rewind`): a rewind's preview. */
  checkpoints(sessionId: string): Promise<CheckpointsResult> {
    return this.rpc.request('dsh/session/checkpoints', { sessionId });
  }
  /** Takes the session's files and conversation back to before turn `beforeTurn` (daemons with `rewind`). */
  rewind(sessionId: string, beforeTurn: number, force = false): Promise<RewindResult> {
    return this.rpc.request('dsh/session/rewind', { sessionId, beforeTurn, files: true, conversation: true, force });
  }
  /** A new session holding this one's log up to the end of turn `atTurn` (daemons with `rewind`). */
  fork(sessionId: string, atTurn: number): Promise<{ sessionId: string }> {
    return this.rpc.request('dsh/session/fork', { sessionId, atTurn });
  }
  /** The session's mode (daemons with `modes`): ask, accept-edits or plan. */
  setMode(sessionId: string, mode: 'ask' | 'accept-edits' | 'plan'): Promise<Record<string, never>> {
    return this.rpc.request('dsh/session/setMode', { sessionId, mode });
  }
  /** The models to offer (daemons with `models`); with `sessionId` (daemons with `sessionModels`), its model and effort. */
  modelsList(sessionId?: string): Promise<ModelsList> {
    return this.rpc.request('dsh/models/list', sessionId ? { sessionId } : {});
  }
  /** The session's own model and reasoning effort, from its next request (daemons with `sessionModels`). */
  setModel(sessionId: string, p: { model?: string; reasoningEffort?: string }): Promise<Record<string, never>> {
    return this.rpc.request('dsh/session/setModel', { sessionId, ...p });
  }
  /** The session's tokens and cost over all its turns (daemons with `sessionUsage`). */
  sessionUsage(sessionId: string): Promise<SessionUsage> {
    return this.rpc.request('dsh/session/usage', { sessionId });
  }
  /** Compacts the session's history now (§14). */
  compact(sessionId: string): Promise<Record<string, unknown>> {
    return this.rpc.request('dsh/session/compact', { sessionId });
  }
  renameSession(sessionId: string, title: string): Promise<Record<string, never>> {
    return this.rpc.request('dsh/session/rename', { sessionId, title });
  }
  deleteSession(sessionId: string): Promise<Record<string, never>> {
    return this.rpc.request('dsh/session/delete', { sessionId });
  }
  /** `context` (only when the daemon advertises `sendContext`) travels with the message as one queued item. */
  send(sessionId: string, message: OutgoingMessage | string, target: Target, wakeup: boolean, context?: ContextRef[]): Promise<SendResult> {
    return this.rpc.request('dsh/send', withContext({ sessionId, message: msg(message), target, wakeup }, context));
  }
  followup(sessionId: string, message: OutgoingMessage | string, context?: ContextRef[]): Promise<SendResult> {
    return this.rpc.request('dsh/followup', withContext({ sessionId, message: msg(message) }, context));
  }
  steer(sessionId: string, message: OutgoingMessage | string, context?: ContextRef[]): Promise<SendResult> {
    return this.rpc.request('dsh/steer', withContext({ sessionId, message: msg(message) }, context));
  }
  inject(sessionId: string, message: OutgoingMessage | string, context?: ContextRef[]): Promise<SendResult> {
    return this.rpc.request('dsh/inject', withContext({ sessionId, message: msg(message) }, context));
  }
  /** `stopProcesses` (daemons with `processes`): the session's background processes are stopped too. */
  cancel(sessionId: string, keepInbox = false, cause: 'user' | 'hook' = 'user', stopProcesses = false): Promise<Record<string, never>> {
    return this.rpc.request('dsh/cancel', stopProcesses ? { sessionId, keepInbox, cause, stopProcesses } : { sessionId, keepInbox, cause });
  }
  /** The session's background processes, oldest first (daemons with `processes`). */
  processList(sessionId: string): Promise<{ processes: ProcessInfo[] }> {
    return this.rpc.request('dsh/process/list', { sessionId });
  }
  /** The newest `maxChars` characters of a background process's output. */
  processOutput(sessionId: string, processId: string, maxChars?: number): Promise<ProcessOutput> {
    return this.rpc.request('dsh/process/output', maxChars === undefined ? { sessionId, processId } : { sessionId, processId, maxChars });
  }
  /** Stops a background process and its whole tree (`stoppedBy: "person"`); `stopped: false` when it had ended. */
  processStop(sessionId: string, processId: string): Promise<{ stopped: boolean; exitCode?: number; signal?: number }> {
    return this.rpc.request('dsh/process/stop', { sessionId, processId });
  }
  /** The person trusts the hooks of `root/.dsh/config.json` as they are now. Only a person's action sends this. */
  trustProject(root: string): Promise<{ root: string; hooks: number; events: string[] }> {
    return this.rpc.request('dsh/project/trust', { root });
  }
  /** The session's (or, before one exists, a folder's) custom commands and skills (daemons with `customCommands`). */
  commandsList(where: { sessionId: string } | { cwd: string }): Promise<{ commands: CustomCommandInfo[]; skills: unknown[]; problems: string[] }> {
    return this.rpc.request('dsh/commands/list', where);
  }
  /** Queues a review turn of the changes (daemons with `review`): none of `base`/`commit` = the
   *  uncommitted changes; `messageId` is the queued message's. */
  reviewStart(sessionId: string, p: { base?: string; commit?: string; instructions?: string } = {}): Promise<{ reviewId: string; messageId: string; target: ReviewTarget; files: string[]; truncated: boolean }> {
    return this.rpc.request('dsh/review/start', { sessionId, ...p });
  }
  /** The live findings (not dismissed, not taken back by a rewind), in the order reported. */
  reviewList(sessionId: string): Promise<{ findings: ReviewFinding[]; reviews: Array<{ reviewId: string; turn: number; target: ReviewTarget; findings: number }> }> {
    return this.rpc.request('dsh/review/list', { sessionId });
  }
  /** `dismissed: false` when it was dismissed already. */
  reviewDismiss(sessionId: string, findingId: string): Promise<{ dismissed: boolean }> {
    return this.rpc.request('dsh/review/dismiss', { sessionId, findingId });
  }
  /** The files turn `turn` (default: the last one still in the conversation) changed, with their hunks. */
  turnDiff(sessionId: string, turn?: number): Promise<TurnDiffResult> {
    return this.rpc.request('dsh/turn/diff', turn === undefined ? { sessionId } : { sessionId, turn });
  }
  /** Marks hunks (all of the file's without `hunks`) reviewed; nothing else changes. */
  turnKeep(sessionId: string, turn: number, path: string, hunks?: number[]): Promise<{ kept: number[] }> {
    return this.rpc.request('dsh/turn/keep', hunks === undefined ? { sessionId, turn, path } : { sessionId, turn, path, hunks });
  }
  /** Takes hunks back, three-way against what the file holds now; the others are named in `conflicts`. */
  turnUndo(sessionId: string, turn: number, path: string, hunks?: number[]): Promise<TurnUndoResult> {
    return this.rpc.request('dsh/turn/undo', hunks === undefined ? { sessionId, turn, path } : { sessionId, turn, path, hunks });
  }
  wake(sessionId: string): Promise<{ started: boolean }> {
    return this.rpc.request('dsh/wake', { sessionId });
  }
  inboxList(sessionId: string): Promise<Inbox> { return this.rpc.request('dsh/inbox/list', { sessionId }); }
  inboxRemove(sessionId: string, messageId: string): Promise<{ removed: boolean }> {
    return this.rpc.request('dsh/inbox/remove', { sessionId, messageId });
  }
  /** Without `context` the item keeps its attachments; a given `context` (even []) replaces them. */
  inboxReplace(sessionId: string, messageId: string, message: OutgoingMessage | string, context?: ContextRef[]): Promise<SendResult> {
    return this.rpc.request('dsh/inbox/replace', withContext({ sessionId, messageId, message: msg(message) }, context));
  }
  inboxMove(sessionId: string, messageId: string, target: Target, index?: number): Promise<Record<string, never>> {
    return this.rpc.request('dsh/inbox/move', index === undefined ? { sessionId, messageId, target } : { sessionId, messageId, target, index });
  }
  contextAdd(p: ContextAddParams): Promise<{ messageId: string }> { return this.rpc.request('dsh/context/add', p); }
  /** The session's "allow always" answers and its open requests (daemons with `permissionEvents`). */
  permissionsList(sessionId: string): Promise<{ grants: PermissionGrant[]; open: PermissionRequest[] }> {
    return this.rpc.request('dsh/permissions/list', { sessionId });
  }
  /** Forgets one grant (its scope), or all of them. */
  permissionsRevoke(sessionId: string, scope?: string): Promise<{ revoked: number }> {
    return this.rpc.request('dsh/permissions/revoke', scope === undefined ? { sessionId } : { sessionId, scope });
  }
  /** New settings (the keys of initializationOptions, merged over them) for the next model request
   *  (daemons with `configurationChange`). */
  changeConfiguration(dsh: Record<string, unknown>): void {
    void this.rpc.notify('workspace/didChangeConfiguration', { settings: { dsh } });
  }
  contextDidChange(p: ContextDidChangeParams): void { void this.rpc.notify('dsh/context/didChange', p); }

  dispose(): void {
    for (const s of this.subs.splice(0)) s.dispose();
    this.eventHandlers.clear();
  }
}

function withContext<P extends object>(params: P, context: ContextRef[] | undefined): P & { context?: ContextRef[] } {
  return context === undefined ? params : { ...params, context };
}

function msg(m: OutgoingMessage | string): OutgoingMessage {
  return typeof m === 'string' ? { content: m } : m;
}
