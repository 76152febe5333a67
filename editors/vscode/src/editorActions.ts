// The agent from where the person is, not only from the panel: "Fix with dsh" / "Explain with dsh"
// code actions on every diagnostic, and inline chat (Ctrl+I, src/inlineChat.ts): a prompt box at the
// cursor whose answer is an inline diff in the editor, with Accept / Discard.
//
// Both send to the session the chat shows, with editor context on the send (protocol §4 `context`):
// the diagnostic itself (kind `diagnostics`) and the code around it (kind `selection`), or the
// selection inline chat works on. Inline chat waits for the turn that claims its prompt to end and
// takes the reply's first code block as the new text of the selection.
import * as path from 'node:path';
import * as vscode from 'vscode';
import { toLspDiagnostic } from './editorContext';
import { InlineChat } from './inlineChat';
import type { SideFolder } from './inlineSession';
import type { Chip } from './protocol/panelMessages';
import type { AnyEvent } from './protocol/types';

export { inlinePrompt } from './inlineChat';

/** Lines of code around a diagnostic sent with it (each side). */
export const AROUND_LINES = 10;

export interface EditorActionsHost {
  /** Sends a prompt with context in the session the chat shows (inline chat: or with `side` in that
   *  folder's side session); `onEvent` gets the connection's events from before the send until `dispose`. */
  ask(text: string, chips: Chip[], onEvent?: (e: AnyEvent) => void, side?: SideFolder): Promise<{ sessionId: string; messageId: string; dispose(): void }>;
  /** Stops the running turn of `sessionId` (inline chat's cancel while its prompt's turn runs). */
  stop?(sessionId: string): Promise<void>;
  /** Takes a queued prompt out of `sessionId`'s queue (inline chat's cancel while it waits). */
  unqueue?(sessionId: string, messageId: string): Promise<boolean>;
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
  const inline = new InlineChat(host);
  subs.push(inline);
  cmd('dsh.inlineChat', () => inline.open());
  cmd('dsh.inlineChat.ask', (comment: vscode.Comment) => inline.ask(comment));
  cmd('dsh.inlineChat.askSide', (comment: vscode.Comment) => inline.ask(comment, 'side'));
  cmd('dsh.inlineChat.askCurrent', (comment: vscode.Comment) => inline.ask(comment, 'current'));
  cmd('dsh.inlineChat.accept', () => inline.accept());
  cmd('dsh.inlineChat.discard', () => inline.discard());
  cmd('dsh.inlineChat.close', () => inline.close());
  cmd('dsh.inlineChat.cancel', () => inline.close());
  return subs;
}
