// The chat panel: a webview view fed by the shared reducer. The host keeps the SessionModel, forwards
// the reducer's actions to the webview in batches (at most every 50 ms; a snapshot only when the view
// (re)loads), and turns the webview's messages into daemon requests.
//
// The model holds the newest turns only (at most `modelTurnsMax`; older ones are dropped with a
// `trim` action the webview applies too): the webview reads older turns with `history` requests
// (`dsh/session/transcript`) as the person scrolls up, so neither side grows with the session.
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { ComposerActions } from './composerActions';
import type { Daemon } from './daemon';
import { DaemonUnavailable } from './daemonState';
import { diagnosticsChip, fileChip, localFileUri, selectionChip, toLspDiagnostic } from './editorContext';
import { excludeGlob, excludePatterns, gitFiles, queryGlob } from './repoFiles';
import type { Permissions } from './permissions';
import type { DshClient } from './protocol/client';
import type { Chip, ConnectionState, HostToWebview, MentionItem, PanelAction, WebviewToHost } from './protocol/panelMessages';
import { Action, emptyModel, pendingCount, reduce, SessionModel, statusLabel, typedText, Via } from './protocol/reducer';
import { errorCode, type AnyEvent, type CheckpointTurn, type ContextRef, type SandboxMode, type SessionInfo } from './protocol/types';
import { deleteSession } from './protocol/worktrees';
import { confirmDeleteSession } from './sessionDelete';
import { sessionPickRow } from './sessionRows';
import { TurnFailureLog } from './outputLog';
import { gitDiffStat, gitDiffText, shortStat } from './gitDiff';
import { TerminalOutputRecorder, terminalOutputNow, terminalRows, type TerminalEvents } from './terminalOutput';
import { isSandboxMode } from './daemonSettings';
import { chatHtml } from './webviewHtml';

const SESSION_KEY = 'dsh.sessionId';
export const BATCH_MS = 50;
const LONG_REPLY = 32_000;
/** run_subagent cards whose child's steps are read again when a session opens (the newest ones). */
const SUBAGENT_REPLAY = 20;
const LONG_REPLY_BATCH_MS = 200;
const FLUSH_AT_ONCE = new Set(['assistant/message', 'turn/end']);

/** What a person reads when a request fails: by the daemon's typed code, never an id or a pid. */
export function personText(err: unknown): string {
  if (err instanceof DaemonUnavailable) return err.state.message ?? 'The daemon is not running.';
  switch (errorCode(err)) {
    case 'session_busy': return (err as { data?: { reason?: string } }).data?.reason === 'running'
      ? 'A turn is running in this session: stop it first.' : 'Another window drives this session.';
    case 'unknown_session': return 'That session no longer exists.';
    case 'unknown_message': return 'That queued message has already run or was removed.';
    case 'shutting_down': return 'The daemon is shutting down.';
    case 'session_unreadable': return 'This session\'s stored log cannot be read by this daemon.';
    case 'outside_workspace': return 'That file is outside the workspace.';
    case 'duplicate_message_id': return 'That message was already sent.';
  }
  const message = String((err as Error)?.message ?? err ?? 'failed');
  // The daemon's own words, without the ids and pids they may carry.
  return message
    .replace(/\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/gi, 'the session')
    .replace(/\b(pid|holderPid)\s*[=:]?\s*\d+/gi, 'another process')
    .split('\n')[0].slice(0, 300);
}

export class ChatPanel implements vscode.WebviewViewProvider, vscode.Disposable {
  static readonly viewId = 'dsh.chat';
  /** Turns per transcript page (a fresh attach). */
  static transcriptTurns = 20;
  /** The model is trimmed to `modelTurnsKeep` turns once it holds more than `modelTurnsMax`. */
  static modelTurnsMax = 60;
  static modelTurnsKeep = 40;
  model: SessionModel = emptyModel();
  private view: vscode.WebviewView | undefined;
  private ready = false;
  private batch: Action[] = [];
  private timer: ReturnType<typeof setTimeout> | undefined;
  private pendingChips: Chip[] = [];
  private connection: ConnectionState = { state: 'starting', root: vscode.workspace.workspaceFolders?.[0]?.uri.fsPath };
  private subscribed = new WeakSet<DshClient>();
  /** A failed turn of any followed session, logged once with its retries (the output log). */
  private readonly failures = new TurnFailureLog();
  private readOnlyRetry: ReturnType<typeof setTimeout> | undefined;
  private inboxTimer: ReturnType<typeof setTimeout> | undefined;
  /** The session whose first transcript page is on its way: its events wait for the attach replay. */
  private paging: string | undefined;
  private readonly disposables: vscode.Disposable[] = [];
  private readonly status: vscode.StatusBarItem;
  private statusShown = '';
  private tracked: { at: number; files: Map<string, Set<string>> } | undefined;
  private readonly sessionShown = new vscode.EventEmitter<string | null>();
  /** The session shown changed (another one opened, a new one, none). */
  readonly onDidShowSession = this.sessionShown.event;
  /** What the "Changed files" bar's rows do (the editor's side of a turn's diff, set by activate). */
  turnFiles: { open(path: string): Promise<void>; keep(path: string): Promise<void>; undo(path: string): Promise<unknown> } | undefined;
  /** The header's model picker and the composer's `/` commands, edit-and-resend (composerActions.ts). */
  private readonly composerActions = new ComposerActions(this);
  /** The integrated terminals' recent commands and output (from activation on), for the @ picker. */
  private readonly terminals = new TerminalOutputRecorder<vscode.Terminal>(vscode.window as unknown as TerminalEvents<vscode.Terminal>);
  /** The daemon's client, when it runs. */
  get daemonClient(): DshClient | undefined { return this.daemon.client; }

