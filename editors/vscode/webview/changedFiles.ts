// The "Changed files" bar under the last turn (daemons with `turnDiff`, protocol.md §15): how many
// files the turn changed and their +/− lines, one row per file that opens its diff in the editor
// (Keep / Undo per hunk there), with Keep and Undo for the whole file. Collapsible; updated live from
// `turn/diff` and after each keep or undo; what an undo could not take back is said in words.
import type { WebviewToHost } from '../src/protocol/panelMessages';
import type { TurnDiffSummary } from '../src/protocol/types';
import { button, el } from './dom';

type FileRow = TurnDiffSummary['files'][number];

export interface BarState {
  diff: TurnDiffSummary | undefined; running: boolean; readOnly: boolean;
  /** The workspace folder: a path under it is shown relative to it. */
  root?: string;
}

export class ChangedFilesBar {
  readonly el = el('details', 'changed-files') as HTMLDetailsElement;
  private readonly summary = el('summary', 'changed-summary');
  private readonly list = el('ul', 'changed-list');
  private readonly noteEl = el('div', 'changed-note');
  private shown: BarState | undefined;

  constructor(private readonly post: (m: WebviewToHost) => void) {
    this.el.open = true;
    this.list.setAttribute('aria-label', 'files the last turn changed');
    this.noteEl.setAttribute('role', 'status');
    this.noteEl.hidden = true;
    this.el.append(this.summary, this.list, this.noteEl);
    this.el.hidden = true;
  }

  /** Draws `s` (nothing when it is what is drawn). */
  render(s: BarState): void {
    const was = this.shown;
    if (was && was.diff === s.diff && was.running === s.running && was.readOnly === s.readOnly && was.root === s.root) return;
    if (was?.diff?.turn !== s.diff?.turn) this.note('', false); // another turn's words
    this.shown = s;
    const files = s.diff?.files ?? [];
    this.el.hidden = files.length === 0;
    if (!files.length) { this.list.replaceChildren(); return; }
    const added = files.reduce((n, f) => n + f.added, 0);
    const removed = files.reduce((n, f) => n + f.removed, 0);
    const pending = files.reduce((n, f) => n + f.pending, 0);
    const label = `${files.length} changed file${files.length === 1 ? '' : 's'}${s.diff!.final ? '' : ' so far'}`;
    this.summary.replaceChildren(
      el('span', 'changed-label', label),
      el('span', 'lines-added', `+${added}`),
      el('span', 'lines-removed', `−${removed}`),
      el('span', 'changed-pending', pending ? `${pending} to review` : 'reviewed'),
    );
    this.summary.title = `Turn ${s.diff!.turn}: ${label}, ${added} lines added, ${removed} removed`;
    // Keep and Undo wait for the turn's end (the daemon refuses them while it runs).
    const acts = s.diff!.final && !s.running && !s.readOnly;
    this.list.replaceChildren(...files.map((f) => this.row(f, acts, s.root)));
  }

  /** What a keep or an undo did (empty: nothing said). */
  note(text: string, warning: boolean): void {
    this.noteEl.textContent = text;
    this.noteEl.classList.toggle('warning', warning);
    this.noteEl.hidden = !text;
  }

  private row(f: FileRow, acts: boolean, root: string | undefined): HTMLElement {
    const li = el('li', `changed-file ${f.status}${f.pending ? '' : ' reviewed'}`);
    li.dataset.path = f.path;
    const shown = root && f.path.startsWith(root.endsWith('/') ? root : root + '/') ? f.path.slice(root.replace(/\/$/, '').length + 1) : f.path;
    const slash = shown.lastIndexOf('/');
    const open = button('', () => this.post({ type: 'turnFile', path: f.path, action: 'open' }), 'link changed-open',
      `Open the diff of ${f.path}: before the turn ↔ now, Keep / Undo per change`);
    open.append(el('span', 'changed-mark', STATUS_MARK[f.status] ?? '?'), el('span', 'changed-name', shown.slice(slash + 1)),
      el('span', 'changed-dir', slash > 0 ? shown.slice(0, slash) : ''));
    open.setAttribute('aria-label', `${shown}, ${f.status}, ${f.added} lines added, ${f.removed} removed: open its diff`);
    const counts = el('span', 'changed-counts');
    counts.append(el('span', 'lines-added', `+${f.added}`), el('span', 'lines-removed', `−${f.removed}`));
    li.append(open, counts);
    if (f.hunks > 0) li.append(el('span', 'changed-state', f.pending ? `${f.pending}/${f.hunks}` : '✓'));
    if (acts && f.pending) {
      const row = el('span', 'changed-acts');
      row.append(
        button('Keep', () => this.post({ type: 'turnFile', path: f.path, action: 'keep' }), 'ghost small', `Keep every change of the turn in ${f.path} (marked reviewed)`),
        button('Undo', () => this.post({ type: 'turnFile', path: f.path, action: 'undo' }), 'ghost small', `Take back every change of the turn in ${f.path} (your own edits stay)`),
      );
      li.append(row);
    }
    return li;
  }
}

const STATUS_MARK: Record<string, string> = { modified: 'M', created: 'A', deleted: 'D' };
