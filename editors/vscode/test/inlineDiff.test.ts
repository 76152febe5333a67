// Inline chat's pure parts (src/inlineDiff.ts): the lines a prompt works on, the reply's code fitted
// to them, the proposal's range kept in step with the person's edits (Discard restores exactly that
// range), and the decorations drawn from the diff of the old and the proposed lines.
import { describe, expect, it } from 'vitest';
import { ghostText, inlineTarget, lineDiff, proposalLooks, proposalText, TrackedRange, type Change } from '../src/inlineDiff';

const FILE = [
  'export function total(xs: number[]): number {',
  '  return xs.length;',
  '}',
  '',
  'class Box {',
  '  area(): number {',
  '',
  '    return 0;',
  '  }',
  '}',
];
const at = (line: number, character: number) => ({ line, character });
const sel = (a: [number, number], b: [number, number] = a) => ({ start: at(...a), end: at(...b), active: at(...b) });
const target = (s: ReturnType<typeof sel>, lines = FILE) => inlineTarget(lines.length, (i) => lines[i], s);

/** `text` with the changes applied one after another, as vscode applies a change event's list. */
function edit(text: string, changes: Change[]): string {
  for (const c of changes) text = text.slice(0, c.rangeOffset) + c.text + text.slice(c.rangeOffset + c.rangeLength);
  return text;
}

describe('the lines inline chat works on', () => {
  it('a selection is its whole lines, indented as its first line with text; one ending at a line\'s start leaves that line out', () => {
    expect(target(sel([1, 2], [1, 19]))).toEqual({ kind: 'replace', first: 1, last: 1, indent: '  ' });
    expect(target(sel([5, 4], [8, 0]))).toEqual({ kind: 'replace', first: 5, last: 7, indent: '  ' });
    expect(target(sel([6, 0], [7, 3]))).toEqual({ kind: 'replace', first: 6, last: 7, indent: '    ' });
  });

  it('with nothing selected: a blank line is replaced (indented as the code around it), a line with text gets the code above or below it', () => {
    expect(target(sel([6, 0]))).toEqual({ kind: 'replace', first: 6, last: 6, indent: '    ' });
    expect(target(sel([3, 0]))).toEqual({ kind: 'replace', first: 3, last: 3, indent: '' });
    // At or before the first character: above; after it: below.
    expect(target(sel([1, 2]))).toEqual({ kind: 'insert', at: at(1, 0), line: 1, indent: '  ', eolFirst: false });
    expect(target(sel([1, 5]))).toEqual({ kind: 'insert', at: at(2, 0), line: 2, indent: '  ', eolFirst: false });
    // Below the last line of a file without a final line break: a line break first.
    expect(target(sel([9, 1]))).toEqual({ kind: 'insert', at: at(9, 1), line: 10, indent: '', eolFirst: true });
  });

  it('the reply\'s code gets the target\'s indentation unless it has its own, in the document\'s line breaks', () => {
    const lines = target(sel([5, 4], [8, 3]));
    expect(proposalText('area(): number {\n  return this.w;\n}\n', lines, '\n')).toBe('  area(): number {\n    return this.w;\n  }');
    expect(proposalText('  area(): number {\n    return 1;\n  }', lines, '\r\n')).toBe('  area(): number {\r\n    return 1;\r\n  }');
    expect(proposalText('a();\n\nb();', lines, '\n')).toBe('  a();\n\n  b();');
    expect(proposalText('x();', target(sel([1, 5])), '\n')).toBe('  x();\n');
    expect(proposalText('x();', target(sel([9, 1])), '\n')).toBe('\nx();');
  });
});

