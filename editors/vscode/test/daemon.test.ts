// DshClient + the reducer against the REAL daemon process and a fake OpenAI-compatible SSE server.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { emptyModel, queueOf, reduce, reduceAll, SessionModel, statusLabel, assistantText, type Action } from '../src/protocol/reducer';
import { textOf, type AnyEvent, type PermissionRequest } from '../src/protocol/types';
import { gate, textReply, toolReply } from './fakeProvider';
import { realDaemons, tempState, type TestDaemon } from './daemon';
import { daemonSettings } from '../src/daemonSettings';

const real = realDaemons();
const daemon = (dirs?: { state: string; root: string }): Promise<TestDaemon> => real.daemon(dirs);

/** A live model fed by the client's events, as the extension host keeps it. */
function liveModel(d: TestDaemon, sessionId: string): { get: () => SessionModel; dispatch: (a: Action) => void } {
  let m = emptyModel(sessionId);
  d.client.onEvent((e) => { m = reduce(m, { kind: 'event', event: e }); });
  return { get: () => m, dispatch: (a) => { m = reduce(m, a); } };
}

const turnEnds = (d: TestDaemon, s: string) => d.of(s, 'turn/end').map((e) => (e.data as any).reason);
const idle = (d: TestDaemon, s: string) => ((d.of(s, 'agent/status').at(-1)?.data as any)?.status ?? 'idle') === 'idle';