  constructor(private readonly ctx: vscode.ExtensionContext, private readonly daemon: Daemon, private readonly permissions: Permissions) {
    this.status = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Left, 50);
    this.status.command = 'dsh.focusChat';
    this.status.name = 'dsh';
    this.updateStatus();
    this.status.show();
    this.disposables.push(this.status, this.terminals);
    this.disposables.push(daemon.onReady((client) => void this.onDaemonReady(client)));
    this.disposables.push(daemon.onState((s) => {
      this.connection = { ...this.connection, state: s.state, message: s.message, detail: s.detail, kind: s.kind, restartOffer: s.restartOffer };
      this.postConnection();
      void this.refreshKeyState();
    }));
  }

  /** Whether the chat view is showing (a permission card there can be seen). */
  get visible(): boolean {
    return !!this.view?.visible && this.ready;
  }

  get sessionId(): string | undefined {
    return this.model.sessionId ?? this.ctx.workspaceState.get<string>(SESSION_KEY);
  }

  private log(line: string): void { this.daemon.output.info(line); }

  private postConnection(): void {
    this.post({ type: 'connection', connection: this.connection });
    this.updateStatus();
  }

  private async refreshKeyState(): Promise<void> {
    const [hasKey, needsKey] = await Promise.all([this.daemon.hasKey(), this.daemon.needsKey()]);
    const takeOver = this.daemon.client?.features?.takeOver === true;
    const handOver = this.daemon.client?.features?.handOver === true;
    const rewind = this.daemon.client?.features?.rewind === true;
    const modes = this.daemon.client?.features?.modes === true;
    const persistWidening = this.daemon.client?.features?.persistWidening === true;
    const processes = this.daemon.client?.features?.processes === true;
    if (hasKey === this.connection.hasKey && needsKey === this.connection.needsKey && takeOver === this.connection.takeOver && handOver === this.connection.handOver
      && rewind === this.connection.rewind && modes === this.connection.modes && persistWidening === this.connection.persistWidening
      && processes === this.connection.processes) return;
    this.connection = { ...this.connection, hasKey, needsKey, takeOver, handOver, rewind, modes, persistWidening, processes };
    this.postConnection();
  }

  // ---- model and batching -------------------------------------------------------------------------

  dispatch(action: Action): void {
    const shown = this.model.sessionId;
    this.model = reduce(this.model, action);
    if (this.model.sessionId !== shown) this.sessionShown.fire(this.model.sessionId);
    this.batch.push(action);
    if (action.kind === 'event' && FLUSH_AT_ONCE.has(action.event.type)) {
      // A finished reply (or turn) goes at once: its last text shows without waiting for a batch.
      if (this.timer) clearTimeout(this.timer);
      this.flush();
    } else {
      this.timer ??= setTimeout(() => this.flush(), this.longReply(action) ? LONG_REPLY_BATCH_MS : BATCH_MS);
    }
    this.updateStatus();
  }

  /** A delta of a reply already longer than LONG_REPLY: the webview draws such a reply at most every
   *  LONG_REPLY_BATCH_MS, so its deltas need not come more often. */
  private longReply(action: Action): boolean {
    if (action.kind !== 'event' || action.event.type !== 'assistant/delta') return false;
    const d = action.event.data as { turn: number; step: number };
    const at = this.model.index[`a:${d.turn}:${d.step}`];
    const it = at === undefined ? undefined : this.model.items[at];
    return it?.kind === 'assistant' && it.text.length + it.liveText.length > LONG_REPLY;
  }

  private flush(): void {
    this.timer = undefined;
    const actions = this.batch.splice(0);
    if (actions.length && this.ready) this.post({ type: 'actions', actions });
  }

  post(msg: HostToWebview): void {
    if (this.view && this.ready) void this.view.webview.postMessage(msg);
  }

  private sendSnapshot(): void {
    if (this.timer) { clearTimeout(this.timer); this.timer = undefined; }
    this.batch = [];
    this.post({ type: 'snapshot', model: this.model, connection: this.connection });
    if (this.pendingChips.length) this.post({ type: 'chips', chips: this.pendingChips.splice(0) });
  }

  /** Says in the chat's "Changed files" bar what a keep or an undo did. */
  sayTurnDiff(sessionId: string, text: string, warning: boolean): void {
    this.post({ type: 'turnDiffNote', sessionId, text, warning });
  }

  /** Drops the oldest turns when the model holds too many (at a turn's end: not while it streams). */
  private trimModel(): void {
    const items = this.model.items;
    if (!items.length) return;
    const first = items[0].turn;
    const newest = items[items.length - 1].turn;
    if (newest - first + 1 > ChatPanel.modelTurnsMax) this.dispatch({ kind: 'trim', beforeTurn: newest - ChatPanel.modelTurnsKeep + 1 });
  }

  /** The status bar item: set only when its text changes (each set is a message to the workbench).
   *  No spinning icon: an animation there would keep the workbench drawing while a turn runs. */
  private updateStatus(): void {
    const c = this.connection.state;
    const label = c === 'error' ? 'daemon failed' : c === 'starting' ? 'starting' : c === 'stopped' ? 'daemon stopped'
      : this.model.readOnly ? `read-only, ${statusLabel(this.model)}` : statusLabel(this.model);
    const icon = c === 'error' || c === 'stopped' ? '$(error)' : this.model.permissions.length ? '$(shield)' : this.model.status === 'running' ? '$(sync)' : pendingCount(this.model) ? '$(list-ordered)' : '$(comment-discussion)';
    const text = `${icon} dsh: ${label}`;
    const tooltip = this.model.title ? `dsh: ${this.model.title}` : 'dsh';
    if (text + tooltip === this.statusShown) return;
    this.statusShown = text + tooltip;
    this.status.text = text;
    this.status.tooltip = tooltip;
  }

  // ---- daemon and sessions ------------------------------------------------------------------------

  private async onDaemonReady(client: DshClient): Promise<void> {
    if (!this.subscribed.has(client)) {
      this.subscribed.add(client);
      client.onEvent((e) => this.onEvent(e));
      client.setPermissionHandler(this.permissions.handle);
    }
    void this.refreshKeyState();
    const id = this.sessionId;
    if (!id) return;
    // The same model after a daemon restart: continue after its last seq (no gap, no duplicate).
    const continuing = this.model.sessionId === id && this.model.lastSeq >= 0;
    await this.attach(client, id, !continuing);
  }

  private onEvent(e: AnyEvent): void {
    for (const line of this.failures.lines(e)) this.daemon.output.error(line); // any session followed
    if (e.type === 'permission/resolved') this.permissions.settled((e.data as { callId: string }).callId); // any session
    if (e.sessionId !== this.model.sessionId) return;
    // Before the page is in, an event of a session this connection already follows would land in
    // front of the page; the attach after the page replays every durable one after it.
    if (e.sessionId === this.paging) return;
    this.dispatch({ kind: 'event', event: e });
    const data = e.data as any;
    if (e.type === 'tool/result' && data?.meta?.path) {
      const p = String(data.meta.path);
      this.permissions.edited.add(path.isAbsolute(p) ? p : path.join(vscode.workspace.workspaceFolders?.[0]?.uri.fsPath ?? '', p));
    }
    if (e.type === 'tool/call' && data?.name === 'run_command') void this.permissions.saveEdited();
    if (e.type === 'turn/end') {
      this.permissions.cancelAll(e.sessionId);
      this.trimModel();
    }
    if (e.type === 'session/lease' && !data?.readOnly) {
      // The other window let go and this daemon drives the session now: the queue as it stands.
      if (this.readOnlyRetry) { clearTimeout(this.readOnlyRetry); this.readOnlyRetry = undefined; }
      this.refreshInbox();
    }
    // A read-only view's attach reply has no queue, so its splices have no base: list it instead.
    if (e.type === 'agent/inbox/spliced' && this.model.readOnly) this.refreshInbox();
  }

  private refreshInbox(): void {
    this.inboxTimer ??= setTimeout(() => {
      this.inboxTimer = undefined;
      const id = this.model.sessionId;
      const client = this.daemon.client;
      if (!id || !client) return;
      client.inboxList(id).then((inbox) => { if (this.model.sessionId === id) this.dispatch({ kind: 'inbox', inbox }); }, () => undefined);
    }, 50);
  }

  /** Lets the daemon release a session this window leaves (daemons with `detach`). */
  private detach(client: DshClient, id: string | null | undefined): void {
    if (id && client.features?.detach) void client.detach(id).catch(() => undefined);
  }

  private async attach(client: DshClient, id: string, fresh: boolean): Promise<void> {
    if (this.readOnlyRetry) { clearTimeout(this.readOnlyRetry); this.readOnlyRetry = undefined; }
    if (fresh) this.dispatch({ kind: 'reset', sessionId: id });
    try {
      let afterSeq = fresh ? undefined : this.model.lastSeq;
      if (fresh && client.features?.transcript) {
        // A long session opens with its newest turns as one rendered page, then attach replays only
        // the events after that page (older turns load on scroll). Not `replay: "none"` then the
        // page: events between those two replies would be both live and in the page.
        this.paging = id;
        let page;
        try { page = await client.transcript(id, { limit: ChatPanel.transcriptTurns }); } finally { this.paging = undefined; }
        this.dispatch({ kind: 'transcript', page, older: false });
        if (this.model.lastSeq >= 0) afterSeq = this.model.lastSeq;
      }
      const res = await client.attach(id, afterSeq);
      this.dispatch({ kind: 'attached', result: res });
      if (res.readOnly) this.log('the session is driven by another process: shown read-only');
      // Requests this window still holds for the session (it asked while another session was shown).
      for (const request of this.permissions.openFor(id)) this.dispatch({ kind: 'permission', request });
      // Subagents of the turns the page drew: their steps from each child's own stored transcript.
      if (fresh) void this.replaySubagents(client, id);
      // Background processes started before the events replayed (a transcript page) are listed.
      if (client.features?.processes && !res.readOnly) {
        const { processes } = await client.processList(id).catch(() => ({ processes: undefined }));
        if (processes && this.model.sessionId === id) this.dispatch({ kind: 'processes', processes });
      }
      if (res.readOnly && client.features?.liveReadOnly) {
        // Another process drives it: its events follow live, and `session/lease` says when this
        // daemon drives it (a reloaded window's old daemon exiting).
        this.refreshInbox();
      } else if (res.readOnly) {
        // An older daemon: attach again until this one drives it.
        this.readOnlyRetry = setTimeout(() => void this.attach(client, id, false), 2000);
      }
      this.trimModel();
    } catch (err) {
      if (errorCode(err) === 'unknown_session') {
        await this.ctx.workspaceState.update(SESSION_KEY, undefined);
        this.dispatch({ kind: 'reset', sessionId: null });
      } else {
        this.daemon.output.error(`could not open the session: ${(err as Error).message}`);
        this.post({ type: 'error', message: `Could not open the session: ${personText(err)}`, actions: ['showLog'] });
      }
    }
    this.sendSnapshot();
  }

  /** The newest SUBAGENT_REPLAY `run_subagent` cards that know no step of their child (drawn from a
   *  transcript page) get them from the child's session (a read of the store; the child stays closed). */
  private async replaySubagents(client: DshClient, id: string): Promise<void> {
    const cards = this.model.items.filter((it) => it.kind === 'tool' && it.name === 'run_subagent' && !it.subagent?.calls.length).slice(-SUBAGENT_REPLAY);
    for (const it of cards) {
      if (it.kind !== 'tool') continue;
      const childId = it.subagent?.childId ?? it.meta?.childId;
      if (typeof childId !== 'string' || !childId) continue;
      try {
        const page = await client.transcript(childId, { limit: 5 });
        if (this.model.sessionId !== id) return;
        this.dispatch({ kind: 'subagentTranscript', callId: it.callId, page });
      } catch (err) {
        this.log(`the subagent session of a run_subagent call could not be read: ${(err as Error)?.message ?? err}`);
      }
    }
  }

  /** One session at a time: a mode picked while the daemon starts and a prompt sent right after it
   *  both wait for the same new session (they made two, the prompt's without the mode). */
  private ensuring: Promise<{ client: DshClient; sessionId: string }> | undefined;

  async ensureSession(): Promise<{ client: DshClient; sessionId: string }> {
    if (!this.ensuring) this.ensuring = this.ensureSessionNow().finally(() => { this.ensuring = undefined; });
    return this.ensuring;
  }

  private async ensureSessionNow(): Promise<{ client: DshClient; sessionId: string }> {
    const client = await this.daemon.ensureStarted();
    if (this.model.sessionId) return { client, sessionId: this.model.sessionId };
    const stored = this.ctx.workspaceState.get<string>(SESSION_KEY);
    if (stored) {
      await this.attach(client, stored, true);
      if (this.model.sessionId) return { client, sessionId: this.model.sessionId };
    }
    const cwd = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
    const { sessionId } = await client.newSession(cwd ? { cwd } : {});
    // The model follows the session before anything else is awaited: its first live events (the
    // project's hooks waiting, `hooks/untrusted`) come right after the reply and are not replayed.
    this.dispatch({ kind: 'reset', sessionId });
    await this.ctx.workspaceState.update(SESSION_KEY, sessionId);
    this.sendSnapshot();
    return { client, sessionId };
  }

  /** A session this window drives: another window's session shown read-only is not driven from here. */
  async drivable(): Promise<{ client: DshClient; sessionId: string }> {
    const s = await this.ensureSession();
    if (this.model.readOnly) throw new Error('Another window drives this session: take it over or start a new session.');
    return s;
  }

  async newSession(): Promise<void> {
    if (this.daemon.client) this.detach(this.daemon.client, this.model.sessionId);
    this.model = emptyModel();
    await this.ctx.workspaceState.update(SESSION_KEY, undefined);
    await this.ensureSession();
  }

  /** The Switch Session picker; with a daemon that has `sessionManagement`, each row also has Rename
   *  and Delete buttons (the picker comes back after either). */
  async switchSession(): Promise<void> {
    const client = await this.daemon.ensureStarted();
    for (;;) {
      const choice = await this.pickSession(client);
      if (!choice) return;
      const { action, session } = choice;
      if (action === 'switch') return this.openSession(session.sessionId);
      try {
        if (action === 'rename') {
          const title = await vscode.window.showInputBox({ prompt: 'Rename the dsh session', value: session.title, ignoreFocusOut: true,
            validateInput: (v) => v.trim() ? undefined : 'A title needs some text' });
          if (title?.trim()) await client.renameSession(session.sessionId, title);
        } else {
          // A session in its own worktree asks whether the worktree goes too (protocol.md §20).
          const answer = await confirmDeleteSession(session);
          if (answer) {
            await deleteSession(client, session.sessionId, answer.removeWorktree);
            await this.forgetSession(session.sessionId);
          }
        }
      } catch (err) {
        void vscode.window.showErrorMessage(`dsh: ${personText(err)}`);
      }
    }
  }

  /** After session `id` was deleted: when it is the one on screen, the panel starts empty and the
   *  next prompt makes a new one. */
  async forgetSession(id: string): Promise<void> {
    if (id !== this.sessionId) return;
    await this.ctx.workspaceState.update(SESSION_KEY, undefined);
    this.dispatch({ kind: 'reset', sessionId: null });
    this.sendSnapshot();
  }

  /** "Allow always" answers of the session shown, to take back (daemons with `permissionEvents`). */
  async revokeGrants(): Promise<void> {
    const { client, sessionId } = await this.ensureSession();
    if (!client.features?.permissionEvents) {
      void vscode.window.showInformationMessage('dsh: this daemon cannot list or revoke "Allow always" answers; a new session starts without them.');
      return;
    }
    const { grants } = await client.permissionsList(sessionId);
    if (!grants.length) {
      void vscode.window.showInformationMessage('dsh: no "Allow always" answers in this session.');
      return;
    }
    const picked = await vscode.window.showQuickPick(grants.map((g) => ({
      label: g.command !== undefined ? `$ ${g.command}` : g.tool,
      description: g.command !== undefined ? `${g.tool}: this exact command` : 'every call of this tool',
      picked: true, grant: g,
    })), { canPickMany: true, placeHolder: 'Revoke "Allow always": the next such call asks again' });
    if (!picked?.length) return;
    let revoked = 0;
    for (const p of picked) revoked += (await client.permissionsRevoke(sessionId, p.grant.scope)).revoked;
    void vscode.window.showInformationMessage(`dsh: ${revoked} "Allow always" answer${revoked === 1 ? '' : 's'} revoked.`);
  }

  /** Shows session `id` (leaving the one shown, which is detached). */
  async openSession(id: string): Promise<void> {
    const client = await this.daemon.ensureStarted();
    if (id !== this.model.sessionId) this.detach(client, this.model.sessionId);
    await this.ctx.workspaceState.update(SESSION_KEY, id);
    await this.attach(client, id, true);
  }

  /** Asks the window that drives the session shown to let go (daemons with `takeOver`); the usual
   *  `session/lease` event follows once this one drives it. */
  async takeOver(force = false): Promise<void> {
    const client = await this.daemon.ensureStarted();
    const id = this.model.sessionId;
    if (!id || !this.model.readOnly) return;
    if (!client.features?.takeOver) throw new Error('This daemon cannot take a session over from another window.');
    await client.takeOver(id, force);
    // Asked: the panel says it waits (for the other window's turn, or for it to end) until the lease moves.
    if (this.model.sessionId === id && this.model.readOnly) this.dispatch({ kind: 'takeOver', force });
  }

  /** Lets the session shown go at once to the window that asked to take it over (daemons with `handOver`). */
  async handOver(): Promise<void> {
    const client = await this.daemon.ensureStarted();
    const id = this.model.sessionId;
    if (!id || this.model.readOnly) return;
    if (!client.features?.handOver) throw new Error('This daemon cannot hand a session over at once.');
    await client.handOver(id);
  }

  /** The sandbox mode picked in the panel's header: written to the user setting `dsh.sandbox.mode`,
   *  which reaches the daemon as `tools.sandbox.mode` (daemon-wide, from the next command; the daemon
   *  answers with a new `sandbox/status`). full-access hands the agent the whole account: it is
   *  confirmed in a modal first (a stray key cannot confirm it). Not applied: the picker is told. */
  async setSandboxMode(mode: SandboxMode): Promise<void> {
    if (!isSandboxMode(mode)) return;
    if (mode === 'full-access') {
      // A picker whose first (active) row keeps the sandbox: Enter or Esc keeps it, so only a
      // deliberate pick of the second row hands the agent the account (a modal dialog would focus
      // its confirming button, and a stray Enter would confirm it).
      const keep = { label: '$(shield) Keep the sandbox', description: 'commands stay confined' };
      const use = {
        label: '$(warning) Use full-access',
        description: 'no sandbox, for every session',
        detail: 'Commands then run as you, with your whole account: every file you can read or write, your credentials in files, the network. Each command asks before it runs.',
      };
      const picked = await vscode.window.showQuickPick([keep, use], {
        title: 'Run the agent\'s commands without a sandbox (full-access)?', placeHolder: 'full-access hands the agent your whole account', ignoreFocusOut: true,
      });
      if (picked !== use) { this.post({ type: 'sandboxModeDeclined' }); return; }
    }
    const cfg = vscode.workspace.getConfiguration('dsh');
    try {
      if (cfg.get<string>('sandbox.mode', '') === mode) {
        // Already the setting (the daemon was told otherwise since, e.g. by config.json at a
        // restart): tell it again.
        if (!this.daemon.applySettings()) this.post({ type: 'sandboxModeDeclined' });
        return;
      }
      // A user setting (the setting's scope is `application`): a workspace's .vscode/settings.json
      // cannot loosen the sandbox.
      await cfg.update('sandbox.mode', mode, vscode.ConfigurationTarget.Global);
      this.log(`sandbox mode set to ${mode} (dsh.sandbox.mode)`);
    } catch (err) {
      this.post({ type: 'sandboxModeDeclined' });
      throw err;
    }
  }

  /** "Restore checkpoint" on the prompt of turn `turn` (daemons with `rewind`): the files the agent
   *  changed from that turn on are listed first (a modal: a stray key cannot confirm it), then the
   *  session's files and conversation go back to how they were before the turn. Files someone else
   *  changed since are named and only overwritten when the person says so. */
  async rewindTo(turn: number): Promise<void> {
    const { client, sessionId } = await this.drivable();
    if (!client.features?.rewind) throw new Error('This daemon cannot restore checkpoints.');
    if (this.model.status === 'running') throw new Error('Stop the running turn first, then restore the checkpoint.');
    const { turns } = await client.checkpoints(sessionId);
    const lines = checkpointPreview(turns.filter((t) => t.turn >= turn), (p) => vscode.workspace.asRelativePath(p));
    const prompt = this.promptOfTurn(turn);
    const detail = [
      lines.length ? 'Files that go back to how they were before it:' : 'No file was changed by the agent since then.',
      ...lines.map((l) => `  ${l}`),
      '',
      'The conversation goes back too: the model forgets this turn and the ones after it (they stay in the transcript, marked).',
    ].join('\n');
    const yes = await vscode.window.showWarningMessage(`Restore the checkpoint before ${prompt ? `"${prompt}"` : `turn ${turn}`}?`,
      { modal: true, detail }, 'Restore');
    if (yes !== 'Restore') return;
    this.log(`restoring the checkpoint before turn ${turn} of session ${sessionId.slice(0, 8)}`);
    let result = await this.daemon.saves.during(() => client.rewind(sessionId, turn));
    if (result.conflicts.length) {
      const changed = result.conflicts.map((c) => `  ${c.path ? vscode.workspace.asRelativePath(c.path) : '?'}`);
      const force = await vscode.window.showWarningMessage('Some files were changed after the agent changed them. Nothing was restored yet.', {
        modal: true, detail: ['Changed since (your changes there would be lost):', ...changed, '', 'Overwrite them with the checkpoint?'].join('\n'),
      }, 'Overwrite and restore');
      if (force !== 'Overwrite and restore') return;
      this.log(`restoring the checkpoint before turn ${turn} over files changed since (the person said overwrite)`);
      result = await this.daemon.saves.during(() => client.rewind(sessionId, turn, true));
    }
    this.log(`restored the checkpoint before turn ${turn}: ${result.restored.length} restored, ${result.deleted.length} deleted${result.conflicts.length ? `, ${result.conflicts.length} in conflict (nothing written)` : ''}${result.notRestorable.length ? `, ${result.notRestorable.length} not restorable` : ''}`);
    if (result.wroteNoFile) {
      void vscode.window.showWarningMessage(`dsh: no file was written (the files still hold what the agent left): ${result.notRestorable.map((n) => n.path ? vscode.workspace.asRelativePath(n.path) : n.reason).join('; ')}`);
    } else if (result.notRestorable.length) {
      void vscode.window.showWarningMessage(`dsh: restored, except what cannot be: ${result.notRestorable.map((n) => n.path ? vscode.workspace.asRelativePath(n.path) : n.reason).join('; ')}`);
    }
  }

  /** "Fork from here" on turn `turn`'s footer (daemons with `rewind`): a new session with this one's
   *  conversation up to the end of that turn, shown in its place (this one stays as it is). */
  async forkAt(turn: number): Promise<void> {
    const client = await this.daemon.ensureStarted();
    const id = this.model.sessionId;
    if (!id) return;
    if (!client.features?.rewind) throw new Error('This daemon cannot fork a session.');
    const { sessionId } = await client.fork(id, turn);
    this.log(`forked the session at turn ${turn}`);
    await this.openSession(sessionId);
  }

  /** The first line of the prompt that started turn `turn`, if it is loaded (cut to 60 characters). */
  private promptOfTurn(turn: number): string | undefined {
    const it = this.model.items.find((i) => i.kind === 'user' && i.turn === turn && i.message.source.kind === 'user');
    if (!it || it.kind !== 'user') return undefined;
    const line = typedText(it.message).split('\n')[0].trim();
    return line.length > 60 ? line.slice(0, 59) + '…' : line;
  }

  private async pickSession(client: DshClient): Promise<{ action: 'switch' | 'rename' | 'delete'; session: SessionInfo } | undefined> {
    const manage = !!client.features?.sessionManagement;
    const renameButton: vscode.QuickInputButton = { iconPath: new vscode.ThemeIcon('edit'), tooltip: 'Rename' };
    const deleteButton: vscode.QuickInputButton = { iconPath: new vscode.ThemeIcon('trash'), tooltip: 'Delete' };
    type Pick = vscode.QuickPickItem & { session: SessionInfo };
    const qp = vscode.window.createQuickPick<Pick>();
    qp.placeholder = manage ? 'Switch dsh session (or rename / delete one with its buttons)' : 'Switch dsh session';
    qp.matchOnDescription = true;
    qp.matchOnDetail = true;
    qp.busy = true;
    const current = this.sessionId;
    try {
      return await new Promise((resolve, reject) => {
        qp.onDidAccept(() => { const it = qp.selectedItems[0]; if (it) resolve({ action: 'switch', session: it.session }); });
        qp.onDidTriggerItemButton((e) => resolve({ action: e.button === renameButton ? 'rename' : 'delete', session: e.item.session }));
        qp.onDidHide(() => resolve(undefined));
        qp.show();
        client.listSessions({}).then(({ sessions }) => {
          qp.items = sessions.map((s) => ({
            ...sessionPickRow(s, current),
            buttons: manage ? [renameButton, deleteButton] : [],
            session: s,
          }));
          qp.busy = false;
        }, reject);
      });
    } finally {
      qp.dispose();
    }
  }

  /** Older turns for the webview (not put in the model). */
  private async history(beforeTurn: number, limit: number): Promise<void> {
    const id = this.model.sessionId;
    const client = this.daemon.client;
    if (!id || !client || !client.features?.transcript || limit < 1) return;
    try {
      const page = await client.transcript(id, { beforeTurn, limit });
      this.post({ type: 'history', sessionId: id, beforeTurn, limit, page });
    } catch (err) {
      this.daemon.output.warn(`could not read older turns: ${(err as Error).message}`);
    }
  }

  async addChip(chip: Chip | undefined): Promise<void> {
    if (!chip) { void vscode.window.showInformationMessage('dsh: select some text first'); return; }
    await vscode.commands.executeCommand('dsh.chat.focus');
    if (this.ready) this.post({ type: 'chip', chip }); else this.pendingChips.push(chip);
  }

  async contextNow(chip: Chip, delivery: 'inject' | 'steer' | 'followup'): Promise<void> {
    const { client, sessionId } = await this.drivable();
    const r = await client.contextAdd({ sessionId, ...await contextRefNow(chip, this.terminals), delivery });
    this.dispatch({ kind: 'sent', messageId: r.messageId, via: delivery === 'inject' ? 'context' : delivery });
  }

  async cancel(keepInbox: boolean, stopProcesses = false): Promise<void> {
    if (!this.model.sessionId || !this.daemon.client) return;
    if (this.model.readOnly) throw new Error('Another window drives this session: stop it there.');
    await this.daemon.client.cancel(this.model.sessionId, keepInbox, 'user', stopProcesses && this.daemon.client.features?.processes === true);
  }

  /** A background process's newest output, for the panel's processes strip (not kept in the model). */
  private async processOutput(processId: string): Promise<void> {
    const { client, sessionId } = await this.ensureSession();
    try {
      const output = await client.processOutput(sessionId, processId);
      this.post({ type: 'processOutput', sessionId, processId, output });
    } catch (err) {
      this.post({ type: 'processOutput', sessionId, processId, error: personText(err) });
    }
  }

  /** The person's Stop on a background process: its `process/exited {stoppedBy: "person"}` follows. */
  private async processStop(processId: string): Promise<void> {
    const { client, sessionId } = await this.drivable();
    const r = await client.processStop(sessionId, processId);
    this.log(r.stopped ? `stopped background process ${processId}` : `background process ${processId} had ended already`);
  }

  /** The panel's "Trust…" on a project's waiting hooks: the hooks are shown (every entry of the
   *  project's config.json, read here) in a modal, and trusted only when the person confirms there
   *  (a stray key or click on the panel cannot trust them; protocol.md §17: only a person's action
   *  sends dsh/project/trust). */
  async trustHooks(): Promise<void> {
    const waiting = this.model.hooksUntrusted;
    if (!waiting) return;
    const { client } = await this.drivable();
    const listed = describeHooks(waiting.path);
    const detail = [
      `${waiting.path}${waiting.changed ? ' changed since you trusted its hooks' : ''} asks to run:`,
      ...listed.lines.map((l) => `  ${l}`),
      ...(waiting.problems?.length ? ['', 'Left out:', ...waiting.problems.map((p) => `  ${p}`)] : []),
      '',
      'They run as your commands (in the session\'s sandbox) in every session of this folder, from the next event on, until the file changes.',
    ].join('\n');
    // The dialog's first button is the one it focuses: Show hooks, so a stray Enter opens the file
    // and only a deliberate click on Trust trusts them.
    const choice = await vscode.window.showWarningMessage(`Trust the hooks of ${path.basename(waiting.root) || waiting.root}?`, { modal: true, detail }, 'Show hooks', 'Trust');
    if (choice === 'Show hooks') { await this.showHooks(); return; }
    if (choice !== 'Trust') return;
    const r = await client.trustProject(waiting.root);
    this.log(`trusted ${r.hooks} hooks of ${r.root} (${r.events.join(', ')})`);
    this.dispatch({ kind: 'hooksTrusted', root: waiting.root });
    if (listed.count !== undefined && listed.count !== r.hooks) {
      void vscode.window.showWarningMessage(`dsh: the hooks changed while you looked at them: ${r.hooks} are trusted now (${r.events.join(', ')}). Show them to check.`, 'Show hooks')
        .then((c) => { if (c) void this.showHooks(waiting.path); });
    }
  }

  private async showHooks(file = this.model.hooksUntrusted?.path): Promise<void> {
    if (!file) return;
    await vscode.window.showTextDocument(vscode.Uri.file(file), { preview: true });
  }

  /** The session's custom slash commands (or the workspace folder's, before a session). */
  private async commands(id: number): Promise<void> {
    const client = this.daemon.client;
    const sessionId = this.model.sessionId;
    const cwd = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
    if (!client?.features?.customCommands || (!sessionId && !cwd)) { this.post({ type: 'commands', id, commands: [], problems: [] }); return; }
    try {
      const r = await client.commandsList(sessionId ? { sessionId } : { cwd: cwd! });
      this.post({ type: 'commands', id, commands: r.commands ?? [], problems: r.problems ?? [] });
    } catch (err) {
      this.post({ type: 'commands', id, commands: [], problems: [personText(err)] });
    }
  }

  async wake(): Promise<void> {
    const { client, sessionId } = await this.drivable();
    await client.wake(sessionId);
  }

  /** The person changed the proposed side of `callId`'s diff (or undid it): its card says that
   *  allowing writes their version. */
  proposalEdited(callId: string, edited: boolean): void {
    this.post({ type: 'proposalEdited', callId, edited });
  }

  /** Focuses the chat view's message box. */
  async focusComposer(): Promise<void> {
    await vscode.commands.executeCommand('dsh.chat.focus');
    this.post({ type: 'focusComposer' });
  }

  // ---- the webview ----------------------------------------------------------------------------

  resolveWebviewView(view: vscode.WebviewView): void {
    this.view = view;
    this.ready = false;
    const dist = vscode.Uri.joinPath(this.ctx.extensionUri, 'dist');
    view.webview.options = { enableScripts: true, localResourceRoots: [dist] };
    view.webview.html = webviewHtml(view.webview, dist);
    view.webview.onDidReceiveMessage((m: WebviewToHost) => void this.onMessage(m).catch((err) => {
      this.daemon.output.error(`${m.type}: ${(err as Error)?.message ?? err}`);
      this.post({ type: 'error', message: personText(err), actions: actionsFor(err) });
    }), undefined, this.disposables);
    view.onDidDispose(() => { if (this.view === view) { this.view = undefined; this.ready = false; } });
  }

  private async onMessage(m: WebviewToHost): Promise<void> {
    switch (m.type) {
      case 'ready':
        this.ready = true;
        await this.refreshKeyState().catch(() => undefined);
        this.sendSnapshot();
        void this.daemon.ensureStarted().then(() => { if (this.sessionId && !this.model.sessionId) void this.ensureSession(); }).catch(() => undefined);
        return;
      case 'send': {
        try {
          await this.send(m.text, m.chips, m.mode);
          if (m.id !== undefined) this.post({ type: 'sendResult', id: m.id, ok: true });
        } catch (err) {
          this.daemon.output.error(`send failed: ${(err as Error)?.message ?? err}`);
          if (m.id === undefined) throw err;
          // Why the daemon is not running is said once, in its own block above (with what to do).
          const error = err instanceof DaemonUnavailable ? 'Not sent: the daemon is not running. The message stays here.' : `Not sent: ${personText(err)}`;
          const daemonDown = err instanceof DaemonUnavailable;
          this.post({ type: 'sendResult', id: m.id, ok: false, error, actions: daemonDown ? [] : actionsFor(err), ...(daemonDown ? { daemonDown } : {}) });
        }
        return;
      }
      case 'retry': {
        const { client, sessionId } = await this.drivable();
        const r = await client.followup(sessionId, m.text);
        this.dispatch({ kind: 'sent', messageId: r.messageId, via: 'followup' });
        return;
      }
      case 'cancel': return this.cancel(m.keepInbox, m.stopProcesses === true);
      case 'processOutput': return this.processOutput(m.processId);
      case 'processStop': return this.processStop(m.processId);
      case 'trustHooks': return this.trustHooks();
      case 'showHooks': return this.showHooks();
      case 'commands': return this.commands(m.id);
      case 'wake': return this.wake();
      case 'continue': {
        const { client, sessionId } = await this.drivable();
        if (pendingCount(this.model)) await client.wake(sessionId);
        else this.dispatch({ kind: 'sent', messageId: (await client.followup(sessionId, 'Continue where you left off.')).messageId, via: 'followup' });
        return;
      }
      case 'history': return this.history(m.beforeTurn, m.limit);
      case 'newSession': return this.newSession();
      case 'switchSession': return this.switchSession();
      case 'openSession': return this.openSession(m.sessionId);
      case 'takeOver': return this.takeOver(!!m.force);
      case 'handOver': return this.handOver();
      case 'setMode': {
        const { client, sessionId } = await this.drivable();
        if (!client.features?.modes) throw new Error('This daemon has no session modes.');
        await client.setMode(sessionId, m.mode);
        return;
      }
      case 'rewind': return this.rewindTo(m.turn);
      case 'models': return this.composerActions.models();
      case 'setModel': return this.composerActions.setModel(m.model, m.reasoningEffort);
      case 'compact': return this.composerActions.compact();
      case 'cost': return this.composerActions.cost();
      case 'undo': return this.composerActions.undo();
      case 'rewindPick': return this.composerActions.rewindPick();
      case 'forkLast': return this.composerActions.fork();
      case 'editPreview': return this.composerActions.editPreview(m.turn);
      case 'editResend': {
        try {
          await this.composerActions.editResend(m.turn, m.text, m.chips);
          this.post({ type: 'sendResult', id: m.id, ok: true });
        } catch (err) {
          this.post({ type: 'sendResult', id: m.id, ok: false, error: personText(err), actions: actionsFor(err) });
        }
        return;
      }
      case 'fork': return this.forkAt(m.turn);
      case 'setApiKey': await vscode.commands.executeCommand('dsh.setApiKey'); return;
      case 'showLog': this.daemon.output.show(); return;
      case 'openSettings': await vscode.commands.executeCommand('workbench.action.openSettings', '@ext:dsh.dsh-vscode'); return;
      case 'installDaemon': await this.daemon.install(); return;
      case 'restartDaemon': await this.daemon.restart(); return;
      case 'declineRestart': this.daemon.declineRestart(); return;
      case 'addSelection': await vscode.commands.executeCommand('dsh.addSelection'); return;
      case 'addFile': await vscode.commands.executeCommand('dsh.addFile'); return;
      case 'mentions': this.post({ type: 'mentions', id: m.id, items: await this.mentions(m.query) }); return;
      case 'dropUris': {
        const chips = await dropChips(m.uris);
        if (chips.length) this.post({ type: 'chips', chips });
        return;
      }
      case 'inboxRemove': { const { client, sessionId } = await this.drivable(); await client.inboxRemove(sessionId, m.messageId); return; }
      case 'inboxReplace': {
        const { client, sessionId } = await this.drivable();
        const old = [...this.model.inbox.nextTurn, ...this.model.inbox.nextStep].find((x) => x.id === m.messageId);
        // What the daemon recorded of a custom command (`source.command`) stays behind: the new text is
        // expanded again as it is sent (a message that carries one is never expanded).
        const source = old ? Object.fromEntries(Object.entries(old.source).filter(([k]) => k !== 'command')) as typeof old.source : undefined;
        const r = await client.inboxReplace(sessionId, m.messageId, source ? { content: m.text, source } : m.text);
        const via = this.model.via[m.messageId];
        if (via) this.dispatch({ kind: 'sent', messageId: r.messageId, via });
        return;
      }
      case 'inboxMove': { const { client, sessionId } = await this.drivable(); await client.inboxMove(sessionId, m.messageId, m.target, m.index); return; }
      case 'permission': this.permissions.answer(m.callId, m.outcome, m.persist === true, m.unsaved, { mode: m.mode, feedback: m.feedback }); return;
      case 'setSandboxMode': return this.setSandboxMode(m.mode);
      case 'turnFile': {
        const t = this.turnFiles;
        if (!t) return;
        if (m.action === 'open') return t.open(m.path);
        await (m.action === 'keep' ? t.keep(m.path) : t.undo(m.path));
        return;
      }
      case 'viewDiff': return this.permissions.viewDiff(m.callId, vscode.workspace.workspaceFolders?.[0]?.uri.fsPath);
      case 'openFile': {
        if (vscode.workspace.workspaceFolders?.some((f) => f.uri.toString() === m.uri)) { await vscode.commands.executeCommand('workbench.view.scm'); return; } // a git diff chip
        const command = /^terminal:\/(\d+)\//.exec(m.uri); // a terminal chip: its terminal, while it is open
        if (command) { this.terminals.find(Number(command[1]))?.terminal.show(); return; }
        const doc = await vscode.workspace.openTextDocument(vscode.Uri.parse(m.uri));
        const ed = await vscode.window.showTextDocument(doc, { preview: true });
        if (m.range) ed.revealRange(new vscode.Range(m.range.start.line, m.range.start.character, m.range.end.line, m.range.end.character));
        return;
      }
      case 'copy': await vscode.env.clipboard.writeText(m.text); return;
      case 'insert': {
        const ed = vscode.window.activeTextEditor ?? vscode.window.visibleTextEditors[0];
        if (!ed) throw new Error('Open a file to insert the code into.');
        await ed.edit((b) => b.replace(ed.selection, m.text));
        return;
      }
      case 'apply': await this.permissions.proposeApply(m.text, m.path, vscode.window.activeTextEditor ?? vscode.window.visibleTextEditors[0]); return;
      case 'newFile': {
        const doc = await vscode.workspace.openTextDocument({ content: m.text, language: languageId(m.lang) });
        await vscode.window.showTextDocument(doc, { preview: false });
        return;
      }
    }
  }

  async send(text: string, chips: Chip[], mode: 'followup' | 'steer'): Promise<string | undefined> {
    const { client, sessionId } = await this.drivable();
    return this.sendIn(client, sessionId, text, chips, mode);
  }

  /** `send` into `sessionId` (the chat's, or another this window drives: inline chat's side session);
   *  only the chat's own session's model hears of it. */
  private async sendIn(client: DshClient, sessionId: string, text: string, chips: Chip[], mode: 'followup' | 'steer'): Promise<string | undefined> {
    const sent = (messageId: string, via: Via) => { if (sessionId === this.model.sessionId) this.dispatch({ kind: 'sent', messageId, via }); };
    const hasText = !!text.trim();
    if (hasText && chips.length && client.features?.sendContext) {
      // The chips travel with the prompt (`context` on the send): read now, queued with it as one item
      // and entered just before it by the turn that claims it, so a prompt queued behind a running
      // turn does not leak its selection into that turn.
      const context = await Promise.all(chips.map((c) => contextRefNow(c, this.terminals)));
      const r = mode === 'steer' ? await client.steer(sessionId, text, context) : await client.followup(sessionId, text, context);
      sent(r.messageId, mode as Via);
      return r.messageId;
    }
    // Context sent alone is injected (it joins the running turn's next step, or waits for the next
    // prompt). A daemon without `sendContext` gets the chips this way in front of the prompt too.
    for (const chip of chips) {
      const r = await client.contextAdd({ sessionId, ...await contextRefNow(chip, this.terminals), delivery: 'inject' });
      sent(r.messageId, 'context');
    }
    if (!hasText) return undefined;
    const r = mode === 'steer' ? await client.steer(sessionId, text) : await client.followup(sessionId, text);
    sent(r.messageId, mode as Via);
    return r.messageId;
  }

  /** Sends `text` as the person's prompt (a followup), as if typed in the composer. */
  async prompt(text: string): Promise<void> {
    await this.send(text, [], 'followup');
  }

  /** Sends `text` with `chips` as its context in the session shown (from the editor: a code action,
   *  inline chat), or in the session `side` gives (inline chat's side session); the prompt's message
   *  id and its session, for waiting on its reply. */
  async ask(text: string, chips: Chip[], onEvent?: (e: AnyEvent) => void, side?: (client: DshClient) => Promise<string>): Promise<{ sessionId: string; messageId: string; dispose(): void }> {
    const { client, sessionId } = side ? await this.daemon.ensureStarted().then(async (c) => ({ client: c, sessionId: await side(c) })) : await this.drivable();
    const sub = onEvent ? client.onEvent(onEvent) : undefined;
    try {
      const messageId = await this.sendIn(client, sessionId, text, chips, 'followup');
      if (!messageId) throw new Error('Nothing was sent.');
      return { sessionId, messageId, dispose: () => sub?.dispose() };
    } catch (err) {
      sub?.dispose();
      throw err;
    }
  }

  /** Queues a review of the changes (daemons with `review`): the uncommitted ones, or those since `base`. */
  async review(base?: string): Promise<{ files: string[] }> {
    const { client, sessionId } = await this.drivable();
    if (!client.features?.review) throw new Error('This daemon cannot review changes (it has no `review`).');
    const r = await client.reviewStart(sessionId, base ? { base } : {});
    this.dispatch({ kind: 'sent', messageId: r.messageId, via: 'followup' });
    return r;
  }

  /** The files git does not ignore, per workspace folder (fsPath) in a git work tree; kept 10 s. */
  private async gitFiles(): Promise<Map<string, Set<string>>> {
    if (this.tracked && Date.now() - this.tracked.at < 10000) return this.tracked.files;
    const files = new Map<string, Set<string>>();
    for (const folder of vscode.workspace.workspaceFolders ?? []) {
      if (folder.uri.scheme !== 'file') continue;
      const set = await gitFiles(folder.uri.fsPath);
      if (set) files.set(folder.uri.fsPath, set);
    }
    this.tracked = { at: Date.now(), files };
    return files;
  }

  /** The @ picker's rows for `query`: the selection, problems, open editors, folders, files, symbols. */
  async mentions(query: string): Promise<MentionItem[]> {
    const q = query.toLowerCase();
    const match = (s: string) => !q || s.toLowerCase().includes(q);
    const out: MentionItem[] = [];
    const editor = vscode.window.activeTextEditor;
    const sel = selectionChip(editor);
    if (sel && (match('selection') || match(sel.label))) out.push({ kind: 'selection', label: sel.label, detail: 'the selected text', chips: [sel] });
    const problems = diagnosticsChip(editor);
    if (problems && (match('problems') || match(problems.label))) out.push({ kind: 'problems', label: problems.label, detail: `${problems.diagnostics?.length ?? 0} in this file`, chips: [problems] });
    if (this.daemon.client?.features?.editorContext?.includes('gitDiff') && (match('git diff') || match('changes') || match('uncommitted'))) {
      out.push(...await changesRows());
    }
    if (this.daemon.client?.features?.editorContext?.includes('terminal')) out.push(...terminalRows(this.terminals, vscode.window.activeTerminal, query));
    const seen = new Set<string>();
    for (const tab of vscode.window.tabGroups?.all.flatMap((g) => g.tabs) ?? []) {
      const uri = (tab.input as { uri?: vscode.Uri } | undefined)?.uri;
      if (!(uri instanceof vscode.Uri) || uri.scheme !== 'file' || seen.has(uri.toString())) continue;
      seen.add(uri.toString());
      const rel = vscode.workspace.asRelativePath(uri);
      if (match(rel)) out.push({ kind: 'editor', label: path.basename(uri.fsPath), detail: rel, chips: [fileChip(uri)] });
    }
    // Files whose path holds the query, searched with the query (not the first files then filtered):
    // files.exclude and search.exclude applied, and in a git work tree only what git does not ignore.
    const cfg = (section: string, key: string) => vscode.workspace.getConfiguration(section).get<Record<string, unknown>>(key);
    const exclude = excludeGlob(excludePatterns(cfg('files', 'exclude'), cfg('search', 'exclude'), { '**/.git': true }));
    const [found, tracked] = await Promise.all([
      vscode.workspace.findFiles(queryGlob(query), exclude, 2000),
      this.gitFiles(),
    ]);
    const listed = found.map((f) => ({ f, rel: vscode.workspace.asRelativePath(f, false) }))
      .filter((x) => !tracked || !tracked.has(rootOf(x.f)) || tracked.get(rootOf(x.f))!.has(relTo(rootOf(x.f), x.f)));
    const ranked = listed.filter((x) => !seen.has(x.f.toString()) && match(x.rel))
      .sort((a, b) => score(a.rel, q) - score(b.rel, q) || a.rel.length - b.rel.length).slice(0, 40);
    // Folders whose name holds the query (from the files found): their files, up to 20, as chips.
    const folders = new Map<string, vscode.Uri[]>();
    for (const { f, rel } of listed) {
      const dir = path.posix.dirname(rel);
      if (dir === '.' || !match(path.posix.basename(dir))) continue;
      const list = folders.get(dir) ?? [];
      if (list.length < 20) list.push(f);
      folders.set(dir, list);
    }
    for (const [dir, files] of [...folders].sort((a, b) => a[0].length - b[0].length).slice(0, 5)) {
      out.push({ kind: 'folder', label: `${path.posix.basename(dir)}/`, detail: `${dir}/ (${files.length}${files.length === 20 ? '+' : ''} files)`, chips: files.map(fileChip) });
    }
    for (const { f, rel } of ranked) out.push({ kind: 'file', label: path.basename(f.fsPath), detail: rel, chips: [fileChip(f)] });
    // The language servers' workspace symbols (a class, a function) as the lines that declare them.
    if (q.length >= 2) {
      const symbols = await vscode.commands.executeCommand<vscode.SymbolInformation[]>('vscode.executeWorkspaceSymbolProvider', query.trim())
        .then((r) => r ?? [], () => [] as vscode.SymbolInformation[]);
      for (const s of symbols.filter((x) => x.location?.uri?.scheme === 'file' && x.name.toLowerCase().includes(q)).slice(0, 10)) {
        const uri = s.location.uri;
        const r = s.location.range;
        const rel = vscode.workspace.asRelativePath(uri, false);
        if (tracked?.has(rootOf(uri)) && !tracked.get(rootOf(uri))!.has(relTo(rootOf(uri), uri))) continue;
        const range = { start: { line: r.start.line, character: 0 }, end: { line: r.end.line + 1, character: 0 } };
        out.push({ kind: 'symbol', label: s.name, detail: `${vscode.SymbolKind[s.kind]?.toLowerCase() ?? 'symbol'} in ${rel}:${r.start.line + 1}`, chips: [{ kind: 'selection', uri: uri.toString(), range, label: `${s.name} (${path.basename(uri.fsPath)}:${r.start.line + 1})` }] });
      }
    }
    // Problems: of the whole workspace, and of each file that has some.
    const withProblems = vscode.languages.getDiagnostics().filter(([u, d]) => u.scheme === 'file' && d.length);
    const problemChip = (u: vscode.Uri, d: readonly vscode.Diagnostic[]): Chip => ({ kind: 'diagnostics', uri: u.toString(), label: `problems in ${path.basename(u.fsPath)}`, diagnostics: d.slice(0, 50).map(toLspDiagnostic) });
    if (withProblems.length && (match('problems') || match('workspace'))) {
      const count = withProblems.reduce((n, [, d]) => n + d.length, 0);
      out.push({ kind: 'problems', label: 'problems in the workspace', detail: `${count} in ${withProblems.length} file${withProblems.length === 1 ? '' : 's'}`, chips: withProblems.slice(0, 20).map(([u, d]) => problemChip(u, d)) });
    }
    for (const [u, d] of withProblems) {
      const rel = vscode.workspace.asRelativePath(u, false);
      if (q && (match(rel) || match('problems')) && u.toString() !== editor?.document.uri.toString()) out.push({ kind: 'problems', label: `problems in ${path.basename(u.fsPath)}`, detail: `${d.length} in ${rel}`, chips: [problemChip(u, d)] });
    }
    return out;
  }

  dispose(): void {
    if (this.timer) clearTimeout(this.timer);
    if (this.readOnlyRetry) clearTimeout(this.readOnlyRetry);
    if (this.inboxTimer) clearTimeout(this.inboxTimer);
    this.disposables.forEach((d) => d.dispose());
    this.sessionShown.dispose();
  }
}

