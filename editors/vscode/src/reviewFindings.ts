// A review's findings (protocol.md §19) as diagnostics of source `dsh review` in the Problems panel,
// for the session the panel shows: folded from its `review/*` events (a rewind's cut: listed again),
// each with code actions to apply its suggested fix, ask dsh to fix it, or dismiss it. A finding
// whose lines the person changes is dismissed (its lines no longer say what it was about); one below
// a change moves with its lines.
import * as path from 'node:path';
import * as vscode from 'vscode';
import type { DshClient } from './protocol/client';
import type { AnyEvent, ReviewFinding } from './protocol/types';
import { patchReplacements } from './reviewPatch';

export const REVIEW_SOURCE = 'dsh review';

interface Live { finding: ReviewFinding; uri: vscode.Uri; start: number; end: number } // 0-based, end inclusive

export interface ReviewHost {
  /** Sends `text` as the person's prompt to the session shown (what "Ask dsh to fix" does). */
  ask(text: string): Promise<void>;
  log(line: string): void;
}

export class ReviewFindings implements vscode.Disposable, vscode.CodeActionProvider {
  readonly diagnostics: vscode.DiagnosticCollection;
  private readonly live = new Map<string, Live>();
  private session: { client: DshClient; sessionId: string; cwd: string } | undefined;
  private readonly subs: vscode.Disposable[] = [];
  private eventSub: { dispose(): void } | undefined;
  /** Bumped per session shown and per list, so an older list's answer does not overwrite a newer one. */
  private generation = 0;

  constructor(private readonly host: ReviewHost) {
    this.diagnostics = vscode.languages.createDiagnosticCollection(REVIEW_SOURCE);
    this.subs.push(this.diagnostics, vscode.workspace.onDidChangeTextDocument((e) => this.documentChanged(e)));
    this.subs.push(vscode.languages.registerCodeActionsProvider({ scheme: 'file' }, this, { providedCodeActionKinds: [vscode.CodeActionKind.QuickFix] }));
  }

  /** Shows the findings of `sessionId` (relative paths against `cwd`, the session's); none: clears them. */
  async show(client: DshClient | undefined, sessionId: string | undefined, cwd: string | undefined): Promise<void> {
    this.eventSub?.dispose();
    this.eventSub = undefined;
    this.session = client && sessionId && cwd && client.features?.review ? { client, sessionId, cwd } : undefined;
    this.live.clear();
    this.generation++;
    this.render();
    if (!this.session) return;
    this.eventSub = client!.onEvent((e) => this.onEvent(e));
    await this.reload();
  }

  findings(): ReviewFinding[] { return [...this.live.values()].map((l) => l.finding); }

  private onEvent(e: AnyEvent): void {
    if (!this.session || e.sessionId !== this.session.sessionId) return;
    if (e.type === 'review/finding') { this.add(e.data as ReviewFinding); this.render(); }
    else if (e.type === 'review/dismissed') { this.live.delete((e.data as { findingId: string }).findingId); this.render(); }
    // A cut takes back the findings of the turns it removes: the daemon's list says which are left.
    else if (e.type === 'conversation/cut') void this.reload();
  }

  private async reload(): Promise<void> {
    const s = this.session;
    if (!s) return;
    const gen = ++this.generation;
    try {
      const { findings } = await s.client.reviewList(s.sessionId);
      if (gen !== this.generation) return;
      this.live.clear();
      for (const f of findings) this.add(f);
      this.render();
    } catch (err) {
      this.host.log(`review list: ${(err as Error)?.message ?? err}`);
    }
  }

  private add(f: ReviewFinding): void {
    if (!this.session) return;
    const abs = path.isAbsolute(f.path) ? f.path : path.join(this.session.cwd, f.path);
    this.live.set(f.findingId, { finding: f, uri: vscode.Uri.file(abs), start: f.startLine - 1, end: f.endLine - 1 });
  }

  private render(): void {
    const byUri = new Map<string, { uri: vscode.Uri; list: vscode.Diagnostic[] }>();
    for (const l of this.live.values()) {
      const f = l.finding;
      const severity = f.severity === 'error' ? vscode.DiagnosticSeverity.Error
        : f.severity === 'warning' ? vscode.DiagnosticSeverity.Warning : vscode.DiagnosticSeverity.Information;
      // The finding's whole lines: to the start of the line after its last (VS Code shows the range
      // up to that line's end).
      const d = new vscode.Diagnostic(new vscode.Range(l.start, 0, l.end + 1, 0), f.body ? `${f.title}\n${f.body}` : f.title, severity);
      d.source = REVIEW_SOURCE;
      d.code = f.findingId;
      const key = l.uri.toString();
      if (!byUri.has(key)) byUri.set(key, { uri: l.uri, list: [] });
      byUri.get(key)!.list.push(d);
    }
    this.diagnostics.clear();
    for (const { uri, list } of byUri.values()) this.diagnostics.set(uri, list);
  }

