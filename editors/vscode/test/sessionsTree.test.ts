// The Sessions view's model: nesting, state dots, a worktree session's figures, orphan worktrees.
import { describe, expect, it } from 'vitest';
import type { ListedSession, WorktreeRow } from '../src/protocol/worktrees';
import { ORPHANS_LABEL, findSession, nodeChildren, nodeId, nodeLook, sessionState, sessionTree, worktreeFigures, type SessionNode } from '../src/sessionsTree';
import { diffText, rowOrShown } from '../src/sessionsView';

function session(id: string, more: Partial<ListedSession> = {}): ListedSession {
  return { sessionId: id, title: `S ${id}`, cwd: '/p/app', createdAt: 1, updatedAt: 2, status: 'idle', pending: 0, ...more };
}

const WT = { path: '/p/app.dsh-worktrees/fix', branch: 'fix', base: 'HEAD', repo: '/p/app', exists: true, changedFiles: 1, ahead: 0 };

function orphan(path: string, sessionId: string | null): WorktreeRow {
  return { ...WT, path, branch: path.split('/').pop()!, baseCommit: 'abcdef0123456789', sessionId };
}

describe('sessionTree', () => {
  it('nests a subagent\'s session under its parent, keeping the daemon\'s order', () => {
    const roots = sessionTree([session('a'), session('c1', { parentId: 'b' }), session('b'), session('c2', { parentId: 'b' })]);
    expect(roots.map(nodeId)).toEqual(['session:a', 'session:b']);
    expect(nodeChildren(roots[1]!).map(nodeId)).toEqual(['session:c1', 'session:c2']);
    expect(nodeLook(roots[1]!).expanded).toBe(true);
    expect(findSession(roots, 'c2')).toMatchObject({ node: { session: { sessionId: 'c2' } }, parent: { session: { sessionId: 'b' } } });
    expect(findSession(roots, 'a')?.parent).toBeUndefined();
    expect(findSession(roots, 'nope')).toBeUndefined();
  });

  it('shows a child whose parent is not listed, and sessions in a parentId cycle, as roots', () => {
    const lone = sessionTree([session('c', { parentId: 'gone' })]);
    expect(lone.map(nodeId)).toEqual(['session:c']);
    const cycle = sessionTree([session('x', { parentId: 'y' }), session('y', { parentId: 'x' }), session('z', { parentId: 'z' })]);
    const all: string[] = [];
    const walk = (ns: ReturnType<typeof sessionTree>) => { for (const n of ns) { all.push(nodeId(n)); walk(nodeChildren(n)); } };
    walk(cycle);
    expect(all.sort()).toEqual(['session:x', 'session:y', 'session:z']);
  });

  it('lists worktrees whose session is gone under their own node, never those with a session', () => {
    const roots = sessionTree([session('a')], [orphan('/p/app.dsh-worktrees/old', null), orphan('/p/app.dsh-worktrees/fix', 'a')]);
    expect(roots.map(nodeId)).toEqual(['session:a', 'orphans']);
    const orphans = roots[1]!;
    expect(nodeLook(orphans)).toMatchObject({ label: ORPHANS_LABEL, description: '1', contextValue: 'orphans', expanded: true });
    const [row] = nodeChildren(orphans);
    expect(nodeId(row!)).toBe('worktree:/p/app.dsh-worktrees/old');
    expect(nodeLook(row!)).toMatchObject({ label: 'old', description: '1 file changed', contextValue: 'orphanWorktree', icon: 'git-branch' });
    expect(sessionTree([session('a')], [orphan('/w', 'a')]).map(nodeId)).toEqual(['session:a']);
  });
});

