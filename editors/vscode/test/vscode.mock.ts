import { readFileSync, statSync } from 'node:fs';
// The parts of the `vscode` API that the panel touches, for host-side tests in plain Node.
type Listener<T> = (e: T) => unknown;

export class EventEmitter<T> {
  private listeners = new Set<Listener<T>>();
  event = (l: Listener<T>) => { this.listeners.add(l); return { dispose: () => this.listeners.delete(l) }; };
  fire(e: T): void { for (const l of [...this.listeners]) l(e); }
  dispose(): void { this.listeners.clear(); }
  /** How many listeners are subscribed (a test checks none is left behind). */
  get listening(): number { return this.listeners.size; }
}

export class Uri {
  constructor(readonly scheme: string, readonly path: string, readonly query = '') {}
  static file(p: string): Uri { return new Uri('file', p); }
  static parse(s: string): Uri { const u = new URL(s); return new Uri(u.protocol.replace(':', ''), decodeURIComponent(u.pathname)); }
  static joinPath(base: Uri, ...parts: string[]): Uri { return new Uri(base.scheme, [base.path, ...parts].join('/')); }
  static from(c: { scheme: string; path: string; query?: string }): Uri { return new Uri(c.scheme, c.path, c.query); }
  get fsPath(): string { return this.path; }
  toString(): string { return `${this.scheme}://${this.path}${this.query ? `?${this.query}` : ''}`; }
}

export enum StatusBarAlignment { Left = 1, Right = 2 }

export class Position { constructor(readonly line: number, readonly character: number) {} }
export class Range {
  readonly start: Position; readonly end: Position;
  /** (start, end) or (startLine, startCharacter, endLine, endCharacter), as VS Code's. */
  constructor(a: Position | number, b: Position | number, c?: number, d?: number) {
    this.start = typeof a === 'number' ? new Position(a, b as number) : a;
    this.end = typeof a === 'number' ? new Position(c!, d!) : b as Position;
  }
}
export class Location { constructor(readonly uri: Uri, readonly range: Range) {} }
export enum DiagnosticSeverity { Error = 0, Warning = 1, Information = 2, Hint = 3 }
export class Diagnostic {
  source?: string;
  code?: string | number | { value: string | number; target: Uri };
  constructor(readonly range: Range, readonly message: string, readonly severity = DiagnosticSeverity.Error) {}
}
/** What the "language servers" know: a test fills these (diagnostics by uri string; command results by command id). */
export const languageState = { diagnostics: new Map<string, Diagnostic[]>(), commands: new Map<string, (...args: unknown[]) => unknown>() };
export const diagnosticsChanged = new EventEmitter<{ uris: Uri[] }>();
/** Diagnostic collections the code under test made, by name: `entries()` is what Problems shows. */
export const diagnosticCollections = new Map<string, DiagnosticCollection>();
export class DiagnosticCollection {
  private readonly byUri = new Map<string, { uri: Uri; list: Diagnostic[] }>();
  constructor(readonly name: string) {}
  set(uri: Uri, list: Diagnostic[]): void { this.byUri.set(uri.toString(), { uri, list: [...list] }); }
  get(uri: Uri): Diagnostic[] { return this.byUri.get(uri.toString())?.list ?? []; }
  delete(uri: Uri): void { this.byUri.delete(uri.toString()); }
  clear(): void { this.byUri.clear(); }
  entries(): Array<[Uri, Diagnostic[]]> { return [...this.byUri.values()].map((e) => [e.uri, e.list]); }
  dispose(): void { this.byUri.clear(); diagnosticCollections.delete(this.name); }
}
export const codeActionProviders: Array<{ selector: unknown; provider: any }> = [];
export class CodeActionKind { static readonly QuickFix = new CodeActionKind('quickfix'); constructor(readonly value: string) {} }
export class CodeAction {
  diagnostics?: Diagnostic[]; command?: { title: string; command: string; arguments?: unknown[] }; isPreferred?: boolean;
  constructor(readonly title: string, readonly kind?: CodeActionKind) {}
}
export enum EndOfLine { LF = 1, CRLF = 2 }
/** The edits `workspace.applyEdit` got; a test sets `applyEditAnswer` to what the person does with the preview. */
export const appliedEdits: WorkspaceEdit[] = [];
export const applyEditAnswer = { applied: true };
export const languages = {
  createDiagnosticCollection: (name: string) => { const c = new DiagnosticCollection(name); diagnosticCollections.set(name, c); return c; },
  registerCodeActionsProvider: (selector: unknown, provider: unknown) => {
    const row = { selector, provider };
    codeActionProviders.push(row);
    return { dispose() { codeActionProviders.splice(codeActionProviders.indexOf(row), 1); } };
  },
  onDidChangeDiagnostics: diagnosticsChanged.event,
  getDiagnostics: (uri?: Uri): any => uri
    ? languageState.diagnostics.get(uri.toString()) ?? []
    : [...languageState.diagnostics].map(([u, ds]) => [Uri.parse(u), ds]),
};

