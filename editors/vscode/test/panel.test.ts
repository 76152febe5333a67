// The host side of the chat panel with a mocked `vscode` module and the REAL daemon: the webview gets
// one snapshot, then batched actions at most every 50 ms, and replaying them reproduces the host model.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import * as vscode from 'vscode';
import { ChatPanel } from '../src/panel';
import { DaemonUnavailable } from '../src/daemonState';
import { Permissions } from '../src/permissions';
import { SaveReason } from '../src/outputLog';
import type { HostToWebview, WebviewToHost } from '../src/protocol/panelMessages';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { queueOf, reduceAll, type SessionModel } from '../src/protocol/reducer';
import { textOf } from '../src/protocol/types';
import { FakeProvider, gate, textReply, toolReply } from './fakeProvider';
import { removeTempStates, startDaemon, type TestDaemon } from './daemon';
import { infos, pick, quickPicks, statusItems, warn, warnings, workspace as mockWorkspace } from './vscode.mock';

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

function fakeHost(stored?: string, realPermissions = false, ensureStarted: () => Promise<any> = async () => d.client) {
  const state = new Map<string, unknown>();
  if (stored) state.set('dsh.sessionId', stored);
  const ctx = {
    extensionUri: vscode.Uri.file('/ext'),
    workspaceState: { get: (k: string) => state.get(k), update: async (k: string, v: unknown) => { state.set(k, v); } },
    secrets: { get: async () => undefined },
    subscriptions: [],
  };
  const onReady = new vscode.EventEmitter<any>();
  const onState = new vscode.EventEmitter<any>();
  const logged: string[] = [];
  const output = { info: (l: string) => logged.push(l), warn: (l: string) => logged.push(l), error: (l: string) => logged.push(l), show() {} };
  const daemon = { client: d.client, ensureStarted, onReady: onReady.event, onState: onState.event, hasKey: async () => true, needsKey: async () => false, output, saves: new SaveReason() };
  const ref: { panel?: ChatPanel } = {};
  const permissions = realPermissions
    ? new Permissions((request) => ref.panel?.dispatch({ kind: 'permission', request }), (callId) => ref.panel?.dispatch({ kind: 'permissionDone', callId }))
    : { handle: async () => 'allow-once', answer() {}, cancelAll() {}, openFor: () => [], saveEdited: async () => {}, edited: new Set<string>(), viewDiff: async () => {} };
  const posted: Array<{ at: number; msg: HostToWebview }> = [];
  let receive: (m: WebviewToHost) => void = () => {};
  const view = {
    webview: {
      options: {}, html: '', cspSource: 'vscode-webview://x',
      asWebviewUri: (u: vscode.Uri) => u,
      // As VS Code does, the message is serialized when it is posted.
      postMessage: async (msg: HostToWebview) => { posted.push({ at: Date.now(), msg: JSON.parse(JSON.stringify(msg)) }); return true; },
      onDidReceiveMessage: (h: (m: WebviewToHost) => void) => { receive = h; return { dispose() {} }; },
    },
    onDidDispose: () => ({ dispose() {} }),
  };
  const panel = new ChatPanel(ctx as any, daemon as any, permissions as any);
  ref.panel = panel;
  onReady.fire(d.client);
  onState.fire({ state: 'ready' });
  panel.resolveWebviewView(view as any);
  return { panel, view, posted, state, permissions, logged, send: (m: WebviewToHost) => receive(m) };
}

type Host = ReturnType<typeof fakeHost>;
const strip = (x: SessionModel) => ({ ...x, rev: 0, index: {}, items: x.items.map((i) => ({ ...i, rev: 0 })) });
const plain = <T>(x: T): T => JSON.parse(JSON.stringify(x));
/** The webview's model: the last snapshot of the current session plus the batches after it. */
function webviewModel(host: Host): SessionModel {
  let snapAt = host.posted.length - 1;
  while (snapAt >= 0 && !(host.posted[snapAt].msg.type === 'snapshot' && ((host.posted[snapAt].msg as any).model as SessionModel).sessionId === host.panel.model.sessionId)) snapAt--;
  let m = (host.posted[snapAt].msg as any).model as SessionModel;
  for (const b of host.posted.slice(snapAt + 1)) if (b.msg.type === 'actions') m = reduceAll(m, b.msg.actions);
  return m;
}