/** The hooks a project's `.dsh/config.json` holds, one line each (`event: name: command (tools: matcher)`),
 *  for the person to read before trusting them; `count` undefined when the file cannot be read. */
export function describeHooks(file: string): { lines: string[]; count?: number } {
  let hooks: unknown;
  try {
    hooks = (JSON.parse(readFileSync(file, 'utf8')) as { hooks?: unknown })?.hooks;
  } catch (err) {
    return { lines: [`(the file cannot be read here: ${(err as Error).message.split('\n')[0]})`] };
  }
  const lines: string[] = [];
  let count = 0;
  if (hooks && typeof hooks === 'object') {
    for (const [event, entries] of Object.entries(hooks as Record<string, unknown>)) {
      if (!Array.isArray(entries)) continue;
      for (const e of entries as Array<Record<string, unknown>>) {
        count++;
        const cmd = Array.isArray(e?.command) ? e.command.map(String).join(' ') : String(e?.command ?? '?');
        const name = typeof e?.name === 'string' ? `${e.name}: ` : '';
        const matcher = typeof e?.matcher === 'string' && e.matcher !== '*' ? ` (tools: ${e.matcher})` : '';
        lines.push(`${event}: ${name}${cmd.length > 200 ? cmd.slice(0, 199) + '…' : cmd}${matcher}`);
      }
    }
  }
  const shown = lines.length > 30 ? [...lines.slice(0, 30), `… and ${lines.length - 30} more`] : lines;
  return { lines: shown.length ? shown : ['(no hooks)'], count };
}

