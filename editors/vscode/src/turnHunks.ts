// A turn's hunks against the text a file holds now (protocol.md §15 "A turn's diff"): where each one
// is (its lines found in the text, as the daemon's undo finds them), and the text before the turn
// (each hunk's after-lines put back to its before-lines). No vscode import: the tests run it as is.
import type { TurnDiffHunk } from './protocol/types';

export interface HunkLines {
  before: string[]; after: string[];
  /** The unchanged lines the hunk's text shows above and below its change. */
  above: string[]; below: string[];
}

/** A hunk's lines from its unified-diff text (its `@@` line first). */
export function hunkLines(diff: string): HunkLines {
  const out: HunkLines = { before: [], after: [], above: [], below: [] };
  const lines = diff.split('\n');
  if (lines.at(-1) === '') lines.pop();
  let changed = false;
  for (const line of lines) {
    if (line.startsWith('@@') || line.startsWith('\\')) continue;
    const body = line.slice(1);
    if (line.startsWith('-')) { out.before.push(body); changed = true; out.below = []; }
    else if (line.startsWith('+')) { out.after.push(body); changed = true; out.below = []; }
    else if (changed) out.below.push(body);
    else out.above.push(body);
  }
  return out;
}

/** Where hunk `h` is in `lines` (0-based): the first of its after-lines, or for a hunk that only
 *  deleted lines the line its deleted lines stood before. The run nearest to where the turn left it
 *  wins (the person's edits above it move it). Undefined: its lines are no longer there in one run. */
export function locateHunk(lines: string[], h: Pick<TurnDiffHunk, 'newStart' | 'newLines' | 'diff'>): number | undefined {
  const { after, above, below } = hunkLines(h.diff);
  const want = h.newStart - 1;
  if (after.length) return nearestRun(lines, after, want);
  // Only deleted lines: the gap is after the lines above it (or before the lines below it).
  if (above.length) { const at = nearestRun(lines, above, want - above.length); return at === undefined ? undefined : at + above.length; }
  if (below.length) return nearestRun(lines, below, want);
  return Math.min(Math.max(want, 0), lines.length);
}

function nearestRun(lines: string[], run: string[], want: number): number | undefined {
  let best: number | undefined;
  for (let i = 0; i + run.length <= lines.length; i++) {
    let k = 0;
    while (k < run.length && lines[i + k] === run[k]) k++;
    if (k === run.length && (best === undefined || Math.abs(i - want) < Math.abs(best - want))) best = i;
  }
  return best;
}

/** The text before the turn, from `text` (what the file holds now): each hunk not undone has its
 *  after-lines replaced by its before-lines where they are found (an undone one holds its
 *  before-lines already). `missing`: hunks whose lines were not found (the text keeps them as they are). */
export function textBeforeTurn(text: string, hunks: TurnDiffHunk[]): { text: string; missing: number[] } {
  const lines = text.split('\n');
  const placed: { at: number; h: TurnDiffHunk; l: HunkLines }[] = [];
  const missing: number[] = [];
  for (const h of hunks) {
    if (h.state === 'undone') continue;
    const at = locateHunk(lines, h);
    if (at === undefined) missing.push(h.index);
    else placed.push({ at, h, l: hunkLines(h.diff) });
  }
  // From the bottom up: a replacement never moves a hunk still to be replaced.
  placed.sort((a, b) => b.at - a.at);
  for (const p of placed) lines.splice(p.at, p.l.after.length, ...p.l.before);
  return { text: lines.join('\n'), missing };
}
