// The chat panel: a webview view fed by the shared reducer. The host keeps the SessionModel, forwards
// the reducer's actions to the webview in batches (at most every 50 ms; a snapshot only when the view
// (re)loads), and turns the webview's messages into daemon requests.
import * as path from 'node:path';
import * as vscode from 'vscode';
import type { Daemon } from './daemon';
import type { Permissions } from './permissions';
import type { DshClient } from './protocol/client';
import type { Chip, ConnectionState, HostToWebview, WebviewToHost } from './protocol/panelMessages';
import { Action, emptyModel, pendingCount, reduce, SessionModel, statusLabel, Via } from './protocol/reducer';
import { errorCode, type AnyEvent, type ContextRef, type SessionInfo } from './protocol/types';
import { chatHtml } from './webviewHtml';

const SESSION_KEY = 'dsh.sessionId';
export const BATCH_MS = 50;

export class ChatPanel implements vscode.WebviewViewProvider, vscode.Disposable {
  static readonly viewId = 'dsh.chat';
  /** Turns per transcript page (a fresh attach, and each older page the webview asks for). */
  static transcriptTurns = 20;
  model: SessionModel = emptyModel();
  private view: vscode.WebviewView | undefined;
  private ready = false;
  private batch: Action[] = [];
  private timer: ReturnType<typeof setTimeout> | undefined;
  private pendingChips: Chip[] = [];
  private connection: ConnectionState = { state: 'starting' };
  private subscribed = new WeakSet<DshClient>();
  private readOnlyRetry: ReturnType<typeof setTimeout> | undefined;
  private loadingOlder = false;
  private inboxTimer: ReturnType<typeof setTimeout> | undefined;
  /** The session whose first transcript page is on its way: its events wait for the attach replay. */
  private paging: string | undefined;
  private readonly disposables: vscode.Disposable[] = [];
  private readonly status: vscode.StatusBarItem;