describe('a row\'s look', () => {
  it('gives each state its dot: running green, queued yellow, idle an outline', () => {
    expect(sessionState(session('a', { status: 'running', pending: 2 }))).toBe('running');
    expect(sessionState(session('a', { pending: 2 }))).toBe('queued');
    expect(sessionState(session('a'))).toBe('idle');
    const look = (s: ListedSession) => nodeLook(sessionTree([s])[0]!);
    expect(look(session('a', { status: 'running' }))).toMatchObject({ icon: 'circle-filled', color: 'charts.green' });
    expect(look(session('a', { pending: 2 }))).toMatchObject({ icon: 'circle-filled', color: 'charts.yellow', description: '2 queued' });
    expect(look(session('a'))).toMatchObject({ icon: 'circle-outline', color: undefined, description: '' });
  });

  it('shows a worktree session\'s branch, changed files and ahead count on a row under it, above its subagents', () => {
    const roots = sessionTree([session('a', { title: 'Fix greet', worktree: { ...WT, changedFiles: 3, ahead: 2 } }), session('k', { parentId: 'a' })]);
    const node = roots[0] as SessionNode;
    const look = nodeLook(node, 'a');
    expect(look).toMatchObject({ label: 'Fix greet', description: '', contextValue: 'session.worktree', expanded: true });
    expect(look.tooltip).toContain('(shown in the chat)');
    expect(look.tooltip).toContain('worktree /p/app.dsh-worktrees/fix');
    expect(nodeLook(node, 'other').tooltip).not.toContain('shown');
    const [wt, child] = nodeChildren(node);
    expect([nodeId(wt!), nodeId(child!)]).toEqual(['worktree-of:a', 'session:k']);
    expect(nodeLook(wt!)).toMatchObject({ label: 'fix', description: '3 files changed · 2 ahead', icon: 'git-branch', contextValue: 'worktree' });
    expect(nodeChildren(wt!)).toEqual([]);
    expect(nodeLook(sessionTree([session('b', { title: '' })])[0]!)).toMatchObject({ label: '(untitled)', contextValue: 'session', expanded: undefined });
  });

  it('says a removed worktree is removed and offers no worktree actions on it', () => {
    const node = sessionTree([session('a', { worktree: { ...WT, exists: false, changedFiles: undefined, ahead: undefined } })])[0]!;
    expect(nodeLook(node)).toMatchObject({ contextValue: 'session.worktreeGone' });
    expect(nodeLook(nodeChildren(node)[0]!)).toMatchObject({ label: 'fix', description: 'worktree removed', contextValue: 'worktreeGone' });
    expect(worktreeFigures({ exists: true, changedFiles: 0 })).toBe('0 files changed');
    expect(worktreeFigures({ exists: true, changedFiles: 1, ahead: 1 })).toBe('1 file changed · 1 ahead');
  });
});

describe('diffText', () => {
  it('names the worktree, the base and each file above the patch, and says when it was cut', () => {
    const text = diffText({
      path: '/p/app.dsh-worktrees/fix', branch: 'fix', base: 'main', baseCommit: '0123456789abcdef0123',
      files: [{ path: 'app.py', status: 'modified', added: 2, removed: 1 }, { path: 'logo.png', status: 'added', added: 0, removed: 0, binary: true }],
      patch: 'diff --git a/app.py b/app.py\n', truncated: true,
    });
    expect(text.split('\n').slice(0, 6)).toEqual([
      '# Worktree /p/app.dsh-worktrees/fix',
      '# branch fix against main (0123456789ab): 2 files changed, +2 −1',
      '#   modified app.py +2 −1',
      '#   added    logo.png (binary)',
      '# The patch is cut at 2 MB here; the worktree holds all of it.',
      '',
    ]);
    expect(text.endsWith('diff --git a/app.py b/app.py\n')).toBe(true);
  });
});

describe('a row command\'s target', () => {
  it('acts on the row, on the chat\'s session from the palette, and on nothing when VS Code forgot the row', async () => {
    const got: Array<string | undefined> = [];
    const run = rowOrShown(async (node) => { got.push(node ? nodeId(node) : undefined); });
    const row: SessionNode = { kind: 'session', session: session('a'), children: [] };
    await run(row, [row]); // a row's menu: the row, and the selection
    await run(); // the palette: no argument
    expect(got).toEqual(['session:a', undefined]);
    // A menu opened before the tree changed: VS Code's stale handle comes as undefined (or null).
    await expect(run(undefined)).rejects.toThrow('that row changed while its menu was open, so nothing was done');
    await expect(run(null)).rejects.toThrow('nothing was done');
    expect(got).toHaveLength(2);
  });
});
