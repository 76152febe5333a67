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
import { closedTabs, executed, FilePermission, fileSystems, openFakeDocument, tabs, workspace } from './vscode.mock';
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
        shown.push(permissions.sideText(left), permissions.sideText(right));
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
    expect(title).toBe('notes.txt (proposed by dsh)');
    // A daemon without editedAccept: the proposed side is read-only.
    const [, right] = executed.filter((c) => c.id === 'vscode.diff').at(-1)!.args as [vscode.Uri, vscode.Uri];
    expect(right.scheme).toBe('dsh-diff');
    // Both sides read as the file (its path: the breadcrumb, the language); proposal and side in the query.
    const [left] = executed.filter((c) => c.id === 'vscode.diff').at(-1)!.args as [vscode.Uri];
    expect([left.path, right.path]).toEqual([join(d.root, 'notes.txt'), join(d.root, 'notes.txt')]);
    const ed = d.callId(sessionId, 'call_ed');
    expect([left.query, right.query]).toEqual([`id=${ed}&side=original`, `id=${ed}&side=proposed`]);
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
    const permissions = new Permissions((req) => { requests.push(req.callId); }, () => undefined, { now: () => clock });
    d.client.setPermissionHandler(permissions.handle);
    const { sessionId } = await d.client.newSession({ cwd: d.root });
    await d.client.followup(sessionId, 'edit one');
    await d.waitFor(() => requests.length === 1, 'the first request');
    await permissions.viewDiff(requests[0], d.root);
    expect(tabs.map((t) => t.label)).toEqual(['notes.txt (proposed by dsh)']);
    expect(permissions.activeProposal()).toBe(requests[0]);
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
    expect(closedTabs.map((t) => t.label)).toEqual(['notes.txt (proposed by dsh)']);
    // Answered in the panel (Reject): the diff tab goes too.
    await d.client.followup(sessionId, 'edit two');
    await d.waitFor(() => requests.length === 2, 'the second request');
    await permissions.viewDiff(requests[1], d.root);
    expect(tabs.length).toBe(1);
    permissions.answer(requests[1], 'reject');
    await d.waitFor(() => d.of(sessionId, 'turn/end').length === 2, 'the second turn');
    expect(tabs).toEqual([]);
    const results = d.of(sessionId, 'tool/result').map((e) => (e.data as any).error?.code ?? 'ok');
    expect(results).toEqual(['ok', 'REJECTED']);
    permissions.dispose();
  });

  it('the proposed side changed in the diff editor: Accept sends the person\'s version (editedAccept), the daemon writes it and tells the model', async () => {
    tabs.length = 0;
    workspace.textDocuments.length = 0;
    writeFileSync(join(d.root, 'calc.py'), 'def add(a, b):\n    return a - b\n');
    fake.script(
      toolReply([{ id: 'call_fix', name: 'edit_file', args: { path: 'calc.py', old_string: 'a - b', new_string: 'a + b  # fixed' } }]),
      textReply('Thanks for the change.'),
    );
    const requests: string[] = [];
    const edited: Array<[string, boolean]> = [];
    let clock = 1_000_000;
    const permissions = new Permissions((req) => { requests.push(req.callId); }, () => undefined, {
      now: () => clock, editedAccept: () => d.client.features?.editedAccept === true, onEdited: (id, e) => edited.push([id, e]),
    });
    d.client.setPermissionHandler(permissions.handle);
    expect(d.client.features?.editedAccept).toBe(true);
    const { sessionId } = await d.client.newSession({ cwd: d.root });
    await d.client.followup(sessionId, 'fix add');
    await d.waitFor(() => requests.length === 1, 'the request');
    await permissions.viewDiff(requests[0], d.root);
    const [left, right] = executed.filter((c) => c.id === 'vscode.diff').at(-1)!.args as [vscode.Uri, vscode.Uri];
    expect(tabs.map((t) => t.label)).toEqual(['calc.py (proposed by dsh, editable)']);
    const fs = fileSystems.get('dsh-diff');
    expect(fs.stat(left).permissions).toBe(FilePermission.Readonly);
    expect(fs.stat(right).permissions).toBeUndefined(); // the person may type in it
    expect(right.path.endsWith('/calc.py')).toBe(true); // (its language from the file's name)
    // The person retypes the proposed line in the diff editor.
    const doc = openFakeDocument(right);
    expect(doc.getText()).toBe('def add(a, b):\n    return a + b  # fixed\n');
    doc.type('def add(a, b):\n    return b + a\n');
    expect(edited).toEqual([[requests[0], true]]);
    clock += DIFF_ARM_MS;
    await permissions.acceptActive();
    await d.waitFor(() => d.of(sessionId, 'turn/end').length === 1, 'the turn');
    // Written as the person changed it, and the model was told so.
    expect(JSON.stringify(d.applied)).toContain('return b + a');
    const result = d.of(sessionId, 'tool/result')[0].data as any;
    expect(result.meta.editedByUser).toBe(true);
    const told = JSON.stringify(fake.requests.at(-1)!.body.messages);
    expect(told).toContain('The user changed your proposed edit of calc.py before accepting it');
    expect(told).toContain('-    return a + b  # fixed');
    expect(told).toContain('+    return b + a');
    // Its tab closed (the side saved into memory first: no question on closing), its files gone.
    expect(tabs).toEqual([]);
    expect(doc.saves).toBeGreaterThan(0);
    expect(() => fs.stat(right)).toThrow();
    permissions.dispose();
  });

  it('an unchanged proposal, or one the daemon cannot take changed, is answered without newText', async () => {
    tabs.length = 0;
    workspace.textDocuments.length = 0;
    writeFileSync(join(d.root, 'a.txt'), 'one\r\ntwo\r\n');
    fake.script(
      toolReply([{ id: 'call_a', name: 'edit_file', args: { path: 'a.txt', old_string: 'two', new_string: 'TWO' } }]), textReply('a done'),
    );
    const answers: unknown[] = [];
    let clock = 1_000_000;
    let accepts = true;
    const permissions = new Permissions(() => undefined, () => undefined, { now: () => clock, editedAccept: () => accepts });
    d.client.setPermissionHandler(async (req) => { const a = await permissions.handle(req); answers.push(a); return a; });
    const { sessionId } = await d.client.newSession({ cwd: d.root });
    await d.client.followup(sessionId, 'edit a');
    await d.waitFor(() => permissions.openFor(sessionId).length === 1, 'the request');
    await permissions.viewDiff(d.callId(sessionId, 'call_a'), d.root);
    const [, right] = executed.filter((c) => c.id === 'vscode.diff').at(-1)!.args as [vscode.Uri, vscode.Uri];
    // Opened (its line ends as a document's own) but not changed.
    const doc = openFakeDocument(right);
    doc.type('one\ntwo\n'.replace('two', 'TWO'));
    clock += DIFF_ARM_MS;
    await permissions.acceptActive();
    await d.waitFor(() => d.of(sessionId, 'turn/end').length === 1, 'the turn');
    expect(answers).toEqual([{ outcome: 'allow-once' }]);
    expect((d.of(sessionId, 'tool/result')[0].data as any).meta.editedByUser).toBeUndefined();
    // A daemon that cannot take a changed proposal: its proposed side is read-only.
    accepts = false;
    fake.script(toolReply([{ id: 'call_b', name: 'edit_file', args: { path: 'a.txt', old_string: 'one', new_string: 'ONE' } }]), textReply('b done'));
    await d.client.followup(sessionId, 'edit b');
    await d.waitFor(() => permissions.openFor(sessionId).length === 1, 'the second request');
    await permissions.viewDiff(d.callId(sessionId, 'call_b'), d.root);
    const [, right2] = executed.filter((c) => c.id === 'vscode.diff').at(-1)!.args as [vscode.Uri, vscode.Uri];
    expect(fileSystems.get('dsh-diff').stat(right2).permissions).toBe(FilePermission.Readonly);
    expect(tabs.map((t) => t.label)).toEqual(['a.txt (proposed by dsh)']);
    permissions.answer(d.callId(sessionId, 'call_b'), 'allow-once');
    await d.waitFor(() => d.of(sessionId, 'turn/end').length === 2, 'the second turn');
    expect(answers[1]).toEqual({ outcome: 'allow-once' });
    permissions.dispose();
  });
  it('an escalation answered "Always (saved to config)" sends allow-always with persist; the session answer and other tools never carry persist', async () => {
    const cache = join(d.root, 'cache');
    const escalate = (id: string) => toolReply([{ id, name: 'run_command', args: { command: 'echo widened', escalate: { reason: 'the tool keeps its cache there', writable: [cache] } } }]);
    fake.script(escalate('call_w1'), textReply('saved'), escalate('call_w2'), textReply('session'),
      toolReply([{ id: 'call_r', name: 'run_command', args: { command: 'echo plain' } }]), textReply('plain'));
    const answers: unknown[] = [];
    const requests: PermissionRequest[] = [];
    const permissions = new Permissions((req) => requests.push(req), () => undefined);
    d.client.setPermissionHandler(async (req) => { const a = await permissions.handle(req); answers.push(a); return a; });
    const { sessionId } = await d.client.newSession({ cwd: d.root });
    await d.client.followup(sessionId, 'widen and save');
    await d.waitFor(() => permissions.openFor(sessionId).length === 1, 'the escalation');
    expect(requests[0].preview?.escalation).toEqual({ reason: 'the tool keeps its cache there', writable: [cache], network: [], unconfined: false });
    permissions.answer(requests[0].callId, 'allow-always', true);
    await d.waitFor(() => d.of(sessionId, 'turn/end').length === 1, 'turn 1');
    expect(answers[0]).toEqual({ outcome: 'allow-always', persist: true });
    // The daemon granted the widening (until it saves to config.json it counts as the session's).
    expect(d.of(sessionId, 'sandbox/widened').map((e: any) => e.data.writable)).toEqual([[cache]]);
    expect(String((d.of(sessionId, 'tool/result')[0].data as any).message.content[0].content[0].text)).toContain('widened');
    // A second request of the same widening would be granted already: another session.
    const other = await d.client.newSession({ cwd: d.root });
    await d.client.followup(other.sessionId, 'widen for the session');
    await d.waitFor(() => permissions.openFor(other.sessionId).length === 1, 'the second escalation');
    permissions.answer(requests[1].callId, 'allow-always');
    await d.waitFor(() => d.of(other.sessionId, 'turn/end').length === 1, 'turn 2');
    expect(answers[1]).toEqual({ outcome: 'allow-always' });
    // persist on a request that is no escalation is not sent.
    await d.client.followup(other.sessionId, 'plain');
    await d.waitFor(() => permissions.openFor(other.sessionId).length === 1, 'the plain request');
    permissions.answer(requests[2].callId, 'allow-always', true);
    await d.waitFor(() => d.of(other.sessionId, 'turn/end').length === 2, 'turn 3');
    expect(answers[2]).toEqual({ outcome: 'allow-always' });
    permissions.dispose();
  });

  it('a plan\'s answers carry the mode picked or the words to revise by (§3 "Plan approval")', async () => {
    fake.script(
      toolReply([{ id: 'call_p1', name: 'propose_plan', args: { plan: '1. a' } }]),
      toolReply([{ id: 'call_p2', name: 'propose_plan', args: { plan: '1. a\n2. b' } }]),
      textReply('carrying it out'),
    );
    const plans: string[] = [];
    let next = 0;
    const permissions: Permissions = new Permissions((req) => {
      plans.push(String(req.preview?.plan));
      if (next++ === 0) permissions.answer(req.callId, 'reject', false, undefined, { feedback: '  add b  ' });
      else permissions.answer(req.callId, 'allow-once', false, undefined, { mode: 'accept-edits' });
    }, () => undefined);
    d.client.setPermissionHandler(permissions.handle);
    const { sessionId } = await d.client.newSession({ cwd: d.root });
    await d.client.setMode(sessionId, 'plan');
    await d.client.followup(sessionId, 'plan it');
    await d.waitFor(() => d.of(sessionId, 'turn/end').length === 2, 'the plan\'s own turn');
    expect(plans).toEqual(['1. a', '1. a\n2. b']);
    expect(JSON.stringify(fake.requests[1].body.messages)).toContain('They said:\\nadd b');
    expect(d.of(sessionId, 'session/mode').map((e) => (e.data as { mode: string }).mode)).toEqual(['plan', 'accept-edits']);
    permissions.dispose();
  });
});