  /** A change over a finding's lines dismisses it; one above it moves it by the lines it adds or
   *  removes. The changes of one event are all in the text before it, so each is compared with the
   *  finding's lines as they were. */
  private documentChanged(e: vscode.TextDocumentChangeEvent): void {
    if (!this.session || !e.contentChanges.length) return;
    const key = e.document.uri.toString();
    let changed = false;
    for (const l of [...this.live.values()]) {
      if (l.uri.toString() !== key) continue;
      let delta = 0;
      let touched = false;
      for (const c of e.contentChanges) {
        // Ending at the very start of the finding's first line is above it when whole lines go or
        // come there (a line above deleted, a line inserted before it), not when it joins or types
        // into that line.
        const atStart = c.range.end.line === l.start && c.range.end.character === 0;
        const above = c.range.end.line < l.start || (atStart && (c.text.endsWith('\n') || (c.text === '' && c.range.start.character === 0)));
        if (above) delta += c.text.split('\n').length - 1 - (c.range.end.line - c.range.start.line);
        else if (c.range.start.line <= l.end) touched = true;
      }
      if (touched) { void this.dismiss(l.finding.findingId); changed = true; }
      else if (delta) { l.start += delta; l.end += delta; changed = true; }
    }
    if (changed) this.render();
  }

  /** Dismisses a finding on the daemon (durable) and takes it out of the Problems panel now. */
  async dismiss(findingId: string): Promise<void> {
    const s = this.session;
    if (!this.live.delete(findingId) || !s) return;
    this.render();
    await s.client.reviewDismiss(s.sessionId, findingId);
  }

  /** The finding's fix as an edit the person looks at before it is applied (the refactor preview). */
  async applyFix(findingId: string): Promise<boolean> {
    const l = this.live.get(findingId);
    if (!l?.finding.suggestedPatch) return false;
    const doc = await vscode.workspace.openTextDocument(l.uri);
    const edit = new vscode.WorkspaceEdit();
    const meta = { needsConfirmation: true, label: `dsh review: ${l.finding.title}` };
    const eol = doc.eol === vscode.EndOfLine.CRLF ? '\r\n' : '\n';
    for (const r of patchReplacements(doc.getText(), l.finding.suggestedPatch)) {
      // Whole lines: from the start of the first to the start of the line after the last (the end
      // of the text when that is the last line).
      const atEnd = r.end >= doc.lineCount;
      const end = atEnd ? doc.lineAt(doc.lineCount - 1).range.end : new vscode.Position(r.end, 0);
      const text = r.lines.length ? r.lines.join(eol) + (atEnd ? '' : eol) : '';
      edit.replace(l.uri, new vscode.Range(new vscode.Position(r.start, 0), end), text, meta);
    }
    return vscode.workspace.applyEdit(edit);
  }

  /** Sends the finding to the session as the person's request to fix it. */
  async askFix(findingId: string): Promise<void> {
    const l = this.live.get(findingId);
    if (!l) return;
    await this.host.ask(askText(l.finding));
  }

  provideCodeActions(_doc: vscode.TextDocument, _range: vscode.Range | vscode.Selection, context: vscode.CodeActionContext): vscode.CodeAction[] {
    const out: vscode.CodeAction[] = [];
    for (const d of context.diagnostics) {
      const id = d.source === REVIEW_SOURCE && typeof d.code === 'string' ? d.code : undefined;
      const l = id ? this.live.get(id) : undefined;
      if (!l) continue;
      const action = (title: string, command: string, preferred = false) => {
        const a = new vscode.CodeAction(title, vscode.CodeActionKind.QuickFix);
        a.diagnostics = [d];
        a.command = { title, command, arguments: [l.finding.findingId] };
        a.isPreferred = preferred;
        out.push(a);
      };
      if (l.finding.suggestedPatch) action('Apply suggested fix', 'dsh.review.applyFix', true);
      action('Ask dsh to fix', 'dsh.review.askFix');
      action('Dismiss', 'dsh.review.dismiss');
    }
    return out;
  }

  dispose(): void {
    this.eventSub?.dispose();
    for (const s of this.subs.splice(0)) s.dispose();
  }
}

/** The prompt "Ask dsh to fix" sends: the finding as context, then the request. */
export function askText(f: ReviewFinding): string {
  const lines = f.startLine === f.endLine ? `line ${f.startLine}` : `lines ${f.startLine}-${f.endLine}`;
  return `Fix this review finding in ${f.path} (${lines}, ${f.severity}): ${f.title}\n\n${f.body}`.trimEnd()
    + (f.suggestedPatch ? `\n\nThe review suggested this patch:\n\`\`\`diff\n${f.suggestedPatch.trimEnd()}\n\`\`\`` : '');
}
