import { describe, expect, it } from 'vitest';
import { emptyModel, reduceAll, assistantText, type Action } from '../src/protocol/reducer';
import type { AnyEvent } from '../src/protocol/types';

const S = 's1';
const ev = (type: string, data: unknown, seq?: number): Action => ({ kind: 'event', event: { sessionId: S, type, data, ...(seq === undefined ? {} : { seq }) } as AnyEvent });
const delta = (text: string) => ev('assistant/delta', { turn: 1, step: 1, delta: { type: 'text', text } });
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
});