  constructor(private readonly ctx: vscode.ExtensionContext, private readonly daemon: Daemon, private readonly permissions: Permissions) {
    this.status = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Left, 50);
    this.status.command = 'dsh.chat.focus';
    this.status.name = 'dsh';
    this.updateStatus();
    this.status.show();
    this.disposables.push(this.status);
    this.disposables.push(daemon.onReady((client) => void this.onDaemonReady(client)));
    this.disposables.push(daemon.onState((s) => {
      this.connection = { ...s, hasKey: this.connection.hasKey };
      this.post({ type: 'connection', connection: this.connection });
      this.updateStatus();
      void daemon.hasKey().then((hasKey) => {
        this.connection = { ...this.connection, hasKey };
        this.post({ type: 'connection', connection: this.connection });
      });
    }));
  }

  /** Whether the chat view is showing (a permission card there can be seen). */
  get visible(): boolean {
    return !!this.view?.visible && this.ready;
  }

  get sessionId(): string | undefined {
    return this.model.sessionId ?? this.ctx.workspaceState.get<string>(SESSION_KEY);
  }

  // ---- model and batching -------------------------------------------------------------------------

  dispatch(action: Action): void {
    this.model = reduce(this.model, action);
    this.batch.push(action);
    this.timer ??= setTimeout(() => this.flush(), BATCH_MS);
    this.updateStatus();
  }

  private flush(): void {
    this.timer = undefined;
    const actions = this.batch.splice(0);
    if (actions.length && this.ready) this.post({ type: 'actions', actions });
  }

  private post(msg: HostToWebview): void {
    if (this.view && this.ready) void this.view.webview.postMessage(msg);
  }

  private sendSnapshot(): void {
    if (this.timer) { clearTimeout(this.timer); this.timer = undefined; }
    this.batch = [];
    this.post({ type: 'snapshot', model: this.model, connection: this.connection });
    for (const chip of this.pendingChips.splice(0)) this.post({ type: 'chip', chip });
  }

  private updateStatus(): void {
    const label = this.connection.state === 'error' ? 'daemon failed' : this.connection.state === 'starting' ? 'starting' : statusLabel(this.model);
    const icon = this.model.permissions.length ? '$(shield)' : this.model.status === 'running' ? '$(sync~spin)' : pendingCount(this.model) ? '$(list-ordered)' : '$(comment-discussion)';
    this.status.text = `${icon} dsh: ${label}`;
    this.status.tooltip = this.model.sessionId
      ? `dsh session ${this.model.title ? `"${this.model.title}" (${this.model.sessionId})` : this.model.sessionId}` : 'dsh: no session yet';
  }

  // ---- daemon and sessions ------------------------------------------------------------------------

  private async onDaemonReady(client: DshClient): Promise<void> {
    if (!this.subscribed.has(client)) {
      this.subscribed.add(client);
      client.onEvent((e) => this.onEvent(e));
      client.setPermissionHandler(this.permissions.handle);
    }
    const id = this.sessionId;
    if (!id) return;
    // The same model after a daemon restart: continue after its last seq (no gap, no duplicate).
    const continuing = this.model.sessionId === id && this.model.lastSeq >= 0;
    await this.attach(client, id, !continuing);
  }

  private onEvent(e: AnyEvent): void {
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
    if (e.type === 'turn/end') this.permissions.cancelAll(e.sessionId);
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
      // Requests this window still holds for the session (it asked while another session was shown).
      for (const request of this.permissions.openFor(id)) this.dispatch({ kind: 'permission', request });
      if (res.readOnly && client.features?.liveReadOnly) {
        // Another process drives it: its events follow live, and `session/lease` says when this
        // daemon drives it (a reloaded window's old daemon exiting).
        this.refreshInbox();
      } else if (res.readOnly) {
        // An older daemon: attach again until this one drives it.
        this.readOnlyRetry = setTimeout(() => void this.attach(client, id, false), 2000);
      }
    } catch (err) {
      if (errorCode(err) === 'unknown_session') {
        await this.ctx.workspaceState.update(SESSION_KEY, undefined);
        this.dispatch({ kind: 'reset', sessionId: null });
      } else {
        void vscode.window.showErrorMessage(`dsh: could not attach session ${id}: ${(err as Error).message}`);
      }
    }
    this.sendSnapshot();
  }

  async ensureSession(): Promise<{ client: DshClient; sessionId: string }> {
    const client = await this.daemon.ensureStarted();
    if (this.model.sessionId) return { client, sessionId: this.model.sessionId };
    const stored = this.ctx.workspaceState.get<string>(SESSION_KEY);
    if (stored) {
      await this.attach(client, stored, true);
      if (this.model.sessionId) return { client, sessionId: this.model.sessionId };
    }
    const cwd = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
    const { sessionId } = await client.newSession(cwd ? { cwd } : {});
    await this.ctx.workspaceState.update(SESSION_KEY, sessionId);
    this.dispatch({ kind: 'reset', sessionId });
    this.sendSnapshot();
    return { client, sessionId };
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
          const yes = await vscode.window.showWarningMessage(`Delete the dsh session "${session.title || '(untitled)'}"?`,
            { modal: true, detail: 'Its transcript and queued prompts are removed for good.' }, 'Delete');
          if (yes === 'Delete') {
            await client.deleteSession(session.sessionId);
            if (session.sessionId === this.sessionId) {
              // The session on screen is gone: the panel starts empty, the next prompt makes a new one.
              await this.ctx.workspaceState.update(SESSION_KEY, undefined);
              this.dispatch({ kind: 'reset', sessionId: null });
              this.sendSnapshot();
            }
          }
        }
      } catch (err) {
        void vscode.window.showErrorMessage(`dsh: ${(err as Error).message ?? err}`);
      }
    }
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
            label: s.title || '(untitled)',
            description: `${s.sessionId === current ? 'current · ' : ''}${s.status}${s.pending ? `, ${s.pending} queued` : ''} · ${new Date(s.updatedAt).toLocaleString()}`,
            detail: s.lastPrompt ? `${s.lastPrompt} — ${s.cwd}` : s.cwd,
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

  /** The transcript page before the oldest turn shown. */
  async loadOlder(): Promise<void> {
    const id = this.model.sessionId;
    const before = this.model.olderBefore;
    const client = this.daemon.client;
    if (!id || before === null || !client || this.loadingOlder) return;
    this.loadingOlder = true;
    try {
      const page = await client.transcript(id, { beforeTurn: before, limit: ChatPanel.transcriptTurns });
      if (this.model.sessionId === id && this.model.olderBefore === before) this.dispatch({ kind: 'transcript', page, older: true });
    } finally {
      this.loadingOlder = false;
    }
  }

  async addChip(chip: Chip | undefined): Promise<void> {
    if (!chip) { void vscode.window.showInformationMessage('dsh: select some text first'); return; }
    await vscode.commands.executeCommand('dsh.chat.focus');
    if (this.ready) this.post({ type: 'chip', chip }); else this.pendingChips.push(chip);
  }

  async contextNow(chip: Chip, delivery: 'inject' | 'steer' | 'followup'): Promise<void> {
    const { client, sessionId } = await this.ensureSession();
    const r = await client.contextAdd({ sessionId, ...contextRef(chip), delivery });
    this.dispatch({ kind: 'sent', messageId: r.messageId, via: delivery === 'inject' ? 'context' : delivery });
  }

  async cancel(keepInbox: boolean): Promise<void> {
    if (!this.model.sessionId || !this.daemon.client) return;
    await this.daemon.client.cancel(this.model.sessionId, keepInbox);
  }

  async wake(): Promise<void> {
    const { client, sessionId } = await this.ensureSession();
    await client.wake(sessionId);
  }

  // ---- the webview ----------------------------------------------------------------------------

  resolveWebviewView(view: vscode.WebviewView): void {
    this.view = view;
    this.ready = false;
    const dist = vscode.Uri.joinPath(this.ctx.extensionUri, 'dist');
    view.webview.options = { enableScripts: true, localResourceRoots: [dist] };
    view.webview.html = webviewHtml(view.webview, dist);
    view.webview.onDidReceiveMessage((m: WebviewToHost) => void this.onMessage(m).catch((err) => {
      void vscode.window.showErrorMessage(`dsh: ${(err as Error).message ?? err}`);
    }), undefined, this.disposables);
    view.onDidDispose(() => { if (this.view === view) { this.view = undefined; this.ready = false; } });
  }

  private async onMessage(m: WebviewToHost): Promise<void> {
    switch (m.type) {
      case 'ready':
        this.ready = true;
        {
          const hasKey = await this.daemon.hasKey(); // read the state after the await: it may have moved on
          this.connection = { ...this.connection, hasKey };
        }
        this.sendSnapshot();
        void this.daemon.ensureStarted().then(() => { if (this.sessionId && !this.model.sessionId) void this.ensureSession(); }).catch(() => undefined);
        return;
      case 'send': return this.send(m.text, m.chips, m.mode);
      case 'cancel': return this.cancel(m.keepInbox);
      case 'wake': return this.wake();
      case 'continue': {
        const { client, sessionId } = await this.ensureSession();
        if (pendingCount(this.model)) await client.wake(sessionId);
        else this.dispatch({ kind: 'sent', messageId: (await client.followup(sessionId, 'Continue where you left off.')).messageId, via: 'followup' });
        return;
      }
      case 'loadOlder': return this.loadOlder();
      case 'newSession': return this.newSession();
      case 'switchSession': return this.switchSession();
      case 'setApiKey': await vscode.commands.executeCommand('dsh.setApiKey'); return;
      case 'addSelection': await vscode.commands.executeCommand('dsh.addSelection'); return;
      case 'addFile': await vscode.commands.executeCommand('dsh.addFile'); return;
      case 'inboxRemove': { const { client, sessionId } = await this.ensureSession(); await client.inboxRemove(sessionId, m.messageId); return; }
      case 'inboxReplace': {
        const { client, sessionId } = await this.ensureSession();
        const old = [...this.model.inbox.nextTurn, ...this.model.inbox.nextStep].find((x) => x.id === m.messageId);
        const r = await client.inboxReplace(sessionId, m.messageId, old ? { content: m.text, source: old.source } : m.text);
        const via = this.model.via[m.messageId];
        if (via) this.dispatch({ kind: 'sent', messageId: r.messageId, via });
        return;
      }
      case 'inboxMove': { const { client, sessionId } = await this.ensureSession(); await client.inboxMove(sessionId, m.messageId, m.target, m.index); return; }
      case 'permission': this.permissions.answer(m.callId, m.outcome); return;
      case 'viewDiff': return this.permissions.viewDiff(m.callId, vscode.workspace.workspaceFolders?.[0]?.uri.fsPath);
      case 'openFile': {
        const doc = await vscode.workspace.openTextDocument(vscode.Uri.parse(m.uri));
        const ed = await vscode.window.showTextDocument(doc, { preview: true });
        if (m.range) ed.revealRange(new vscode.Range(m.range.start.line, m.range.start.character, m.range.end.line, m.range.end.character));
        return;
      }
      case 'copy': await vscode.env.clipboard.writeText(m.text); return;
      case 'insert': {
        const ed = vscode.window.activeTextEditor ?? vscode.window.visibleTextEditors[0];
        if (ed) await ed.edit((b) => b.replace(ed.selection, m.text));
        return;
      }
    }
  }

  private async send(text: string, chips: Chip[], mode: 'followup' | 'steer'): Promise<void> {
    const { client, sessionId } = await this.ensureSession();
    const hasText = !!text.trim();
    if (hasText && chips.length && client.features?.sendContext) {
      // The chips travel with the prompt (`context` on the send): read now, queued with it as one item
      // and entered just before it by the turn that claims it, so a prompt queued behind a running
      // turn does not leak its selection into that turn.
      const context = chips.map(contextRef);
      const r = mode === 'steer' ? await client.steer(sessionId, text, context) : await client.followup(sessionId, text, context);
      this.dispatch({ kind: 'sent', messageId: r.messageId, via: mode as Via });
      return;
    }
    // Context sent alone is injected (it joins the running turn's next step, or waits for the next
    // prompt). A daemon without `sendContext` gets the chips this way in front of the prompt too.
    for (const chip of chips) {
      const r = await client.contextAdd({ sessionId, ...contextRef(chip), delivery: 'inject' });
      this.dispatch({ kind: 'sent', messageId: r.messageId, via: 'context' });
    }
    if (!hasText) return;
    const r = mode === 'steer' ? await client.steer(sessionId, text) : await client.followup(sessionId, text);
    this.dispatch({ kind: 'sent', messageId: r.messageId, via: mode as Via });
  }

  dispose(): void {
    if (this.timer) clearTimeout(this.timer);
    if (this.readOnlyRetry) clearTimeout(this.readOnlyRetry);
    if (this.inboxTimer) clearTimeout(this.inboxTimer);
    this.disposables.forEach((d) => d.dispose());
  }
}

function contextRef(chip: Chip): ContextRef {
  return chip.range ? { uri: chip.uri, kind: chip.kind, range: chip.range } : { uri: chip.uri, kind: chip.kind };
}

export function webviewHtml(webview: vscode.Webview, dist: vscode.Uri): string {
  return chatHtml({
    cspSource: webview.cspSource,
    scriptUri: webview.asWebviewUri(vscode.Uri.joinPath(dist, 'webview.js')).toString(),
    styleUri: webview.asWebviewUri(vscode.Uri.joinPath(dist, 'webview.css')).toString(),
  });
}
