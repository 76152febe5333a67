// The last turn's changed files in the editor (protocol.md §15 "A turn's diff", flag `turnDiff`) for
// the session the panel shows: a diff editor per file (left: the file before the turn, right: the file
// now) and CodeLens above each pending hunk in the file's editors: Keep / Undo that hunk, and Keep all /
// Undo all at the top. An undo goes through the daemon (three-way against the editor's text: the other
// hunks and the person's own edits stay); a hunk it could not take back is said in words.
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import type { DshClient } from './protocol/client';
import type { AnyEvent, TurnDiffFile, TurnDiffResult, TurnDiffSummary, TurnUndoResult } from './protocol/types';
import { locateHunk, textBeforeTurn } from './turnHunks';

export const BEFORE_SCHEME = 'dsh-turn-before';

export interface TurnDiffHost {
  /** The last turn's files changed (in counts): the chat's bar shows them. */
  changed(sessionId: string, summary: TurnDiffSummary | null): void;
  /** What a keep or an undo did, in words (the chat's bar says it too). */
  said(sessionId: string, text: string, warning: boolean): void;
  log(line: string): void;
}

interface Shown { client: DshClient; sessionId: string; result: TurnDiffResult }

export class TurnDiffs implements vscode.Disposable, vscode.CodeLensProvider, vscode.TextDocumentContentProvider {
  private session: { client: DshClient; sessionId: string } | undefined;
  private shown: Shown | undefined;
  private eventSub: { dispose(): void } | undefined;
  private readonly subs: vscode.Disposable[] = [];
  private readonly lensesChanged = new vscode.EventEmitter<void>();
  readonly onDidChangeCodeLenses = this.lensesChanged.event;
  private readonly beforeChanged = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.beforeChanged.event;
  /** The text before the turn, per `turn:path`: made once (from the text the file held then, its
   *  hunks put back), so the person's later edits show as theirs on the right side only. */
  private readonly before = new Map<string, string>();
  /** Bumped per session shown and per refresh, so an older answer does not overwrite a newer one. */
  private generation = 0;
  private refreshTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(private readonly host: TurnDiffHost) {
    this.subs.push(this.lensesChanged, this.beforeChanged);
    this.subs.push(vscode.languages.registerCodeLensProvider({ scheme: 'file' }, this));
    this.subs.push(vscode.workspace.registerTextDocumentContentProvider(BEFORE_SCHEME, this));
  }

  /** Follows `sessionId` (undefined: none); its last turn's diff is read at once. */
  async show(client: DshClient | undefined, sessionId: string | undefined): Promise<void> {
    this.eventSub?.dispose();
    this.eventSub = undefined;
    this.session = client && sessionId && client.features?.turnDiff ? { client, sessionId } : undefined;
    this.shown = undefined;
    this.before.clear();
    this.generation++;
    this.lensesChanged.fire();
    if (!this.session) return;
    this.eventSub = client!.onEvent((e) => this.onEvent(e));
    await this.refresh();
  }

  /** The diff shown (for the tests). */
  get current(): TurnDiffResult | undefined { return this.shown?.result; }

  private onEvent(e: AnyEvent): void {
    if (!this.session || e.sessionId !== this.session.sessionId) return;
    // `turn/diff` says a turn's files changed (an edit, the turn's end, a keep or an undo); a cut may
    // take the turn shown back. The hunks are read again, once for a burst.
    if (e.type === 'turn/diff' || e.type === 'conversation/cut' || e.type === 'turn/start') {
      if (this.refreshTimer) clearTimeout(this.refreshTimer);
      this.refreshTimer = setTimeout(() => { this.refreshTimer = undefined; void this.refresh().catch((err) => this.host.log(`turn diff: ${err?.message ?? err}`)); }, 100);
    }
  }

  /** Reads the last turn's diff again. */
  async refresh(): Promise<void> {
    const s = this.session;
    if (!s) return;
    const generation = ++this.generation;
    const result = await s.client.turnDiff(s.sessionId);
    if (generation !== this.generation || this.session !== s) return;
    if (this.shown && this.shown.result.turn !== result.turn) this.before.clear();
    this.shown = { ...s, result };
    this.lensesChanged.fire();
    for (const f of result.files) this.beforeChanged.fire(beforeUri(f.path));
    this.host.changed(s.sessionId, result.turn === null ? null : summaryOf(result));
  }

  /** Opens the diff of `file` (a path the last turn changed): before the turn ↔ now. */
  async open(file: string): Promise<void> {
    const f = this.file(file);
    if (!f || !this.shown) throw new Error(`${path.basename(file)} is not among the files the last turn changed.`);
    const name = path.basename(f.path);
    const right = vscode.Uri.file(f.path);
    // A deleted file has no right side on disk: the diff shows it against an empty one.
    const now = f.status === 'deleted' ? beforeUri(f.path, 'deleted') : right;
    await vscode.commands.executeCommand('vscode.diff', beforeUri(f.path), now, `${name}: before turn ${this.shown.result.turn} ↔ now`);
  }

  async keep(file: string, hunks?: number[]): Promise<void> {
    const { client, sessionId, result } = this.required();
    const f = this.file(file);
    if (!f || result.turn === null) return;
    const { kept } = await client.turnKeep(sessionId, result.turn, f.path, hunks ?? pendingOf(f));
    const text = `Kept ${hunkWords(kept, hunks, f)} of ${path.basename(f.path)}.`;
    this.host.said(sessionId, text, false);
    await this.refresh();
  }

