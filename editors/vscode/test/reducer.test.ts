import { describe, expect, it } from 'vitest';
import { emptyModel, queueOf, reduce, reduceAll, assistantText, typedText, PROCESSES_EXITED, type Action, type Item } from '../src/protocol/reducer';
import type { AnyEvent, TranscriptPage } from '../src/protocol/types';

const S = 's1';
const ev = (type: string, data: unknown, seq?: number): Action => ({ kind: 'event', event: { sessionId: S, type, data, ...(seq === undefined ? {} : { seq }) } as AnyEvent });
const delta = (text: string) => ev('assistant/delta', { turn: 1, step: 1, delta: { type: 'text', text } });
const at = (offset: number, text: string, type: 'text' | 'reasoning' = 'text') => ev('assistant/delta', { turn: 1, step: 1, offset, delta: { type, text } });
const shown = (m: ReturnType<typeof emptyModel>) => { const a = m.items[0]; return a.kind === 'assistant' ? assistantText(a) : undefined; };
const chunk = (seq: number, ...texts: string[]) => ev('assistant/chunk', { turn: 1, step: 1, deltas: texts.map((text) => ({ type: 'text', text })) }, seq);

describe('reducer', () => {
  it('live deltas and durable chunks never double the text', () => {
    const m = reduceAll(emptyModel(S), [ev('turn/start', { turn: 1 }, 0), delta('ab'), delta('cd'), chunk(1, 'ab', 'cd'), delta('ef')]);
    const a = m.items[0];
    expect(a.kind === 'assistant' && assistantText(a).text).toBe('abcdef');
  });

  it('a chunk covering deltas sent before this connection attached keeps the text whole', () => {
    const m = reduceAll(emptyModel(S), [delta('cd'), chunk(1, 'ab', 'cd'), delta('e')]);
    const a = m.items[0];
    expect(a.kind === 'assistant' && assistantText(a).text).toBe('abcde');
  });

  it('a replayed durable event at or below lastSeq is ignored', () => {
    const user = { id: 'm1', role: 'user', content: [{ type: 'text', text: 'hi' }], source: { kind: 'user' } };
    const m = reduceAll(emptyModel(S), [ev('user/message', user, 3), ev('user/message', user, 3), chunk(2, 'x')]);
    expect(m.items.map((i) => i.kind)).toEqual(['user']);
    expect(m.lastSeq).toBe(3);
  });

  it('events of another session are ignored', () => {
    const m = reduceAll(emptyModel(S), [{ kind: 'event', event: { sessionId: 'other', type: 'turn/start', data: { turn: 1 }, seq: 0 } }]);
    expect(m.lastSeq).toBe(-1);
  });

  it('splices keep the queue; a claim removes the head', () => {
    const msg = (id: string) => ({ id, role: 'user', content: [{ type: 'text', text: id }], source: { kind: 'user' } });
    const m = reduceAll(emptyModel(S), [
      ev('agent/inbox/spliced', { target: 'next-turn', start: 0, inserted: [msg('a')] }, 0),
      ev('agent/inbox/spliced', { target: 'next-turn', start: 1, inserted: [msg('b')] }, 1),
      ev('agent/inbox/spliced', { target: 'next-turn', start: 0, inserted: [], removedCount: 1, removedIds: ['a'] }, 2),
    ]);
    expect(m.inbox.nextTurn.map((x) => x.id)).toEqual(['b']);
  });

  it('delta offsets: a duplicate after a reattach is dropped, an overlap appends only what is new', () => {
    const m = reduceAll(emptyModel(S), [
      at(0, 'ab'), at(2, 'cd'),
      at(0, 'ab'), at(2, 'cd'), // the same deltas again (a reattach)
      at(3, 'de'), // overlaps one unit
      at(0, 'th', 'reasoning'), at(0, 'th', 'reasoning'), at(2, 'ink', 'reasoning'), // blocks count apart
    ]);
    expect(shown(m)).toEqual({ text: 'abcde', reasoning: 'think' });
  });

  it('delta offsets: deltas already covered by a replayed chunk are dropped; a gap is filled by the next chunk', () => {
    const covered = reduceAll(emptyModel(S), [chunk(1, 'ab', 'cd'), at(2, 'cd'), at(4, 'e')]);
    expect(shown(covered)?.text).toBe('abcde');
    // Deltas after a gap (sent before this connection subscribed, not yet in a chunk) wait for it.
    const gap = reduceAll(emptyModel(S), [chunk(1, 'ab'), at(4, 'ef'), at(6, 'g')]);
    expect(shown(gap)?.text).toBe('abefg');
    const filled = reduceAll(gap, [chunk(2, 'cd', 'e')]);
    expect(shown(filled)?.text).toBe('abcdefg');
    const after = reduceAll(filled, [chunk(3, 'fg'), at(7, 'h')]);
    expect(shown(after)?.text).toBe('abcdefgh');
    const a = after.items[0];
    expect(a.kind === 'assistant' && [a.text, a.liveText]).toEqual(['abcdefg', 'h']);
  });

  it('offsets count UTF-16 code units, as JavaScript strings do', () => {
    const m = reduceAll(emptyModel(S), [at(0, 'c\u{1F600}'), at(3, 'd'), at(1, '\u{1F600}d')]);
    expect(shown(m)?.text).toBe('c\u{1F600}d');
  });

  it('tool/result names its call at top level: a card without its tool/call still gets the name', () => {
    const result = { id: 'r1', role: 'user', content: [{ type: 'tool-result', toolCallId: 'c9', content: [{ type: 'text', text: 'ok' }] }], source: { kind: 'tool', callId: 'c9' } };
    const m = reduceAll(emptyModel(S), [ev('tool/result', { turn: 1, step: 1, callId: 'c9', name: 'grep', message: result }, 0)]);
    expect(m.items[0]).toMatchObject({ kind: 'tool', callId: 'c9', name: 'grep', status: 'ok', result: 'ok' });
  });

  it('queue labels come from the item verb; attached context is listed with the item', () => {
    const ctx = { id: 'c1', role: 'user', content: [{ type: 'text', text: 'Selection in /w/a.py, lines 1-2:' }], source: { kind: 'editor', uri: 'file:///w/a.py', contextKind: 'selection' } };
    const item = (id: string, verb?: string, context?: unknown[]) => ({ id, role: 'user', content: [{ type: 'text', text: id }], source: { kind: 'user' }, ...(verb ? { verb } : {}), ...(context ? { context } : {}) });
    const m = reduceAll(emptyModel(S), [
      ev('agent/inbox/spliced', { target: 'next-step', start: 0, inserted: [item('s', 'steer'), item('i', 'inject'), item('old')] }, 0),
      ev('agent/inbox/spliced', { target: 'next-turn', start: 0, inserted: [item('f', 'followup', [ctx]), item('p', 'send')] }, 1),
      { kind: 'sent', messageId: 'i', via: 'steer' }, // what this window thought it sent loses to the verb
    ]);
    expect(queueOf(m).map((q) => [q.message.id, q.label, q.context.map((c) => c.id)])).toEqual([
      ['s', 'steer', []], ['i', 'inject', []], ['old', 'steer', []], ['f', 'followup', ['c1']], ['p', 'send', []],
    ]);
  });

  it('the title: from the attach reply, then live from session/title; an older daemon has none', () => {
    const attached = (title?: string): Action => ({ kind: 'attached', result: { sessionId: S, status: 'idle', lastSeq: 4, inbox: { nextTurn: [], nextStep: [] }, ...(title === undefined ? {} : { title }) } });
    const m = reduceAll(emptyModel(S), [attached('Fix the flaky test')]);
    expect(m.title).toBe('Fix the flaky test');
    expect(reduceAll(m, [ev('session/title', { title: 'Flaky test, take two' }, 5)]).title).toBe('Flaky test, take two');
    expect(reduceAll(m, [ev('session/title', { title: 'replayed, older' }, 3)]).title).toBe('Fix the flaky test'); // seq ≤ lastSeq
    expect(reduceAll(emptyModel(S), [attached()]).title).toBeUndefined(); // older daemon: nothing to show
    expect(reduceAll(emptyModel(S), [attached('')]).title).toBeUndefined(); // no title yet
    expect(reduceAll(emptyModel(S), [attached(''), ev('session/title', { title: 'first prompt' }, 5)]).title).toBe('first prompt');
    expect(reduceAll(m, [{ kind: 'reset', sessionId: 'other' }]).title).toBeUndefined();
  });

  it("a permission request of another session does not become a card in this one", () => {
    const req = (sessionId: string) => ({ sessionId, callId: 'c1', tool: 'edit_file', title: 'Edit', arguments: {} });
    const m = reduceAll(emptyModel(S), [{ kind: 'permission', request: req('other') }]);
    expect(m.permissions).toEqual([]);
    expect(reduceAll(m, [{ kind: 'permission', request: req(S) }]).permissions.map((p) => p.callId)).toEqual(['c1']);
  });

  it('a streamed delta changes its item in place: no copy of the item list, however long the session', () => {
    const turns: Action[] = [];
    for (let t = 1; t <= 300; t++) turns.push(ev('turn/start', { turn: t }, t * 3), ev('user/message', { id: `u${t}`, role: 'user', content: [{ type: 'text', text: 'q' }], source: { kind: 'user' } }, t * 3 + 1), ev('turn/end', { turn: t, reason: { kind: 'completed' } }, t * 3 + 2));
    const m0 = reduceAll(emptyModel(S), [...turns, ev('turn/start', { turn: 301 }, 1000), ev('assistant/delta', { turn: 301, step: 1, offset: 0, delta: { type: 'text', text: 'a' } })]);
    const items = m0.items;
    const before = items[items.length - 1];
    const m1 = reduce(m0, ev('assistant/delta', { turn: 301, step: 1, offset: 1, delta: { type: 'text', text: 'b' } }));
    expect(m1.items).toBe(items); // the same array
    expect(m1.items[items.length - 1]).not.toBe(before); // the item is a new object with a new rev
    expect(m1.items[items.length - 1].rev).toBeGreaterThan(before.rev);
    expect(assistantText(m1.items[items.length - 1] as any).text).toBe('ab');
    expect(m1.items[0]).toBe(m0.items[0]); // the others untouched
  });

  it('retries fold into one line per step, updated in place; the answer after it; failed retries told by the error block', () => {
    const err = { code: 'SERVER', message: '500', status: 500 };
    const retry = (n: number, seq: number) => ev('llm/retry', { turn: 1, step: 1, retry: n, delayMs: 500 * n, error: err }, seq);
    let m = reduceAll(emptyModel(S), [ev('turn/start', { turn: 1 }, 0), retry(1, 1), retry(2, 2), retry(3, 3)]);
    expect(m.items.map((i) => [i.id, i.kind])).toEqual([['r:1:1', 'retry']]);
    expect((m.items[0] as any).retry).toMatchObject({ retry: 3, delayMs: 1500, state: 'waiting' });
    m = reduceAll(m, [delta('ok')]);
    expect(m.items.map((i) => i.id)).toEqual(['r:1:1', 'a:1:1']);
    expect((m.items[0] as any).retry.state).toBe('recovered');
    // Text that streamed before the failure: the retry shows on the answer, whose text restarts.
    let p = reduceAll(emptyModel(S), [ev('turn/start', { turn: 1 }, 0), at(0, 'partial answ'), retry(1, 1), ev('llm/request', { turn: 1, step: 1, attempt: 2 }, 2)]);
    expect(p.items.map((i) => i.id)).toEqual(['a:1:1']);
    expect(shown(p)?.text).toBe('');
    expect((p.items[0] as any).retry.state).toBe('waiting');
    p = reduceAll(p, [at(0, 'a whole answer')]);
    expect(shown(p)?.text).toBe('a whole answer');
    expect((p.items[0] as any).retry.state).toBe('recovered');
    // Five retries, then the turn fails: no separate notice, the error block counts the retries.
    const f = reduceAll(emptyModel(S), [ev('turn/start', { turn: 1 }, 0), ...[1, 2, 3, 4, 5].map((n) => retry(n, n)),
      ev('agent/error', { turn: 1, step: 1, error: err }), ev('turn/end', { turn: 1, reason: { kind: 'error', error: err } }, 6)]);
    const visible = f.items.filter((i: Item) => !(i.kind === 'notice' && i.folded) && !(i.kind === 'retry' && i.retry.state === 'failed'));
    expect(visible.map((i) => i.kind)).toEqual(['turnEnd']);
    expect(f.items.find((i) => i.kind === 'turnEnd')).toMatchObject({ retries: 5 });
    // A compaction's retries are not a step of the transcript.
    expect(reduceAll(emptyModel(S), [ev('llm/retry', { turn: 1, step: 1, retry: 1, delayMs: 5, error: err, purpose: 'compaction' }, 0)]).items).toEqual([]);
  });

  it('an error that does not end the turn in error (e.g. another window took over) stays a block of its own', () => {
    const m = reduceAll(emptyModel(S), [ev('turn/start', { turn: 1 }, 0), ev('agent/error', { turn: 1, step: null, error: { code: 'LEASE_LOST', message: 'taken over' } }),
      ev('turn/end', { turn: 1, reason: { kind: 'aborted', cause: 'shutdown' } }, 1)]);
    expect(m.items.map((i) => [i.kind, (i as any).folded ?? false])).toEqual([['notice', false], ['turnEnd', false]]);
  });

  it('prompts are tagged: steered in, queued behind a running turn, parked; not the one that started a turn', () => {
    const msg = (id: string) => ({ id, role: 'user', content: [{ type: 'text', text: id }], source: { kind: 'user' } });
    const m = reduceAll(emptyModel(S), [
      ev('agent/inbox/spliced', { target: 'next-turn', start: 0, inserted: [{ ...msg('p1'), verb: 'followup' }] }, 0),
      ev('turn/start', { turn: 1 }, 1),
      ev('agent/inbox/spliced', { target: 'next-turn', start: 0, inserted: [], removedCount: 1 }, 2),
      ev('user/message', msg('p1'), 3),
      ev('agent/inbox/spliced', { target: 'next-step', start: 0, inserted: [{ ...msg('s1'), verb: 'steer' }] }, 4),
      ev('agent/inbox/spliced', { target: 'next-turn', start: 0, inserted: [{ ...msg('p2'), verb: 'followup' }] }, 5),
      ev('agent/inbox/spliced', { target: 'next-step', start: 0, inserted: [], removedCount: 1 }, 6),
      ev('user/message', msg('s1'), 7),
      ev('turn/end', { turn: 1, reason: { kind: 'completed' } }, 8),
      ev('agent/inbox/spliced', { target: 'next-turn', start: 1, inserted: [{ ...msg('p3'), verb: 'send', wakeup: false }] }, 9),
      ev('turn/start', { turn: 2 }, 10),
      ev('agent/inbox/spliced', { target: 'next-turn', start: 0, inserted: [], removedCount: 1 }, 11),
      ev('user/message', msg('p2'), 12),
      ev('turn/end', { turn: 2, reason: { kind: 'completed' } }, 13),
      ev('turn/start', { turn: 3 }, 14),
      ev('agent/inbox/spliced', { target: 'next-turn', start: 0, inserted: [], removedCount: 1 }, 15),
      ev('user/message', msg('p3'), 16),
    ]);
    expect(m.items.filter((i) => i.kind === 'user').map((i) => [(i as any).message.id, (i as any).tags ?? [], i.turn])).toEqual([
      ['p1', [], 1], ['s1', ['steer'], 1], ['p2', ['queued'], 2], ['p3', ['queued'], 3],
    ]);
    expect(m.claims).toEqual({});
    expect(m.queuedIds).toEqual({});
  });

  it('trim drops the oldest turns; the events after it still update items in place', () => {
    const msg = (id: string) => ({ id, role: 'user', content: [{ type: 'text', text: id }], source: { kind: 'user' } });
    const acts: Action[] = [];
    for (let t = 1; t <= 5; t++) acts.push(ev('turn/start', { turn: t }, t * 10), ev('user/message', msg(`u${t}`), t * 10 + 1), ev('turn/end', { turn: t, reason: { kind: 'completed' } }, t * 10 + 2));
    const d6 = (offset: number, text: string) => ev('assistant/delta', { turn: 6, step: 1, offset, delta: { type: 'text', text } });
    let m = reduceAll(emptyModel(S), [...acts, ev('turn/start', { turn: 6 }, 60), d6(0, 'x')]);
    m = reduceAll(m, [{ kind: 'trim', beforeTurn: 4 }]);
    expect(m.items.map((i) => i.id)).toEqual(['u:u4', 'e:4', 'u:u5', 'e:5', 'a:6:1']);
    expect(m.olderBefore).toBe(4);
    m = reduceAll(m, [d6(1, 'y'), ev('turn/end', { turn: 6, reason: { kind: 'completed' } }, 61)]);
    expect(m.items.map((i) => i.id)).toEqual(['u:u4', 'e:4', 'u:u5', 'e:5', 'a:6:1', 'e:6']);
    expect(assistantText(m.items[4] as any).text).toBe('xy');
  });
  it('a restored checkpoint: the cut turns stay, marked rewound; the files restored are said once, an interrupted restore warns', () => {
    const msg = (id: string) => ({ id, role: 'user', content: [{ type: 'text', text: id }], source: { kind: 'user' } });
    const acts: Action[] = [];
    for (let t = 1; t <= 3; t++) acts.push(ev('turn/start', { turn: t }, t * 10), ev('user/message', msg(`u${t}`), t * 10 + 1), ev('turn/end', { turn: t, reason: { kind: 'completed' } }, t * 10 + 2));
    const m = reduceAll(emptyModel(S), [...acts,
      ev('rewind/files', { rewindId: 'r1', phase: 'started', beforeTurn: 2, conversation: true, plan: [{ path: '/w/app.py', action: 'restore' }] }, 40),
      ev('rewind/files', { rewindId: 'r1', phase: 'done', beforeTurn: 2, restored: ['/w/app.py'], deleted: ['/w/new.md'] }, 41),
      ev('conversation/cut', { beforeTurn: 2 }, 42),
      ev('conversation/cut', { beforeTurn: 2 }, 42), // a replay of the same event
    ]);
    expect(m.items.filter((i) => i.kind === 'user').map((i) => [(i as any).message.id, (i as any).tags ?? []])).toEqual([['u1', []], ['u2', ['rewound']], ['u3', ['rewound']]]);
    const notices = m.items.filter((i) => i.kind === 'notice').map((i) => (i as any).text);
    expect(notices).toEqual(['Files: restored app.py; deleted new.md.', expect.stringContaining('went back to before turn 2')]);
    const crashed = reduceAll(emptyModel(S), [ev('rewind/files', { rewindId: 'r2', phase: 'interrupted', beforeTurn: 1, restored: ['/w/a.py'], deleted: [], untouched: ['/w/b.py'] }, 0)]);
    expect(crashed.items).toMatchObject([{ kind: 'notice', level: 'warning', text: expect.stringContaining('not restored yet: b.py') }]);
  });
  it('sandbox: the attach reply\'s status, then each live sandbox/status (no seq) replaces it; a widening is a notice', () => {
    const status = (mode: string, extra: object = {}) => ({ mode, configuredMode: mode, level: 'Landlock 7 + seccomp + namespaces', confined: mode !== 'full-access', available: true, reasons: [], network: [], writable: [], ...extra });
    const inbox = { nextTurn: [], nextStep: [] };
    let m = reduceAll(emptyModel(S), [{ kind: 'attached', result: { sessionId: S, status: 'idle', lastSeq: 4, inbox, sandbox: status('workspace-write') as any } }]);
    expect(m.sandbox?.mode).toBe('workspace-write');
    m = reduceAll(m, [ev('sandbox/status', status('read-only', { configuredMode: 'workspace-write' }))]);
    expect(m.sandbox).toMatchObject({ mode: 'read-only', configuredMode: 'workspace-write' });
    expect(m.lastSeq).toBe(4); // live: no seq taken
    // A reattach whose reply has no status (an older daemon) keeps the one known.
    m = reduce(m, { kind: 'attached', result: { sessionId: S, status: 'idle', lastSeq: 4, inbox } });
    expect(m.sandbox?.mode).toBe('read-only');
    m = reduceAll(m, [ev('sandbox/widened', { callId: 'c9', command: 'npm ci', reason: 'cache', writable: ['/home/me/.npm'], network: ['registry.npmjs.org'], unconfined: false, scope: 'session' }, 5)]);
    expect(m.items.at(-1)).toMatchObject({ kind: 'notice', level: 'info', text: 'Sandbox widened for this session: writable /home/me/.npm; network registry.npmjs.org.' });
  });

  it('plan: plan/updated replaces the whole plan, empty steps clear it, a cut puts back the plan of before its turn, attach says what stands', () => {
    const plan = (turn: number, ...titles: string[]) => ({ turn, steps: titles.map((title, i) => ({ title, status: i === 0 ? 'done' : i === 1 ? 'in_progress' : 'pending' })), callId: `p${turn}-${titles.length}` });
    let m = reduceAll(emptyModel(S), [ev('turn/start', { turn: 1 }, 0), ev('plan/updated', plan(1, 'read', 'fix'), 1)]);
    expect(m.plan?.steps.map((s) => `${s.status}:${s.title}`)).toEqual(['done:read', 'in_progress:fix']);
    m = reduceAll(m, [ev('turn/start', { turn: 2 }, 2), ev('plan/updated', plan(2, 'read', 'fix', 'test'), 3)]);
    expect(m.plan?.steps).toHaveLength(3);
    m = reduceAll(m, [ev('turn/start', { turn: 3 }, 4), ev('plan/updated', { turn: 3, steps: [] }, 5)]);
    expect(m.plan).toBeUndefined();
    // A restored checkpoint before turn 2: the plan that stood when turn 2 began (turn 1's).
    m = reduceAll(m, [ev('conversation/cut', { beforeTurn: 2 }, 6)]);
    expect(m.plan?.steps.map((s) => s.title)).toEqual(['read', 'fix']);
    m = reduceAll(m, [ev('conversation/cut', { beforeTurn: 1 }, 7)]);
    expect(m.plan).toBeUndefined();
    // The attach reply's plan stands whatever was replayed; absent, there is none.
    const inbox = { nextTurn: [], nextStep: [] };
    m = reduce(m, { kind: 'attached', result: { sessionId: S, status: 'running', lastSeq: 7, inbox, plan: plan(4, 'a', 'b') as any } });
    expect(m.plan?.turn).toBe(4);
    m = reduce(m, { kind: 'attached', result: { sessionId: S, status: 'idle', lastSeq: 7, inbox } });
    expect(m.plan).toBeUndefined();
    // The log stays bounded however many updates a long session makes.
    for (let i = 0; i < 100; i++) m = reduce(m, ev('plan/updated', plan(10 + i, 'x', 'y'), 8 + i));
    expect(m.planLog.length).toBeLessThanOrEqual(32);
    expect(m.plan?.turn).toBe(109);
  });

  it('background processes: started, exited with how, listed on attach; the model keeps every running one and the newest ended', () => {
    const started = (id: string, seq: number) => ev('process/started', { processId: id, name: `srv ${id}`, command: `serve ${id}`, pid: 100 + seq, confined: true, turn: 1, callId: 'c' + id }, seq);
    let m = reduceAll(emptyModel(S), [started('p1', 0), started('p2', 1)]);
    expect(m.processes.map((p) => [p.processId, p.running])).toEqual([['p1', true], ['p2', true]]);
    const before = m.processes;
    m = reduce(m, ev('process/exited', { processId: 'p1', signal: 15, stoppedBy: 'person' }, 2));
    expect(before[0].running).toBe(true); // replaced, never changed in place: a view compares by identity
    expect(m.processes[0]).toMatchObject({ processId: 'p1', name: 'srv p1', running: false, signal: 15, stoppedBy: 'person' });
    // An exit whose start is before the events this model holds: known by its id until listed.
    m = reduce(m, ev('process/exited', { processId: 'p0', exitCode: 0 }, 3));
    expect(m.processes.at(-1)).toMatchObject({ processId: 'p0', name: 'p0', running: false, exitCode: 0 });
    m = reduce(m, { kind: 'processes', processes: [{ processId: 'p0', name: 'build', command: 'make', pid: 9, confined: true, running: false, exitCode: 0 }] });
    expect(m.processes.map((p) => p.name)).toEqual(['build']);
    // Many ended ones: all running kept, only the newest PROCESSES_EXITED ended.
    const many: Action[] = [];
    for (let i = 0; i < 12; i++) many.push(started(`q${i}`, 10 + 2 * i), ev('process/exited', { processId: `q${i}`, exitCode: i }, 11 + 2 * i));
    many.push(started('live', 40));
    m = reduceAll(m, many);
    expect(m.processes.filter((p) => !p.running).map((p) => p.processId)).toEqual(['q7', 'q8', 'q9', 'q10', 'q11'].slice(-PROCESSES_EXITED));
    expect(m.processes.filter((p) => p.running).map((p) => p.processId)).toEqual(['live']);
  });

  it("a project's hooks wait for trust: from the attach reply or the live event, gone once trusted or when the reply no longer carries them", () => {
    const waiting = { root: '/w', path: '/w/.dsh/config.json', events: ['preToolUse', 'stop'], hooks: 2 };
    const attached = (hooksUntrusted?: object): Action => ({ kind: 'attached', result: { sessionId: S, status: 'idle', lastSeq: 0, inbox: { nextTurn: [], nextStep: [] }, ...(hooksUntrusted ? { hooksUntrusted } : {}) } as any });
    let m = reduce(emptyModel(S), attached(waiting));
    expect(m.hooksUntrusted).toEqual(waiting);
    m = reduce(m, { kind: 'hooksTrusted', root: '/other' });
    expect(m.hooksUntrusted).toEqual(waiting); // another folder's trust
    m = reduce(m, { kind: 'hooksTrusted', root: '/w' });
    expect(m.hooksUntrusted).toBeUndefined();
    m = reduce(m, ev('hooks/untrusted', { ...waiting, changed: true }));
    expect(m.hooksUntrusted?.changed).toBe(true);
    m = reduce(m, attached());
    expect(m.hooksUntrusted).toBeUndefined();
  });

  it('a failed hook is one warning line, however often it is told; hook messages stay user items', () => {
    const failed = ev('hook/failed', { hook: 'guard', event: 'preToolUse', reason: 'it exited with status 3', origin: 'project' });
    const m = reduceAll(emptyModel(S), [ev('turn/start', { turn: 1 }, 0), failed, failed,
      ev('user/message', { id: 'h1', role: 'user', content: [{ type: 'text', text: 'tests pass' }], source: { kind: 'hook', event: 'userPromptSubmit', hook: 'ctx' } }, 1)]);
    const notices = m.items.filter((i) => i.kind === 'notice');
    expect(notices).toHaveLength(1);
    expect(notices[0]).toMatchObject({ level: 'warning', topic: 'hook', text: "The preToolUse hook guard (the project's) failed and was ignored: it exited with status 3" });
    expect(m.items.at(-1)).toMatchObject({ kind: 'user', message: { source: { kind: 'hook', hook: 'ctx' } } });
  });

  it('session/notice: a sandbox notice is a line where it happened; a take-over is one too, without the pid and host it names', () => {
    const m = reduceAll(emptyModel(S), [
      ev('turn/start', { turn: 1 }, 0),
      ev('session/notice', { kind: 'sandbox', level: 'warning', message: 'The widening could not be saved: config.json cannot be parsed.' }, 1),
      ev('session/notice', { kind: 'lease', level: 'info', message: 'dsh-daemon process 12 on h took this chat over; it drives it from here on.' }, 2),
      ev('session/notice', { kind: 'sandbox', level: 'info', message: 'A .git appeared at /w: protected from now on.' }, 3),
    ]);
    expect(m.items.map((i) => i.kind === 'notice' && [i.topic, i.level, i.text])).toEqual([
      ['sandbox', 'warning', 'The widening could not be saved: config.json cannot be parsed.'],
      ['lease', 'info', 'The session was taken over here by another window.'],
      ['sandbox', 'info', 'A .git appeared at /w: protected from now on.'],
    ]);
  });

  it('take-over, asking side: Take over waits (then forces); the lease moving here is one line, and the durable notice after it no second', () => {
    const lines = (m: ReturnType<typeof emptyModel>) => m.items.filter((i) => i.kind === 'notice').map((i) => i.kind === 'notice' && i.text);
    let m = reduceAll(emptyModel(S), [{ kind: 'attached', result: { sessionId: S, status: 'running', lastSeq: 0, inbox: { nextTurn: [], nextStep: [] }, readOnly: true } as any },
      ev('turn/start', { turn: 1 }, 1)]);
    m = reduce(m, { kind: 'takeOver', force: false });
    expect(m.lease?.asked).toBe('waiting');
    m = reduce(m, { kind: 'takeOver', force: true });
    expect(m.lease?.asked).toBe('forced');
    m = reduceAll(m, [ev('turn/end', { turn: 1, reason: { kind: 'aborted', cause: 'handover' } }, 2), ev('session/lease', { holder: null, readOnly: false }),
      ev('session/notice', { kind: 'lease', level: 'info', message: 'dsh-daemon process 12 on h took this chat over; it drives it from here on.' }, 3)]);
    expect(m.readOnly).toBe(false);
    expect(m.lease?.asked).toBeUndefined();
    expect(lines(m)).toEqual(['This window took the session over: it drives it from here on.']);
    // Taken back by the other window: this one follows, one line again; a later take-over notice (seen
    // by this window only in the store) is a line of its own.
    m = reduceAll(m, [ev('session/lease', { holder: { pid: 9, host: 'h' }, readOnly: true }),
      ev('session/notice', { kind: 'lease', level: 'info', message: 'dsh-daemon process 9 on h took this chat over; it drives it from here on.' }, 4),
      ev('session/notice', { kind: 'lease', level: 'info', message: 'dsh-daemon process 12 on h took this chat over; it drives it from here on.' }, 5)]);
    expect(lines(m)).toEqual(['This window took the session over: it drives it from here on.',
      'Another window took this session over: this window follows it from here on.', 'The session was taken over here by another window.']);
    expect(new Set(m.items.map((i) => i.id)).size).toBe(m.items.length);
    // Take over is asked of a read-only view only.
    expect(reduce(emptyModel(S), { kind: 'takeOver', force: false }).lease).toBeUndefined();
  });

  it('take-over, driving side: session/handover is shown until the lease moves (or the turn ends); a forced one says so', () => {
    let m = reduceAll(emptyModel(S), [ev('turn/start', { turn: 1 }, 0), ev('session/handover', { requester: { pid: 9, host: 'h' }, force: false })]);
    expect(m.lease?.handover).toEqual({ force: false });
    m = reduce(m, ev('session/handover', { requester: { pid: 9, host: 'h' }, force: true }));
    expect(m.lease?.handover).toEqual({ force: true });
    // The new driver's durable notice may reach this window before its own lease event: one line, in this window's words.
    m = reduceAll(m, [ev('turn/end', { turn: 1, reason: { kind: 'aborted', cause: 'handover' } }, 1),
      ev('session/notice', { kind: 'lease', level: 'info', message: 'dsh-daemon process 9 on h took this chat over; it drives it from here on.' }, 2),
      ev('session/lease', { holder: { pid: 9, host: 'h' }, readOnly: true })]);
    expect(m.lease?.handover).toBeUndefined();
    expect(m.readOnly).toBe(true);
    expect(m.items.filter((i) => i.kind === 'notice').map((i) => i.kind === 'notice' && i.text))
      .toEqual(['Another window took this session over: this window follows it from here on.']);
    // A turn that ends without the handover (the asker withdrew): the bar goes too.
    const n = reduceAll(emptyModel(S), [ev('turn/start', { turn: 1 }, 0), ev('session/handover', { requester: { pid: 9, host: 'h' }, force: false }),
      ev('turn/end', { turn: 1, reason: { kind: 'completed' } }, 1)]);
    expect(n.lease?.handover).toBeUndefined();
  });

  it('a transcript page\'s `queued` prompt is tagged queued, as the live splices tag it (a reload, a fork)', () => {
    const page = {
      lastSeq: 9, hasMore: false,
      turns: [{ turn: 2, startSeq: 5, startedAt: 0, endSeq: 9, end: { kind: 'completed' }, items: [
        { type: 'message', seq: 6, step: 1, id: 'q2', source: { kind: 'user' }, text: 'waited', queued: true },
        { type: 'message', seq: 7, step: 2, id: 's2', source: { kind: 'user' }, text: 'steered' },
      ] }, { turn: 1, startSeq: 0, startedAt: 0, endSeq: 4, end: { kind: 'completed' }, items: [
        { type: 'message', seq: 1, step: 1, id: 'q1', source: { kind: 'user' }, text: 'first' },
      ] }],
    } as unknown as TranscriptPage;
    const m = reduce(emptyModel(S), { kind: 'transcript', page, older: false });
    expect(m.items.filter((i) => i.kind === 'user').map((i) => i.kind === 'user' && [i.message.id, i.tags ?? []])).toEqual([['q1', []], ['q2', ['queued']], ['s2', ['steer']]]);
  });

  it("a fork's notice is its line, with the original to open; the model keeps forkOf (live, and from a page)", () => {
    const forkOf = { sessionId: 'orig-1', atTurn: 3, title: 'Work' };
    const notice = { kind: 'fork', level: 'info', message: 'Forked from «Work» at turn 3.', forkOf };
    const live = reduceAll(emptyModel(S), [ev('turn/start', { turn: 3 }, 0), ev('session/notice', notice, 5)]);
    expect(live.forkOf).toEqual(forkOf);
    expect(live.items.at(-1)).toMatchObject({ kind: 'notice', topic: 'fork', text: 'Forked from «Work» at turn 3.', forkOf });
    const page = { lastSeq: 5, hasMore: false, turns: [{ turn: 3, startSeq: 0, startedAt: 0, endSeq: 4, end: { kind: 'completed' }, items: [
      { type: 'event', seq: 5, step: null, event: 'session/notice', data: notice }] }] } as unknown as TranscriptPage;
    const paged = reduce(emptyModel(S), { kind: 'transcript', page, older: false });
    expect(paged.forkOf).toEqual(forkOf);
    // Logged after the turn ended: after its footer, as the live events put it.
    expect(paged.items.map((i) => i.kind)).toEqual(['turnEnd', 'notice']);
    expect(reduce(paged, { kind: 'trim', beforeTurn: 4 }).forkOf).toEqual(forkOf);
    // A notice without a well-formed forkOf is a plain line.
    expect(reduceAll(emptyModel(S), [ev('session/notice', { ...notice, forkOf: { sessionId: 1 } }, 1)]).forkOf).toBeUndefined();
  });

  it('session/notice from a transcript page (an `event` item): the same line, and the replay after it adds none', () => {
    const notice = { kind: 'mcp', level: 'warning', message: 'MCP server files could not start; its tools are no longer offered.' };
    const page = {
      lastSeq: 6, hasMore: false,
      turns: [{ turn: 1, startSeq: 1, startedAt: 0, endSeq: 6, end: { kind: 'completed' }, items: [
        { type: 'event', seq: 0, step: null, event: 'session/notice', data: notice },
        { type: 'message', seq: 3, step: 1, id: 'q1', source: { kind: 'user' }, text: 'hi' },
        { type: 'event', seq: 4, step: 1, event: 'process/started', data: { processId: 'p1', name: 'web', command: 'serve', pid: 1, confined: true } },
      ] }],
    } as unknown as TranscriptPage;
    let m = reduce(emptyModel(S), { kind: 'transcript', page, older: false });
    const notices = () => m.items.filter((i) => i.kind === 'notice').map((i) => i.kind === 'notice' && [i.id, i.topic, i.level, i.text]);
    expect(notices()).toEqual([['sn:0', 'mcp', 'warning', notice.message]]);
    m = reduce(m, ev('session/notice', notice, 0)); // an attach replaying from before the page
    expect(notices()).toHaveLength(1);
  });

  it('a review\'s message is shown as the request, not as the prompt holding the diff', () => {
    const review = (target: object, instructions?: string) => ({ id: 'r1', role: 'user', content: [{ type: 'text', text: 'Review the code changes below…\ndiff --git a/app.py b/app.py' }], source: { kind: 'user', review: { reviewId: 'review-1', target, ...(instructions ? { instructions } : {}) } } });
    expect(typedText(review({ kind: 'uncommitted' }))).toBe('Review uncommitted changes');
    expect(typedText(review({ kind: 'base', ref: 'main' }, 'look at errors'))).toBe('Review changes since main: look at errors');
    expect(typedText(review({ kind: 'commit', ref: 'a'.repeat(40) }))).toBe(`Review commit ${'a'.repeat(12)}`);
    const m = reduce(emptyModel(S), ev('agent/inbox/spliced', { target: 'next-turn', start: 0, inserted: [review({ kind: 'uncommitted' })] }, 0));
    expect(queueOf(m).map((q) => q.text)).toEqual(['Review uncommitted changes']);
  });

  it('a custom command is shown as typed: its transcript line, its queue row', () => {
    const expanded = { id: 'c1', role: 'user', content: [{ type: 'text', text: 'Review app.py for bugs.' }], source: { kind: 'user', command: { name: 'review', arguments: 'app.py', origin: 'project', path: '/w/.dsh/commands/review.md' } } };
    expect(typedText(expanded)).toBe('/review app.py');
    expect(typedText({ ...expanded, source: { kind: 'user', command: { name: 'tidy', arguments: '' } } })).toBe('/tidy');
    expect(typedText({ ...expanded, source: { kind: 'user' } })).toBe('Review app.py for bugs.');
    const m = reduce(emptyModel(S), ev('agent/inbox/spliced', { target: 'next-turn', start: 0, inserted: [expanded] }, 0));
    expect(queueOf(m).map((q) => q.text)).toEqual(['/review app.py']);
  });
});
