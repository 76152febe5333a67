import { describe, expect, it } from 'vitest';
import { emptyModel, queueOf, reduceAll, assistantText, type Action } from '../src/protocol/reducer';
import type { AnyEvent } from '../src/protocol/types';

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
});
