// Entry point: the daemon, the chat view, commands, ambient editor context.
import * as vscode from 'vscode';
import { Daemon, SECRET_KEY } from './daemon';
import { DaemonUnavailable } from './daemonState';
import { runAgent } from './agents';
import { registerEditorActions } from './editorActions';
import { fileChip, selectionChip, watchAmbient } from './editorContext';
import { SideSessions } from './inlineSession';
import { ChatPanel, personText } from './panel';
import { Permissions } from './permissions';
import type { DshClient } from './protocol/client';
import type { SessionInfo } from './protocol/types';
import { ReviewFindings } from './reviewFindings';
import { SessionsView } from './sessionsView';
import { TurnDiffs } from './turnDiffView';

let daemon: Daemon | undefined;

export function activate(ctx: vscode.ExtensionContext): { panel: ChatPanel; daemon: Daemon; review: ReviewFindings; turnDiffs: TurnDiffs; sessions: SessionsView } {
  const output = vscode.window.createOutputChannel('dsh', { log: true });
  daemon = new Daemon(ctx, output);
  const permissions = new Permissions(
    (request) => {
      p.dispatch({ kind: 'permission', request });
      // The card is in the panel; when the panel is not showing, or shows another session (the card
      // appears when that session is shown again), ask in a notification too.
      const elsewhere = request.sessionId !== p.model.sessionId;
      if (!p.visible || elsewhere) {
        // 'Show' first: the primary action of a notification also runs from the keyboard
        // (notification.acceptPrimaryAction), and that must not approve a tool.
        const overlaps = request.preview?.unsaved === 'overlaps';
        const allow = overlaps ? ['Buffer only', 'Write both'] : ['Allow once'];
        const also = overlaps ? ' (the edit overlaps your unsaved changes in the file)' : '';
        void vscode.window.showWarningMessage(`dsh: ${request.title}${also}${elsewhere ? ' (in another session)' : ''}`, 'Show', 'Reject', ...allow).then((choice) => {
          if (choice === 'Allow once') permissions.answer(request.callId, 'allow-once');
          else if (choice === 'Buffer only') permissions.answer(request.callId, 'allow-once', false, 'buffer-only');
          else if (choice === 'Write both') permissions.answer(request.callId, 'allow-once', false, 'both');
          else if (choice === 'Reject') permissions.answer(request.callId, 'reject');
          else if (choice === 'Show') {
            void vscode.commands.executeCommand('dsh.chat.focus');
            if (request.sessionId !== p.model.sessionId) void p.openSession(request.sessionId);
          }
        });
      }
    },
    (callId) => p.dispatch({ kind: 'permissionDone', callId }),
    {
      log: (line) => output.info(line),
      editedAccept: () => daemon?.client?.features?.editedAccept === true,
      onEdited: (callId, edited) => p.proposalEdited(callId, edited),
    },
  );
  const d = daemon;
  const p = new ChatPanel(ctx, d, permissions);
  const cmd = (id: string, f: (...args: any[]) => unknown) => ctx.subscriptions.push(vscode.commands.registerCommand(id, async (...args: any[]) => {
    try {
      await f(...args);
    } catch (err) {
      output.error(`${id}: ${(err as Error)?.message ?? err}`);
      // Why the daemon is not running is shown in the panel, with what to do about it.
      if (err instanceof DaemonUnavailable) { void p.focusComposer(); return; }
      void vscode.window.showErrorMessage(`dsh: ${personText(err)}`);
    }
  }));

  ctx.subscriptions.push(output, d, permissions, p,
    vscode.window.registerWebviewViewProvider(ChatPanel.viewId, p, { webviewOptions: { retainContextWhenHidden: true } }));

  cmd('dsh.setApiKey', async () => {
    const key = await vscode.window.showInputBox({ prompt: 'API key for the model provider (stored in VS Code SecretStorage)', password: true, ignoreFocusOut: true });
    if (key === undefined) return;
    if (key) await ctx.secrets.store(SECRET_KEY, key.trim()); else await ctx.secrets.delete(SECRET_KEY);
    await d.restart();
    void vscode.window.showInformationMessage(key ? 'dsh: API key saved; the daemon restarted with it.' : 'dsh: API key removed.');
  });
  cmd('dsh.addSelection', () => p.addChip(selectionChip(vscode.window.activeTextEditor)));
  cmd('dsh.steerSelection', async () => {
    const chip = selectionChip(vscode.window.activeTextEditor);
    if (!chip) { void vscode.window.showInformationMessage('dsh: select some text first'); return; }
    await p.contextNow(chip, 'steer');
  });
  cmd('dsh.addFile', async (uri?: vscode.Uri, uris?: vscode.Uri[]) => {
    const picked = Array.isArray(uris) && uris.length ? uris : uri instanceof vscode.Uri ? [uri] : [];
    if (picked.length) { for (const u of picked) await p.addChip(fileChip(u)); return; }
    let target = vscode.window.activeTextEditor?.document.uri;
    if (!target || target.scheme !== 'file') {
      const files = await vscode.workspace.findFiles('**/*', '**/{node_modules,.git,.venv}/**', 500);
      const choice = await vscode.window.showQuickPick(files.map((f) => ({ label: vscode.workspace.asRelativePath(f), uri: f })), { placeHolder: 'Add a file to the chat' });
      target = choice?.uri;
    }
    if (target) await p.addChip(fileChip(target));
  });
  cmd('dsh.newSession', () => p.newSession());
  cmd('dsh.switchSession', () => p.switchSession());
  cmd('dsh.revokePermissions', () => p.revokeGrants());
  cmd('dsh.stop', () => p.cancel(true));
  cmd('dsh.stopAndClear', () => p.cancel(false));
  cmd('dsh.runQueue', () => p.wake());
  cmd('dsh.restartDaemon', () => d.restart());
  cmd('dsh.showLog', () => output.show());
  cmd('dsh.installDaemon', () => d.install());
  cmd('dsh.focusChat', () => p.focusComposer());
  const review = new ReviewFindings({ ask: (text) => p.prompt(text), log: (line) => output.info(line) });
  ctx.subscriptions.push(review);
  // The Problems panel shows the findings of the session the chat shows; its cwd resolves their paths.
  const showFindings = async (sessionId: string | null | undefined) => {
    const client = d.client;
    if (!client || !sessionId) { await review.show(undefined, undefined, undefined); return; }
    const cwd = await sessionCwd(client, sessionId);
    if (p.model.sessionId === sessionId) await review.show(client, sessionId, cwd);
  };
  ctx.subscriptions.push(p.onDidShowSession((id) => void showFindings(id).catch((err) => output.error(`review findings: ${err?.message ?? err}`))));
  ctx.subscriptions.push(d.onReady(() => void showFindings(p.model.sessionId).catch(() => undefined)));
  cmd('dsh.reviewUncommitted', async () => {
    const r = await p.review();
    void vscode.window.showInformationMessage(`dsh: reviewing ${r.files.length} changed file${r.files.length === 1 ? '' : 's'}; findings appear in Problems.`);
  });
  cmd('dsh.reviewBranch', async () => {
    const base = await vscode.window.showInputBox({ prompt: 'Review the changes since this branch (or any ref) left HEAD', value: 'main', ignoreFocusOut: true });
    if (!base?.trim()) return;
    const r = await p.review(base.trim());
    void vscode.window.showInformationMessage(`dsh: reviewing ${r.files.length} changed file${r.files.length === 1 ? '' : 's'} since ${base.trim()}; findings appear in Problems.`);
  });
  cmd('dsh.review.applyFix', async (findingId: string) => {
    if (!await review.applyFix(findingId)) void vscode.window.showInformationMessage('dsh: the fix was not applied.');
  });
  cmd('dsh.review.askFix', (findingId: string) => review.askFix(findingId));
  cmd('dsh.review.dismiss', (findingId: string) => review.dismiss(findingId));
  // The last turn's changed files: the chat's bar, a diff editor per file, Keep / Undo CodeLens.
  const turnDiffs = new TurnDiffs({
    changed: (sessionId, summary) => { if (p.model.sessionId === sessionId) p.dispatch({ kind: 'turnDiff', diff: summary }); },
    said: (sessionId, text, warning) => p.sayTurnDiff(sessionId, text, warning),
    log: (line) => output.info(line),
  });
  ctx.subscriptions.push(turnDiffs);
  p.turnFiles = turnDiffs;
  const showTurnDiff = (sessionId: string | null | undefined) => turnDiffs.show(d.client, sessionId ?? undefined)
    .catch((err) => output.error(`turn diff: ${err?.message ?? err}`));
  ctx.subscriptions.push(p.onDidShowSession((id) => void showTurnDiff(id)));
  ctx.subscriptions.push(d.onReady(() => void showTurnDiff(p.model.sessionId)));
  cmd('dsh.turnDiff.open', (file: string) => turnDiffs.open(file));
  cmd('dsh.turnDiff.keep', (file: string, hunks?: number[]) => turnDiffs.keep(file, hunks));
  cmd('dsh.turnDiff.undo', (file: string, hunks?: number[]) => turnDiffs.undo(file, hunks));
  // The Sessions view: this workspace's sessions, worktree sessions' Apply / Keep / Discard.
  const sessions = new SessionsView(d, p, (line) => output.info(line));
  ctx.subscriptions.push(sessions.register(cmd));
  // The agent from the editor: code actions on diagnostics, inline chat (Ctrl+I).
  const sideSessions = new SideSessions(ctx.workspaceState, (line) => output.info(line));
  ctx.subscriptions.push(...registerEditorActions({
    ask: async (text, chips, onEvent, side) => {
      if (!side) return p.ask(text, chips, onEvent);
      let sessionId: string | undefined;
      try {
        return await p.ask(text, chips, onEvent, async (client) => (sessionId = await sideSessions.sessionFor(client, side)));
      } catch (err) {
        // A side session that took no prompt (deleted meanwhile, say) is not asked again.
        if (sessionId) await sideSessions.forget(sessionId);
        throw err;
      }
    },
    stop: async (sessionId) => { await d.client?.cancel(sessionId, true, 'user'); },
    unqueue: async (sessionId, messageId) => (await d.client?.inboxRemove(sessionId, messageId))?.removed ?? false,
    focusChat: () => p.focusComposer(),
    log: (line) => output.info(line),
    fail: (id, err) => {
      output.error(`${id}: ${(err as Error)?.message ?? err}`);
      if (err instanceof DaemonUnavailable) void p.focusComposer();
      else void vscode.window.showErrorMessage(`dsh: ${personText(err)}`);
    },
  }));
  cmd('dsh.runAgent', () => runAgent({
    client: () => d.ensureStarted(),
    sessionId: () => p.model.sessionId,
    cwd: () => vscode.workspace.workspaceFolders?.[0]?.uri.fsPath,
    prompt: (text) => p.prompt(text),
    focusChat: () => p.focusComposer(),
  }));
  cmd('dsh.acceptProposedEdit', (uri?: unknown) => permissions.acceptActive(uri));
  cmd('dsh.rejectProposedEdit', (uri?: unknown) => permissions.rejectActive(uri));

  ctx.subscriptions.push(vscode.workspace.onDidChangeConfiguration((e) => d.onConfigurationChanged(e)));

  ctx.subscriptions.push(watchAmbient((state) => {
    const client = d.client;
    if (client && p.model.sessionId && !p.model.readOnly) client.contextDidChange(state);
  }));

  // Start the daemon now so a stored session is reattached (and its queue shown) as soon as the view
  // opens. Not installed: one notification offers to install it unless the panel already shows that.
  void d.ensureStarted().catch((err) => {
    if (!(err instanceof DaemonUnavailable) || err.state.kind !== 'notFound' || p.visible) return;
    void vscode.window.showInformationMessage('dsh: dsh-daemon is not installed (not on PATH, not in the workspace\'s .venv).', 'Install', 'Open Settings').then((c) => {
      if (c === 'Install') void vscode.commands.executeCommand('dsh.installDaemon');
      else if (c === 'Open Settings') void vscode.commands.executeCommand('workbench.action.openSettings', 'dsh.serverCommand');
    });
  });
  return { panel: p, daemon: d, review, turnDiffs, sessions };
}

/** The session's cwd (its findings' paths are relative to it); the workspace folder when the
 *  daemon's list does not hold it. */
async function sessionCwd(client: DshClient, sessionId: string): Promise<string | undefined> {
  const { sessions } = await client.listSessions({ limit: 500 }).catch(() => ({ sessions: [] as SessionInfo[] }));
  return sessions.find((s) => s.sessionId === sessionId)?.cwd ?? vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
}

export async function deactivate(): Promise<void> {
  await daemon?.stop();
}
