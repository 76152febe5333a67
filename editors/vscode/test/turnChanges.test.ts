// A turn's changed files and a subagent's card as the shared reducer folds them, and a turn's hunks
// against a file's current text (turnHunks: where each one is, the text before the turn).
import { describe, expect, it } from 'vitest';
import { emptyModel, reduce, reduceAll, type Action, type ToolItem } from '../src/protocol/reducer';
import { SUBAGENT_CALLS } from '../src/protocol/subagents';
import type { AnyEvent, TurnDiffHunk } from '../src/protocol/types';
import { hunkLines, locateHunk, textBeforeTurn } from '../src/turnHunks';

const S = 's1';
const ev = (type: string, data: unknown, seq?: number): Action => ({ kind: 'event', event: { sessionId: S, type, data, ...(seq === undefined ? {} : { seq }) } as AnyEvent });
const file = (path: string, hunks: number, pending: number) => ({ path, status: 'modified' as const, by: 'edit' as const, added: 2, removed: 1, hunks, pending });
const sub = (type: string, data: unknown) => ev('subagent/event', { callId: 'p1', childId: 'k', event: { type, data } });
const tool = (m: ReturnType<typeof emptyModel>) => m.items.find((i): i is ToolItem => i.kind === 'tool' && i.callId === 'p1')!;

describe('the last turn\'s changed files in the model', () => {
  it('live turn/diff replaces the counts; a new turn starts with none; the attach\'s dsh/turn/diff sets them', () => {
    let m = reduceAll(emptyModel(S), [ev('turn/start', { turn: 1 }, 0), ev('turn/diff', { turn: 1, files: [file('/w/a.py', 1, 1)], final: false })]);
    expect(m.turnDiff?.files.map((f) => f.path)).toEqual(['/w/a.py']);
    m = reduce(m, ev('turn/diff', { turn: 1, files: [file('/w/a.py', 2, 2), file('/w/b.py', 1, 1)], final: true }));
    expect(m.turnDiff).toMatchObject({ turn: 1, final: true });
    expect(m.turnDiff?.files.map((f) => f.hunks)).toEqual([2, 1]);
    // An older turn's late diff does not replace a newer one's.
    m = reduce(m, ev('turn/diff', { turn: 0, files: [], final: true }));
    expect(m.turnDiff?.turn).toBe(1);
    m = reduce(m, ev('turn/start', { turn: 2 }, 5));
    expect(m.turnDiff).toBeUndefined();
    m = reduce(m, { kind: 'turnDiff', diff: { turn: 2, files: [file('/w/c.py', 3, 1)], final: true } });
    expect(m.turnDiff?.files[0].pending).toBe(1);
    expect(reduce(m, { kind: 'turnDiff', diff: null }).turnDiff).toBeUndefined();
  });
});

describe('a subagent on its run_subagent card', () => {
  const call = ev('tool/call', { turn: 1, step: 1, callId: 'p1', name: 'run_subagent', arguments: JSON.stringify({ description: 'find the build tool', prompt: 'p' }) }, 1);
  const started = ev('subagent/started', { callId: 'p1', childId: 'k', description: 'find the build tool', tools: 'explore', maxSteps: 30 }, 2);

  it('started, the child\'s steps and tool calls live, its words, then its summary and state', () => {
    let m = reduceAll(emptyModel(S), [ev('turn/start', { turn: 1 }, 0), call, started]);
    expect(tool(m).subagent).toMatchObject({ description: 'find the build tool', status: 'running', childId: 'k', tools: 'explore', maxSteps: 30 });
    m = reduceAll(m, [
      sub('step/start', { turn: 1, step: 1 }),
      sub('tool/call', { turn: 1, step: 1, callId: 'k1', name: 'read_file', arguments: '{"path": "notes.txt"}' }),
      sub('assistant/delta', { turn: 1, step: 2, delta: { type: 'text', text: 'The' } }),
    ]);
    expect(tool(m).subagent?.calls).toEqual([{ callId: 'k1', name: 'read_file', summary: 'notes.txt', status: 'running' }]);
    expect(tool(m).subagent?.steps).toBe(1);
    m = reduceAll(m, [
      sub('tool/result', { turn: 1, step: 1, callId: 'k1', message: { id: 'r', role: 'tool', content: [{ type: 'tool-result', toolCallId: 'k1', content: [] }], source: { kind: 'tool', callId: 'k1' } } }),
      sub('tool/call', { turn: 1, step: 2, callId: 'k2', name: 'grep', arguments: { pattern: 'make' } }),
      sub('tool/result', { turn: 1, step: 2, callId: 'k2', error: { code: 'OUTSIDE_WORKSPACE' }, message: { id: 'r2', role: 'tool', content: [], source: { kind: 'tool' } } }),
      sub('assistant/message', { turn: 1, step: 3, message: { id: 'a', role: 'assistant', content: [{ type: 'text', text: 'It is make.' }], source: { kind: 'model' } } }),
    ]);
    expect(tool(m).subagent?.calls.map((c) => [c.name, c.status, c.error])).toEqual([['read_file', 'ok', undefined], ['grep', 'error', 'OUTSIDE_WORKSPACE']]);
    expect(tool(m).subagent?.text).toBe('It is make.');
    const rev = tool(m).rev;
    m = reduce(m, ev('subagent/finished', { callId: 'p1', childId: 'k', status: 'completed', summary: 'It is make.' }, 3));
    expect(tool(m).subagent).toMatchObject({ status: 'completed', summary: 'It is make.' });
    expect(tool(m).rev).toBeGreaterThan(rev); // the card is drawn again
  });

  it('a streamed delta of the child leaves the card as it is (no redraw per word)', () => {
    const m = reduceAll(emptyModel(S), [ev('turn/start', { turn: 1 }, 0), call, started]);
    const before = tool(m);
    const after = reduce(m, sub('assistant/delta', { turn: 1, step: 1, delta: { type: 'text', text: 'x' } }));
    expect(tool(after)).toBe(before);
  });

  it('the child\'s permission request marks its call; a call open when the child ends did not finish', () => {
    let m = reduceAll(emptyModel(S), [ev('turn/start', { turn: 1 }, 0), call, started,
      sub('tool/call', { turn: 1, step: 1, callId: 'k1', name: 'edit_file', arguments: { path: 'a.py' } })]);
    m = reduce(m, { kind: 'permission', request: { sessionId: S, callId: 'k1', tool: 'edit_file', title: 'Subagent “x”: edit a.py', arguments: {}, subagent: { childId: 'k', callId: 'p1', description: 'x' } } });
    expect(tool(m).subagent?.calls[0].status).toBe('awaiting-permission');
    expect(m.permissions.map((p) => p.callId)).toEqual(['k1']);
    m = reduce(m, ev('subagent/finished', { callId: 'p1', childId: 'k', status: 'cancelled', summary: '' }, 3));
    expect(tool(m).subagent?.calls[0].status).toBe('error');
    expect(tool(m).subagent?.status).toBe('cancelled');
  });

  it('keeps the newest calls only, counting the others', () => {
    let m = reduceAll(emptyModel(S), [ev('turn/start', { turn: 1 }, 0), call, started]);
    for (let i = 0; i < SUBAGENT_CALLS + 5; i++) m = reduce(m, sub('tool/call', { turn: 1, step: i, callId: `k${i}`, name: 'read_file', arguments: { path: `f${i}` } }));
    expect(tool(m).subagent?.calls).toHaveLength(SUBAGENT_CALLS);
    expect(tool(m).subagent?.earlier).toBe(5);
    expect(tool(m).subagent?.calls[0].summary).toBe('f5');
  });
});

