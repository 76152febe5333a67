// What the editor offers the daemon (protocol.md §9): saving the documents an agent edit changed
// (`dsh/document/save`), the problems VS Code knows (`dsh/editor/diagnostics`), and its language
// features (`dsh/editor/definition|references|symbols|hover`) answered by whatever language
// extensions the person has installed. Advertised in `initialize` params
// `capabilities.experimental.dsh`; each answer converts VS Code's types to LSP's.
import * as vscode from 'vscode';
import type { SaveReason } from './outputLog';

export const OFFERED = {
  documentSave: true,
  documentSaveText: true,
  diagnostics: true,
  diagnosticsSettle: true,
  languageFeatures: ['definition', 'references', 'symbols', 'hover'],
};

/** Whether an installed extension with code serves documents of `languageId`: one that activates on
 *  the language, or contributes it and has code. VS Code lists no language-feature providers, so this
 *  is how "no language server for this file" is told from "the server found nothing"; extensions that
 *  activate on everything (`*`, such as git) do not count. */
export function languageServed(languageId: string): boolean {
  return vscode.extensions.all.some((e) => {
    const pj = e.packageJSON ?? {};
    if (!pj.main && !pj.browser) return false;
    const events: unknown[] = Array.isArray(pj.activationEvents) ? pj.activationEvents : [];
    if (events.includes(`onLanguage:${languageId}`)) return true;
    const langs: unknown[] = Array.isArray(pj.contributes?.languages) ? pj.contributes.languages : [];
    return langs.some((l) => (l as { id?: unknown })?.id === languageId);
  });
}

function documentOf(uri: string): vscode.TextDocument | undefined {
  const key = vscode.Uri.parse(uri).toString();
  return vscode.workspace.textDocuments.find((d) => d.uri.toString() === key);
}

/** No language server for the document at `uri` (not open: judged by its file name's language). */
async function unserved(uri: string): Promise<boolean> {
  let doc = documentOf(uri);
  try {
    doc ??= await vscode.workspace.openTextDocument(vscode.Uri.parse(uri));
  } catch { /* no such file: nothing serves it */ }
  return doc === undefined || !languageServed(doc.languageId);
}

const QUIET_MS = 100; // after a re-check, how long to wait for another report (TypeScript sends three kinds)

/** When each document last changed and when its diagnostics last changed (ms), for `settleMs`: the
 *  diagnostics changed after the document did means its language server re-checked it. One per
 *  extension (the Daemon owns it, across daemon restarts, and disposes it with the extension): its
 *  listeners live exactly as long as it does. */
export class Rechecks implements vscode.Disposable {
  private changed = new Map<string, number>();
  private reported = new Map<string, number>();
  private readonly listeners: vscode.Disposable[];
  constructor() {
    this.listeners = [
      vscode.workspace.onDidChangeTextDocument((e) => { if (e.contentChanges.length) this.changed.set(e.document.uri.toString(), Date.now()); }),
      vscode.languages.onDidChangeDiagnostics((e) => { const now = Date.now(); for (const u of e.uris) this.reported.set(u.toString(), now); }),
      vscode.workspace.onDidCloseTextDocument((d) => { this.changed.delete(d.uri.toString()); this.reported.delete(d.uri.toString()); }),
    ];
  }

  dispose(): void {
    for (const l of this.listeners.splice(0)) l.dispose();
    this.changed.clear();
    this.reported.clear();
  }

  /** Opens the document at `uri` for its language servers, in no editor tab, when VS Code has none:
   *  VS Code keeps a document an agent edit opened only until the edit is saved, and language servers
   *  check only the documents VS Code has, so without this an edit to a file open in no tab was never
   *  checked. Opening counts as a change: only a report after it is for this text. A file that cannot
   *  be opened, or that no server serves, is settled at once ("no language server") as before. */
  private async openForServers(uri: vscode.Uri): Promise<void> {
    const key = uri.toString();
    if (vscode.workspace.textDocuments.some((d) => d.uri.toString() === key)) return;
    const asked = Date.now();
    try {
      const doc = await vscode.workspace.openTextDocument(uri);
      if (languageServed(doc.languageId)) this.changed.set(key, Math.max(this.changed.get(key) ?? 0, asked));
    } catch { /* no such file, or no way to read it: nothing will re-check it */ }
  }