/** The workspace folder (fsPath) that holds `uri`; '' when none. */
function rootOf(uri: vscode.Uri): string {
  return vscode.workspace.getWorkspaceFolder(uri)?.uri.fsPath ?? '';
}

/** `uri`'s path relative to the folder `root`, with `/`. */
function relTo(root: string, uri: vscode.Uri): string {
  return path.relative(root, uri.fsPath).split(path.sep).join('/');
}

/** A file whose name starts with the query comes first, then one whose name holds it, then the rest. */
function score(rel: string, q: string): number {
  const name = rel.split('/').pop()!.toLowerCase();
  return !q ? 0 : name.startsWith(q) ? 0 : name.includes(q) ? 1 : 2;
}

function actionsFor(err: unknown): PanelAction[] {
  if (err instanceof DaemonUnavailable) return err.state.kind === 'notFound' ? ['installDaemon', 'openSettings', 'showLog'] : ['openSettings', 'showLog'];
  return ['showLog'];
}

/** Files dropped on the panel (folders are skipped), as the files this host sees. */
async function dropChips(uris: string[]): Promise<Chip[]> {
  const chips: Chip[] = [];
  for (const s of uris) {
    try {
      const uri = localFileUri(vscode.Uri.parse(s));
      const stat = await vscode.workspace.fs.stat(uri);
      if (stat.type & vscode.FileType.Directory) continue;
      chips.push(fileChip(uri));
    } catch { /* gone, or not a file */ }
  }
  return chips;
}

