// The pure parts of inline chat's proposal (no vscode import: the tests run it as is): which lines
// the prompt works on, the reply's code fitted to them, the proposal's range kept in step with the
// person's edits, and what the editor draws for a proposal (the lines it adds, the lines it removes).

/** A zero-based position, as vscode's. */
export interface Pos { line: number; character: number }

/** What inline chat works on: whole lines replaced (`first`..`last`, inclusive), or new lines put in
 *  at `at` (the new code's first line is then line `at.line`; `at` may be the end of the last line
 *  of a file without a final line break). `indent` is what the code's lines start with when the
 *  reply's code has none of its own. */
export type Target =
  | { kind: 'replace'; first: number; last: number; indent: string }
  | { kind: 'insert'; at: Pos; line: number; indent: string; eolFirst: boolean };

const leading = (s: string): string => /^[ \t]*/.exec(s)![0];
const blank = (s: string): boolean => s.trim() === '';

/** The lines the prompt works on: a selection's whole lines (a selection ending at the start of a
 *  line leaves that line out); with nothing selected, a blank cursor line is replaced, and a line
 *  with text gets the code above it (the cursor at or before its first character) or below it. */
export function inlineTarget(lineCount: number, lineAt: (line: number) => string, sel: { start: Pos; end: Pos; active: Pos }): Target {
  const empty = sel.start.line === sel.end.line && sel.start.character === sel.end.character;
  if (!empty) {
    const first = sel.start.line;
    const last = sel.end.character === 0 && sel.end.line > first ? sel.end.line - 1 : sel.end.line;
    let text: string | undefined;
    for (let i = first; i <= last && text === undefined; i++) if (!blank(lineAt(i))) text = lineAt(i);
    return { kind: 'replace', first, last, indent: text === undefined ? '' : leading(text) };
  }
  const l = sel.active.line;
  const line = l < lineCount ? lineAt(l) : '';
  if (blank(line)) return { kind: 'replace', first: l, last: l, indent: line || nearIndent(lineCount, lineAt, l) };
  const indent = leading(line);
  if (sel.active.character <= indent.length) return { kind: 'insert', at: { line: l, character: 0 }, line: l, indent, eolFirst: false };
  if (l + 1 < lineCount) return { kind: 'insert', at: { line: l + 1, character: 0 }, line: l + 1, indent, eolFirst: false };
  return { kind: 'insert', at: { line: l, character: line.length }, line: l + 1, indent, eolFirst: true };
}

/** The indentation of the code around an empty line: the deeper of the nearest lines with text. */
function nearIndent(lineCount: number, lineAt: (line: number) => string, l: number): string {
  let up = '';
  let down = '';
  for (let i = l - 1; i >= 0; i--) if (!blank(lineAt(i))) { up = leading(lineAt(i)); break; }
  for (let i = l + 1; i < lineCount; i++) if (!blank(lineAt(i))) { down = leading(lineAt(i)); break; }
  return down.length > up.length ? down : up;
}

/** The text that replaces the target: the reply's code, indented as the target when the code has no
 *  indentation of its own (code the model indented is kept as it is), in the document's line breaks. */
export function proposalText(code: string, target: Target, eol: string): string {
  const lines = code.replace(/\r\n/g, '\n').replace(/\n+$/, '').split('\n');
  const own = lines.filter((l) => !blank(l)).map(leading);
  const common = own.length ? own.reduce((a, b) => (b.length < a.length ? b : a)) : '';
  const fitted = common === '' && target.indent ? lines.map((l) => (blank(l) ? l : target.indent + l)) : lines;
  const body = fitted.join(eol);
  if (target.kind === 'replace') return body;
  return target.eolFirst ? eol + body : body + eol;
}

/** One change of the document (as vscode's TextDocumentContentChangeEvent: `rangeLength` characters
 *  at `rangeOffset` replaced by `text`), in the text as the changes before it left it. */
export interface Change { rangeOffset: number; rangeLength: number; text: string }

/** The proposal's range, in offsets, kept in step with the document: an edit before it moves it, an
 *  edit after it leaves it, an edit into it grows or shrinks it to cover what the edit put there
 *  (and marks it touched: the range then holds the person's text too). */
export class TrackedRange {
  touched = false;
  constructor(public start: number, public end: number) {}