  async undo(file: string, hunks?: number[]): Promise<TurnUndoResult | undefined> {
    const { client, sessionId, result } = this.required();
    const f = this.file(file);
    if (!f || result.turn === null) return undefined;
    // The whole file: its pending hunks (an undone one would come back as a conflict, "already undone").
    const r = await client.turnUndo(sessionId, result.turn, f.path, hunks ?? pendingOf(f));
    const name = path.basename(f.path);
    const parts: string[] = [];
    if (r.undone.length || r.wholeFile) parts.push(`Undid ${r.wholeFile ? 'the whole file' : hunkWords(r.undone, hunks, f)} of ${name}.`);
    for (const c of r.conflicts) parts.push(`${c.hunk !== undefined ? `Hunk ${c.hunk}` : path.basename(c.path)} was not undone: ${c.reason}.`);
    const text = parts.join(' ') || `Nothing to undo in ${name}.`;
    this.host.said(sessionId, text, r.conflicts.length > 0);
    if (r.conflicts.length) void vscode.window.showWarningMessage(`dsh: ${text}`);
    await this.refresh();
    return r;
  }

  // ---- the editor's side ----------------------------------------------------------------------------

  provideTextDocumentContent(uri: vscode.Uri): string {
    if (uri.query === 'deleted') return '';
    const f = this.file(uri.path);
    const turn = this.shown?.result.turn;
    if (!f || turn === null || turn === undefined) return '';
    const key = `${turn}:${f.path}`;
    let text = this.before.get(key);
    if (text === undefined) {
      if (f.status === 'created') text = '';
      else text = textBeforeTurn(f.status === 'deleted' ? '' : currentText(f.path), f.hunks).text;
      this.before.set(key, text);
    }
    return text;
  }

  provideCodeLenses(doc: vscode.TextDocument): vscode.CodeLens[] {
    const f = this.file(doc.uri.fsPath);
    if (!f || !this.shown?.result.final) return [];
    const pending = f.hunks.filter((h) => h.state === 'pending');
    if (!pending.length) return [];
    const lines = doc.getText().split('\n');
    const lens = (line: number, title: string, command: string, args: unknown[], tooltip: string) => {
      const r = new vscode.Range(line, 0, line, 0);
      return new vscode.CodeLens(r, { title, command, arguments: args, tooltip });
    };
    const out: vscode.CodeLens[] = [];
    const turn = this.shown.result.turn;
    if (f.hunks.length > 1) {
      out.push(lens(0, `dsh: turn ${turn} changed ${pending.length} hunk${pending.length === 1 ? '' : 's'} here — Keep all`, 'dsh.turnDiff.keep', [f.path], 'Mark every change of the turn in this file reviewed'));
      out.push(lens(0, 'Undo all', 'dsh.turnDiff.undo', [f.path], 'Take back every change of the turn in this file (your own edits stay)'));
      out.push(lens(0, 'Open diff', 'dsh.turnDiff.open', [f.path], 'Show this file before the turn beside the file now'));
    }
    for (const h of pending) {
      const at = locateHunk(lines, h);
      if (at === undefined) continue; // its lines changed since: an undo would be a conflict
      const line = Math.min(at, Math.max(doc.lineCount - 1, 0));
      out.push(lens(line, `Keep (hunk ${h.index})`, 'dsh.turnDiff.keep', [f.path, [h.index]], 'Mark this change reviewed'));
      out.push(lens(line, 'Undo', 'dsh.turnDiff.undo', [f.path, [h.index]], 'Take this change back (the other changes and your own edits stay)'));
    }
    return out;
  }

  private file(p: string): TurnDiffFile | undefined {
    return this.shown?.result.files.find((f) => f.path === p);
  }

  private required(): Shown {
    if (!this.shown) throw new Error('No turn diff is shown.');
    return this.shown;
  }

  dispose(): void {
    this.eventSub?.dispose();
    if (this.refreshTimer) clearTimeout(this.refreshTimer);
    for (const s of this.subs.splice(0)) s.dispose();
  }
}

export function beforeUri(file: string, query = ''): vscode.Uri {
  return vscode.Uri.file(file).with({ scheme: BEFORE_SCHEME, query });
}

/** The file's text now: the editor's when it is open there, else the disk's ('' when there is none). */
function currentText(file: string): string {
  const doc = vscode.workspace.textDocuments.find((d) => d.uri.scheme === 'file' && d.uri.fsPath === file);
  if (doc) return doc.getText();
  try { return readFileSync(file, 'utf8'); } catch { return ''; }
}

/** A `dsh/turn/diff` answer in the counts of a live `turn/diff`. */
export function summaryOf(r: TurnDiffResult): TurnDiffSummary {
  return {
    turn: r.turn ?? 0, final: r.final,
    files: r.files.map((f) => ({
      path: f.path, status: f.status, by: f.by, added: f.added, removed: f.removed, hunks: f.hunks.length,
      pending: f.hunks.filter((h) => h.state === 'pending').length, // as the daemon counts it
    })),
  };
}

/** The hunks of `f` still pending; undefined for a file without hunks (binary or gone: a whole). */
function pendingOf(f: TurnDiffFile): number[] | undefined {
  return f.hunks.length ? f.hunks.filter((h) => h.state === 'pending').map((h) => h.index) : undefined;
}

function hunkWords(done: number[], asked: number[] | undefined, f: TurnDiffFile): string {
  if (!asked && done.length === f.hunks.length) return done.length === 1 ? 'the change' : `all ${done.length} changes`;
  if (!done.length) return 'nothing';
  return `hunk${done.length === 1 ? '' : 's'} ${done.join(', ')}`;
}
