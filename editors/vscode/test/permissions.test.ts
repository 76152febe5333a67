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
import { executed } from './vscode.mock';

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
    const permissions: Permissions = new Permissions((req) => {
      seen.push(req);
      void permissions.viewDiff(req.callId, d.root).then(() => permissions.answer(req.callId, 'allow-once'));
    }, () => undefined);
    d.client.setPermissionHandler(permissions.handle);
    const { sessionId } = await d.client.newSession({ cwd: d.root });
    await d.client.followup(sessionId, 'fix the notes');
    await d.waitFor(() => d.of(sessionId, 'turn/end').length === 1, 'turn end');
    expect(seen).toHaveLength(1);
    expect(seen[0].preview).toMatchObject({ oldText: 'alpha\nbeta\n', newText: 'alpha\ngamma\n' });
    const diff = executed.filter((c) => c.id === 'vscode.diff').at(-1)!;
    const [left, right, title] = diff.args as [vscode.Uri, vscode.Uri, string];
    expect(permissions.provideTextDocumentContent(left)).toBe('alpha\nbeta\n');
    expect(permissions.provideTextDocumentContent(right)).toBe('alpha\ngamma\n');
    expect(title).toBe('dsh: notes.txt (proposed edit)');
    expect(JSON.stringify(d.applied)).toContain('gamma');
    permissions.dispose();
  });
});