  apply(c: Change): void {
    const changeEnd = c.rangeOffset + c.rangeLength;
    const delta = c.text.length - c.rangeLength;
    if (changeEnd <= this.start) {
      // Before the range, or text typed right at its start: the range moves.
      this.start += delta;
      this.end += delta;
    } else if (c.rangeOffset < this.end) {
      this.start = Math.min(this.start, c.rangeOffset);
      this.end = Math.max(this.end, changeEnd) + delta;
      this.touched = true;
    }
    // Otherwise the change is after the range (or text typed right at its end): nothing moves.
  }

  applyAll(changes: readonly Change[]): void {
    for (const c of changes) this.apply(c);
  }
}

/** A run of changed lines: `removed` (the old lines) stand where the new lines `added` (indices into
 *  the new lines, from `newStart`) are; either may be empty. */
export interface Hunk { oldStart: number; removed: string[]; newStart: number; added: number }

/** The changed runs between two texts' lines (a longest common subsequence; regions larger than
 *  `limit` cells are one run, which is still a correct diff). */
export function lineDiff(oldLines: readonly string[], newLines: readonly string[], limit = 4_000_000): Hunk[] {
  // Equal lines at both ends are not part of any run.
  let head = 0;
  while (head < oldLines.length && head < newLines.length && oldLines[head] === newLines[head]) head++;
  let tail = 0;
  while (tail < oldLines.length - head && tail < newLines.length - head && oldLines[oldLines.length - 1 - tail] === newLines[newLines.length - 1 - tail]) tail++;
  const a = oldLines.slice(head, oldLines.length - tail);
  const b = newLines.slice(head, newLines.length - tail);
  if (!a.length && !b.length) return [];
  if (!a.length || !b.length || a.length * b.length > limit) return [{ oldStart: head, removed: [...a], newStart: head, added: b.length }];
  // lcs[i][j]: the longest common subsequence of a[i..] and b[j..].
  const w = b.length + 1;
  const lcs = new Uint32Array((a.length + 1) * w);
  for (let i = a.length - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) {
      lcs[i * w + j] = a[i] === b[j] ? lcs[(i + 1) * w + j + 1] + 1 : Math.max(lcs[(i + 1) * w + j], lcs[i * w + j + 1]);
    }
  }
  const hunks: Hunk[] = [];
  let cur: Hunk | undefined;
  let i = 0;
  let j = 0;
  const open = () => (cur ??= { oldStart: head + i, removed: [], newStart: head + j, added: 0 });
  while (i < a.length || j < b.length) {
    if (i < a.length && j < b.length && a[i] === b[j]) {
      if (cur) { hunks.push(cur); cur = undefined; }
      i++; j++;
    } else if (j < b.length && (i >= a.length || lcs[i * w + j + 1] >= lcs[(i + 1) * w + j])) {
      open().added++;
      j++;
    } else {
      open().removed.push(a[i]);
      i++;
    }
  }
  if (cur) hunks.push(cur);
  return hunks;
}

/** What the editor draws for a proposal, in line indices of the new text: the lines it adds or
 *  changes (a diff-inserted background), and the old lines it removes, as ghost text at the end of a
 *  line: each removed line beside the new line that took its place, the rest on the hunk's last new
 *  line, and a hunk that only removes on the line above the gap (or below it, at the top). */
export interface ProposalLooks { added: number[]; ghosts: { line: number; removed: string[] }[] }

export function proposalLooks(oldText: string, newText: string): ProposalLooks {
  const newLines = newText.split(/\r?\n/);
  const hunks = lineDiff(oldText.split(/\r?\n/), newLines);
  const added: number[] = [];
  const ghosts: ProposalLooks['ghosts'] = [];
  for (const h of hunks) {
    for (let k = 0; k < h.added; k++) added.push(h.newStart + k);
    if (!h.removed.length) continue;
    if (h.added) {
      const beside = Math.min(h.removed.length, h.added) - 1;
      for (let k = 0; k < beside; k++) ghosts.push({ line: h.newStart + k, removed: [h.removed[k]] });
      ghosts.push({ line: h.newStart + beside, removed: h.removed.slice(beside) });
    } else {
      ghosts.push({ line: h.newStart > 0 ? h.newStart - 1 : Math.min(h.newStart, newLines.length - 1), removed: h.removed });
    }
  }
  return { added, ghosts };
}

/** A ghost's text: the removed lines without their indentation, on one line, cut to `max` characters. */
export function ghostText(removed: readonly string[], max = 120): string {
  const text = removed.map((l) => l.trim()).filter((l, k) => l || k === 0).join(' ⏎ ');
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}