function languageId(lang: string): string {
  const l = lang.toLowerCase();
  const map: Record<string, string> = { py: 'python', js: 'javascript', ts: 'typescript', sh: 'shellscript', bash: 'shellscript', shell: 'shellscript', rs: 'rust', rb: 'ruby', yml: 'yaml', md: 'markdown', 'c++': 'cpp', cs: 'csharp', golang: 'go' };
  return map[l] ?? (l || 'plaintext');
}

/** The @ picker's "git diff" rows: one per workspace folder in a git work tree with uncommitted changes. */
async function changesRows(): Promise<MentionItem[]> {
  const folders = (vscode.workspace.workspaceFolders ?? []).filter((f) => f.uri.scheme === 'file');
  const rows = await Promise.all(folders.map(async (f): Promise<MentionItem | undefined> => {
    const stat = await gitDiffStat(f.uri.fsPath);
    if (!stat) return undefined; // not a git work tree, or nothing changed
    const label = `git diff ${folders.length > 1 ? f.name : ''}`.trim();
    return { kind: 'changes', label, detail: `uncommitted: ${shortStat(stat)}`, chips: [{ kind: 'gitDiff', uri: f.uri.toString(), label }] };
  }));
  return rows.filter((r): r is MentionItem => r !== undefined);
}

