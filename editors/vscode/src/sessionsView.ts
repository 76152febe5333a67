// The Sessions view (issue 34.2): this workspace's sessions with a state dot, a subagent's session
// under its parent's, a session in its own worktree with its branch and figures; a click opens the
// session in the chat panel. For a worktree: its whole diff, Apply to my workspace, Keep branch,
// Discard; deleting its session asks whether the worktree goes too, and a worktree whose session is
// gone is listed under a node of its own until the person keeps or discards it.
import * as vscode from 'vscode';
import type { Daemon } from './daemon';
import type { ChatPanel } from './panel';
import type { DshClient } from './protocol/client';
import {
  deleteSession, listWorkspaceSessions, listWorktrees, newWorktreeSession, worktreeApply, worktreeDiff, worktreeDiscard, worktreeKeep,
  type ListedSession, type WorktreeDiff, type WorktreeRef,
} from './protocol/worktrees';
import { confirmDeleteSession } from './sessionDelete';
import { findSession, nodeChildren, nodeId, nodeLook, sessionTree, type TreeNode } from './sessionsTree';

export const SESSIONS_VIEW_ID = 'dsh.sessions';
const DIFF_SCHEME = 'dsh-worktree';
/** How often the view asks again while it is visible: sessions of other windows and the worktrees'
 *  figures change without an event reaching this window. */
const POLL_MS = 4000;
/** Events of the session shown that change its row. */
const ROW_EVENTS = new Set(['agent/status', 'turn/end', 'tool/result', 'session/title', 'agent/inbox/inserted', 'agent/inbox/claimed', 'agent/inbox/spliced']);

type Command = (id: string, f: (...args: any[]) => unknown) => void;

/** The worktree a command acts on, with the words its messages use. */
interface Target { ref: WorktreeRef; branch: string; label: string; sessionId?: string; exists: boolean; changedFiles?: number }

