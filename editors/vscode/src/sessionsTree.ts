// The Sessions view's model, apart from VS Code: this workspace's sessions as a tree (a subagent's
// session under its parent's), each with its state and, for a session in its own worktree, the
// branch and its figures; worktrees whose session was deleted under a node of their own.
import type { ListedSession, WorktreeRow } from './protocol/worktrees';
import { forkBadge, forkLine } from './sessionRows';

export type SessionState = 'running' | 'queued' | 'idle';

export interface SessionNode {
  kind: 'session';
  session: ListedSession;
  children: SessionNode[];
}

/** The worktree of a session, as the first row under it: at the sidebar's default 300 px the
 *  session's own row has no room for the branch and figures after its title. */
export interface WorktreeNode {
  kind: 'worktree';
  session: ListedSession & { worktree: NonNullable<ListedSession['worktree']> };
}

export interface OrphansNode {
  kind: 'orphans';
  worktrees: OrphanNode[];
}

export interface OrphanNode {
  kind: 'orphan';
  worktree: WorktreeRow;
}

export type TreeNode = SessionNode | WorktreeNode | OrphansNode | OrphanNode;

/** What a row shows: the words, the state dot (a codicon and a theme colour), the menus' key. */
export interface NodeLook {
  label: string;
  description: string;
  tooltip: string;
  icon: string;
  color?: string;
  /** `viewItem` in package.json's menus. */
  contextValue: string;
  expanded?: boolean;
}

export const ORPHANS_LABEL = 'Worktrees without a session';

/** The roots, in the daemon's order (most recent first); children in the same order under their
 *  parent. A child whose parent is not listed is a root, so no session is hidden. */
export function sessionTree(sessions: ListedSession[], worktrees: WorktreeRow[] = []): TreeNode[] {
  const nodes = new Map<string, SessionNode>();
  for (const s of sessions) nodes.set(s.sessionId, { kind: 'session', session: s, children: [] });
  const roots: TreeNode[] = [];
  for (const s of sessions) {
    const node = nodes.get(s.sessionId)!;
    const parent = s.parentId !== undefined && s.parentId !== s.sessionId ? nodes.get(s.parentId) : undefined;
    if (parent && !isAncestor(node, parent, nodes)) parent.children.push(node);
    else roots.push(node);
  }
  const orphans = worktrees.filter((w) => w.sessionId === null).map((worktree): OrphanNode => ({ kind: 'orphan', worktree }));
  if (orphans.length) roots.push({ kind: 'orphans', worktrees: orphans });
  return roots;
}

/** Whether `node` is `parent` or above it (a cycle of parentIds must not drop sessions). */
function isAncestor(node: SessionNode, parent: SessionNode, nodes: Map<string, SessionNode>): boolean {
  const seen = new Set<string>();
  for (let at: SessionNode | undefined = parent; at && !seen.has(at.session.sessionId); ) {
    if (at === node) return true;
    seen.add(at.session.sessionId);
    at = at.session.parentId !== undefined ? nodes.get(at.session.parentId) : undefined;
  }
  return false;
}

export function sessionState(s: ListedSession): SessionState {
  if (s.status === 'running') return 'running';
  return s.pending > 0 ? 'queued' : 'idle';
}

/** "1 file changed · 2 ahead" (figures only while the worktree exists). */
export function worktreeFigures(w: { exists: boolean; changedFiles?: number; ahead?: number }): string {
  if (!w.exists) return 'worktree removed';
  const parts: string[] = [];
  if (w.changedFiles !== undefined) parts.push(`${w.changedFiles} file${w.changedFiles === 1 ? '' : 's'} changed`);
  if (w.ahead) parts.push(`${w.ahead} ahead`);
  return parts.join(' · ');
}

const STATE_LOOK: Record<SessionState, { icon: string; color?: string; words: string }> = {
  running: { icon: 'circle-filled', color: 'charts.green', words: 'running' },
  queued: { icon: 'circle-filled', color: 'charts.yellow', words: 'queued' },
  idle: { icon: 'circle-outline', words: 'idle' },
};

export function nodeLook(node: TreeNode, currentId?: string | null): NodeLook {
  if (node.kind === 'orphans') {
    return { label: ORPHANS_LABEL, description: String(node.worktrees.length), tooltip: 'Worktrees whose session was deleted: keep their branch or discard them', icon: 'warning', contextValue: 'orphans', expanded: true };
  }
  if (node.kind === 'orphan') {
    const w = node.worktree;
    return {
      label: w.branch, description: worktreeFigures(w),
      tooltip: `${w.path}\nbranch ${w.branch} from ${w.base}\nits session was deleted`,
      icon: 'git-branch', contextValue: w.exists ? 'orphanWorktree' : 'orphanWorktreeGone',
    };
  }
  if (node.kind === 'worktree') {
    const w = node.session.worktree;
    return {
      label: w.branch, description: worktreeFigures(w),
      tooltip: `${w.path}\nbranch ${w.branch} from ${w.base}${w.exists ? '' : '\nthe worktree was removed (kept or discarded)'}`,
      icon: 'git-branch', contextValue: w.exists ? 'worktree' : 'worktreeGone',
    };
  }
  const s = node.session;
  const state = sessionState(s);
  const look = STATE_LOOK[state];
  const current = s.sessionId === currentId;
  const parts: string[] = [];
  const badge = forkBadge(s);
  if (badge) parts.push(badge);
  if (state === 'queued') parts.push(`${s.pending} queued`);
  const w = s.worktree;
  const tooltip = [
    `${s.title || '(untitled)'}: ${look.words}${s.pending ? `, ${s.pending} queued` : ''}${current ? ' (shown in the chat)' : ''}`,
    forkLine(s) ?? '',
    w ? `worktree ${w.path}\nbranch ${w.branch} from ${w.base}${w.exists ? '' : ' (the worktree was removed)'}` : s.cwd,
    s.lastPrompt ? `last prompt: ${s.lastPrompt}` : '',
  ].filter(Boolean).join('\n');
  return {
    label: s.title || '(untitled)', description: parts.join(' · '), tooltip,
    icon: look.icon, color: look.color,
    contextValue: w ? (w.exists ? 'session.worktree' : 'session.worktreeGone') : 'session',
    expanded: w || node.children.length ? true : undefined,
  };
}

/** The node of a session, at any depth, and its parent. */
export function findSession(roots: TreeNode[], sessionId: string, parent?: TreeNode): { node: SessionNode; parent?: TreeNode } | undefined {
  for (const n of roots) {
    if (n.kind === 'session' && n.session.sessionId === sessionId) return { node: n, parent };
    const found = findSession(nodeChildren(n), sessionId, n);
    if (found) return found;
  }
  return undefined;
}

/** A stable id per row (VS Code keeps a row's expansion and selection by it across refreshes). */
export function nodeId(node: TreeNode): string {
  if (node.kind === 'orphans') return 'orphans';
  if (node.kind === 'orphan') return `worktree:${node.worktree.path}`;
  if (node.kind === 'worktree') return `worktree-of:${node.session.sessionId}`;
  return `session:${node.session.sessionId}`;
}

export function nodeChildren(node: TreeNode): TreeNode[] {
  if (node.kind === 'session') {
    const s = node.session;
    return s.worktree ? [{ kind: 'worktree', session: { ...s, worktree: s.worktree } }, ...node.children] : node.children;
  }
  if (node.kind === 'orphans') return node.worktrees;
  return [];
}