  /** Why `uri`'s diagnostics are those of its current text: nothing re-checks it, or a report came
   *  after its last change (then 100 ms without another); undefined: not (yet). */
  settled(uri: vscode.Uri): Settled | undefined {
    const key = uri.toString();
    const doc = vscode.workspace.textDocuments.find((d) => d.uri.toString() === key);
    if (!doc || !languageServed(doc.languageId)) return 'no language server'; // nothing will re-check it
    const reported = this.reported.get(key);
    return reported !== undefined && reported > (this.changed.get(key) ?? 0) && Date.now() - reported >= QUIET_MS ? 'reported' : undefined;
  }

  /** Waits until every one of `uris` is settled, `capMs` at most; which are. A TypeScript/JavaScript
   *  document is also settled when TypeScript's own answer for its current text is what the editor
   *  already shows: an edit that leaves its problems as they were brings no diagnostics event
   *  (the TypeScript extension does not re-announce an unchanged empty list), which without this
   *  waited the whole cap. A TypeScript document in no editor tab is settled by tsserver's answer,
   *  put in `asked` (the extension reports only on files open in tabs). */
  async wait(uris: vscode.Uri[], capMs: number, asked?: Map<string, Record<string, unknown>[]>): Promise<Array<Settled | undefined>> {
    const deadline = Date.now() + Math.min(capMs, 60000);
    await Promise.all(uris.map((u) => this.openForServers(u)));
    // One question to tsserver per TypeScript document and settle: its answer both is the
    // diagnostics of a document in no tab (the TypeScript extension asks tsserver for the
    // diagnostics of the files open in tabs only, so none are ever reported for it) and tells
    // whether what the editor shows is already that of the current text.
    const answers = asked ?? new Map<string, Record<string, unknown>[]>();
    const confirmed = new Set<string>();
    const asking = new Set<string>();
    for (const uri of uris) {
      const untabbed = isTypescript(uri) && !inTab(uri);
      if (untabbed) asking.add(uri.toString());
      void askTsserver(uri).then((answer) => {
        if (answer && untabbed) answers.set(uri.toString(), answer.diagnostics);
        if (answer && editorAgrees(answer)) confirmed.add(uri.toString());
        asking.delete(uri.toString()); // no answer: its reports are waited for as for any document
      });
    }
    const how = (u: vscode.Uri): Settled | undefined => {
      if (answers.has(u.toString())) return 'asked TypeScript';
      if (asking.has(u.toString())) return undefined;
      return this.settled(u) ?? (confirmed.has(u.toString()) ? 'TypeScript agrees' : undefined);
    };
    while (!uris.every(how) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    return uris.map(how);
  }
}

/** How a document's diagnostics were known to be those of its current text (said in the log). */
type Settled = 'no language server' | 'reported' | 'TypeScript agrees' | 'asked TypeScript';

const TYPESCRIPT_LANGUAGES = new Set(['typescript', 'typescriptreact', 'javascript', 'javascriptreact']);
/** Whether the document at `uri` is shown in an editor tab (a text or a diff tab). */
function inTab(uri: vscode.Uri): boolean {
  const key = uri.toString();
  return vscode.window.tabGroups.all.some((g) => g.tabs.some((t) => {
    const input = t.input as { uri?: vscode.Uri; original?: vscode.Uri; modified?: vscode.Uri } | undefined;
    return [input?.uri, input?.original, input?.modified].some((u) => u?.toString() === key);
  }));
}

/** tsserver's diagnostics for each TypeScript document of `uris` that is in no editor tab (opened for
 *  it when VS Code has none), whose problems the editor never shows: what it had before an edit. */
async function untabbedTypescript(uris: vscode.Uri[], into: Map<string, Record<string, unknown>[]>): Promise<void> {
  await Promise.all(uris.map(async (uri) => {
    if (inTab(uri)) return;
    try {
      if (!vscode.workspace.textDocuments.some((d) => d.uri.toString() === uri.toString())) await vscode.workspace.openTextDocument(uri);
    } catch { return; }
    const doc = vscode.workspace.textDocuments.find((d) => d.uri.toString() === uri.toString());
    if (!doc || !isTypescript(uri) || !languageServed(doc.languageId)) return;
    const answer = await askTsserver(uri);
    if (answer) into.set(uri.toString(), answer.diagnostics);
  }));
}

const isTypescript = (uri: vscode.Uri): boolean =>
  vscode.workspace.textDocuments.some((d) => d.uri.toString() === uri.toString() && TYPESCRIPT_LANGUAGES.has(d.languageId));
/** A TypeScript diagnostic as tsserver sends it (1-based line and offset). */
interface TsDiagnostic { start: { line: number; offset: number }; end?: { line: number; offset: number }; text: string; code?: number; category?: string }

/** What tsserver said of a TypeScript document: its diagnostics, and whether the document changed
 *  (or closed) while it was asked, when they are no longer those of its current text. */
interface TsserverAnswer { uri: vscode.Uri; diagnostics: Record<string, unknown>[]; stale: boolean }

/** Asks tsserver (the TypeScript extension's `typescript.tsserverRequest`, which sends the editor's
 *  pending changes first) for the syntactic and semantic diagnostics of the TypeScript document at
 *  `uri` (not its suggestions, a third kind the editor shows as hints), as LSP diagnostics from "ts"
 *  as the editor shows them. Undefined when it is no open TypeScript document or tsserver cannot be
 *  asked. Every use of tsserver's diagnostics goes through this one question. */
async function askTsserver(uri: vscode.Uri): Promise<TsserverAnswer | undefined> {
  const doc = vscode.workspace.textDocuments.find((d) => d.uri.toString() === uri.toString());
  if (!doc || !TYPESCRIPT_LANGUAGES.has(doc.languageId)) return undefined;
  const version = doc.version;
  try {
    const ask = (command: string) => vscode.commands.executeCommand<{ success?: boolean; body?: TsDiagnostic[] } | undefined>(
      'typescript.tsserverRequest', command, { file: doc.uri, includeLinePosition: false });
    const [syntax, semantic] = await Promise.all([ask('syntacticDiagnosticsSync'), ask('semanticDiagnosticsSync')]);
    if (!syntax?.success || !semantic?.success || !Array.isArray(syntax.body) || !Array.isArray(semantic.body)) return undefined;
    const severity: Record<string, number> = { error: 1, warning: 2, message: 3 };
    const diagnostics = [...syntax.body, ...semantic.body].filter((t) => t.category !== 'suggestion').map((t) => {
      const end = t.end ?? t.start;
      return {
        range: { start: { line: t.start.line - 1, character: t.start.offset - 1 }, end: { line: end.line - 1, character: end.offset - 1 } },
        message: t.text, severity: severity[t.category ?? 'error'] ?? 1, source: 'ts', ...(t.code !== undefined ? { code: t.code } : {}),
      };
    });
    return { uri: doc.uri, diagnostics, stale: doc.isClosed || doc.version !== version };
  } catch {
    return undefined;
  }
}

/** Whether the editor's TypeScript problems for the document tsserver was asked about are already
 *  those of its current text: tsserver's answer compared, by place, code and message, with the
 *  diagnostics the editor holds from TypeScript (not its hints). Equal: nothing more will come for this
 *  text. Different, or the document changed meanwhile: false (the wait goes on for the extension's
 *  report, up to the cap). The extension leaves nothing out of what it shows, except by settings
 *  (`validate.enable`, `showUnused`…), and then this says false, never a wrong true. */
function editorAgrees(answer: TsserverAnswer): boolean {
  if (answer.stale) return false;
  const key = (line: number, character: number, code: unknown, message: string) => `${line}:${character}:${String(code ?? '')}:${message}`;
  const truth = answer.diagnostics.map((t) => {
    const { range: r, code, message } = t as { range: LspRange; code?: unknown; message: string };
    return key(r.start.line, r.start.character, code, message);
  }).sort();
  const shown = vscode.languages.getDiagnostics(answer.uri)
    .filter((d) => (d.source === 'ts' || d.source === 'js') && d.severity !== vscode.DiagnosticSeverity.Hint)
    .map((d) => key(d.range.start.line, d.range.start.character, typeof d.code === 'object' && d.code !== null ? d.code.value : d.code, d.message)).sort();
  return truth.length === shown.length && truth.every((k, i) => k === shown[i]);
}

interface LspPosition { line: number; character: number }
interface LspRange { start: LspPosition; end: LspPosition }
interface LspLocation { uri: string; range: LspRange }

const pos = (p: vscode.Position): LspPosition => ({ line: p.line, character: p.character });
const range = (r: vscode.Range): LspRange => ({ start: pos(r.start), end: pos(r.end) });
const position = (p: LspPosition) => new vscode.Position(p.line, p.character);

/** A VS Code diagnostic as an LSP one (VS Code's severities count from 0, LSP's from 1). */
export function lspDiagnostic(d: vscode.Diagnostic): Record<string, unknown> {
  const code = typeof d.code === 'object' && d.code !== null ? d.code.value : d.code;
  return {
    range: range(d.range), message: d.message, severity: d.severity + 1,
    ...(d.source ? { source: d.source } : {}), ...(code !== undefined ? { code } : {}),
  };
}

function location(l: vscode.Location | vscode.LocationLink): LspLocation {
  if ('targetUri' in l) return { uri: l.targetUri.toString(), range: range(l.targetSelectionRange ?? l.targetRange) };
  return { uri: l.uri.toString(), range: range(l.range) };
}

function hoverText(h: vscode.Hover): string {
  return h.contents.map((c) => typeof c === 'string' ? c : 'language' in c ? `\`\`\`${c.language}\n${c.value}\n\`\`\`` : c.value).join('\n\n');
}

/** Flattens document symbols (a tree) into LSP `SymbolInformation`-like rows, with their container. */
function symbolRows(uri: vscode.Uri, list: Array<vscode.DocumentSymbol | vscode.SymbolInformation>, container?: string): Record<string, unknown>[] {
  const rows: Record<string, unknown>[] = [];
  for (const s of list) {
    if ('location' in s) {
      rows.push({ name: s.name, kind: s.kind + 1, location: location(s.location), ...(s.containerName ? { containerName: s.containerName } : {}) });
      continue;
    }
    rows.push({ name: s.name, kind: s.kind + 1, location: { uri: uri.toString(), range: range(s.selectionRange) }, ...(container ? { containerName: container } : {}) });
    rows.push(...symbolRows(uri, s.children ?? [], s.name));
  }
  return rows;
}

type Handler = (params: any) => Promise<unknown>;

/** The editor's diagnostics for `uri`, TypeScript's replaced by tsserver's answer when it was asked. */
function diagnosticsOf(uri: vscode.Uri, fromTsserver: Record<string, unknown>[] | undefined): Record<string, unknown>[] {
  const shown = vscode.languages.getDiagnostics(uri);
  if (!fromTsserver) return shown.map(lspDiagnostic);
  return [...shown.filter((d) => d.source !== 'ts' && d.source !== 'js').map(lspDiagnostic), ...fromTsserver];
}

/** The document's whole range. */
function wholeRange(doc: vscode.TextDocument): vscode.Range {
  return new vscode.Range(new vscode.Position(0, 0), doc.positionAt(doc.getText().length));
}

/** Write `text` to the document's file while the document keeps what it shows, the person's unsaved
 *  changes included (issue 37): saved through the document (its text swapped for `text`, saved, and
 *  swapped back), so VS Code knows the file's new state and the person's next save is no "file is
 *  newer" conflict; the document stays dirty. In a visible editor the swaps join the agent's edit in
 *  one undo step. Save participants (format on save) may change what is written: then it says so. */
export async function saveTextKeepingBuffer(doc: vscode.TextDocument, text: string): Promise<string | undefined> {
  const shown = doc.getText();
  const swap = async (to: string): Promise<boolean> => {
    const editor = vscode.window.visibleTextEditors.find((e) => e.document === doc);
    if (editor) return editor.edit((b) => b.replace(wholeRange(doc), to), { undoStopBefore: false, undoStopAfter: false });
    const edit = new vscode.WorkspaceEdit();
    edit.replace(doc.uri, wholeRange(doc), to);
    return vscode.workspace.applyEdit(edit);
  };
  if (!await swap(text)) return 'the editor refused to change the document';
  let problem: string | undefined;
  try {
    if (!await doc.save()) problem = 'the editor did not save it';
  } finally {
    if (doc.getText() !== shown && !await swap(shown)) problem = 'the editor refused to restore the document';
  }
  if (problem) return problem;
  const written = new TextDecoder().decode(await vscode.workspace.fs.readFile(doc.uri));
  return written === text ? undefined : 'the file does not hold the text after saving (a save participant changed it?)';
}

/** The request handlers, by method. `log` says what was done (the daemon log the person can open);
 *  `watcher` is the extension's one re-check watch (handlers are made again at each daemon start). */
export function editorHandlers(log: (line: string) => void, watcher: Rechecks, saves?: SaveReason): Record<string, Handler> {
  const run = <T>(command: string, ...args: unknown[]) => vscode.commands.executeCommand<T>(command, ...args);
  /** An empty answer for a document no language server serves says so (protocol.md §9). */
  const orNone = async <T extends object>(uri: string | undefined, answer: T, empty: boolean): Promise<T & { noLanguageServer?: true }> =>
    empty && (uri !== undefined ? await unserved(uri) : !vscode.workspace.textDocuments.some((d) => languageServed(d.languageId)))
      ? { ...answer, noLanguageServer: true } : answer;
  return {
    // Exactly the documents named (those an agent edit just changed), never another: the person's
    // unsaved changes elsewhere stay unsaved.
    // `texts` (documentSaveText): the file gets that text, the document keeps the person's unsaved
    // changes (issue 37).
    'dsh/document/save': async (p: { uris: string[]; texts?: Record<string, string> }) => {
      const saved: string[] = [];
      const failed: Array<{ uri: string; message: string }> = [];
      for (const uri of p.uris ?? []) {
        const doc = vscode.workspace.textDocuments.find((d) => d.uri.toString() === vscode.Uri.parse(uri).toString());
        if (!doc) { failed.push({ uri, message: 'the document is not open in the editor' }); continue; }
        const text = p.texts?.[uri];
        try {
          if (typeof text === 'string') {
            const problem = await saveTextKeepingBuffer(doc, text);
            log(`wrote ${vscode.workspace.asRelativePath(doc.uri)} with the agent's edit only, its unsaved changes kept in the editor${problem ? `: failed (${problem})` : ''}`);
            if (problem) failed.push({ uri, message: problem }); else saved.push(uri);
          } else if (!doc.isDirty || await doc.save()) saved.push(uri);
          else failed.push({ uri, message: 'the editor did not save it' });
        } catch (err) {
          failed.push({ uri, message: String((err as Error)?.message ?? err) });
        }
      }
      const names = saved.map((u) => vscode.workspace.asRelativePath(vscode.Uri.parse(u)));
      log(saves ? saves.savedLine(names) : `saved after an agent edit: ${names.join(', ') || 'nothing'}`);
      return failed.length ? { saved, failed } : { saved };
    },
    // With `settleMs` (after an agent edit): once the language server re-checked each document.
    'dsh/editor/diagnostics': async (p: { uris: string[] | null; settleMs?: number }) => {
      if (!p.uris) {
        const all = vscode.languages.getDiagnostics().filter(([, ds]) => ds.length > 0);
        return { items: all.map(([uri, ds]) => ({ uri: uri.toString(), diagnostics: ds.map(lspDiagnostic) })) };
      }
      const uris = p.uris.map((u) => vscode.Uri.parse(u));
      const started = Date.now();
      const asked = new Map<string, Record<string, unknown>[]>();
      const settled = typeof p.settleMs === 'number' && p.settleMs > 0 ? await watcher.wait(uris, p.settleMs, asked) : undefined;
      // Asked before an edit (or by the diagnostics tool): a TypeScript file in no tab has what
      // tsserver says, so its old errors are not later told as new.
      if (!settled) await untabbedTypescript(uris, asked);
      if (settled) {
        const said = uris.map((u, i) => `${vscode.workspace.asRelativePath(u)}: ${settled[i] ?? `not re-checked within ${p.settleMs} ms`}`);
        log(`diagnostics after an edit (${Date.now() - started} ms): ${said.join(', ')}`);
      }
      return {
        items: uris.map((uri, i) => ({
          uri: uri.toString(), diagnostics: diagnosticsOf(uri, asked.get(uri.toString())),
          ...(settled ? { settled: settled[i] !== undefined } : {}),
        })),
      };
    },
    'dsh/editor/definition': async (p: { uri: string; position: LspPosition }) => {
      const found = await run<Array<vscode.Location | vscode.LocationLink>>('vscode.executeDefinitionProvider', vscode.Uri.parse(p.uri), position(p.position));
      const locations = (found ?? []).map(location);
      return orNone(p.uri, { locations }, locations.length === 0);
    },
    'dsh/editor/references': async (p: { uri: string; position: LspPosition; includeDeclaration?: boolean }) => {
      const found = await run<vscode.Location[]>('vscode.executeReferenceProvider', vscode.Uri.parse(p.uri), position(p.position));
      let locations = (found ?? []).map(location);
      if (p.includeDeclaration === false) {
        const decl = await run<Array<vscode.Location | vscode.LocationLink>>('vscode.executeDefinitionProvider', vscode.Uri.parse(p.uri), position(p.position));
        const key = (l: LspLocation) => `${l.uri}:${l.range.start.line}:${l.range.start.character}`;
        const skip = new Set((decl ?? []).map(location).map(key));
        locations = locations.filter((l) => !skip.has(key(l)));
      }
      return orNone(p.uri, { locations }, (found ?? []).length === 0);
    },
    'dsh/editor/symbols': async (p: { uri?: string; query?: string }) => {
      if (p.uri !== undefined) {
        const uri = vscode.Uri.parse(p.uri);
        const found = await run<Array<vscode.DocumentSymbol | vscode.SymbolInformation>>('vscode.executeDocumentSymbolProvider', uri);
        const symbols = symbolRows(uri, found ?? []);
        return orNone(p.uri, { symbols }, symbols.length === 0);
      }
      const found = await run<vscode.SymbolInformation[]>('vscode.executeWorkspaceSymbolProvider', p.query ?? '');
      const symbols = symbolRows(vscode.Uri.parse('file:///'), found ?? []);
      return orNone(undefined, { symbols }, symbols.length === 0);
    },
    'dsh/editor/hover': async (p: { uri: string; position: LspPosition }) => {
      const found = await run<vscode.Hover[]>('vscode.executeHoverProvider', vscode.Uri.parse(p.uri), position(p.position));
      const contents = (found ?? []).map(hoverText).filter((t) => t.trim()).join('\n\n---\n\n');
      return orNone(p.uri, { contents }, contents === '');
    },
  };
}