export class SessionsView implements vscode.TreeDataProvider<TreeNode>, vscode.TextDocumentContentProvider, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<TreeNode | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  private readonly docChanged = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.docChanged.event;
  private roots: TreeNode[] = [];
  private sessions: ListedSession[] = [];
  private view: vscode.TreeView<TreeNode> | undefined;
  private timer: ReturnType<typeof setInterval> | undefined;
  private debounce: ReturnType<typeof setTimeout> | undefined;
  private inFlight: Promise<void> | undefined;
  /** What the tree was last told to show (the rows and the chat's session, which marks one). */
  private drawn: string | undefined;
  private readonly subs: vscode.Disposable[] = [];
  private eventSub: { dispose(): void } | undefined;
  /** The session last selected for the person (the one the chat showed then). */
  private selected: string | undefined;

  constructor(private readonly daemon: Daemon, private readonly panel: ChatPanel, private readonly log: (line: string) => void) {}

  /** Creates the tree view and registers the view's commands. */
  register(cmd: Command): vscode.Disposable {
    this.view = vscode.window.createTreeView(SESSIONS_VIEW_ID, { treeDataProvider: this, showCollapseAll: true });
    this.subs.push(this.view, this.changed, this.docChanged,
      vscode.workspace.registerTextDocumentContentProvider(DIFF_SCHEME, this),
      this.view.onDidChangeVisibility((e) => this.poll(e.visible)),
      this.panel.onDidShowSession(() => this.soon()),
      this.daemon.onReady((client) => this.follow(client)));
    if (this.daemon.client) this.follow(this.daemon.client);
    this.poll(this.view.visible);
    cmd('dsh.newWorktreeSession', () => this.newWorktreeSession());
    cmd('dsh.sessions.refresh', () => this.refresh());
    cmd('dsh.sessions.open', (id: string) => this.open(id));
    cmd('dsh.sessions.delete', rowOrShown((node) => this.delete(node)));
    cmd('dsh.worktree.diff', rowOrShown((node) => this.showDiff(node)));
    cmd('dsh.worktree.apply', rowOrShown((node) => this.apply(node)));
    cmd('dsh.worktree.keep', rowOrShown((node) => this.keep(node)));
    cmd('dsh.worktree.discard', rowOrShown((node) => this.discard(node)));
    return this;
  }

  // ---- the tree

  getTreeItem(node: TreeNode): vscode.TreeItem {
    const look = nodeLook(node, this.panel.sessionId);
    const children = nodeChildren(node).length > 0;
    const item = new vscode.TreeItem(look.label, !children ? vscode.TreeItemCollapsibleState.None
      : look.expanded ? vscode.TreeItemCollapsibleState.Expanded : vscode.TreeItemCollapsibleState.Collapsed);
    item.id = nodeId(node);
    item.description = look.description;
    item.tooltip = look.tooltip;
    item.contextValue = look.contextValue;
    item.iconPath = new vscode.ThemeIcon(look.icon, look.color ? new vscode.ThemeColor(look.color) : undefined);
    if (node.kind === 'session') item.command = { command: 'dsh.sessions.open', title: 'Open in the Chat', arguments: [node.session.sessionId] };
    else if (node.kind === 'worktree' && node.session.worktree.exists) item.command = { command: 'dsh.worktree.diff', title: 'Show Worktree Diff', arguments: [node] };
    else if (node.kind === 'orphan' && node.worktree.exists) item.command = { command: 'dsh.worktree.diff', title: 'Show Worktree Diff', arguments: [node] };
    return item;
  }

  getChildren(node?: TreeNode): TreeNode[] {
    return node ? nodeChildren(node) : this.roots;
  }

  getParent(node: TreeNode): TreeNode | undefined {
    if (node.kind === 'orphan') return this.roots.find((n) => n.kind === 'orphans');
    if (node.kind === 'session') return findSession(this.roots, node.session.sessionId)?.parent;
    if (node.kind === 'worktree') return findSession(this.roots, node.session.sessionId)?.node;
    return undefined;
  }

  /** Reads the daemon's lists again (one read at a time; a call during one waits for it). */
  async refresh(): Promise<void> {
    if (this.inFlight) return this.inFlight;
    this.inFlight = this.read().finally(() => { this.inFlight = undefined; });
    return this.inFlight;
  }

  private async read(): Promise<void> {
    const client = this.daemon.client;
    if (!client) { this.roots = []; this.drawn = undefined; this.changed.fire(undefined); return; }
    const folder = workspaceFolder();
    const [{ sessions }, worktrees] = await Promise.all([
      listWorkspaceSessions(client, folder),
      client.features?.worktrees ? listWorktrees(client).then((r) => r.worktrees.filter((w) => inRepo(folder, w.repo))) : Promise.resolve([]),
    ]);
    this.sessions = sessions;
    const roots = sessionTree(sessions, worktrees);
    // A refresh makes VS Code forget the tree's elements until it asks for them again; a row menu's
    // command that comes meanwhile gets no row (it would fall back to the chat's session). The poll
    // would do that every few seconds, so the tree is only told when what it shows changed.
    const drawn = JSON.stringify([roots, this.panel.sessionId]);
    this.roots = roots;
    if (this.view) this.view.message = sessions.length || worktrees.length ? undefined : 'No sessions in this workspace yet.';
    if (drawn !== this.drawn) {
      this.drawn = drawn;
      this.changed.fire(undefined);
    }
    this.selectShown();
  }

  /** Selects the session the chat shows, once each time that changes (the person's own selection
   *  is left alone in between). */
  private selectShown(): void {
    const id = this.panel.sessionId;
    if (!this.view?.visible || !id || id === this.selected) return;
    const found = findSession(this.roots, id);
    if (!found) return;
    this.selected = id;
    void Promise.resolve(this.view.reveal(found.node, { select: true, focus: false })).catch(() => { this.selected = undefined; });
  }

  private follow(client: DshClient): void {
    this.eventSub?.dispose();
    this.eventSub = client.onEvent((e) => { if (ROW_EVENTS.has(e.type)) this.soon(); });
    this.soon();
  }

  /** A refresh shortly, once for a burst of events. */
  private soon(): void {
    if (this.debounce) return;
    this.debounce = setTimeout(() => {
      this.debounce = undefined;
      void this.refresh().catch((err) => this.log(`sessions view: ${(err as Error)?.message ?? err}`));
    }, 300);
  }

  private poll(visible: boolean): void {
    if (this.timer) { clearInterval(this.timer); this.timer = undefined; }
    if (!visible) return;
    this.soon();
    this.timer = setInterval(() => this.soon(), POLL_MS);
  }

  // ---- commands

  private async open(sessionId: string): Promise<void> {
    await this.panel.openSession(sessionId);
    await vscode.commands.executeCommand('dsh.chat.focus');
    this.soon();
  }

  async newWorktreeSession(): Promise<void> {
    const client = await this.daemon.ensureStarted();
    if (!client.features?.worktrees) throw new Error('this dsh-daemon cannot start a session in a worktree; update it.');
    const branch = await vscode.window.showInputBox({
      title: 'New dsh session in a worktree',
      prompt: 'A new branch for the worktree (empty: dsh/<title>-<id>)',
      placeHolder: 'dsh/…', ignoreFocusOut: true,
      validateInput: (v) => /\s/.test(v.trim()) ? 'A branch name has no spaces' : undefined,
    });
    if (branch === undefined) return;
    const { sessionId } = await newWorktreeSession(client, workspaceFolder(), branch.trim() ? { branch: branch.trim() } : {});
    await this.open(sessionId);
  }

  private async delete(node: TreeNode | undefined): Promise<void> {
    if (node?.kind !== 'session') return;
    const answer = await confirmDeleteSession(node.session);
    if (!answer) return;
    const client = await this.daemon.ensureStarted();
    await deleteSession(client, node.session.sessionId, answer.removeWorktree);
    await this.panel.forgetSession(node.session.sessionId);
    await this.refresh();
  }

  /** The worktree of a row, or, run from the palette, of the session the chat shows. */
  private target(node: TreeNode | undefined): Target {
    if (node?.kind === 'orphan') {
      const w = node.worktree;
      return { ref: { path: w.path }, branch: w.branch, label: w.branch, exists: w.exists, changedFiles: w.changedFiles };
    }
    const session = node?.kind === 'session' || node?.kind === 'worktree' ? node.session : this.sessions.find((s) => s.sessionId === this.panel.sessionId);
    const w = session?.worktree;
    if (!session || !w) throw new Error(node ? 'this session has no worktree of its own.' : 'the chat shows no session in a worktree of its own.');
    return { ref: { sessionId: session.sessionId }, branch: w.branch, label: session.title || w.branch, sessionId: session.sessionId, exists: w.exists, changedFiles: w.changedFiles };
  }

  private async showDiff(node: TreeNode | undefined): Promise<void> {
    const t = this.target(node);
    const uri = vscode.Uri.from({ scheme: DIFF_SCHEME, path: `/${t.branch}.diff`, query: JSON.stringify(t.ref) });
    this.docChanged.fire(uri); // an open one is read again
    const doc = await vscode.workspace.openTextDocument(uri);
    if (doc.languageId !== 'diff') await vscode.languages.setTextDocumentLanguage(doc, 'diff');
    await vscode.window.showTextDocument(doc, { preview: true });
  }

  async provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
    const client = await this.daemon.ensureStarted();
    return diffText(await worktreeDiff(client, JSON.parse(uri.query) as WorktreeRef));
  }

  private async apply(node: TreeNode | undefined): Promise<void> {
    const t = this.target(node);
    const client = await this.daemon.ensureStarted();
    const r = await worktreeApply(client, t.ref);
    if (r.applied) {
      void vscode.window.showInformationMessage(r.files.length
        ? `dsh: applied ${t.branch} to your workspace as uncommitted changes: ${r.files.map((f) => f.path).join(', ')}.`
        : `dsh: ${t.branch} changes nothing; nothing was applied.`);
    } else {
      void vscode.window.showWarningMessage(`dsh: nothing was applied; ${r.conflicts.length === 1 ? 'a conflict' : `${r.conflicts.length} conflicts`} with your workspace: ${r.conflicts.map((c) => `${c.path} (${c.reason})`).join('; ')}.`);
    }
    await this.refresh();
  }

  private async keep(node: TreeNode | undefined): Promise<void> {
    const t = this.target(node);
    const yes = await vscode.window.showWarningMessage(`Keep the branch ${t.branch} and remove its worktree?`, {
      modal: true, detail: 'What is not committed in the worktree is committed on the branch, then the worktree folder is removed. The branch stays; the session can still be read but not continued.',
    }, 'Keep Branch');
    if (yes !== 'Keep Branch') return;
    const client = await this.daemon.ensureStarted();
    const r = await worktreeKeep(client, t.ref);
    void vscode.window.showInformationMessage(`dsh: kept branch ${r.branch} at ${r.commit.slice(0, 8)}; its worktree folder was removed.`);
    await this.refresh();
  }

  private async discard(node: TreeNode | undefined): Promise<void> {
    const t = this.target(node);
    const files = t.changedFiles ? ` and its ${t.changedFiles} changed file${t.changedFiles === 1 ? '' : 's'}` : '';
    const yes = await vscode.window.showWarningMessage(`Discard the worktree of ${t.label}${files}?`, {
      modal: true, detail: `The worktree folder and the branch ${t.branch} are removed, uncommitted work included. This cannot be undone.`,
    }, 'Discard');
    if (yes !== 'Discard') return;
    const client = await this.daemon.ensureStarted();
    const r = await worktreeDiscard(client, t.ref);
    void vscode.window.showInformationMessage(`dsh: discarded the worktree and branch ${r.branch}.`);
    await this.refresh();
  }

  dispose(): void {
    this.poll(false);
    if (this.debounce) clearTimeout(this.debounce);
    this.eventSub?.dispose();
    for (const s of this.subs.splice(0)) s.dispose();
  }
}

