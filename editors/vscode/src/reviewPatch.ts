// A finding's `suggestedPatch` (a unified diff of one file) as line replacements of the file's text
// now: each hunk's old side must still be there, else the patch is refused (the file moved on).

/** Lines [start, end) (0-based) of the file's text become `lines`. */
export interface LineReplacement { start: number; end: number; lines: string[] }

export class PatchMismatch extends Error {}

const HUNK = /^@@ -(\d+)(?:,(\d+))? \+\d+(?:,(\d+))? @@/;

/** The hunks' replacements in file order; PatchMismatch when the file no longer matches. */
export function patchReplacements(text: string, patch: string): LineReplacement[] {
  const fileLines = text.split('\n');
  const out: LineReplacement[] = [];
  let hunk: { start: number; count: number; oldLeft: number; newLeft: number; old: string[]; new: string[] } | undefined;
  const finish = () => {
    if (!hunk) return;
    // `-a,0` names the line after which the hunk inserts; otherwise `a` is the first old line.
    const start = hunk.count === 0 ? hunk.start : hunk.start - 1;
    const have = fileLines.slice(start, start + hunk.old.length);
    if (have.length !== hunk.old.length || have.some((l, i) => l.replace(/\r$/, '') !== hunk!.old[i])) {
      throw new PatchMismatch(`the file no longer has the lines the fix changes (line ${start + 1})`);
    }
    const prev = out[out.length - 1];
    if (prev && start < prev.end) throw new PatchMismatch('the fix\'s hunks overlap');
    out.push({ start, end: start + hunk.old.length, lines: hunk.new });
    hunk = undefined;
  };
  for (const line of patch.split('\n')) {
    const m = HUNK.exec(line);
    if (m) {
      finish();
      const count = m[2] === undefined ? 1 : Number(m[2]);
      hunk = { start: Number(m[1]), count, oldLeft: count, newLeft: m[3] === undefined ? 1 : Number(m[3]), old: [], new: [] };
      continue;
    }
    // The ---/+++ header, `diff --git`, `\ No newline at end of file`, lines after a hunk's counts.
    if (!hunk || (hunk.oldLeft === 0 && hunk.newLeft === 0)) continue;
    // A context line whose leading space an editor trimmed is an empty line of both sides.
    const kind = line === '' ? ' ' : line[0];
    const body = line.slice(1);
    if (kind === ' ') { hunk.old.push(body); hunk.new.push(body); hunk.oldLeft--; hunk.newLeft--; }
    else if (kind === '-') { hunk.old.push(body); hunk.oldLeft--; }
    else if (kind === '+') { hunk.new.push(body); hunk.newLeft--; }
  }
  finish();
  if (!out.length) throw new PatchMismatch('the suggested fix holds no hunk');
  return out;
}