describe('DshClient against the real daemon', () => {
  it('streams a reply into the model: deltas, final text, footer with usage', async () => {
    const d = await daemon();
    real.fake.script(textReply(['Hel', 'lo ', '**world**'], { delayMs: 20 }));
    const { sessionId } = await d.client.newSession({ cwd: d.root });
    const live = liveModel(d, sessionId);
    // Every live delta delivered twice (as after a reattach): its offset lets the reducer drop the copy.
    let doubled = emptyModel(sessionId);
    d.client.onEvent((e) => {
      doubled = reduce(doubled, { kind: 'event', event: e });
      if (e.type === 'assistant/delta') doubled = reduce(doubled, { kind: 'event', event: e });
    });
    const sawPartial: string[] = [];
    d.client.onEvent(() => {
      const a = live.get().items.find((i) => i.kind === 'assistant');
      if (a && a.kind === 'assistant' && !a.done) sawPartial.push(assistantText(a).text);
    });
    const { messageId } = await d.client.followup(sessionId, 'hi there');
    live.dispatch({ kind: 'sent', messageId, via: 'followup' });
    await d.waitFor(() => turnEnds(d, sessionId).length === 1 && idle(d, sessionId), 'turn end');
    const m = live.get();
    expect(sawPartial).toContain('Hel');
    expect(d.of(sessionId, 'assistant/delta').map((e) => (e.data as any).offset)).toEqual([0, 3, 6]);
    expect(doubled.items.map((i) => i.kind === 'assistant' ? assistantText(i).text : i.kind)).toEqual(['user', 'Hello **world**', 'turnEnd']);
    const kinds = m.items.map((i) => i.kind);
    expect(kinds).toEqual(['user', 'assistant', 'turnEnd']);
    const a = m.items[1];
    expect(a.kind === 'assistant' && a.done && a.text).toBe('Hello **world**');
    const end = m.items[2];
    expect(end.kind === 'turnEnd' && end.reason.kind).toBe('completed');
    expect(end.kind === 'turnEnd' && end.usage?.inputTokens).toBe(12);
    expect(m.status).toBe('idle');
    expect(statusLabel(m)).toBe('idle');
    expect(real.fake.requests[0].body.messages.at(-1)).toMatchObject({ role: 'user', content: 'hi there' });
  });

  it('queues a followup while busy, shows it as queued, then runs it as its own turn', async () => {
    const d = await daemon();
    const g = gate();
    real.fake.script(textReply(['first'], { gate: g.promise }), textReply(['second']));
    const { sessionId } = await d.client.newSession({ cwd: d.root });
    const live = liveModel(d, sessionId);
    await d.client.followup(sessionId, 'one');
    await real.fake.waitRequests(1);
    const { messageId } = await d.client.followup(sessionId, 'two');
    live.dispatch({ kind: 'sent', messageId, via: 'followup' });
    await d.waitFor(() => queueOf(live.get()).length === 1, 'queued item');
    expect(queueOf(live.get())[0]).toMatchObject({ label: 'followup', text: 'two', target: 'next-turn' });
    expect(statusLabel(live.get())).toBe('running, queued 1');
    g.open();
    await d.waitFor(() => turnEnds(d, sessionId).length === 2 && idle(d, sessionId), 'two turns');
    const m = live.get();
    expect(queueOf(m)).toEqual([]);
    expect(m.items.filter((i) => i.kind === 'assistant').map((i) => (i as any).text)).toEqual(['first', 'second']);
  });

  it('Stop keeps the queue (cancel keepInbox), Run queue wakes it, Stop and clear discards', async () => {
    const d = await daemon();
    real.fake.script(textReply(['never'], { gate: new Promise(() => {}) }), textReply(['queued ran']), textReply(['x'], { gate: new Promise(() => {}) }));
    const { sessionId } = await d.client.newSession({ cwd: d.root });
    const live = liveModel(d, sessionId);
    await d.client.followup(sessionId, 'slow');
    await real.fake.waitRequests(1);
    await d.client.followup(sessionId, 'later');
    await d.client.cancel(sessionId, true);
    expect(turnEnds(d, sessionId)).toEqual([{ kind: 'aborted', cause: 'user' }]);
    await d.waitFor(() => idle(d, sessionId), 'idle');
    expect(queueOf(live.get()).map((q) => q.text)).toEqual(['later']);
    expect(statusLabel(live.get())).toBe('queued 1');
    expect(await d.client.wake(sessionId)).toEqual({ started: true });
    await d.waitFor(() => turnEnds(d, sessionId).length === 2 && idle(d, sessionId), 'queued turn');
    expect(live.get().items.filter((i) => i.kind === 'assistant').map((i) => (i as any).text)).toContain('queued ran');
    // Stop and clear: a queued item is discarded with the running turn.
    await d.client.followup(sessionId, 'third');
    await real.fake.waitRequests(3);
    await d.client.followup(sessionId, 'dropped');
    await d.waitFor(() => queueOf(live.get()).length === 1, 'queued');
    await d.client.cancel(sessionId, false);
    await d.waitFor(() => idle(d, sessionId), 'idle');
    expect(queueOf(live.get())).toEqual([]);
    expect(await d.client.wake(sessionId)).toEqual({ started: false });
  });

  it('steer enters the running turn at its next step; queue edits replace and remove', async () => {
    const d = await daemon();
    const g = gate();
    real.fake.script(
      { ...toolReply([{ id: 'call_ls', name: 'list_dir', args: { path: '.' } }]), gate: g.promise },
      textReply(['steered']),
    );
    const { sessionId } = await d.client.newSession({ cwd: d.root });
    const live = liveModel(d, sessionId);
    await d.client.followup(sessionId, 'look around');
    await real.fake.waitRequests(1);
    const parked = await d.client.send(sessionId, 'parked prompt', 'next-turn', false);
    const r = await d.client.inboxReplace(sessionId, parked.messageId, 'reworded prompt');
    await d.waitFor(() => queueOf(live.get()).some((q) => q.text === 'reworded prompt'), 'replaced');
    await d.client.inboxRemove(sessionId, r.messageId);
    const s = await d.client.steer(sessionId, 'use the v2 API');
    live.dispatch({ kind: 'sent', messageId: s.messageId, via: 'steer' });
    await d.waitFor(() => queueOf(live.get()).some((q) => q.label === 'steer'), 'steer queued');
    g.open();
    await d.waitFor(() => turnEnds(d, sessionId).length === 1 && idle(d, sessionId), 'turn end');
    expect(d.of(sessionId, 'turn/start')).toHaveLength(1);
    const msgs = real.fake.requests[1].body.messages.map((x: any) => x.content);
    expect(msgs).toContain('use the v2 API');
    const m = live.get();
    const tool = m.items.find((i) => i.kind === 'tool');
    const ls = d.callId(sessionId, 'call_ls');
    expect(ls).not.toBe('call_ls'); // the daemon's own id, never the provider's
    expect(tool).toMatchObject({ kind: 'tool', callId: ls, name: 'list_dir', status: 'ok' });
    expect(d.of(sessionId, 'tool/result')[0].data).toMatchObject({ callId: ls, name: 'list_dir' });
    expect(m.items.map((i) => i.kind)).toEqual(['user', 'tool', 'user', 'assistant', 'turnEnd']);
    expect(queueOf(m)).toEqual([]);
  });

  it('context: a selection injected just before a followup travels with that prompt', async () => {
    const d = await daemon();
    const file = join(d.root, 'app.py');
    writeFileSync(file, 'import os\n\ndef main():\n    return 42\n');
    const { sessionId } = await d.client.newSession({ cwd: d.root });
    const live = liveModel(d, sessionId);
    const c = await d.client.contextAdd({
      sessionId, uri: pathToFileURL(file).href, kind: 'selection', delivery: 'inject',
      range: { start: { line: 2, character: 0 }, end: { line: 4, character: 0 } },
    });
    live.dispatch({ kind: 'sent', messageId: c.messageId, via: 'context' });
    await d.waitFor(() => queueOf(live.get()).length === 1, 'context queued');
    expect(queueOf(live.get())[0]).toMatchObject({ label: 'context', target: 'next-step' });
    expect(real.fake.requests).toHaveLength(0); // an inject never starts a turn
    await d.client.followup(sessionId, 'explain this');
    await d.waitFor(() => turnEnds(d, sessionId).length === 1 && idle(d, sessionId), 'turn end');
    const sent = real.fake.requests[0].body.messages.map((x: any) => x.content).join('\n');
    expect(sent).toContain('def main():');
    expect(sent).toContain('explain this');
    const users = live.get().items.filter((i) => i.kind === 'user').map((i) => (i as any).message.source);
    expect(users.some((s: any) => s.kind === 'editor' && s.contextKind === 'selection')).toBe(true);
  });

  it('permission: the request shows a diff preview; allow applies the edit through workspace/applyEdit', async () => {
    const d = await daemon();
    const file = join(d.root, 'notes.txt');
    writeFileSync(file, 'alpha\nbeta\n');
    real.fake.script(toolReply([{ id: 'call_ed', name: 'edit_file', args: { path: 'notes.txt', old_string: 'beta', new_string: 'gamma' } }]), textReply('done'));
    const { sessionId } = await d.client.newSession({ cwd: d.root });
    const live = liveModel(d, sessionId);
    const seen: PermissionRequest[] = [];
    d.client.setPermissionHandler(async (req) => {
      seen.push(req);
      live.dispatch({ kind: 'permission', request: req });
      expect(statusLabel(live.get())).toBe('awaiting permission');
      live.dispatch({ kind: 'permissionDone', callId: req.callId });
      return 'allow-once';
    });
    await d.client.followup(sessionId, 'fix the notes');
    await d.waitFor(() => turnEnds(d, sessionId).length === 1 && idle(d, sessionId), 'turn end');
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({ tool: 'edit_file', callId: d.callId(sessionId, 'call_ed') });
    expect(seen[0].preview?.diff).toContain('+gamma');
    expect(d.applied, JSON.stringify(d.of(sessionId, 'tool/result')) + d.stderr.join('')).toHaveLength(1);
    expect(JSON.stringify(d.applied[0])).toContain('gamma');
    const tool = live.get().items.find((i) => i.kind === 'tool');
    expect(tool).toMatchObject({ status: 'ok', name: 'edit_file' });
    expect((tool as any).meta.diff).toContain('+gamma');
  });

  it('a rejected permission gives the model an error result and the turn goes on', async () => {
    const d = await daemon();
    real.fake.script(toolReply([{ id: 'call_rc', name: 'run_command', args: { command: 'echo hi' } }]), textReply('ok then'));
    const { sessionId } = await d.client.newSession({ cwd: d.root });
    const live = liveModel(d, sessionId);
    let preview: unknown;
    d.client.setPermissionHandler(async (req) => { preview = req.preview; return 'reject'; });
    await d.client.followup(sessionId, 'run it');
    await d.waitFor(() => turnEnds(d, sessionId).length === 1 && idle(d, sessionId), 'turn end');
    expect(preview).toMatchObject({ command: 'echo hi' });
    const tool = live.get().items.find((i) => i.kind === 'tool');
    expect(tool).toMatchObject({ status: 'error', name: 'run_command' });
    expect((tool as any).error.code).toBe('REJECTED');
  });

  it('restart + reattach: the queue survives, afterSeq continues with no gap and no duplicate', async () => {
    const dirs = tempState();
    const d1 = await daemon(dirs);
    real.fake.script(textReply('first reply'), textReply(['slow'], { gate: new Promise(() => {}) }));
    const { sessionId } = await d1.client.newSession({ cwd: d1.root });
    const live = liveModel(d1, sessionId);
    await d1.client.followup(sessionId, 'one');
    await d1.waitFor(() => turnEnds(d1, sessionId).length === 1 && idle(d1, sessionId), 'turn 1');
    await d1.client.followup(sessionId, 'two');
    await real.fake.waitRequests(2);
    await d1.client.followup(sessionId, 'queued across restart');
    await d1.waitFor(() => queueOf(live.get()).length === 1, 'queued');
    await d1.stop();
    const before = live.get();

    // The extension host reattaches its existing model after afterSeq.
    const d2 = await daemon(dirs);
    let m = before;
    const seqs: number[] = [];
    d2.client.onEvent((e: AnyEvent) => { if (e.seq !== undefined) seqs.push(e.seq); m = reduce(m, { kind: 'event', event: e }); });
    const res = await d2.client.attach(sessionId, before.lastSeq);
    m = reduce(m, { kind: 'attached', result: res });
    expect(seqs.every((s) => s > before.lastSeq)).toBe(true);
    expect(m.lastSeq).toBe(res.lastSeq);
    expect(m.lastTurnEnd).toMatchObject({ kind: 'aborted', cause: 'shutdown' });
    expect(queueOf(m).map((q) => q.text)).toEqual(['queued across restart']);
    real.fake.script(textReply('after restart'));
    expect(await d2.client.wake(sessionId)).toEqual({ started: true });
    await d2.waitFor(() => turnEnds(d2, sessionId).length === 1 && idle(d2, sessionId), 'turn after restart');
    // A fresh window (no model) replays everything and reaches the same transcript.
    const d3conn = await daemon(tempState()); // unrelated daemon: proves nothing leaks across state dirs
    await expect(d3conn.client.attach(sessionId)).rejects.toMatchObject({ data: { code: 'unknown_session' } });
    const replayed: AnyEvent[] = [];
    const sub = d2.client.onEvent((e) => replayed.push(e));
    const again = await d2.client.attach(sessionId);
    sub.dispose();
    let fresh = reduceAll(emptyModel(sessionId), replayed.map((event) => ({ kind: 'event' as const, event })));
    fresh = reduce(fresh, { kind: 'attached', result: again });
    const strip = (x: SessionModel) => x.items.map((i) => ({ ...i, rev: 0 }));
    expect(strip(fresh)).toEqual(strip(m));
    expect(fresh.items.filter((i) => i.kind === 'assistant').map((i) => [(i as any).text, (i as any).interrupted])).toEqual([['first reply', false], ['slow', true], ['after restart', false]]);
    expect(fresh.lastSeq).toBe(m.lastSeq);
  });

  it('a second window attaches read-only while another daemon drives the session, then drives it once that one exits', async () => {
    const dirs = tempState();
    const d1 = await daemon(dirs);
    const { sessionId } = await d1.client.newSession({ cwd: d1.root });
    await d1.client.followup(sessionId, 'from window one');
    await d1.waitFor(() => turnEnds(d1, sessionId).length === 1 && idle(d1, sessionId), 'turn 1');
    const d2 = await daemon(dirs);
    let m = emptyModel(sessionId);
    d2.client.onEvent((e) => { m = reduce(m, { kind: 'event', event: e }); });
    const ro = await d2.client.attach(sessionId);
    m = reduce(m, { kind: 'attached', result: ro });
    expect(ro.readOnly).toBe(true);
    expect(m.readOnly).toBe(true);
    expect(m.items.filter((i) => i.kind === 'assistant')).toHaveLength(1);
    await expect(d2.client.followup(sessionId, 'too early')).rejects.toMatchObject({ data: { code: 'session_busy' } });
    await d1.stop();
    // What the panel does every 2 s while read-only: attach again after its last seq.
    const rw = await d2.client.attach(sessionId, m.lastSeq);
    m = reduce(m, { kind: 'attached', result: rw });
    expect(rw.readOnly ?? false).toBe(false);
    expect(m.readOnly).toBe(false);
    real.fake.script(textReply('now from window two'));
    await d2.client.followup(sessionId, 'from window two');
    await d2.waitFor(() => turnEnds(d2, sessionId).length === 2 && idle(d2, sessionId), 'turn 2'); // turn 1's end came with the replay
    expect(m.items.filter((i) => i.kind === 'assistant').map((i) => (i as any).text)).toEqual(['Hello there!', 'now from window two']);
  });

  it('a prompt queued behind a running turn carries its selection into its own turn (context on the followup), not the running one', async () => {
    const d = await daemon();
    expect(d.client.features?.sendContext).toBe(true);
    const file = join(d.root, 'app.py');
    writeFileSync(file, 'import os\n\ndef main():\n    return 42\n');
    const g = gate();
    real.fake.script(
      { ...toolReply([{ id: 'call_ls', name: 'list_dir', args: { path: '.' } }]), gate: g.promise },
      textReply('the running turn goes on'),
      textReply('it returns 42'),
    );
    const { sessionId } = await d.client.newSession({ cwd: d.root });
    const live = liveModel(d, sessionId);
    await d.client.followup(sessionId, 'look around');
    await real.fake.waitRequests(1);
    const selection = { uri: pathToFileURL(file).href, kind: 'selection' as const, range: { start: { line: 2, character: 0 }, end: { line: 4, character: 0 } } };
    const r = await d.client.followup(sessionId, 'explain this', [selection]);
    expect(r.contextIds).toHaveLength(1);
    // The selection is read now: a later change to the file does not reach the queued prompt.
    writeFileSync(file, 'import os\n\ndef changed():\n    return 0\n');
    await d.waitFor(() => queueOf(live.get()).length === 1, 'queued');
    const q = queueOf(live.get())[0]; // no 'sent' action: the label and the context come from the daemon
    expect(q).toMatchObject({ label: 'followup', text: 'explain this', target: 'next-turn' });
    expect(q.context.map((c) => [c.id, (c.source as any).contextKind])).toEqual([[r.contextIds![0], 'selection']]);
    const listed = await d.client.inboxList(sessionId);
    expect(listed.nextTurn[0]).toMatchObject({ id: r.messageId, verb: 'followup', wakeup: true, target: 'next-turn' });
    expect(typeof listed.nextTurn[0].queuedAt).toBe('number');
    // Editing the text keeps the attachment (it is not sent again).
    const re = await d.client.inboxReplace(sessionId, r.messageId, 'explain this, briefly');
    await d.waitFor(() => queueOf(live.get())[0]?.text === 'explain this, briefly', 'replaced');
    expect(queueOf(live.get())[0].context.map((c) => c.id)).toEqual(r.contextIds);
    expect(queueOf(live.get())[0].message.id).toBe(re.messageId);
    g.open();
    await d.waitFor(() => turnEnds(d, sessionId).length === 2 && idle(d, sessionId), 'two turns');
    const sent = (i: number) => real.fake.requests[i].body.messages.map((x: any) => String(x.content));
    expect(real.fake.requests).toHaveLength(3);
    expect(sent(1).join('\n')).not.toContain('def main'); // the running turn's next step: no selection
    const third = sent(2);
    expect(third.at(-1)).toBe('explain this, briefly');
    expect(third.at(-2)).toContain('def main():');
    expect(third.join('\n')).not.toContain('def changed');
    const users = live.get().items.filter((i) => i.kind === 'user').map((i) => (i as any).message.source.kind);
    expect(users).toEqual(['user', 'editor', 'user']);
    expect(queueOf(live.get())).toEqual([]);
  });

  it('queued steer and inject are labelled from the verb the daemon reports, also after a fresh attach', async () => {
    const d = await daemon();
    real.fake.script(textReply(['busy'], { gate: new Promise(() => {}) }));
    const { sessionId } = await d.client.newSession({ cwd: d.root });
    const live = liveModel(d, sessionId);
    await d.client.followup(sessionId, 'slow');
    await real.fake.waitRequests(1);
    await d.client.steer(sessionId, 'use v2');
    await d.client.inject(sessionId, 'a note');
    await d.client.send(sessionId, 'parked', 'next-turn', false);
    await d.waitFor(() => queueOf(live.get()).length === 3, 'queued');
    const labels = (m: SessionModel) => queueOf(m).map((q) => [q.text, q.label]);
    expect(labels(live.get())).toEqual([['use v2', 'steer'], ['a note', 'inject'], ['parked', 'send']]);
    expect(d.of(sessionId, 'agent/inbox/inserted').map((e) => [(e.data as any).message.verb, (e.data as any).index])).toEqual([
      ['followup', 0], ['steer', 0], ['inject', 1], ['send', 0],
    ]);
    const fresh = reduce(emptyModel(sessionId), { kind: 'attached', result: await d.client.attach(sessionId) });
    expect(labels(fresh)).toEqual(labels(live.get()));
    await d.client.cancel(sessionId, false);
  });

  it('a read-only attach follows the driver live and turns writable (session/lease) when it detaches', async () => {
    const dirs = tempState();
    const d1 = await daemon(dirs);
    const { sessionId } = await d1.client.newSession({ cwd: d1.root });
    const d2 = await daemon(dirs);
    expect(d2.client.features?.liveReadOnly).toBe(true);
    let m = emptyModel(sessionId);
    d2.client.onEvent((e) => { m = reduce(m, { kind: 'event', event: e }); });
    const ro = await d2.client.attach(sessionId);
    m = reduce(m, { kind: 'attached', result: ro });
    expect(m.readOnly).toBe(true);
    real.fake.script(textReply('driven by window one'));
    await d1.client.followup(sessionId, 'from window one');
    await d2.waitFor(() => m.items.some((i) => i.kind === 'turnEnd'), 'the turn, live in the read-only window');
    await d1.waitFor(() => idle(d1, sessionId), 'window one idle');
    await d1.client.send(sessionId, 'parked in window one', 'next-turn', false);
    await d2.waitFor(() => m.inbox.nextTurn.length === 1, 'the parked item, live');
    expect(m.items.filter((i) => i.kind === 'assistant').map((i) => (i as any).text)).toEqual(['driven by window one']);
    const listed = await d2.client.inboxList(sessionId); // works read-only
    expect(listed.nextTurn.map((x) => [textOf(x.content), x.verb])).toEqual([['parked in window one', 'send']]);
    await d1.client.detach(sessionId);
    await d2.waitFor(() => !m.readOnly, 'session/lease: writable');
    expect(d2.of(sessionId, 'session/lease').at(-1)?.data).toMatchObject({ holder: null, readOnly: false });
    // Window two drives it now: its prompt wakes the session, which runs the parked item first.
    await d2.client.followup(sessionId, 'from window two');
    await d2.waitFor(() => m.items.filter((i) => i.kind === 'turnEnd').length === 3 && idle(d2, sessionId), 'turns 2 and 3 from window two');
    expect(m.items.filter((i) => i.kind === 'user').map((i) => textOf((i as any).message.content))).toEqual(['from window one', 'parked in window one', 'from window two']);
    expect(queueOf(m)).toEqual([]);
  });

  it('changed provider settings apply to the next model request without a restart, keeping the key', async () => {
    const d = await daemon();
    expect(d.client.features?.configurationChange).toBe(true);
    const { sessionId } = await d.client.newSession({ cwd: d.root });
    await d.client.followup(sessionId, 'before');
    await d.waitFor(() => turnEnds(d, sessionId).length === 1 && idle(d, sessionId), 'turn 1');
    // Flat keys, as the extension sends them (like its initializationOptions).
    d.client.changeConfiguration({ model: 'changed-model', baseUrl: real.fake.baseUrl, thinking: false });
    await d.client.followup(sessionId, 'after');
    await d.waitFor(() => turnEnds(d, sessionId).length === 2 && idle(d, sessionId), 'turn 2');
    expect(real.fake.requests.map((r) => r.body.model)).toEqual([real.fake.requests[0].body.model, 'changed-model']);
    expect(real.fake.requests[0].body.model).not.toBe('changed-model');
    expect(real.fake.requests[1].authorization).toBe('Bearer sk-test-0000');
  });
  it('the sandbox mode setting reaches the daemon live (a new sandbox/status); each change carries it, so a provider change keeps it', async () => {
    const d = await daemon();
    const { sessionId } = await d.client.newSession({ cwd: d.root });
    const status = () => d.of(sessionId, 'sandbox/status').at(-1)?.data as any;
    const provider = (model: string) => ({ model, baseUrl: real.fake.baseUrl, thinking: false });
    await d.waitFor(() => status()?.configuredMode === 'full-access', 'the status of config.json\'s mode');
    d.client.changeConfiguration(daemonSettings(provider('m1'), 'read-only'));
    await d.waitFor(() => status()?.configuredMode === 'read-only', 'read-only applied');
    expect(status()).toMatchObject({ mode: 'read-only', confined: expect.any(Boolean), level: expect.any(String) });
    // The next change (the model) is merged over the options given at start, not over the last
    // change: it carries the mode, which stays.
    d.client.changeConfiguration(daemonSettings(provider('m2'), 'read-only'));
    await d.client.followup(sessionId, 'hi');
    await d.waitFor(() => turnEnds(d, sessionId).length === 1 && idle(d, sessionId), 'a turn');
    expect(real.fake.requests.at(-1)!.body.model).toBe('m2');
    expect(status().configuredMode).toBe('read-only');
    // Without it (a provider change alone) the daemon goes back to the mode of the start.
    d.client.changeConfiguration(daemonSettings(provider('m3'), ''));
    await d.waitFor(() => status()?.configuredMode === 'full-access', 'the mode of the start again');
  });

  it('daemonSettings: flat provider keys, and tools.sandbox.mode only for a mode', () => {
    expect(daemonSettings({ model: 'x' }, 'workspace-write')).toEqual({ model: 'x', tools: { sandbox: { mode: 'workspace-write' } } });
    expect(daemonSettings({ model: 'x' }, '')).toEqual({ model: 'x' });
    expect(daemonSettings({}, 'everything')).toEqual({});
  });
});