export const statusItems: Array<{ text: string }> = [];
export const errors: string[] = [];
export const executed: Array<{ id: string; args: unknown[] }> = [];
export const infos: string[] = [];
export const pick: { next?: (items: any[], options: unknown) => unknown } = {};
/** A test sets `input.next` to answer the next input box (else it was dismissed); `asked` records its options. */
export const input: { next?: (options: any) => string | undefined; asked: any[] } = { asked: [] };
/** Warnings shown (a modal's `detail` too); a test sets `warn.next` to press one of its buttons (else
 *  none is pressed: the dialog was dismissed). */
export const warnings: Array<{ message: string; options?: { modal?: boolean; detail?: string }; items: string[] }> = [];
export const warn: { next?: (message: string, items: string[]) => string | undefined } = {};

export class ThemeIcon { constructor(readonly id: string) {} }

/** Quick picks the code under test created; `accept(label)` picks a row as a person would. */
export const quickPicks: Array<{ items: any[]; accept(label: string): void; hide(): void }> = [];

function createQuickPick() {
  const on = { accept: [] as Array<() => void>, button: [] as Array<(e: unknown) => void>, hide: [] as Array<() => void> };
  const sub = <T>(list: T[]) => (h: T) => { list.push(h); return { dispose() {} }; };
  const qp = {
    items: [] as any[], selectedItems: [] as any[], busy: false, placeholder: '', matchOnDescription: false, matchOnDetail: false,
    onDidAccept: sub(on.accept), onDidTriggerItemButton: sub(on.button), onDidHide: sub(on.hide),
    show() {}, dispose() {},
    hide() { on.hide.forEach((h) => h()); },
    accept(label: string) { qp.selectedItems = qp.items.filter((i) => i.label === label); on.accept.forEach((h) => h()); },
  };
  quickPicks.push(qp);
  return qp;
}

/** Editor tabs: `vscode.diff` opens one (the active tab), `tabGroups.close` closes them. */
export const tabs: Array<{ label: string; input: { original?: Uri; modified?: Uri; uri?: Uri } }> = [];
export const closedTabs: Array<{ label: string }> = [];
const tabsChanged = new EventEmitter<unknown>();
const group = {
  get tabs() { return tabs; },
  get activeTab() { return tabs[tabs.length - 1]; },
};
export const tabGroups = {
  get all() { return [group]; },
  get activeTabGroup() { return group; },
  onDidChangeTabs: tabsChanged.event,
  close: async (list: Array<{ label: string }>) => {
    for (const t of list) { const i = tabs.indexOf(t as any); if (i >= 0) { tabs.splice(i, 1); closedTabs.push(t); } }
    tabsChanged.fire({});
    return true;
  },
};