describe('a turn\'s hunks against the text now', () => {
  const before = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j', ''].join('\n');
  // The turn changed b (hunk 1), inserted x after f (hunk 2), deleted i (hunk 3).
  const hunks: TurnDiffHunk[] = [
    { index: 1, oldStart: 2, oldLines: 1, newStart: 2, newLines: 1, state: 'pending', diff: '@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n' },
    { index: 2, oldStart: 7, oldLines: 0, newStart: 7, newLines: 1, state: 'pending', diff: '@@ -5,2 +5,3 @@\n e\n f\n+x\n g\n' },
    { index: 3, oldStart: 9, oldLines: 1, newStart: 9, newLines: 0, state: 'pending', diff: '@@ -8,3 +9,2 @@\n h\n-i\n j\n' },
  ];
  const after = ['a', 'B', 'c', 'd', 'e', 'f', 'x', 'g', 'h', 'j', ''].join('\n');

  it('reads a hunk\'s lines', () => {
    expect(hunkLines(hunks[1].diff)).toEqual({ before: [], after: ['x'], above: ['e', 'f'], below: ['g'] });
  });

  it('puts every hunk back: the text before the turn', () => {
    expect(textBeforeTurn(after, hunks)).toEqual({ text: before, missing: [] });
  });

  it('finds the hunks where the person\'s lines moved them; an undone one is already back', () => {
    const now = ['mine', 'a', 'B', 'c', 'd', 'e', 'f', 'g', 'h', 'j', 'mine too', ''];
    const withUndone = hunks.map((h) => h.index === 2 ? { ...h, state: 'undone' as const } : h);
    expect(locateHunk(now, hunks[0])).toBe(2);
    expect(locateHunk(now, hunks[2])).toBe(9); // the gap where i stood, after h
    expect(textBeforeTurn(now.join('\n'), withUndone).text).toBe(['mine', 'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j', 'mine too', ''].join('\n'));
  });

  it('a hunk whose lines changed since is not found (the text keeps it as it is)', () => {
    const now = after.replace('B', 'Bee');
    expect(locateHunk(now.split('\n'), hunks[0])).toBeUndefined();
    expect(textBeforeTurn(now, hunks).missing).toEqual([1]);
  });

  it('of several runs of the same lines, the one nearest to where the turn left it', () => {
    const lines = ['x', 'a', 'x', 'b', 'c', 'd', 'x'];
    expect(locateHunk(lines, { newStart: 6, newLines: 1, diff: '@@ -6 +6 @@\n-y\n+x\n' })).toBe(6);
    expect(locateHunk(lines, { newStart: 3, newLines: 1, diff: '@@ -3 +3 @@\n-y\n+x\n' })).toBe(2);
  });

  it('a created file before the turn is empty; a deleted one is its old lines', () => {
    expect(textBeforeTurn('p\nq\n', [{ index: 1, oldStart: 1, oldLines: 0, newStart: 1, newLines: 2, state: 'pending', diff: '@@ -0,0 +1,2 @@\n+p\n+q\n' }]).text).toBe('');
    expect(textBeforeTurn('', [{ index: 1, oldStart: 1, oldLines: 2, newStart: 1, newLines: 0, state: 'pending', diff: '@@ -1,2 +0,0 @@\n-p\n-q\n' }]).text).toBe('p\nq\n');
  });
});
