// The agent from where the person is, not only from the panel: "Fix with dsh" / "Explain with dsh"
// code actions on every diagnostic, and inline chat (Ctrl+I): a prompt at the cursor whose answer is
// shown as a diff of the selection (Accept / Reject in the diff editor, as for Apply).
//
// Both send to the session the chat shows, with editor context on the send (protocol §4 `context`):
// the diagnostic itself (kind `diagnostics`) and the code around it (kind `selection`), or the
// selection inline chat works on. Inline chat waits for the turn that claims its prompt to end and
// takes the reply's first code block as the new text of the selection.
import * as path from 'node:path';
import * as vscode from 'vscode';
import { toLspDiagnostic, toRange } from './editorContext';
import type { Chip } from './protocol/panelMessages';
import type { AnyEvent } from './protocol/types';
import { codeBlockOf, ReplyTracker } from './replyTracker';

/** Lines of code around a diagnostic sent with it (each side). */
export const AROUND_LINES = 10;

export interface EditorActionsHost {
  /** Sends a prompt with context in the session the chat shows; `onEvent` gets the connection's
   *  events from before the send until `dispose`. */
  ask(text: string, chips: Chip[], onEvent?: (e: AnyEvent) => void): Promise<{ sessionId: string; messageId: string; dispose(): void }>;
  /** Shows `range` of `uri` replaced by `text` as a diff with Accept / Reject; the proposal's id. */
  propose(uri: vscode.Uri, range: vscode.Range, text: string, title: string): Promise<string>;
  focusChat(): Promise<void>;
  log(line: string): void;
  /** A command failed: say why (as the extension's other commands do). */
  fail(command: string, err: unknown): void;
}

export class DiagnosticActions implements vscode.CodeActionProvider {
  static readonly kinds = [vscode.CodeActionKind.QuickFix];

  provideCodeActions(doc: vscode.TextDocument, _range: vscode.Range | vscode.Selection, context: vscode.CodeActionContext): vscode.CodeAction[] {
    if (doc.uri.scheme !== 'file') return [];
    // Hints (an unused name drawn faded) are not problems the Problems panel lists: no action on them.
    const diags = context.diagnostics.filter((d) => d.severity !== vscode.DiagnosticSeverity.Hint).slice(0, 5);
    const out: vscode.CodeAction[] = [];
    for (const d of diags) {
      const about = diags.length > 1 ? `: ${d.message.split('\n')[0].slice(0, 50)}` : '';
      for (const [verb, command] of [['Fix', 'dsh.fixDiagnostic'], ['Explain', 'dsh.explainDiagnostic']] as const) {
        const a = new vscode.CodeAction(`${verb} with dsh${about}`, vscode.CodeActionKind.QuickFix);
        a.diagnostics = [d];
        a.command = { command, title: a.title, arguments: [doc.uri, toLspDiagnostic(d)] };
        out.push(a);
      }
    }
    return out;
  }
}

/** The context a diagnostic goes with: the diagnostic, and the code around it. */
/** A diagnostic in LSP form (what toLspDiagnostic makes), as the code action hands it over. */
export interface LspDiagnostic { range: { start: { line: number; character: number }; end: { line: number; character: number } }; message: string; [k: string]: unknown }

export function diagnosticChips(uri: vscode.Uri, diagnostic: LspDiagnostic, lineCount: number): Chip[] {
  const name = path.basename(uri.fsPath);
  const first = Math.max(0, diagnostic.range.start.line - AROUND_LINES);
  const last = Math.min(lineCount - 1, diagnostic.range.end.line + AROUND_LINES);
  return [
    { kind: 'diagnostics', uri: uri.toString(), label: `problem in ${name}:${diagnostic.range.start.line + 1}`, diagnostics: [diagnostic] },
    { kind: 'selection', uri: uri.toString(), label: `${name}:${first + 1}-${last + 1}`, range: { start: { line: first, character: 0 }, end: { line: last + 1, character: 0 } } },
  ];
}

export function diagnosticPrompt(verb: 'fix' | 'explain', rel: string, diagnostic: { message: string; range: { start: { line: number } } }): string {
  const where = `${rel}:${diagnostic.range.start.line + 1}`;
  const what = diagnostic.message.split('\n')[0];
  return verb === 'fix'
    ? `Fix this problem at ${where}: ${what}`
    : `Explain this problem at ${where}, and how to fix it (do not change any file): ${what}`;
}