describe('ChatPanel (host) with the real daemon', () => {
  it('serves a CSP-locked page, a snapshot on ready, then batched actions that rebuild the host model', async () => {
    const host = fakeHost();
    expect(host.view.webview.html).toMatch(/Content-Security-Policy" content="default-src 'none'; style-src vscode-webview:\/\/x; script-src 'nonce-([A-Za-z0-9]{32})'/);
    const nonce = /nonce-([A-Za-z0-9]{32})/.exec(host.view.webview.html)![1];
    expect(host.view.webview.html).toContain(`<script nonce="${nonce}"`);
    host.send({ type: 'ready' });
    await d.waitFor(() => host.posted.some((p) => p.msg.type === 'snapshot'), 'snapshot');

    fake.script(textReply(Array.from({ length: 40 }, (_, i) => `w${i} `), { delayMs: 5 }));
    host.send({ type: 'send', text: 'stream please', chips: [], mode: 'followup' });
    await d.waitFor(() => host.panel.model.items.some((i) => i.kind === 'turnEnd') && host.panel.model.status === 'idle', 'turn end');
    await new Promise((r) => setTimeout(r, 120)); // the last batch

    const snapAt = host.posted.findIndex((p) => p.msg.type === 'snapshot' && (p.msg.model as SessionModel).sessionId === host.panel.model.sessionId);
    expect(snapAt).toBeGreaterThanOrEqual(0);
    const batches = host.posted.slice(snapAt + 1).filter((p) => p.msg.type === 'actions');
    const actionCount = batches.reduce((n, b) => n + (b.msg as any).actions.length, 0);
    const events = d.of(host.panel.model.sessionId!).length;
    expect(actionCount).toBeGreaterThanOrEqual(events);
    expect(batches.length).toBeLessThan(actionCount / 3); // batched, not one post per event
    // At most one batch per 50 ms, except that a finished reply or turn is sent at once.
    const atOnce = (b: typeof batches[number]) => (b.msg as any).actions.some((a: any) => a.kind === 'event' && (a.event.type === 'assistant/message' || a.event.type === 'turn/end'));
    for (let i = 1; i < batches.length; i++) if (!atOnce(batches[i]) && !atOnce(batches[i - 1])) expect(batches[i].at - batches[i - 1].at).toBeGreaterThanOrEqual(45);
    expect(batches.filter(atOnce).length).toBeGreaterThan(0);
    // The webview runs the same reducer: snapshot + batches = the host's model.
    let m = (host.posted[snapAt].msg as any).model as SessionModel;
    for (const b of batches) m = reduceAll(m, (b.msg as any).actions);
    const strip = (x: SessionModel) => ({ ...x, rev: 0, index: {}, items: x.items.map((i) => ({ ...i, rev: 0 })) });
    expect(strip(JSON.parse(JSON.stringify(m)))).toEqual(strip(JSON.parse(JSON.stringify(host.panel.model))));
    expect(host.state.get('dsh.sessionId')).toBe(host.panel.model.sessionId);
    expect(statusItems.at(-1)?.text).toContain('dsh: idle');
    host.panel.dispose();
  });

  it('chips on a prompt queued behind a running turn travel with it (context on the followup); an older daemon gets them injected first', async () => {
    const host = fakeHost();
    host.send({ type: 'ready' });
    const file = join(d.root, 'app.py');
    writeFileSync(file, 'import os\n\ndef main():\n    return 42\n');
    const chip = { kind: 'selection' as const, uri: pathToFileURL(file).href, label: 'app.py:3-4', range: { start: { line: 2, character: 0 }, end: { line: 4, character: 0 } } };
    const g = gate();
    fake.script(
      { ...toolReply([{ id: 'call_ls', name: 'list_dir', args: { path: '.' } }]), gate: g.promise },
      textReply('the running turn goes on'),
      textReply('it returns 42'),
    );
    host.send({ type: 'send', text: 'look around', chips: [], mode: 'followup' });
    await fake.waitRequests(1);
    host.send({ type: 'send', text: 'explain this', chips: [chip], mode: 'followup' });
    await d.waitFor(() => queueOf(host.panel.model).length === 1, 'queued with its chip');
    expect(queueOf(host.panel.model)[0]).toMatchObject({ label: 'followup', text: 'explain this' });
    expect(queueOf(host.panel.model)[0].context.map((c) => (c.source as any).contextKind)).toEqual(['selection']);
    g.open();
    const ends = () => host.panel.model.items.filter((i) => i.kind === 'turnEnd').length;
    await d.waitFor(() => ends() === 2 && host.panel.model.status === 'idle', 'two turns');
    const sent = (i: number) => fake.requests[i].body.messages.map((x: any) => String(x.content)).join('\n');
    expect(fake.requests).toHaveLength(3);
    expect(sent(1)).not.toContain('def main'); // the running turn's second step
    expect(sent(2)).toContain('def main():');
    expect(sent(2)).toContain('explain this');

    // A daemon that does not advertise sendContext: the chip goes in with dsh/context/add (inject), then the prompt.
    d.client.features = undefined;
    fake.script(textReply('legacy path'));
    host.send({ type: 'send', text: 'and now?', chips: [chip], mode: 'followup' });
    await d.waitFor(() => ends() === 3 && host.panel.model.status === 'idle', 'third turn');
    expect(sent(3)).toContain('def main():');
    const verbs = d.of(host.panel.model.sessionId!, 'agent/inbox/inserted').map((e) => (e.data as any).message.verb);
    expect(verbs).toEqual(['followup', 'followup', 'context', 'followup']);
    host.panel.dispose();
  });

  it('a file dropped from a remote window\'s Explorer (vscode-remote:, as code-server hands it over) becomes a file: chip the daemon reads', async () => {
    const file = join(d.root, 'notes.txt');
    writeFileSync(file, 'alpha from the dropped file\n');
    const folders = mockWorkspace.workspaceFolders;
    mockWorkspace.workspaceFolders = [{ uri: vscode.Uri.file(d.root) }] as any;
    try {
      const host = fakeHost();
      host.send({ type: 'ready' });
      await d.waitFor(() => host.posted.some((p) => p.msg.type === 'snapshot'), 'snapshot');
      host.send({ type: 'dropUris', uris: [`vscode-remote://127.0.0.1:8080${file}`, 'vscode-remote://127.0.0.1:8080/not/in/the/workspace.txt'] });
      await d.waitFor(() => host.posted.some((p) => p.msg.type === 'chips'), 'the chips');
      const chips = (host.posted.find((p) => p.msg.type === 'chips')!.msg as { chips: any[] }).chips;
      expect(chips.map((c) => c.uri)).toEqual([vscode.Uri.file(file).toString()]);
      expect(chips[0]).toMatchObject({ kind: 'file', label: 'notes.txt' });
      fake.script(textReply('It says alpha.'));
      host.send({ type: 'send', text: 'what does it say?', chips, mode: 'followup' });
      await d.waitFor(() => host.panel.model.items.some((i) => i.kind === 'turnEnd'), 'the turn');
      expect(JSON.stringify(fake.requests[0].body.messages)).toContain('alpha from the dropped file');
      expect(host.posted.filter((p) => p.msg.type === 'error')).toEqual([]);
      host.panel.dispose();
    } finally {
      mockWorkspace.workspaceFolders = folders;
    }
  });

  it('a reopened window starts from a transcript page plus the events after it (no gap, no duplicate mid-stream), older pages load in front', async () => {
    expect(d.client.features?.transcript).toBe(true);
    const one = fakeHost();
    one.send({ type: 'ready' });
    const file = join(d.root, 'app.py');
    writeFileSync(file, 'def main():\n    return 42\n');
    const chip = { kind: 'selection' as const, uri: pathToFileURL(file).href, label: 'app.py:1-2', range: { start: { line: 0, character: 0 }, end: { line: 2, character: 0 } } };
    const ends = (h: Host) => h.panel.model.items.filter((i) => i.kind === 'turnEnd').length;
    const turn = async (text: string, n: number, chips: typeof chip[] = []) => {
      one.send({ type: 'send', text, chips, mode: 'followup' });
      await d.waitFor(() => ends(one) === n && one.panel.model.status === 'idle', `turn ${n}`);
    };
    fake.script(toolReply([{ id: 'call_ls', name: 'list_dir', args: { path: '.' } }]), textReply('listed'));
    await turn('look around', 1);
    fake.script(textReply('it returns 42'));
    await turn('explain this', 2, [chip]);
    await turn('three', 3);
    await turn('four', 4);
    // Turn 5 streams while the second window opens; a prompt waits behind it.
    const g = gate();
    fake.script(textReply(Array.from({ length: 30 }, (_, i) => `p${i} `), { delayMs: 15, gate: g.promise }), textReply('six'));
    one.send({ type: 'send', text: 'five', chips: [], mode: 'followup' });
    const sid = one.panel.model.sessionId!;
    await d.waitFor(() => d.of(sid, 'assistant/chunk').some((e) => (e.data as any).turn === 5), 'a durable chunk of turn 5');
    one.send({ type: 'send', text: 'six, queued', chips: [], mode: 'followup' });
    await d.waitFor(() => queueOf(one.panel.model).length === 1, 'queued');

    ChatPanel.transcriptTurns = 2;
    try {
      const two = fakeHost(sid);
      two.send({ type: 'ready' });
      await d.waitFor(() => two.panel.model.sessionId === sid && two.panel.model.olderBefore !== null && queueOf(two.panel.model).length === 1, 'second window attached');
      expect(two.panel.model.olderBefore).toBe(4);
      const streaming = two.panel.model.items.find((i) => i.id === 'a:5:1');
      expect(streaming?.kind === 'assistant' && !streaming.done && streaming.text.startsWith('p0 ')).toBe(true); // a partial step in the page
      expect(two.panel.model.items.filter((i) => i.kind === 'user').map((i) => (i as any).message.content[0].text)).toEqual(['four', 'five']);
      g.open();
      await d.waitFor(() => ends(one) === 6 && two.panel.model.items.some((i) => i.id === 'e:6') && two.panel.model.status === 'idle', 'turns 5 and 6 in both windows');
      // Older turns: the webview asks (`history`), the page goes to it and not into the model.
      two.send({ type: 'history', beforeTurn: 4, limit: 2 });
      await d.waitFor(() => two.posted.some((p) => p.msg.type === 'history'), 'a history page');
      const hist = two.posted.find((p) => p.msg.type === 'history')!.msg as Extract<HostToWebview, { type: 'history' }>;
      expect(hist.page?.turns.map((t) => t.turn)).toEqual([3, 2]);
      expect(hist.page?.hasMore).toBe(true);
      expect(two.panel.model.olderBefore).toBe(4);
      // The turns both windows hold are the same items.
      const from4 = (m: SessionModel) => strip(plain(m)).items.filter((i) => i.turn >= 4);
      expect(from4(two.panel.model)).toEqual(from4(one.panel.model));
      const five = two.panel.model.items.find((i) => i.id === 'a:5:1');
      expect(five?.kind === 'assistant' && five.text).toBe(Array.from({ length: 30 }, (_, i) => `p${i} `).join(''));
      await new Promise((r) => setTimeout(r, 120)); // the last batch
      // The webview, fed a snapshot and batches (transcript pages included), holds the same model.
      expect(strip(plain(webviewModel(two)))).toEqual(strip(plain(two.panel.model)));
      two.panel.dispose();
    } finally {
      ChatPanel.transcriptTurns = 20;
      one.panel.dispose();
    }
  });

  it('the title: taken from the first prompt live, renamed live, and in the attach reply of a reopened window', async () => {
    const host = fakeHost();
    host.send({ type: 'ready' });
    expect(host.panel.model.title).toBeUndefined();
    host.send({ type: 'send', text: 'explain   the\nparser', chips: [], mode: 'followup' });
    await d.waitFor(() => host.panel.model.items.some((i) => i.kind === 'turnEnd') && host.panel.model.status === 'idle', 'turn end');
    expect(host.panel.model.title).toBe('explain the parser');
    const id = host.panel.model.sessionId!;
    await d.client.renameSession(id, 'The parser');
    await d.waitFor(() => host.panel.model.title === 'The parser', 'the renamed title');
    await new Promise((r) => setTimeout(r, 120)); // the last batch
    expect(webviewModel(host).title).toBe('The parser');
    host.panel.dispose();
    // A reloaded window: a transcript page plus the events after it hold no session/title; the
    // attach reply does.
    const again = fakeHost(id);
    again.send({ type: 'ready' });
    await d.waitFor(() => again.panel.model.sessionId === id && again.panel.model.title !== undefined, 'reattached');
    expect(again.panel.model.title).toBe('The parser');
    await d.waitFor(() => webviewModel(again).title === 'The parser', 'the webview has it');
    again.panel.dispose();
  });

  it('New Session and Switch Session detach the session they leave, so another window can drive it', async () => {
    expect(d.client.features?.detach).toBe(true);
    const host = fakeHost();
    host.send({ type: 'ready' });
    const ends = () => host.panel.model.items.filter((i) => i.kind === 'turnEnd').length;
    host.send({ type: 'send', text: 'in session A', chips: [], mode: 'followup' });
    await d.waitFor(() => ends() === 1 && host.panel.model.status === 'idle', 'turn in A');
    const a = host.panel.model.sessionId!;
    await host.panel.newSession();
    const b = host.panel.model.sessionId!;
    expect(b).not.toBe(a);
    host.send({ type: 'send', text: 'in session B', chips: [], mode: 'followup' });
    await d.waitFor(() => ends() === 1 && host.panel.model.status === 'idle' && host.panel.model.sessionId === b, 'turn in B');
    const switching = host.panel.switchSession();
    await d.waitFor(() => quickPicks.at(-1)?.items.length === 2, 'the picker lists both sessions');
    quickPicks.at(-1)!.accept('in session A');
    await switching;
    expect(host.panel.model.sessionId).toBe(a);
    expect(host.panel.model.items.filter((i) => i.kind === 'user').map((i) => (i as any).message.content[0].text)).toEqual(['in session A']);
    // A second daemon on the same state: B was released (detached while idle); A is driven here.
    const other = await startDaemon(fake.baseUrl, { state: d.state, root: d.root });
    try {
      expect((await other.client.attach(a)).readOnly).toBe(true);
      expect((await other.client.attach(b)).readOnly ?? false).toBe(false);
      fake.script(textReply('B from the other window'));
      await other.client.followup(b, 'B from the other window');
      await other.waitFor(() => other.of(b, 'turn/end').length >= 1, 'B driven by the other daemon');
    } finally {
      await other.stop();
    }
    host.panel.dispose();
  });

  it('a permission request of a session left waiting survives the other session\'s turns; its card comes back when it is shown again', async () => {
    const host = fakeHost(undefined, true);
    const permissions = host.permissions as Permissions;
    host.send({ type: 'ready' });
    writeFileSync(join(d.root, 'notes.txt'), 'alpha\nbeta\n');
    fake.script(toolReply([{ id: 'call_ed', name: 'edit_file', args: { path: 'notes.txt', old_string: 'beta', new_string: 'gamma' } }]), textReply('edited'));
    host.send({ type: 'send', text: 'edit the notes', chips: [], mode: 'followup' });
    await d.waitFor(() => host.panel.model.permissions.length === 1, 'the permission card');
    const a = host.panel.model.sessionId!;
    await host.panel.newSession(); // leaves A running, waiting for the answer
    const b = host.panel.model.sessionId!;
    fake.script(textReply('hello from B'));
    host.send({ type: 'send', text: 'meanwhile in B', chips: [], mode: 'followup' });
    await d.waitFor(() => host.panel.model.items.some((i) => i.kind === 'turnEnd'), 'a turn in B');
    expect(host.panel.model.sessionId).toBe(b);
    expect(host.panel.model.permissions).toEqual([]);
    const ed = d.callId(a, 'call_ed');
    expect(permissions.openFor(a).map((r) => r.callId)).toEqual([ed]); // B's turn end did not cancel it
    await host.panel.openSession(a);
    expect(host.panel.model.permissions.map((r) => r.callId)).toEqual([ed]);
    permissions.answer(ed, 'allow-once');
    await d.waitFor(() => host.panel.model.items.some((i) => i.id === 'e:1') && host.panel.model.status === 'idle', 'A finished');
    expect(host.panel.model.permissions).toEqual([]);
    expect(JSON.stringify(d.applied)).toContain('gamma');
    permissions.dispose();
    host.panel.dispose();
  });

  it('an answer given elsewhere (permission/resolved) takes the card away; "Allow always" answers can be revoked', async () => {
    expect(d.client.features?.permissionEvents).toBe(true);
    const host = fakeHost(undefined, true);
    const permissions = host.permissions as Permissions;
    host.send({ type: 'ready' });
    writeFileSync(join(d.root, 'notes.txt'), 'one\n');
    const edit = (id: string, from: string, to: string) => toolReply([{ id, name: 'edit_file', args: { path: 'notes.txt', old_string: from, new_string: to } }]);
    const ends = () => host.panel.model.items.filter((i) => i.kind === 'turnEnd').length;
    // 1. Answered by another client (dsh/permissions/respond): the card goes, the local request settles.
    fake.script(edit('call_1', 'one', 'two'), textReply('rejected elsewhere'));
    host.send({ type: 'send', text: 'edit 1', chips: [], mode: 'followup' });
    await d.waitFor(() => host.panel.model.permissions.length === 1, 'card 1');
    const sessionId = host.panel.model.sessionId!;
    expect(await d.client.rpc.request('dsh/permissions/respond', { sessionId, callId: d.callId(sessionId, 'call_1'), outcome: 'reject' })).toEqual({ answered: true });
    await d.waitFor(() => host.panel.model.permissions.length === 0 && permissions.openFor(sessionId).length === 0, 'card 1 gone');
    await d.waitFor(() => ends() === 1 && host.panel.model.status === 'idle', 'turn 1');
    // 2. Allow always: the next edit does not ask; revoked, the one after asks again. (The daemon
    //    writes an applied edit to disk for a client without documentSave: each turn starts from 'one'.)
    const asked: string[] = [];
    d.client.setPermissionHandler(async (req) => { asked.push(req.callId); return 'allow-always'; });
    fake.script(edit('call_2', 'one', 'two'), textReply('ok'), edit('call_3', 'one', 'two'), textReply('ok'));
    host.send({ type: 'send', text: 'edit 2', chips: [], mode: 'followup' });
    await d.waitFor(() => ends() === 2 && host.panel.model.status === 'idle', 'turn 2');
    writeFileSync(join(d.root, 'notes.txt'), 'one\n');
    host.send({ type: 'send', text: 'edit 3', chips: [], mode: 'followup' });
    await d.waitFor(() => ends() === 3 && host.panel.model.status === 'idle', 'turn 3');
    expect(asked).toEqual([d.callId(sessionId, 'call_2')]);
    let offered: string[] = [];
    pick.next = (items) => { offered = items.map((i) => `${i.label} | ${i.description}`); return items; };
    await host.panel.revokeGrants();
    expect(offered).toEqual(['edit_file | every call of this tool']);
    expect(infos.at(-1)).toBe('dsh: 1 "Allow always" answer revoked.');
    fake.script(edit('call_4', 'one', 'two'), textReply('ok'));
    writeFileSync(join(d.root, 'notes.txt'), 'one\n');
    host.send({ type: 'send', text: 'edit 4', chips: [], mode: 'followup' });
    await d.waitFor(() => ends() === 4 && host.panel.model.status === 'idle', 'turn 4');
    expect(asked).toEqual([d.callId(sessionId, 'call_2'), d.callId(sessionId, 'call_4')]);
    pick.next = () => []; // nothing picked: nothing revoked
    await host.panel.revokeGrants();
    expect((await d.client.permissionsList(sessionId)).grants).toEqual([{ scope: 'edit_file', tool: 'edit_file' }]);
    permissions.dispose();
    host.panel.dispose();
  });

  it('the model keeps a bounded number of turns (trim at a turn end); the webview copy follows', async () => {
    ChatPanel.modelTurnsMax = 4;
    ChatPanel.modelTurnsKeep = 2;
    try {
      const host = fakeHost();
      host.send({ type: 'ready' });
      const ends = () => d.of(host.panel.model.sessionId ?? '', 'turn/end').length;
      for (let n = 1; n <= 6; n++) {
        host.send({ type: 'send', text: `prompt ${n}`, chips: [], mode: 'followup' });
        await d.waitFor(() => ends() === n && host.panel.model.status === 'idle', `turn ${n}`);
      }
      const turns = [...new Set(host.panel.model.items.map((i) => i.turn))];
      expect(turns).toEqual([4, 5, 6]); // trimmed to 2 at the end of turn 5, then turn 6 came
      expect(host.panel.model.olderBefore).toBe(4);
      await new Promise((r) => setTimeout(r, 120));
      expect(strip(plain(webviewModel(host)))).toEqual(strip(plain(host.panel.model)));
      host.panel.dispose();
    } finally {
      ChatPanel.modelTurnsMax = 60;
      ChatPanel.modelTurnsKeep = 40;
    }
  });

  it('a send that cannot go is answered with its reason and actions (the webview gives the text back)', async () => {
    const host = fakeHost(undefined, false, async () => { throw new DaemonUnavailable({ state: 'error', kind: 'startFailed', message: 'The daemon command in your settings was not found.', detail: 'dsh.serverCommand is "/nope"' }); });
    host.send({ type: 'ready' });
    host.send({ type: 'send', id: 7, text: 'keep me', chips: [], mode: 'followup' });
    await d.waitFor(() => host.posted.some((p) => p.msg.type === 'sendResult'), 'the send result');
    expect(host.posted.find((p) => p.msg.type === 'sendResult')!.msg).toEqual({
      type: 'sendResult', id: 7, ok: false, error: 'Not sent: the daemon is not running. The message stays here.', actions: [], daemonDown: true,
    });
    expect(host.logged.some((l) => l.includes('send failed'))).toBe(true); // the log says it too
    host.panel.dispose();
  });

  it('read-only: a session another daemon drives is followed, never driven from here (no ids or pids said) until Take over', async () => {
    const other = await startDaemon(fake.baseUrl, { state: d.state, root: d.root });
    try {
      const { sessionId } = await other.client.newSession({ cwd: d.root });
      const g = gate();
      fake.script(textReply(['working', ' on it'], { gate: g.promise }));
      await other.client.followup(sessionId, 'their prompt');
      await other.client.followup(sessionId, 'their queued prompt');
      const host = fakeHost(sessionId);
      host.send({ type: 'ready' });
      await d.waitFor(() => host.panel.model.sessionId === sessionId && host.panel.model.readOnly && queueOf(host.panel.model).length === 1, 'read-only with their queue');
      const snapshot = host.posted.filter((p) => p.msg.type === 'snapshot').at(-1)!.msg as any;
      expect(snapshot.connection.takeOver).toBe(true);
      const requestsBefore = fake.requests.length;
      const inserted = () => other.of(sessionId, 'agent/inbox/inserted').length;
      const before = inserted();
      host.send({ type: 'send', id: 1, text: 'mine', chips: [], mode: 'followup' });
      host.send({ type: 'cancel', keepInbox: true });
      host.send({ type: 'wake' });
      host.send({ type: 'inboxRemove', messageId: queueOf(host.panel.model)[0].message.id });
      await d.waitFor(() => host.posted.filter((p) => p.msg.type === 'error' || p.msg.type === 'sendResult').length >= 4, 'four refusals');
      const said = host.posted.filter((p) => p.msg.type === 'error' || p.msg.type === 'sendResult').map((p) => (p.msg as any).message ?? (p.msg as any).error);
      expect(said.sort()).toEqual([
        'Not sent: Another window drives this session: take it over or start a new session.',
        'Another window drives this session: stop it there.',
        'Another window drives this session: take it over or start a new session.',
        'Another window drives this session: take it over or start a new session.',
      ].sort());
      expect(JSON.stringify(host.posted.filter((p) => p.msg.type !== 'snapshot' && p.msg.type !== 'actions'))).not.toMatch(new RegExp(`${sessionId}|\\bpid\\b|${other.proc.pid}`));
      expect(inserted()).toBe(before); // nothing reached the session
      expect(queueOf(host.panel.model).length).toBe(1);
      // Take over: the other window lets go when its running turn ends; this one drives from then on.
      host.send({ type: 'takeOver' });
      await new Promise((r) => setTimeout(r, 300));
      expect(host.panel.model.readOnly).toBe(true); // their turn still runs
      g.open();
      await d.waitFor(() => !host.panel.model.readOnly, 'driven here', 20000);
      await other.waitFor(() => other.of(sessionId, 'session/lease').some((e: any) => e.data.readOnly === true), 'the other window told');
      expect(fake.requests.length).toBeGreaterThanOrEqual(requestsBefore + 1);
      host.send({ type: 'send', id: 2, text: 'from here', chips: [], mode: 'followup' });
      await d.waitFor(() => host.posted.some((p) => p.msg.type === 'sendResult' && p.msg.id === 2), 'the send answered');
      expect(host.posted.find((p) => p.msg.type === 'sendResult' && p.msg.id === 2)!.msg).toMatchObject({ ok: true });
      await d.waitFor(() => host.panel.model.items.some((i) => i.kind === 'user' && textOf(i.message.content) === 'from here'), 'a turn driven here', 20000);
      host.panel.dispose();
    } finally {
      await other.stop();
    }
  });

  it('take over, asking side: waits for their turn (said), Take over now ends it; a line says this window drives it now', async () => {
    const other = await startDaemon(fake.baseUrl, { state: d.state, root: d.root });
    try {
      const { sessionId } = await other.client.newSession({ cwd: d.root });
      const g = gate();
      fake.script(textReply(['working', ' on it'], { gate: g.promise }));
      await other.client.followup(sessionId, 'their prompt');
      await other.waitFor(() => other.of(sessionId, 'assistant/delta').length > 0, 'their turn streams');
      const host = fakeHost(sessionId);
      host.send({ type: 'ready' });
      await d.waitFor(() => host.panel.model.sessionId === sessionId && host.panel.model.readOnly && host.panel.model.status === 'running', 'read-only, their turn running');
      host.send({ type: 'takeOver' });
      await d.waitFor(() => host.panel.model.lease?.asked === 'waiting', 'waiting said');
      // The other window is told while its turn runs.
      await other.waitFor(() => other.of(sessionId, 'session/handover').length === 1, 'the driver told');
      expect(other.of(sessionId, 'session/handover')[0].data).toMatchObject({ force: false, requester: { pid: d.proc.pid } });
      expect(host.panel.model.readOnly).toBe(true);
      host.send({ type: 'takeOver', force: true });
      await d.waitFor(() => !host.panel.model.readOnly, 'driven here', 20000);
      const m = host.panel.model;
      expect(m.lease?.asked).toBeUndefined();
      expect(m.items.find((i) => i.kind === 'turnEnd')).toMatchObject({ reason: { kind: 'aborted', cause: 'handover' } });
      await d.waitFor(() => host.panel.model.items.some((i) => i.id.startsWith('sn:')) || host.panel.model.lease?.told === false, 'the durable notice in');
      const lines = host.panel.model.items.filter((i) => i.kind === 'notice').map((i) => i.kind === 'notice' && i.text);
      expect(lines).toEqual(['This window took the session over: it drives it from here on.']);
      // The webview's model (snapshot + batches) says the same.
      await new Promise((r) => setTimeout(r, 120));
      expect(strip(plain(webviewModel(host))).lease).toEqual(strip(plain(host.panel.model)).lease);
      expect(JSON.stringify(host.posted.filter((p) => p.msg.type !== 'snapshot' && p.msg.type !== 'actions'))).not.toMatch(new RegExp(`\\bpid\\b|${other.proc.pid}`));
      g.open();
      host.panel.dispose();
    } finally {
      await other.stop();
    }
  });

  it('take over, driving side: another window asks while the turn runs; Hand over now lets it go at once and says so', async () => {
    const host = fakeHost();
    host.send({ type: 'ready' });
    await d.waitFor(() => host.posted.some((p) => (p.msg.type === 'connection' || p.msg.type === 'snapshot') && (p.msg as any).connection.handOver === true), 'handOver offered');
    const g = gate();
    fake.script(textReply(['long', ' answer'], { gate: g.promise }));
    host.send({ type: 'send', id: 1, text: 'a long one', chips: [], mode: 'followup' });
    await d.waitFor(() => host.panel.model.status === 'running' && host.panel.model.items.some((i) => i.kind === 'assistant'), 'our turn streams', 20000);
    const sessionId = host.panel.model.sessionId!;
    const other = await startDaemon(fake.baseUrl, { state: d.state, root: d.root });
    try {
      const attached = await other.client.attach(sessionId);
      expect(attached.readOnly).toBe(true);
      await other.client.takeOver(sessionId);
      await d.waitFor(() => host.panel.model.lease?.handover?.force === false, 'asked to hand over');
      expect(host.panel.model.readOnly).toBe(false);
      host.send({ type: 'handOver' });
      await d.waitFor(() => host.panel.model.readOnly, 'followed read-only', 20000);
      await other.waitFor(() => other.of(sessionId, 'session/lease').some((e: any) => e.data.readOnly === false), 'the other drives it');
      const m = host.panel.model;
      expect(m.lease?.handover).toBeUndefined();
      expect(m.items.find((i) => i.kind === 'turnEnd')).toMatchObject({ reason: { kind: 'aborted', cause: 'handover' } });
      expect(m.items.filter((i) => i.kind === 'notice').map((i) => i.kind === 'notice' && i.text))
        .toEqual(['Another window took this session over: this window follows it from here on.']);
      host.panel.dispose();
    } finally {
      g.open();
      await other.stop();
    }
  });

  it('the mode picker sets the session mode; the model follows session/mode and the attach reply', async () => {
    const host = fakeHost();
    host.send({ type: 'ready' });
    await d.waitFor(() => host.posted.some((p) => (p.msg.type === 'connection' || p.msg.type === 'snapshot') && (p.msg as any).connection.modes === true), 'modes offered');
    fake.script(textReply('hi'));
    host.send({ type: 'send', text: 'hello', chips: [], mode: 'followup' });
    await d.waitFor(() => host.panel.model.items.some((i) => i.kind === 'turnEnd'), 'a turn');
    expect(host.panel.model.mode ?? 'ask').toBe('ask');
    host.send({ type: 'setMode', mode: 'plan' });
    await d.waitFor(() => host.panel.model.mode === 'plan', 'plan mode');
    const id = host.panel.model.sessionId!;
    expect(d.of(id, 'session/mode').map((e: any) => e.data.mode)).toEqual(['plan']);
    host.panel.dispose();
    // Another window opening it hears the mode in the attach reply.
    const again = fakeHost(id);
    again.send({ type: 'ready' });
    await d.waitFor(() => again.panel.model.sessionId === id && again.panel.model.mode === 'plan', 'the mode on attach');
    again.panel.dispose();
  });

  it('Restore checkpoint lists the files first and takes files and conversation back; Fork from here opens a new session', async () => {
    // Edits and restores on disk (this test client's applyEdit only pretends).
    await d.stop();
    d = await startDaemon(fake.baseUrl, undefined, { applyEdit: false });
    const host = fakeHost();
    host.send({ type: 'ready' });
    await d.waitFor(() => host.posted.some((p) => p.msg.type === 'snapshot'), 'snapshot');
    expect(d.client.features?.rewind).toBe(true);
    await d.waitFor(() => host.posted.some((p) => (p.msg.type === 'connection' || p.msg.type === 'snapshot') && (p.msg as any).connection.rewind === true), 'rewind offered');
    const file = join(d.root, 'notes.txt');
    writeFileSync(file, 'alpha\nbeta\n');
    fake.script(toolReply([{ id: 'call_ed', name: 'edit_file', args: { path: 'notes.txt', old_string: 'beta', new_string: 'gamma' } }]), textReply('edited'), textReply('second answer'));
    host.send({ type: 'send', text: 'change beta', chips: [], mode: 'followup' });
    await d.waitFor(() => host.panel.model.items.filter((i) => i.kind === 'turnEnd').length === 1 && host.panel.model.status === 'idle', 'turn 1');
    expect(readFileSync(file, 'utf8')).toBe('alpha\ngamma\n');
    host.send({ type: 'send', text: 'and then?', chips: [], mode: 'followup' });
    await d.waitFor(() => host.panel.model.items.filter((i) => i.kind === 'turnEnd').length === 2 && host.panel.model.status === 'idle', 'turn 2');
    const original = host.panel.model.sessionId!;

    // Dismissing the preview does nothing.
    const before = warnings.length;
    host.send({ type: 'rewind', turn: 1 });
    await d.waitFor(() => warnings.length === before + 1, 'the preview');
    const preview = warnings.at(-1)!;
    expect(preview.message).toBe('Restore the checkpoint before "change beta"?');
    expect(preview.options?.modal).toBe(true);
    expect(preview.options?.detail).toContain('notes.txt');
    expect(preview.items).toEqual(['Restore']);
    await new Promise((r) => setTimeout(r, 300));
    expect(readFileSync(file, 'utf8')).toBe('alpha\ngamma\n');
    expect(d.of(original, 'conversation/cut')).toEqual([]);

    // Someone changed the file after the agent: named, nothing done until the person says overwrite.
    writeFileSync(file, 'alpha\ngamma\nmine\n');
    warn.next = (_m, items) => items[0]; // Restore; the conflict that follows is dismissed
    host.send({ type: 'rewind', turn: 1 });
    await d.waitFor(() => warnings.length === before + 3, 'the preview again, then the conflict');
    const conflict = warnings.at(-1)!;
    expect(conflict.message).toContain('changed after the agent changed them');
    expect(conflict.options?.modal).toBe(true);
    expect(conflict.options?.detail).toContain('notes.txt');
    expect(conflict.items).toEqual(['Overwrite and restore']);
    await new Promise((r) => setTimeout(r, 300));
    expect(readFileSync(file, 'utf8')).toBe('alpha\ngamma\nmine\n'); // nothing was done
    expect(d.of(original, 'conversation/cut')).toEqual([]);
    // Restore, then Overwrite and restore.
    warn.next = (_m, items) => { warn.next = (_m2, items2) => items2[0]; return items[0]; };
    host.send({ type: 'rewind', turn: 1 });
    await d.waitFor(() => readFileSync(file, 'utf8') === 'alpha\nbeta\n', 'the file restored');
    await d.waitFor(() => host.panel.model.items.some((i) => i.kind === 'notice' && i.text.startsWith('↶ Checkpoint restored')), 'the cut shown');
    const prompts = host.panel.model.items.filter((i) => i.kind === 'user' && i.message.source.kind === 'user') as any[];
    expect(prompts.map((p) => [p.turn, p.tags ?? []])).toEqual([[1, ['rewound']], [2, ['rewound']]]);
    expect(host.panel.model.items.some((i) => i.kind === 'notice' && i.text === 'Files: restored notes.txt.')).toBe(true);
    // The log says a restore happened (and which), not an agent edit; its last line is written once
    // the rewind's reply is in, which may come after the file and the events.
    await d.waitFor(() => host.logged.some((l) => l.startsWith('restored the checkpoint')), 'the restore logged');
    expect(host.logged.filter((l) => /checkpoint/.test(l))).toEqual([
      expect.stringMatching(/^restoring the checkpoint before turn 1 of session \w{8}$/), // then the conflict, dismissed
      expect.stringMatching(/^restoring the checkpoint before turn 1 of session \w{8}$/),
      'restoring the checkpoint before turn 1 over files changed since (the person said overwrite)',
      'restored the checkpoint before turn 1: 1 restored, 0 deleted',
    ]);
    await d.waitFor(() => webviewModel(host).lastSeq === host.panel.model.lastSeq, 'the last batch');
    expect(strip(plain(webviewModel(host)))).toEqual(strip(plain(host.panel.model)));

    // Fork from here (turn 1 of the original): a new session, shown in its place, with that turn only.
    fake.script(textReply('in the fork'));
    host.send({ type: 'fork', turn: 1 });
    await d.waitFor(() => host.panel.model.sessionId !== original && host.panel.model.items.some((i) => i.kind === 'turnEnd'), 'the fork shown');
    const forkPrompts = host.panel.model.items.filter((i) => i.kind === 'user' && i.message.source.kind === 'user') as any[];
    expect(forkPrompts.map((p) => p.turn)).toEqual([1]);
    expect(host.state.get('dsh.sessionId')).toBe(host.panel.model.sessionId);
    host.panel.dispose();
  });

  it('Retry sends the failed turn\'s prompt again', async () => {
    const host = fakeHost();
    host.send({ type: 'ready' });
    fake.script({ chunks: [], status: 401 });
    host.send({ type: 'send', text: 'try this', chips: [], mode: 'followup' });
    await d.waitFor(() => host.panel.model.lastTurnEnd?.kind === 'error', 'the failed turn');
    expect(host.panel.model.lastTurnEnd?.error?.code).toBe('AUTH');
    const visible = host.panel.model.items.filter((i) => !(i.kind === 'notice' && i.folded));
    expect(visible.map((i) => i.kind)).toEqual(['user', 'turnEnd']); // one block for the failure
    fake.script(textReply('worked this time'));
    host.send({ type: 'retry', text: 'try this' });
    await d.waitFor(() => host.panel.model.lastTurnEnd?.kind === 'completed', 'the retried turn');
    expect(fake.requests.at(-1)!.body.messages.at(-1)).toMatchObject({ role: 'user', content: 'try this' });
    host.panel.dispose();
  });

  it("background processes: listed when a window opens the session (started before its transcript page), their output read, stopped by the person, and with the turn's Stop", async () => {
    const bg = (id: string, name: string) => toolReply([{ id, name: 'run_command', args: { command: `while :; do echo ${name}-out; sleep 0.2; done`, background: true, name } }]);
    fake.script(bg('call_bg1', 'ticker'), textReply('started'));
    const host = fakeHost();
    host.send({ type: 'ready' });
    host.send({ type: 'send', text: 'start the ticker', chips: [], mode: 'followup' });
    await d.waitFor(() => host.panel.model.items.some((i) => i.kind === 'turnEnd') && host.panel.model.status === 'idle', 'the turn');
    const id = host.panel.model.sessionId!;
    expect(host.panel.model.processes).toMatchObject([{ processId: 'p1', name: 'ticker', running: true }]);
    host.panel.dispose();

    // Another window opens the session: a transcript page, then the events after it (the process's
    // start is inside the page): the strip comes from dsh/process/list.
    const again = fakeHost(id);
    again.send({ type: 'ready' });
    await d.waitFor(() => again.panel.model.processes.length === 1, 'the listed process');
    expect(again.panel.model.processes[0]).toMatchObject({ processId: 'p1', name: 'ticker', running: true, command: 'while :; do echo ticker-out; sleep 0.2; done' });
    again.send({ type: 'processOutput', processId: 'p1' });
    await d.waitFor(() => again.posted.some((p) => p.msg.type === 'processOutput'), 'its output');
    expect((again.posted.find((p) => p.msg.type === 'processOutput')!.msg as any).output.text).toContain('ticker-out');
    again.send({ type: 'processStop', processId: 'p1' });
    await d.waitFor(() => again.panel.model.processes[0]?.running === false, 'stopped');
    expect(d.of(id, 'process/exited').map((e) => e.data)).toEqual([expect.objectContaining({ processId: 'p1', stoppedBy: 'person' })]);
    expect(again.panel.model.processes[0].stoppedBy).toBe('person');

    // Stop and stop processes: the turn's Stop with stopProcesses.
    fake.script(bg('call_bg2', 'watcher'), textReply('watching'));
    again.send({ type: 'send', text: 'start the watcher', chips: [], mode: 'followup' });
    await d.waitFor(() => again.panel.model.processes.some((p) => p.processId === 'p2' && p.running), 'the watcher');
    again.send({ type: 'cancel', keepInbox: true, stopProcesses: true });
    await d.waitFor(() => again.panel.model.processes.find((p) => p.processId === 'p2')?.running === false, 'stopped with the turn');
    expect(d.of(id, 'process/exited').map((e) => (e.data as any).stoppedBy)).toEqual(['person', 'cancel']);
    expect(again.posted.filter((p) => p.msg.type === 'error')).toEqual([]);
    again.panel.dispose();
  });

  it("a project's hooks wait for the person: the Trust dialog lists them, a dismissed one trusts nothing, Trust runs them from the next prompt", async () => {
    const folders = mockWorkspace.workspaceFolders;
    mockWorkspace.workspaceFolders = [{ uri: vscode.Uri.file(d.root) }] as any;
    try {
      mkdirSync(join(d.root, '.dsh'), { recursive: true });
      writeFileSync(join(d.root, '.dsh', 'config.json'), JSON.stringify({ hooks: { userPromptSubmit: [{ command: 'echo \'{"additionalContext": "HOOK-CONTEXT-7"}\'', name: 'ctx' }] } }));
      const host = fakeHost();
      host.send({ type: 'ready' });
      fake.script(textReply('one'), textReply('two'));
      host.send({ type: 'send', text: 'first', chips: [], mode: 'followup' });
      await d.waitFor(() => !!host.panel.model.hooksUntrusted, 'the hooks waiting');
      expect(host.panel.model.hooksUntrusted).toMatchObject({ events: ['userPromptSubmit'], hooks: 1 });
      await d.waitFor(() => host.panel.model.items.some((i) => i.kind === 'turnEnd') && host.panel.model.status === 'idle', 'the first turn');
      expect(JSON.stringify(fake.requests[0].body.messages)).not.toContain('HOOK-CONTEXT-7');

      warnings.length = 0;
      warn.next = () => undefined; // the dialog dismissed
      host.send({ type: 'trustHooks' });
      await d.waitFor(() => warnings.length === 1, 'the dialog');
      expect(warnings[0].options?.modal).toBe(true);
      expect(warnings[0].options?.detail).toContain('userPromptSubmit: ctx: echo \'{"additionalContext": "HOOK-CONTEXT-7"}\'');
      await new Promise((r) => setTimeout(r, 100));
      expect(existsSync(join(d.state, 'trusted-projects.json'))).toBe(false);
      expect(host.panel.model.hooksUntrusted).toBeDefined();

      warn.next = (_m, items) => items.find((i) => i === 'Trust');
      host.send({ type: 'trustHooks' });
      await d.waitFor(() => !host.panel.model.hooksUntrusted, 'trusted');
      expect(existsSync(join(d.state, 'trusted-projects.json'))).toBe(true);
      host.send({ type: 'send', text: 'second', chips: [], mode: 'followup' });
      await d.waitFor(() => host.panel.model.items.filter((i) => i.kind === 'turnEnd').length === 2 && host.panel.model.status === 'idle', 'the second turn');
      expect(JSON.stringify(fake.requests[1].body.messages)).toContain('HOOK-CONTEXT-7');
      expect(host.panel.model.items.some((i) => i.kind === 'user' && i.message.source.kind === 'hook')).toBe(true);
      host.panel.dispose();
    } finally {
      mockWorkspace.workspaceFolders = folders;
    }
  });

  it('a queued custom command is edited as typed and expanded again (its recorded command is not carried over)', async () => {
    const folders = mockWorkspace.workspaceFolders;
    mockWorkspace.workspaceFolders = [{ uri: vscode.Uri.file(d.root) }] as any;
    try {
      mkdirSync(join(d.root, '.dsh', 'commands'), { recursive: true });
      writeFileSync(join(d.root, '.dsh', 'commands', 'review.md'), '---\ndescription: Review a file\nargument-hint: PATH\n---\nReview $ARGUMENTS now.\n');
      const host = fakeHost();
      host.send({ type: 'ready' });
      const g = gate();
      fake.script({ ...textReply('busy'), gate: g.promise }, textReply('reviewed'));
      host.send({ type: 'send', text: 'hold on', chips: [], mode: 'followup' });
      await fake.waitRequests(1);
      host.send({ type: 'commands', id: 7 });
      await d.waitFor(() => host.posted.some((p) => p.msg.type === 'commands'), 'the commands');
      expect((host.posted.find((p) => p.msg.type === 'commands')!.msg as any).commands).toEqual([{ name: 'review', description: 'Review a file', source: 'project', argumentHint: 'PATH' }]);
      host.send({ type: 'send', text: '/review a.py', chips: [], mode: 'followup' });
      await d.waitFor(() => queueOf(host.panel.model).length === 1, 'queued');
      const q = queueOf(host.panel.model)[0];
      expect(q.text).toBe('/review a.py');
      expect(textOf(q.message.content)).toBe('Review a.py now.');
      host.send({ type: 'inboxReplace', messageId: q.message.id, text: '/review b.py' });
      await d.waitFor(() => queueOf(host.panel.model)[0]?.text === '/review b.py', 'replaced');
      expect(textOf(queueOf(host.panel.model)[0].message.content)).toBe('Review b.py now.');
      g.open();
      await d.waitFor(() => host.panel.model.items.filter((i) => i.kind === 'turnEnd').length === 2, 'both turns');
      expect(JSON.stringify(fake.requests[1].body.messages)).toContain('Review b.py now.');
      host.panel.dispose();
    } finally {
      mockWorkspace.workspaceFolders = folders;
    }
  });

  it('@ offers the workspace\'s uncommitted changes as a "git diff" row; its chip sends the diff as it is at send time', async () => {
    const folders = mockWorkspace.workspaceFolders;
    mockWorkspace.workspaceFolders = [{ uri: vscode.Uri.file(d.root), name: 'work' }] as any;
    try {
      const g = (...args: string[]) => execFileSync('git', ['-c', 'user.email=t@t', '-c', 'user.name=t', ...args], { cwd: d.root, env: { ...process.env, GIT_CONFIG_GLOBAL: '/dev/null' } });
      g('init', '-q');
      writeFileSync(join(d.root, 'calc.py'), 'rate = 1\n');
      g('add', 'calc.py');
      g('commit', '-q', '-m', 'calc');
      const host = fakeHost();
      host.send({ type: 'ready' });
      host.send({ type: 'mentions', id: 1, query: 'git' });
      await d.waitFor(() => host.posted.some((p) => p.msg.type === 'mentions'), 'the rows');
      expect((host.posted.find((p) => p.msg.type === 'mentions')!.msg as any).items.filter((i: any) => i.kind === 'changes')).toEqual([]); // nothing changed
      writeFileSync(join(d.root, 'calc.py'), 'rate = 2\n');
      host.send({ type: 'mentions', id: 2, query: 'git' });
      await d.waitFor(() => host.posted.filter((p) => p.msg.type === 'mentions').length === 2, 'the rows again');
      const rows = (host.posted.filter((p) => p.msg.type === 'mentions')[1].msg as any).items.filter((i: any) => i.kind === 'changes');
      expect(rows).toEqual([{ kind: 'changes', label: 'git diff', detail: 'uncommitted: 1 file, +1 −1',
        chips: [{ kind: 'gitDiff', uri: vscode.Uri.file(d.root).toString(), label: 'git diff' }] }]);
      writeFileSync(join(d.root, 'calc.py'), 'rate = 3\n'); // changed again after the pick: the send carries this
      fake.script(textReply('seen'));
      host.send({ type: 'send', text: 'review my changes', chips: rows[0].chips, mode: 'followup' });
      await d.waitFor(() => host.panel.model.items.some((i) => i.kind === 'turnEnd') && host.panel.model.status === 'idle', 'the turn');
      const sent = JSON.stringify(fake.requests[0].body.messages);
      expect(sent).toContain(`Uncommitted changes in ${d.root} (git diff HEAD):`);
      expect(sent).toContain('-rate = 1\\n+rate = 3');
      const line = host.panel.model.items.find((i) => i.kind === 'user' && i.message.source.kind === 'editor');
      expect(line?.kind === 'user' && (line.message.source as any).contextKind).toBe('gitDiff');
      host.panel.dispose();
    } finally {
      mockWorkspace.workspaceFolders = folders;
    }
  });

  it('@ offers the active terminal\'s last command; its chip sends the command, its output and its exit code', async () => {
    // The window's shell-integration events as VS Code 1.93+ fires them (the recorder subscribes when the panel is made).
    const win = vscode.window as any;
    const start = new vscode.EventEmitter<any>();
    const end = new vscode.EventEmitter<any>();
    let shown = 0;
    const bash = { name: 'bash', shellIntegration: {}, show: () => { shown++; } };
    Object.assign(win, { onDidStartTerminalShellExecution: start.event, onDidEndTerminalShellExecution: end.event, activeTerminal: bash });
    try {
      const host = fakeHost();
      host.send({ type: 'ready' });
      const execution = { commandLine: { value: 'echo term36-marker; false' }, cwd: vscode.Uri.file(d.root), async *read() { yield '\x1b]633;C\x07\x1b[1mterm36-marker\x1b[0m\r\n'; } };
      start.fire({ terminal: bash, execution });
      await new Promise((r) => setTimeout(r, 10));
      end.fire({ terminal: bash, execution, exitCode: 1 });
      host.send({ type: 'mentions', id: 1, query: 'term' });
      await d.waitFor(() => host.posted.some((p) => p.msg.type === 'mentions'), 'the rows');
      const rows = (host.posted.find((p) => p.msg.type === 'mentions')!.msg as any).items.filter((i: any) => i.kind === 'terminal');
      expect(rows.map((r: any) => r.label)).toEqual(['exit 1 · 1 line · `echo term36-marker; false`']);
      host.send({ type: 'openFile', uri: rows[0].chips[0].uri });
      await d.waitFor(() => shown === 1, 'the terminal shown');
      fake.script(textReply('seen'));
      host.send({ type: 'send', text: 'why did it fail?', chips: rows[0].chips, mode: 'followup' });
      await d.waitFor(() => host.panel.model.items.some((i) => i.kind === 'turnEnd') && host.panel.model.status === 'idle', 'the turn');
      const users = (fake.requests[0].body.messages as any[]).filter((m) => m.role === 'user').map((m) => m.content);
      expect(users).toContain(`A command in the terminal "bash" (in ${d.root}), exit code 1:\n\`\`\`console\n$ echo term36-marker; false\nterm36-marker\n\`\`\``);
      const line = host.panel.model.items.find((i) => i.kind === 'user' && i.message.source.kind === 'editor');
      expect(line?.kind === 'user' && (line.message.source as any).contextKind).toBe('terminal');
      host.panel.dispose();
    } finally {
      delete win.onDidStartTerminalShellExecution;
      delete win.onDidEndTerminalShellExecution;
      delete win.activeTerminal;
    }
  });
});