describe('the proposal\'s range follows the document', () => {
  const text = 'aaa\nbbb\nccc\nddd\n';
  const start = text.indexOf('bbb');
  const end = text.indexOf('ccc') + 3; // "bbb\nccc"

  it('moves with edits before it, stays for edits after it, and still holds exactly the proposed text', () => {
    const r = new TrackedRange(start, end);
    const changes: Change[] = [
      { rangeOffset: 0, rangeLength: 3, text: 'a longer first line' }, // before
      { rangeOffset: 0, rangeLength: 0, text: '// new\n' }, // before, at the very start
      { rangeOffset: 35, rangeLength: 0, text: 'after it' }, // "ddd" → "after itddd"
    ];
    const now = edit(text, changes);
    r.applyAll(changes);
    expect(now.slice(r.start, r.end)).toBe('bbb\nccc');
    expect(r.touched).toBe(false);
    // Typed right at its start or right at its end: outside it.
    const r2 = new TrackedRange(start, end);
    const edge: Change[] = [{ rangeOffset: start, rangeLength: 0, text: 'X' }, { rangeOffset: end + 1, rangeLength: 0, text: 'Y' }];
    r2.applyAll(edge);
    expect(edit(text, edge).slice(r2.start, r2.end)).toBe('bbb\nccc');
  });

  it('an edit into it (or over its edge) is taken in and marks it touched, so Discard knows it would lose the person\'s text', () => {
    const inside = new TrackedRange(start, end);
    const c: Change = { rangeOffset: start + 1, rangeLength: 1, text: 'BBBB' };
    inside.apply(c);
    expect(edit(text, [c]).slice(inside.start, inside.end)).toBe('bBBBBb\nccc');
    expect(inside.touched).toBe(true);
    const over = new TrackedRange(start, end);
    const d: Change = { rangeOffset: 1, rangeLength: start, text: '' }; // "aa\nb" deleted
    over.apply(d);
    expect(edit(text, [d]).slice(over.start, over.end)).toBe('bb\nccc');
    expect(over.touched).toBe(true);
  });

  it('an empty range (code to insert) moves with text typed at it and takes in a replacement across it', () => {
    const r = new TrackedRange(4, 4);
    r.apply({ rangeOffset: 4, rangeLength: 0, text: 'xy' });
    expect([r.start, r.end, r.touched]).toEqual([6, 6, false]);
    r.apply({ rangeOffset: 6, rangeLength: 2, text: '' });
    expect([r.start, r.end, r.touched]).toEqual([6, 6, false]);
    r.apply({ rangeOffset: 5, rangeLength: 2, text: 'Q' });
    expect([r.start, r.end, r.touched]).toEqual([5, 6, true]);
  });

  it('restoring the old text over the tracked range gives back the document as it was, apart from the person\'s edits elsewhere', () => {
    // The proposal replaced "bbb\nccc" by three lines; the person then edited above and below it.
    const proposed = 'aaa\nBBB\nCCC\nEEE\nddd\n';
    const r = new TrackedRange(4, 4 + 'BBB\nCCC\nEEE'.length);
    const changes: Change[] = [{ rangeOffset: 0, rangeLength: 0, text: '# top\n' }, { rangeOffset: 22, rangeLength: 3, text: 'DDD' }];
    const now = edit(proposed, changes);
    r.applyAll(changes);
    expect(now.slice(0, r.start) + 'bbb\nccc' + now.slice(r.end)).toBe('# top\naaa\nbbb\nccc\nDDD\n');
  });
});

describe('decorations from the diff', () => {
  it('lineDiff finds the changed runs and nothing for equal texts', () => {
    expect(lineDiff(['a', 'b', 'c'], ['a', 'b', 'c'])).toEqual([]);
    expect(lineDiff(['a', 'b', 'c'], ['a', 'X', 'c'])).toEqual([{ oldStart: 1, removed: ['b'], newStart: 1, added: 1 }]);
    expect(lineDiff(['a', 'b', 'c', 'd'], ['a', 'c', 'd', 'e'])).toEqual([
      { oldStart: 1, removed: ['b'], newStart: 1, added: 0 },
      { oldStart: 4, removed: [], newStart: 3, added: 1 },
    ]);
    // Too large for the table: one run, still a correct diff.
    expect(lineDiff(['a', 'b', 'c'], ['a', 'x', 'y', 'c'], 1)).toEqual([{ oldStart: 1, removed: ['b'], newStart: 1, added: 2 }]);
  });

  it('a changed line is drawn added with the old line as ghost text beside it', () => {
    expect(proposalLooks('  return xs.length;', '  return xs.reduce((a, b) => a + b, 0);')).toEqual({ added: [0], ghosts: [{ line: 0, removed: ['  return xs.length;'] }] });
  });

  it('more removed than added: the rest go on the hunk\'s last new line; unchanged lines are not drawn', () => {
    const old = 'if (a) {\n  one();\n  two();\n  three();\n}';
    const now = 'if (a) {\n  all();\n}';
    expect(proposalLooks(old, now)).toEqual({ added: [1], ghosts: [{ line: 1, removed: ['  one();', '  two();', '  three();'] }] });
    const more = proposalLooks('a\nb\nc', 'a\nB1\nB2\nB3\nc');
    expect(more).toEqual({ added: [1, 2, 3], ghosts: [{ line: 1, removed: ['b'] }] });
  });

  it('lines only removed are shown on the line above the gap (or below it at the top); insertions have no ghost', () => {
    expect(proposalLooks('a\nb\nc', 'a\nc')).toEqual({ added: [], ghosts: [{ line: 0, removed: ['b'] }] });
    expect(proposalLooks('a\nb\nc', 'b\nc')).toEqual({ added: [], ghosts: [{ line: 0, removed: ['a'] }] });
    // Code inserted above a line: the range is empty before, "x();\n" after.
    expect(proposalLooks('', 'x();\ny();\n')).toEqual({ added: [0, 1], ghosts: [] });
    expect(proposalLooks('', '\nx();')).toEqual({ added: [1], ghosts: [] });
    expect(proposalLooks('a\r\nb', 'a\r\nB')).toEqual({ added: [1], ghosts: [{ line: 1, removed: ['b'] }] });
  });

  it('the ghost text is the removed lines without indentation on one line, cut to length', () => {
    expect(ghostText(['  one();', '', '  two();'])).toBe('one(); ⏎ two();');
    expect(ghostText(['x'.repeat(200)], 10)).toBe('xxxxxxxxx…');
  });
});
