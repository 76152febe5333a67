// Editor context: chips for the composer (selection, file) and the ambient, debounced
// dsh/context/didChange notification (active file, selection, visible range, nearby diagnostics).
import * as path from 'node:path';
import * as vscode from 'vscode';
import type { Chip } from './protocol/panelMessages';
import type { ContextDidChangeParams, Range } from './protocol/types';

export function toRange(r: vscode.Range): Range {
  return { start: { line: r.start.line, character: r.start.character }, end: { line: r.end.line, character: r.end.character } };
}

export function selectionChip(editor: vscode.TextEditor | undefined): Chip | undefined {
  if (!editor || editor.selection.isEmpty) return undefined;
  const s = editor.selection;
  const endLine = s.end.character === 0 && s.end.line > s.start.line ? s.end.line : s.end.line + 1;
  return {
    kind: 'selection', uri: editor.document.uri.toString(), range: toRange(s),
    label: `${path.basename(editor.document.uri.fsPath)}:${s.start.line + 1}-${endLine}`,
  };
}

/** A URI the workbench side handed over as text (a drop on the webview) names the file the extension
 *  host sees as `file:`: in a remote window (code-server, Remote-SSH) such text keeps the renderer's
 *  `vscode-remote://authority/path`, which the daemon (on the same machine as this host) cannot
 *  read. A `vscode-remote:` URI whose path is inside a workspace folder is that folder's file. Any
 *  other URI is returned as it is. */
export function localFileUri(uri: vscode.Uri, folders: readonly { uri: vscode.Uri }[] = vscode.workspace.workspaceFolders ?? []): vscode.Uri {
  if (uri.scheme !== 'vscode-remote') return uri;
  for (const f of folders) {
    if (f.uri.scheme !== 'file') continue;
    const root = f.uri.path.endsWith('/') ? f.uri.path : f.uri.path + '/';
    if (uri.path === f.uri.path || uri.path.startsWith(root)) return vscode.Uri.file(uri.path);
  }
  return uri;
}

export function fileChip(uri: vscode.Uri): Chip {
  return { kind: 'file', uri: uri.toString(), label: path.basename(uri.fsPath) };
}

/** The problems (diagnostics) of the editor's file, as a chip; undefined when it has none. */
export function diagnosticsChip(editor: vscode.TextEditor | undefined): Chip | undefined {
  if (!editor || editor.document.uri.scheme !== 'file') return undefined;
  const diagnostics = vscode.languages.getDiagnostics(editor.document.uri).slice(0, 50).map(toLspDiagnostic);
  if (!diagnostics.length) return undefined;
  return { kind: 'diagnostics', uri: editor.document.uri.toString(), label: `problems in ${path.basename(editor.document.uri.fsPath)}`, diagnostics };
}

export function toLspDiagnostic(d: vscode.Diagnostic): Record<string, unknown> {
  const out: Record<string, unknown> = { range: toRange(d.range), severity: d.severity + 1, message: d.message };
  if (d.source) out.source = d.source;
  if (d.code !== undefined) out.code = typeof d.code === 'object' ? String(d.code.value) : d.code;
  return out;
}

export function ambientState(editor: vscode.TextEditor | undefined): ContextDidChangeParams | undefined {
  if (!editor || editor.document.uri.scheme !== 'file') return undefined;
  const line = editor.selection.active.line;
  const diagnostics = vscode.languages.getDiagnostics(editor.document.uri)
    .filter((d) => Math.abs(d.range.start.line - line) <= 20)
    .slice(0, 10)
    .map(toLspDiagnostic);
  const params: ContextDidChangeParams = { activeUri: editor.document.uri.toString(), selection: toRange(editor.selection), diagnostics };
  if (editor.visibleRanges[0]) params.visibleRange = toRange(editor.visibleRanges[0]);
  return params;
}

/** Watches the editor and calls `send` with the latest state, debounced. */
export function watchAmbient(send: (p: ContextDidChangeParams) => void, delayMs = 400): vscode.Disposable {
  let timer: ReturnType<typeof setTimeout> | undefined;
  let last = '';
  const schedule = () => {
    if (timer) clearTimeout(timer);
    timer = setTimeout(() => {
      if (!vscode.workspace.getConfiguration('dsh').get<boolean>('ambientContext', true)) return;
      const state = ambientState(vscode.window.activeTextEditor);
      if (!state) return;
      const key = JSON.stringify(state);
      if (key === last) return;
      last = key;
      send(state);
    }, delayMs);
  };
  const subs = [
    vscode.window.onDidChangeActiveTextEditor(schedule),
    vscode.window.onDidChangeTextEditorSelection(schedule),
    vscode.window.onDidChangeTextEditorVisibleRanges(schedule),
    vscode.languages.onDidChangeDiagnostics(schedule),
  ];
  schedule();
  return { dispose: () => { if (timer) clearTimeout(timer); subs.forEach((s) => s.dispose()); } };
}