export const window = {
  createQuickPick,
  tabGroups,
  onDidChangeActiveTextEditor: new EventEmitter<unknown>().event,
  createStatusBarItem: () => { const item = { text: '', tooltip: '', command: '', name: '', show() {}, hide() {}, dispose() {} }; statusItems.push(item); return item; },
  showErrorMessage: (m: string) => { errors.push(m); return Promise.resolve(undefined); },
  showInformationMessage: (m: string) => { infos.push(m); return Promise.resolve(undefined); },
  showWarningMessage: (message: string, ...rest: unknown[]) => {
    const options = typeof rest[0] === 'object' && rest[0] !== null ? rest.shift() as { modal?: boolean; detail?: string } : undefined;
    const items = rest as string[];
    warnings.push({ message, options, items });
    const choose = warn.next;
    warn.next = undefined;
    return Promise.resolve(choose ? choose(message, items) : undefined);
  },
  /** A test sets `pick.next` to choose from the items (else nothing is picked). */
  showQuickPick: async (items: unknown, options?: unknown) => {
    const choose = pick.next;
    pick.next = undefined;
    return choose ? choose(await (items as Promise<any[]> | any[]), options) : undefined;
  },
  showInputBox: async (options?: unknown) => {
    input.asked.push(options);
    const answer = input.next;
    input.next = undefined;
    return answer ? answer(options) : undefined;
  },
  activeTextEditor: undefined,
  visibleTextEditors: [],
};

/** Installed extensions: a test adds `{packageJSON}` rows (a language server is one with code that
 *  activates on its language). */
export const extensions = { all: [] as Array<{ id: string; packageJSON: any }> };

export enum FileType { Unknown = 0, File = 1, Directory = 2, SymbolicLink = 64 }
export enum FilePermission { Readonly = 1 }
export enum FileChangeType { Changed = 1, Created = 2, Deleted = 3 }
export class FileSystemError extends Error {
  constructor(message: string, readonly code: string) { super(message); }
  static FileNotFound(u?: unknown): FileSystemError { return new FileSystemError(`not found: ${String(u)}`, 'FileNotFound'); }
  static NoPermissions(u?: unknown): FileSystemError { return new FileSystemError(`no permissions: ${String(u)}`, 'NoPermissions'); }
}

/** File system providers by scheme (registerFileSystemProvider). */
export const fileSystems = new Map<string, any>();

/** An open document a test types into: `type(text)` replaces its text as a person would (it is
 *  dirty then, its version goes up, and onDidChangeTextDocument fires with the change, as VS Code's
 *  does: listeners tell a change of text from one of dirty state by `contentChanges`); `save()` writes
 *  it through its file system. */
export class FakeDocument {
  isDirty = false;
  isClosed = false;
  saves = 0;
  version = 1;
  constructor(readonly uri: Uri, private text: string, readonly languageId = 'plaintext') {}
  readonly eol = EndOfLine.LF;
  getText(): string { return this.text; }
  positionAt(offset: number): Position {
    const before = this.text.slice(0, offset).split('\n');
    return new Position(before.length - 1, before[before.length - 1].length);
  }
  get lineCount(): number { return this.text.split('\n').length; }
  lineAt(line: number): { text: string; range: Range } {
    const text = this.text.split('\n')[line];
    return { text, range: new Range(line, 0, line, text.length) };
  }
  /** Replaces `range` with `text` as one change (a person typing over a selection). */
  edit(range: Range, text: string): void {
    const lines = this.text.split('\n');
    const offset = (p: Position) => lines.slice(0, p.line).reduce((n, l) => n + l.length + 1, 0) + p.character;
    const from = offset(range.start), to = offset(range.end);
    this.text = this.text.slice(0, from) + text + this.text.slice(to);
    this.isDirty = true;
    this.version++;
    documentChanged.fire({ document: this, contentChanges: [{ range, rangeOffset: from, rangeLength: to - from, text }], reason: undefined });
  }
  type(text: string): void {
    const old = this.text;
    const lines = old.split('\n');
    const whole = new Range(0, 0, lines.length - 1, lines[lines.length - 1].length);
    this.text = text;
    this.isDirty = true;
    this.version++;
    documentChanged.fire({ document: this, contentChanges: [{ range: whole, rangeOffset: 0, rangeLength: old.length, text }], reason: undefined });
  }
  async save(): Promise<boolean> {
    this.saves++;
    fileSystems.get(this.uri.scheme)?.writeFile(this.uri, new TextEncoder().encode(this.text), { create: false, overwrite: true });
    this.isDirty = false;
    return true;
  }
}
/** `replaced`: the texts `applyEdit` gives open documents (the proposal code makes whole-document replacements only);
 *  `replacements`: every replacement with its range and metadata, in the order made. */
