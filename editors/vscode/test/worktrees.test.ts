// The Sessions view's protocol calls (src/protocol/worktrees.ts) and its tree model against the REAL
// daemon in a real git repository: two worktree sessions write the same file; the list rows carry
// their figures; applying one then the other names the conflict and writes nothing; a session deleted
// without its worktree leaves it listed under "Worktrees without a session"; discard removes it.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  deleteSession, listWorkspaceSessions, listWorktrees, newWorktreeSession, worktreeApply, worktreeDiff, worktreeDiscard,
} from '../src/protocol/worktrees';
import { nodeChildren, nodeLook, sessionTree } from '../src/sessionsTree';
import { SessionsView } from '../src/sessionsView';
import type { Daemon } from '../src/daemon';
import type { ChatPanel } from '../src/panel';
import { FakeProvider, textReply, toolReply } from './fakeProvider';
import { removeTempStates, startDaemon, tempState, TestDaemon } from './daemon';

const git = (cwd: string, ...args: string[]) => execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', ...args], { cwd, encoding: 'utf8' });

let fake: FakeProvider;
let d: TestDaemon | undefined;

beforeEach(async () => {
  fake = new FakeProvider();
  await fake.start();
});
afterEach(async () => {
  await d?.stop();
  d = undefined;
  await fake.stop();
  removeTempStates();
});

describe('sessions in their own worktree, through the extension\'s calls', () => {
  it('lists figures, applies one, names the other\'s conflict without writing, and keeps a deleted session\'s worktree listed', async () => {
    const dirs = tempState();
    writeFileSync(join(dirs.root, 'app.py'), 'VALUE = 1\n');
    git(dirs.root, 'init', '-q', '-b', 'main');
    git(dirs.root, 'add', '-A');
    git(dirs.root, 'commit', '-q', '-m', 'start');
    d = await startDaemon(fake.baseUrl, dirs);
    const daemon = d;
    expect(daemon.client.features?.worktrees).toBe(true);
    daemon.client.setPermissionHandler(async () => 'allow-once');

    const one = (await newWorktreeSession(daemon.client, daemon.root, { branch: 'one' })).sessionId;
    const two = (await newWorktreeSession(daemon.client, daemon.root, { branch: 'two' })).sessionId;
    const write = async (sid: string, value: string) => {
      fake.script(toolReply([{ id: `w-${value}`, name: 'write_file', args: { path: 'app.py', content: `VALUE = ${value}\n` } }]), textReply('Done.'));
      await daemon.client.followup(sid, `Set VALUE to ${value}`);
      await daemon.waitFor(() => daemon.of(sid, 'turn/end').length === 1, `the turn of ${sid}`, 60000);
    };
    await write(one, '2');
    await write(two, '3');
    expect(readFileSync(join(daemon.root, 'app.py'), 'utf8')).toBe('VALUE = 1\n'); // the workspace untouched

    const { sessions } = await listWorkspaceSessions(daemon.client, daemon.root);
    const rowOne = sessions.find((s) => s.sessionId === one)!;
    expect(rowOne.worktree).toMatchObject({ branch: 'one', base: 'HEAD', repo: daemon.root, exists: true, changedFiles: 1, ahead: 0 });
    const tree = sessionTree(sessions);
    const nodeOne = tree.find((n) => n.kind === 'session' && n.session.sessionId === one)!;
    expect(nodeLook(nodeChildren(nodeOne)[0]!)).toMatchObject({ label: 'one', description: '1 file changed', contextValue: 'worktree' });

    const diff = await worktreeDiff(daemon.client, { sessionId: one });
    expect(diff.files).toEqual([expect.objectContaining({ path: 'app.py', status: 'modified', added: 1, removed: 1 })]);
    expect(diff.patch).toContain('+VALUE = 2');

    expect(await worktreeApply(daemon.client, { sessionId: one })).toMatchObject({ applied: true, files: [expect.objectContaining({ path: 'app.py' })] });
    expect(readFileSync(join(daemon.root, 'app.py'), 'utf8')).toBe('VALUE = 2\n');
    const second = await worktreeApply(daemon.client, { sessionId: two });
    expect(second.applied).toBe(false);
    expect(second.applied ? [] : second.conflicts.map((c) => c.path)).toEqual(['app.py']);
    expect(readFileSync(join(daemon.root, 'app.py'), 'utf8')).toBe('VALUE = 2\n'); // nothing written

    // Deleted without its worktree: listed without a session, never removed silently.
    await deleteSession(daemon.client, two, false);
    const { worktrees } = await listWorktrees(daemon.client);
    const left = worktrees.find((w) => w.branch === 'two')!;
    expect(left).toMatchObject({ sessionId: null, exists: true, changedFiles: 1 });
    expect(existsSync(left.path)).toBe(true);
    const after = sessionTree((await listWorkspaceSessions(daemon.client, daemon.root)).sessions, worktrees);
    const orphans = after.find((n) => n.kind === 'orphans')!;
    expect(nodeChildren(orphans).map((n) => nodeLook(n).label)).toEqual(['two']);

    // Discard by its path: folder and branch gone, the node with them.
    expect(await worktreeDiscard(daemon.client, { path: left.path })).toEqual({ branch: 'two' });
    expect(existsSync(left.path)).toBe(false);
    expect(git(daemon.root, 'branch', '--list', 'two')).toBe('');
    expect(sessionTree([], (await listWorktrees(daemon.client)).worktrees).some((n) => n.kind === 'orphans')).toBe(false);
  });

  it('tells the tree only what changed: a poll that finds the same rows keeps VS Code\'s elements, so a row menu\'s command still gets its row', async () => {
    // VS Code forgets a tree's elements at each change event until it reads them again; a context-menu
    // command arriving meanwhile got `undefined` (the CI's e2e: Discard fell back to the chat's session).
    const dirs = tempState();
    git(dirs.root, 'init', '-q', '-b', 'main');
    writeFileSync(join(dirs.root, 'a.txt'), 'a\n');
    git(dirs.root, 'add', '-A');
    git(dirs.root, 'commit', '-q', '-m', 'start');
    d = await startDaemon(fake.baseUrl, dirs);
    const daemon = d;
    const panel = { sessionId: undefined as string | undefined };
    const view = new SessionsView({ client: daemon.client } as unknown as Daemon, panel as unknown as ChatPanel, () => undefined);
    let told = 0;
    view.onDidChangeTreeData(() => { told += 1; });
    const { sessionId } = await newWorktreeSession(daemon.client, daemon.root, { branch: 'quiet' });
    await view.refresh();
    expect(told).toBe(1);
    expect(view.getChildren().map((n) => n.kind)).toEqual(['session']);
    await view.refresh();
    await view.refresh();
    expect(told).toBe(1); // the same rows: nothing to redraw
    panel.sessionId = sessionId; // the chat shows it now: its row's look changes
    await view.refresh();
    expect(told).toBe(2);
    writeFileSync(join(daemon.state, 'unrelated'), ''); // not a change the view shows
    await view.refresh();
    expect(told).toBe(2);
    await deleteSession(daemon.client, sessionId, false); // its worktree is left without a session
    await view.refresh();
    expect(told).toBe(3);
    expect(view.getChildren().map((n) => n.kind)).toEqual(['orphans']);
    view.dispose();
  });
});