/** A row command's arguments: the palette passes none (the command acts on the chat's session), a
 *  row's menu passes its row. VS Code passes `undefined` for a row it forgot because the tree changed
 *  while the menu was open; acting on the chat's session then would discard or apply another
 *  worktree than the one the person chose, so nothing is done. */
export function rowOrShown(f: (node: TreeNode | undefined) => Promise<void>): (...args: unknown[]) => Promise<void> {
  return async (...args: unknown[]) => {
    if (args.length > 0 && args[0] == null) throw new Error('that row changed while its menu was open, so nothing was done; open the menu again.');
    return f(args[0] as TreeNode | undefined);
  };
}

/** The diff document: what it is a diff of, the files, then the patch. */
export function diffText(d: WorktreeDiff): string {
  const added = d.files.reduce((n, f) => n + f.added, 0);
  const removed = d.files.reduce((n, f) => n + f.removed, 0);
  const head = [
    `# Worktree ${d.path}`,
    `# branch ${d.branch} against ${d.base} (${d.baseCommit.slice(0, 12)}): ${d.files.length} file${d.files.length === 1 ? '' : 's'} changed, +${added} −${removed}`,
    ...d.files.map((f) => `#   ${f.status.padEnd(8)} ${f.path}${f.binary ? ' (binary)' : ` +${f.added} −${f.removed}`}`),
  ];
  if (d.truncated) head.push('# The patch is cut at 2 MB here; the worktree holds all of it.');
  return `${head.join('\n')}\n\n${d.patch}`;
}

function workspaceFolder(): string | undefined {
  return vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
}

/** Whether a worktree's repository (its main work tree) holds the workspace folder, or is it. */
function inRepo(folder: string | undefined, repo: string): boolean {
  if (!folder) return true;
  return folder === repo || folder.startsWith(repo.endsWith('/') ? repo : `${repo}/`);
}