export class WorkspaceEdit {
  readonly replaced: Array<{ uri: Uri; text: string }> = [];
  readonly replacements: Array<{ uri: Uri; range: Range; text: string; meta?: { needsConfirmation: boolean; label: string } }> = [];
  replace(uri: Uri, range: Range, text: string, meta?: { needsConfirmation: boolean; label: string }): void {
    this.replaced.push({ uri, text });
    this.replacements.push({ uri, range, text, meta });
  }
}
/** A change to a document's text, as VS Code's `TextDocumentContentChangeEvent`. */
export interface ContentChange { range: Range; rangeOffset: number; rangeLength: number; text: string }
export const documentChanged = new EventEmitter<{ document: FakeDocument; contentChanges: ContentChange[]; reason: undefined }>();
/** Opens a document over a registered file system's file (as the diff editor would). */
export function openFakeDocument(uri: Uri): FakeDocument {
  const doc = new FakeDocument(uri, new TextDecoder().decode(fileSystems.get(uri.scheme).readFile(uri)));
  workspace.textDocuments.push(doc);
  return doc;
}

export const workspace = {
  workspaceFolders: undefined as undefined | Array<{ uri: Uri }>,
  textDocuments: [] as FakeDocument[],
  onDidCloseTextDocument: new EventEmitter<unknown>().event,
  getConfiguration: () => ({ get: <T>(_k: string, d: T) => d }),
  /** The @ picker's file search: none here (its rows of files are tested in the browser and e2e). */
  findFiles: async (): Promise<Uri[]> => [],
  registerTextDocumentContentProvider: () => ({ dispose() {} }),
  registerFileSystemProvider: (scheme: string, provider: unknown) => { fileSystems.set(scheme, provider); return { dispose() { fileSystems.delete(scheme); } }; },
  onDidChangeTextDocument: documentChanged.event,
  /** A document of the disk's text (`file:`), or one a test opened (workspace.textDocuments). */
  openTextDocument: async (u: Uri) => workspace.textDocuments.find((d) => d.uri.toString() === u.toString())
    ?? new FakeDocument(u, readFileSync(u.fsPath, 'utf8')),
  /** Records the edit (`appliedEdits`); unless the person refuses it in the preview
   *  (`applyEditAnswer`), applies its whole-document replacements to the open documents (they get dirty). */
  applyEdit: async (edit: WorkspaceEdit) => {
    appliedEdits.push(edit);
    if (!applyEditAnswer.applied) return false;
    for (const { uri, text } of edit.replaced) workspace.textDocuments.find((d) => d.uri.toString() === uri.toString())?.type(text);
    return true;
  },
  /** The disk, for `file:` URIs only (what this host sees). */
  fs: {
    readFile: async (u: Uri) => new Uint8Array(readFileSync(u.fsPath)),
    stat: async (u: Uri) => {
      if (u.scheme !== 'file') throw FileSystemError.FileNotFound(u);
      const st = statSync(u.fsPath);
      return { type: st.isDirectory() ? FileType.Directory : FileType.File, ctime: st.ctimeMs, mtime: st.mtimeMs, size: st.size };
    },
  },
  asRelativePath: (where: string | Uri) => {
    const p = typeof where === 'string' ? where : where.fsPath;
    const root = workspace.workspaceFolders?.[0]?.uri.fsPath;
    return root && p.startsWith(root + '/') ? p.slice(root.length + 1) : p;
  },
};

export const commands = {
  executeCommand: (id: string, ...args: unknown[]) => {
    executed.push({ id, args });
    const answer = languageState.commands.get(id);
    if (answer) return Promise.resolve(answer(...args));
    if (id === 'vscode.diff') {
      tabs.push({ label: String(args[2]), input: { original: args[0] as Uri, modified: args[1] as Uri } });
      tabsChanged.fire({});
    }
    return Promise.resolve(undefined);
  },
  registerCommand: () => ({ dispose() {} }),
};

export const env = { clipboard: { writeText: () => Promise.resolve() } };