/** The prompt inline chat sends: the person's words, then what the reply must be. */
export function inlinePrompt(instruction: string, rel: string, range: vscode.Range, empty: boolean): string {
  const lines = `${rel}:${range.start.line + 1}-${range.end.line + (range.end.character === 0 && range.end.line > range.start.line ? 0 : 1)}`;
  const target = empty
    ? `Write the code to insert at ${rel}:${range.start.line + 1} (the code around it is attached).`
    : `This is about the selected lines ${lines} (attached).`;
  return `${instruction.trim()}\n\n${target} Reply with only the new code for ${empty ? 'that place' : 'those lines'}, in one fenced code block; do not edit the file yourself: the editor shows your code as a diff to accept.`;
}

export function registerEditorActions(host: EditorActionsHost): vscode.Disposable[] {
  const subs: vscode.Disposable[] = [];
  subs.push(vscode.languages.registerCodeActionsProvider({ scheme: 'file' }, new DiagnosticActions(), { providedCodeActionKinds: DiagnosticActions.kinds }));
  const onDiagnostic = (verb: 'fix' | 'explain') => async (uri: vscode.Uri, diagnostic: LspDiagnostic) => {
    const doc = await vscode.workspace.openTextDocument(uri);
    const chips = diagnosticChips(uri, diagnostic, doc.lineCount);
    (await host.ask(diagnosticPrompt(verb, vscode.workspace.asRelativePath(uri), diagnostic), chips)).dispose();
    await host.focusChat();
  };
  const cmd = (id: string, f: (...args: any[]) => Promise<unknown>) => subs.push(vscode.commands.registerCommand(id, async (...args: any[]) => {
    try { return await f(...args); } catch (err) { host.fail(id, err); return undefined; }
  }));
  cmd('dsh.fixDiagnostic', onDiagnostic('fix'));
  cmd('dsh.explainDiagnostic', onDiagnostic('explain'));
  cmd('dsh.inlineChat', () => inlineChat(host));
  return subs;
}

/** Ctrl+I: asks what to do, sends it with the selection (or the code around the cursor), and shows
 *  the reply's code as a diff of the selection (an insertion at the cursor when nothing is selected). */
export async function inlineChat(host: EditorActionsHost): Promise<string | undefined> {
  const editor = vscode.window.activeTextEditor;
  if (!editor || editor.document.uri.scheme !== 'file') { void vscode.window.showInformationMessage('dsh: inline chat works in a file\'s editor.'); return undefined; }
  const doc = editor.document;
  const sel = editor.selection;
  const empty = sel.isEmpty;
  const instruction = await vscode.window.showInputBox({
    title: 'dsh inline chat', prompt: empty ? `Code to insert at line ${sel.active.line + 1}` : 'What to do with the selection',
    placeHolder: empty ? 'e.g. a function that parses the date' : 'e.g. handle the empty list', ignoreFocusOut: true,
  });
  if (!instruction?.trim()) return undefined;
  const target = empty ? new vscode.Range(sel.active, sel.active) : new vscode.Range(sel.start, sel.end);
  const first = empty ? Math.max(0, sel.active.line - AROUND_LINES) : sel.start.line;
  const ctxRange = empty ? new vscode.Range(first, 0, Math.min(doc.lineCount - 1, sel.active.line + AROUND_LINES) + 1, 0) : target;
  const rel = vscode.workspace.asRelativePath(doc.uri);
  const chip: Chip = { kind: 'selection', uri: doc.uri.toString(), range: toRange(ctxRange), label: `${path.basename(doc.uri.fsPath)}:${ctxRange.start.line + 1}-${ctxRange.end.line + 1}` };
  const version = doc.version;
  return vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title: 'dsh: working on the inline chat…', cancellable: true }, async (_p, token) => {
    // The tracker listens from before the send: the turn's events may come before the send's reply.
    const tracker = new ReplyTracker();
    const sent = await host.ask(inlinePrompt(instruction, rel, target, empty), [chip], tracker.take);
    try {
      tracker.expect(sent.sessionId, sent.messageId);
      const reply = await Promise.race([tracker.reply, new Promise<undefined>((r) => token.onCancellationRequested(() => r(undefined)))]);
      if (reply === undefined) return undefined;
      const code = codeBlockOf(reply);
      if (code === undefined) {
        void vscode.window.showInformationMessage('dsh answered without code: the answer is in the chat.');
        await host.focusChat();
        return undefined;
      }
      if (doc.version !== version) host.log('inline chat: the file changed while dsh worked; the diff is against its text now');
      return await host.propose(doc.uri, target, code, `inline chat from dsh: ${instruction.trim().slice(0, 40)}`);
    } finally {
      sent.dispose();
    }
  });
}