/** The reference a chip becomes, read now: a `gitDiff` chip's diff is the work tree's as it is at send,
 *  a `terminal` chip's output the command's as recorded by then. */
async function contextRefNow(chip: Chip, terminals: TerminalOutputRecorder<vscode.Terminal>): Promise<ContextRef> {
  const ref: ContextRef = { uri: chip.uri, kind: chip.kind };
  if (chip.range) ref.range = chip.range;
  if (chip.kind === 'diagnostics' && chip.diagnostics) ref.diagnostics = chip.diagnostics;
  if (chip.kind === 'gitDiff') {
    const diff = await gitDiffText(vscode.Uri.parse(chip.uri).fsPath);
    if (diff === undefined) throw new Error(`git could not read the changes of ${chip.label.replace(/^git diff /, '')}`);
    ref.diff = diff;
  }
  if (chip.kind === 'terminal') ref.terminal = terminalOutputNow(terminals, chip);
  return ref;
}

export function webviewHtml(webview: vscode.Webview, dist: vscode.Uri): string {
  return chatHtml({
    cspSource: webview.cspSource,
    scriptUri: webview.asWebviewUri(vscode.Uri.joinPath(dist, 'webview.js')).toString(),
    styleUri: webview.asWebviewUri(vscode.Uri.joinPath(dist, 'webview.css')).toString(),
  });
}

/** What a rewind to before the first of `turns` does to each file, one line per file, for a person:
 *  a file the agent created is deleted, any other gets its earlier content, a dropped checkpoint
 *  cannot be restored; commands run outside git are said to be out of reach. */
export function checkpointPreview(turns: CheckpointTurn[], rel: (p: string) => string): string[] {
  const files = new Map<string, { created: boolean; dropped: boolean }>();
  let unknown = 0;
  for (const t of [...turns].sort((a, b) => a.turn - b.turn)) {
    unknown += t.unrestorableCommands ?? 0;
    for (const f of t.files) {
      const seen = files.get(f.path);
      // The earliest turn decides: a file the agent created then is deleted, whatever came after.
      if (!seen) files.set(f.path, { created: f.created, dropped: !!f.dropped });
      else if (f.dropped) seen.dropped = true;
    }
  }
  const lines = [...files].map(([p, f]) => `${rel(p)}${f.dropped ? ' (cannot be restored: its checkpoint was dropped)' : f.created ? ' (deleted: the agent created it)' : ''}`);
  if (unknown) lines.push(`(${unknown} command${unknown === 1 ? '' : 's'} ran outside git: what ${unknown === 1 ? 'it' : 'they'} changed is not restored)`);
  return lines;
}
