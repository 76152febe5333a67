// Permissions (host side, mocked `vscode`) with the REAL daemon: View diff shows the preview's own
// before/after texts in VS Code's diff editor; the answer reaches the daemon.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import * as vscode from 'vscode';
import { Permissions } from '../src/permissions';
import type { PermissionRequest } from '../src/protocol/types';
import { FakeProvider, textReply, toolReply } from './fakeProvider';
import { removeTempStates, startDaemon, type TestDaemon } from './daemon';
import { closedTabs, executed, tabs } from './vscode.mock';
import { DIFF_ARM_MS } from '../src/permissions';

let fake: FakeProvider;
let d: TestDaemon;

beforeEach(async () => {
  fake = new FakeProvider();
  await fake.start();
  d = await startDaemon(fake.baseUrl);
});
afterEach(async () => {
  await d.stop();
  await fake.stop();
  removeTempStates();
});

describe('Permissions with the real daemon', () => {
  it('View diff opens vscode.diff over the preview oldText/newText; allow once applies the edit', async () => {
    writeFileSync(join(d.root, 'notes.txt'), 'alpha\nbeta\n');
    fake.script(toolReply([{ id: 'call_ed', name: 'edit_file', args: { path: 'notes.txt', old_string: 'beta', new_string: 'gamma' } }]), textReply('done'));
    const seen: PermissionRequest[] = [];
    const shown: string[] = [];
    const permissions: Permissions = new Permissions((req) => {
      seen.push(req);
      void permissions.viewDiff(req.callId, d.root).then(() => {
        const [left, right] = executed.filter((c) => c.id === 'vscode.diff').at(-1)!.args as [vscode.Uri, vscode.Uri];
        shown.push(permissions.provideTextDocumentContent(left), permissions.provideTextDocumentContent(right));
        permissions.answer(req.callId, 'allow-once');
      });
    }, () => undefined);
    d.client.setPermissionHandler(permissions.handle);
    const { sessionId } = await d.client.newSession({ cwd: d.root });
    await d.client.followup(sessionId, 'fix the notes');
    await d.waitFor(() => d.of(sessionId, 'turn/end').length === 1, 'turn end');
    expect(seen).toHaveLength(1);
    expect(seen[0].preview).toMatchObject({ oldText: 'alpha\nbeta\n', newText: 'alpha\ngamma\n' });
    const title = executed.filter((c) => c.id === 'vscode.diff').at(-1)!.args[2];
    expect(shown).toEqual(['alpha\nbeta\n', 'alpha\ngamma\n']);
    expect(title).toBe('dsh: notes.txt (proposed edit)');
    expect(JSON.stringify(d.applied)).toContain('gamma');
    permissions.dispose();
  });

  it('Accept in the diff editor answers the request (not in its first moment); a request answered anywhere closes its diff tab', async () => {
    tabs.length = 0;
    closedTabs.length = 0;
    writeFileSync(join(d.root, 'notes.txt'), 'alpha\nbeta\n');
    fake.script(
      toolReply([{ id: 'call_1', name: 'edit_file', args: { path: 'notes.txt', old_string: 'beta', new_string: 'gamma' } }]), textReply('first done'),
      toolReply([{ id: 'call_2', name: 'edit_file', args: { path: 'notes.txt', old_string: 'alpha', new_string: 'omega' } }]), textReply('second rejected'),
    );
    const requests: string[] = [];
    let clock = 1_000_000; // the diff editor's arm time is checked against this clock
    const permissions = new Permissions((req) => { requests.push(req.callId); }, () => undefined, () => undefined, () => clock);
    d.client.setPermissionHandler(permissions.handle);
    const { sessionId } = await d.client.newSession({ cwd: d.root });
    await d.client.followup(sessionId, 'edit one');
    await d.waitFor(() => requests.length === 1, 'the first request');
    await permissions.viewDiff('call_1', d.root);
    expect(tabs.map((t) => t.label)).toEqual(['dsh: notes.txt (proposed edit)']);
    expect(permissions.activeProposal()).toBe('call_1');
    // A key typed as the diff opens does not accept it.
    clock += DIFF_ARM_MS - 1;
    await permissions.acceptActive();
    await new Promise((r) => setTimeout(r, 200));
    expect(d.of(sessionId, 'tool/result')).toEqual([]);
    clock += 1;
    await permissions.acceptActive();
    await d.waitFor(() => d.of(sessionId, 'turn/end').length === 1, 'the first turn');
    expect(JSON.stringify(d.applied)).toContain('gamma');
    expect(tabs).toEqual([]); // closed with the answer
    expect(closedTabs.map((t) => t.label)).toEqual(['dsh: notes.txt (proposed edit)']);
    // Answered in the panel (Reject): the diff tab goes too.
    await d.client.followup(sessionId, 'edit two');
    await d.waitFor(() => requests.length === 2, 'the second request');
    await permissions.viewDiff('call_2', d.root);
    expect(tabs.length).toBe(1);
    permissions.answer('call_2', 'reject');
    await d.waitFor(() => d.of(sessionId, 'turn/end').length === 2, 'the second turn');
    expect(tabs).toEqual([]);
    const results = d.of(sessionId, 'tool/result').map((e) => (e.data as any).error?.code ?? 'ok');
    expect(results).toEqual(['ok', 'REJECTED']);
    permissions.dispose();
  });
});
