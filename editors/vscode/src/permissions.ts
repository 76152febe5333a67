// Edits a person decides on: the daemon's permission requests (a card in the panel answers them, or
// the diff editor's Accept / Reject title actions), and code blocks the person applies to a file
// (a client-side WorkspaceEdit, shown in the same diff editor first and made only on Accept).
//
// The diff's proposed side is an in-memory file (ProposalFiles) the person may change before
// accepting, when the daemon can take a changed proposal (`editedAccept`, and the request previews
// the whole before/after text): an allowing answer given anywhere in this window (the diff editor, the
// card, the notification) then carries the side's text as `newText`, since that is what the person
// sees and allows. Otherwise the side is read-only: the daemon applies exactly what it previewed.
// Every diff tab of a request closes when the request is answered, wherever that happens (the card,
// the diff editor, another window, a timeout).
import * as path from 'node:path';
import * as vscode from 'vscode';
import { placeSnippet, type Symbol } from './placeSnippet';
import { ProposalFiles, proposalOf, sideUri } from './proposalFiles';
import type { PermissionAnswer, PermissionOutcome, PermissionRequest, PlanMode, UnsavedChoice } from './protocol/types';

/** What a plan's answer adds (§3 "Plan approval"): the mode an approval runs it in, a revision's words. */
export interface PlanChoice { mode?: PlanMode; feedback?: string }

export { DIFF_SCHEME } from './proposalFiles';
/** True while the active editor is a proposal's diff (editor/title actions and keybindings). */
export const PROPOSAL_CONTEXT = 'dsh.proposedEdit';
/** Accept / Reject from the diff editor are ignored this soon after its tab became active: a key
 *  typed for something else as the diff opens cannot accept an edit. */
export const DIFF_ARM_MS = 600;
/** The proposed side is saved (into memory) this long after the person stops typing in it. */
const SAVE_AFTER_MS = 300;

export interface PermissionOptions {
  log?: (line: string) => void;
  now?: () => number;
  /** Whether the daemon takes a changed proposal (`experimental.dsh.editedAccept`). */
  editedAccept?: () => boolean;
  /** The proposed side of `callId` now differs from the proposal (or no longer does). */
  onEdited?: (callId: string, edited: boolean) => void;
}

interface Apply { uri: vscode.Uri; range: vscode.Range | undefined; text: string; version: number | undefined; created: boolean }

/** A diff tab's two sides and the text proposed (what "not edited" means). */
interface Shown { before: vscode.Uri; after: vscode.Uri; proposed: string; editable: boolean; edited: boolean }

export class Permissions implements vscode.Disposable {
  private readonly pending = new Map<string, { req: PermissionRequest; resolve: (o: PermissionOutcome, persist?: boolean, unsaved?: UnsavedChoice, plan?: PlanChoice) => void }>();
  private readonly applies = new Map<string, Apply>();
  private readonly shown = new Map<string, Shown>();
  private readonly files = new ProposalFiles();
  private readonly saveTimers = new Map<string, ReturnType<typeof setTimeout>>();
  private applySeq = 0;
  private activeSince = 0;
  private activeId: string | undefined;
  /** Files the agent edited (fsPath), saved before its next run_command so commands see them. */
  readonly edited = new Set<string>();
  private readonly subs: vscode.Disposable[] = [];
  private readonly log: (line: string) => void;
  private readonly now: () => number;

  constructor(private readonly onRequest: (req: PermissionRequest) => void, private readonly onDone: (callId: string) => void,
    private readonly opts: PermissionOptions = {}) {
    this.log = opts.log ?? (() => undefined);
    this.now = opts.now ?? Date.now;
    this.subs.push(this.files);
    const track = () => {
      const id = this.activeProposal();
      if (id === this.activeId) return;
      this.activeId = id;
      this.activeSince = this.now();
      void vscode.commands.executeCommand('setContext', PROPOSAL_CONTEXT, id !== undefined);
    };
    if (vscode.window.tabGroups?.onDidChangeTabs) this.subs.push(vscode.window.tabGroups.onDidChangeTabs(track));
    if (vscode.window.onDidChangeActiveTextEditor) this.subs.push(vscode.window.onDidChangeActiveTextEditor(track));
    if (vscode.workspace.onDidChangeTextDocument) this.subs.push(vscode.workspace.onDidChangeTextDocument((e) => this.typed(e.document)));
  }

  /** The DshClient permission handler: resolves when the person answers (panel, notification, diff).
   *  An allowing answer carries the proposed side's text when the person changed it. */
  handle = async (req: PermissionRequest): Promise<PermissionAnswer> => {
    let persist = false;
    let unsaved: UnsavedChoice | undefined;
    let plan: PlanChoice = {};
    const outcome = await new Promise<PermissionOutcome>((resolve) => {
      this.pending.set(req.callId, { req, resolve: (o, p, u, pl) => { persist = !!p; unsaved = u; plan = pl ?? {}; resolve(o); } });
      this.onRequest(req);
    });
    this.pending.delete(req.callId);
    const allowed = outcome === 'allow-once' || outcome === 'allow-always';
    const newText = allowed ? this.editedText(req.callId) : undefined;
    if (newText !== undefined) this.log(`allowed ${req.callId} with the person's changes to the proposal`);
    this.onDone(req.callId);
    if (req.preview?.kind === 'plan') {
      // Approve with the mode picked; Revise (reject) with the person's words, when they gave any.
      if (allowed) return { outcome, mode: plan.mode ?? 'ask' };
      if (outcome === 'reject' && plan.feedback?.trim()) return { outcome, feedback: plan.feedback.trim() };
      return { outcome };
    }
    void this.closeDiff(req.callId);
    if (req.tool === 'run_command' && allowed) await this.saveEdited();
    // "Always (saved to config)" on a sandbox escalation: the daemon writes the widening into the
    // person's config.json (an unconfined one it never saves: it counts as the session's).
    if (persist && outcome === 'allow-always' && req.preview?.escalation) {
      this.log(`${req.callId}: the widening is to be saved to config.json`);
      return { outcome, persist: true };
    }
    // An edit overlapping the person's unsaved changes: what they chose for those (§8); the
    // daemon keeps the edit in the buffer only when nothing is said.
    const choice = allowed && req.preview?.unsaved === 'overlaps' && unsaved ? { unsaved } : {};
    return newText === undefined ? { outcome, ...choice } : { outcome, newText, ...choice };
  };

  /** The daemon settled `callId` some other way (a timeout, a cancel, another client): the answer
   *  this window would send is no longer waited for, and its card and diff go. */
  settled(callId: string): void {
    this.pending.get(callId)?.resolve('cancelled');
  }

  /** The requests of `sessionId` still waiting for an answer here. */
  openFor(sessionId: string): PermissionRequest[] {
    return [...this.pending.values()].filter((p) => p.req.sessionId === sessionId).map((p) => p.req);
  }

  /** `persist` (with allow-always, on a sandbox escalation): save the widening to config.json. */
  answer(callId: string, outcome: PermissionOutcome, persist = false, unsaved?: UnsavedChoice, plan?: PlanChoice): void {
    this.pending.get(callId)?.resolve(outcome, persist, unsaved, plan);
  }

  /** A turn of `sessionId` ended (or everything goes away): its requests still open are moot. */
  cancelAll(sessionId?: string): void {
    for (const p of [...this.pending.values()]) if (sessionId === undefined || p.req.sessionId === sessionId) p.resolve('cancelled');
  }

  async saveEdited(): Promise<void> {
    for (const doc of vscode.workspace.textDocuments) {
      if (doc.isDirty && this.edited.has(doc.uri.fsPath)) await doc.save();
    }
  }

  // ---- the diff editor ---------------------------------------------------------------------------

  async viewDiff(callId: string, cwd: string | undefined): Promise<void> {
    const p = this.pending.get(callId);
    if (!p) return;
    const args = p.req.arguments as { path?: string; old_string?: string; new_string?: string; content?: string; replace_all?: boolean };
    const rel = String(p.req.preview?.path ?? args.path ?? 'file');
    const abs = path.isAbsolute(rel) ? rel : path.join(cwd ?? vscode.workspace.workspaceFolders?.[0]?.uri.fsPath ?? '/', rel);
    const fileUri = vscode.Uri.file(abs);
    const preview = p.req.preview;
    if (typeof preview?.oldText === 'string' && typeof preview.newText === 'string') {
      // The daemon's own before/after texts: exactly what the edit would do. The daemon takes a
      // changed proposal only for such a preview, whole (not cut to 1 MB).
      const editable = !preview.truncated && typeof preview.diff === 'string' && this.opts.editedAccept?.() === true;
      const title = `${path.basename(abs)} (proposed by dsh${preview.truncated ? ', cut to 1 MB' : editable ? ', editable' : ''})`;
      return this.showDiff(callId, abs, preview.oldText, preview.newText, title, editable);
    }
    let before = '';
    try {
      const open = vscode.workspace.textDocuments.find((d) => d.uri.fsPath === abs);
      before = open ? open.getText() : new TextDecoder().decode(await vscode.workspace.fs.readFile(fileUri));
    } catch { /* a new file */ }
    let after: string;
    if (typeof args.content === 'string') after = args.content;
    else if (typeof args.old_string === 'string' && typeof args.new_string === 'string') {
      after = args.replace_all ? before.split(args.old_string).join(args.new_string) : before.replace(args.old_string, () => args.new_string!);
    } else {
      after = p.req.preview?.diff ?? JSON.stringify(p.req.arguments, null, 2);
    }
    return this.showDiff(callId, abs, before, after, `${path.basename(abs)} (proposed by dsh)`, false);
  }

  private async showDiff(id: string, abs: string, before: string, after: string, title: string, editable: boolean): Promise<void> {
    let s = this.shown.get(id);
    if (!s) {
      // Both sides have the file's own workspace path (the breadcrumb and the language read as the
      // file); the proposal and the side are in the query.
      const rel = vscode.workspace.asRelativePath(abs, false);
      s = { before: sideUri(id, rel, 'original'), after: sideUri(id, rel, 'proposed'), proposed: after, editable, edited: false };
      this.shown.set(id, s);
      this.files.set(s.before, before, true);
      this.files.set(s.after, after, !editable);
    }
    // Shown again: the proposed side as the person left it.
    this.activeSince = this.now();
    await vscode.commands.executeCommand('vscode.diff', s.before, s.after, title, { preview: true });
  }

  /** The text of a diff side as shown: its open document (the person's typing), else as stored. */
  sideText(uri: vscode.Uri): string {
    const doc = vscode.workspace.textDocuments.find((d) => d.uri.toString() === uri.toString());
    return doc ? doc.getText() : this.files.text(uri) ?? '';
  }

  /** The proposed side of `id` when the person changed it (undefined: unchanged, or not editable). */
  editedText(id: string): string | undefined {
    const s = this.shown.get(id);
    if (!s?.editable) return undefined;
    const text = this.sideText(s.after);
    // A document's line ends are its own: a proposal with \r\n is not "changed" by being shown.
    return sameText(text, s.proposed) ? undefined : text;
  }

  /** The person typed in a document: a proposed side is saved into memory soon after (closing its tab
   *  then never asks to save it), and the card learns whether the proposal is now changed. */
  private typed(doc: vscode.TextDocument): void {
    const id = proposalOf(doc.uri);
    if (id === undefined) return;
    const s = this.shown.get(id);
    if (!s || doc.uri.toString() !== s.after.toString()) return;
    const edited = this.editedText(id) !== undefined;
    if (edited !== s.edited) { s.edited = edited; this.opts.onEdited?.(id, edited); }
    const t = this.saveTimers.get(id);
    if (t) clearTimeout(t);
    this.saveTimers.set(id, setTimeout(() => {
      this.saveTimers.delete(id);
      if (doc.isDirty && !doc.isClosed) void doc.save().then(undefined, () => undefined);
    }, SAVE_AFTER_MS));
  }

  /** The proposal whose diff is the active tab (or the one `uri` names: an editor/title action). */
  activeProposal(uri?: unknown): string | undefined {
    if (uri instanceof vscode.Uri && proposalOf(uri) !== undefined) return proposalOf(uri);
    const input = vscode.window.tabGroups?.activeTabGroup?.activeTab?.input as { modified?: vscode.Uri } | undefined;
    return proposalOf(input?.modified);
  }

  /** Accept (Allow once, or apply the code block) from the diff editor. */
  async acceptActive(uri?: unknown): Promise<void> {
    const id = this.activeProposal(uri);
    if (!id || this.now() - this.activeSince < DIFF_ARM_MS) return;
    if (this.pending.has(id)) { this.log(`accepted ${id} in the diff editor`); this.answer(id, 'allow-once'); return; }
    if (this.applies.has(id)) await this.acceptApply(id);
  }

  async rejectActive(uri?: unknown): Promise<void> {
    const id = this.activeProposal(uri);
    if (!id || this.now() - this.activeSince < DIFF_ARM_MS) return;
    if (this.pending.has(id)) { this.log(`rejected ${id} in the diff editor`); this.answer(id, 'reject'); return; }
    if (this.applies.delete(id)) await this.closeDiff(id);
  }

  /** Closes every diff tab of proposal `id` and forgets its sides. */
  async closeDiff(id: string): Promise<void> {
    const t = this.saveTimers.get(id);
    if (t) { clearTimeout(t); this.saveTimers.delete(id); }
    // A side still unsaved is saved into memory first: closing it must not ask the person anything.
    for (const doc of vscode.workspace.textDocuments) {
      if (proposalOf(doc.uri) === id && doc.isDirty) await doc.save().then(undefined, () => false);
    }
    const groups = vscode.window.tabGroups;
    if (groups) {
      const tabs = groups.all.flatMap((g) => g.tabs).filter((t) => {
        const input = t.input as { modified?: vscode.Uri } | undefined;
        return proposalOf(input?.modified) === id;
      });
      if (tabs.length) await groups.close(tabs).then(undefined, () => undefined);
    }
    this.shown.delete(id);
    this.files.drop(id);
  }

  // ---- Apply to file: a client-side edit ---------------------------------------------------------

  /** Shows `text` applied to a file as a diff: the file `pathHint` names (replaced whole), else the
   *  active editor: into its selection; with none, in place of the symbol the snippet declares (the
   *  language's document symbols), else where the person says (the cursor, the whole file, another
   *  file, a new file). Nothing changes before Accept. */
  async proposeApply(text: string, pathHint: string | undefined, editor: vscode.TextEditor | undefined): Promise<string | undefined> {
    const root = vscode.workspace.workspaceFolders?.[0]?.uri;
    let uri: vscode.Uri | undefined;
    if (pathHint) uri = path.isAbsolute(pathHint) ? vscode.Uri.file(pathHint) : root ? vscode.Uri.joinPath(root, pathHint) : undefined;
    if (!uri && editor && editor.document.uri.scheme === 'file') {
      const doc = editor.document;
      if (!editor.selection.isEmpty) return this.proposeReplace(doc.uri, editor.selection, text, 'code block from dsh: selection');
      const placed = placeSnippet(doc.getText(), await documentSymbols(doc), text);
      if (placed) {
        return this.proposeReplace(doc.uri, new vscode.Range(doc.positionAt(placed.start), doc.positionAt(placed.end)), placed.text, `code block from dsh: ${placed.symbol}`);
      }
      const where = await vscode.window.showQuickPick([
        { label: 'At the cursor', detail: `${path.basename(doc.uri.fsPath)}:${editor.selection.active.line + 1}`, id: 'cursor' },
        { label: 'Replace the whole file', detail: path.basename(doc.uri.fsPath), id: 'file' },
        { label: 'Another file…', id: 'other' },
        { label: 'A new file', id: 'new' },
      ], { placeHolder: 'The code block names no file and declares nothing in this one: apply it where?' });
      if (!where) return;
      if (where.id === 'cursor') return this.proposeReplace(doc.uri, new vscode.Range(editor.selection.active, editor.selection.active), text, 'code block from dsh: at the cursor');
      if (where.id === 'file') uri = doc.uri;
      if (where.id === 'new') {
        const created = await vscode.workspace.openTextDocument({ content: text, language: doc.languageId });
        await vscode.window.showTextDocument(created, { preview: false });
        return;
      }
    }
    if (!uri) {
      const files = await vscode.workspace.findFiles('**/*', '**/{node_modules,.git,.venv}/**', 2000);
      const picked = await vscode.window.showQuickPick(files.map((f) => ({ label: vscode.workspace.asRelativePath(f), uri: f })), { placeHolder: 'Apply the code block to which file?' });
      uri = picked?.uri;
    }
    if (!uri) return;
    let doc: vscode.TextDocument | undefined;
    try { doc = await vscode.workspace.openTextDocument(uri); } catch { doc = undefined; } // a new file
    const before = doc?.getText() ?? '';
    // A whole file keeps its last line end (a code block has none).
    if (doc && before.endsWith('\n') && !text.endsWith('\n')) text += before.endsWith('\r\n') ? '\r\n' : '\n';
    if (!doc) return this.proposeReplace(uri, undefined, text, 'code block from dsh: new file');
    return this.proposeReplace(uri, new vscode.Range(doc.positionAt(0), doc.positionAt(before.length)), text, 'code block from dsh: whole file');
  }

  /** Shows `range` of `uri` replaced by `text` as a diff (the proposed side editable); Accept makes
   *  the edit, unless the file changed since. `range` undefined: `uri` is a new file. Resolves with
   *  the proposal's id once the diff shows. */
  async proposeReplace(uri: vscode.Uri, range: vscode.Range | undefined, text: string, title: string): Promise<string> {
    let doc: vscode.TextDocument | undefined;
    try { doc = range ? await vscode.workspace.openTextDocument(uri) : undefined; } catch { doc = undefined; }
    const before = doc?.getText() ?? '';
    const after = doc && range ? before.slice(0, doc.offsetAt(range.start)) + text + before.slice(doc.offsetAt(range.end)) : text;
    const id = `apply-${++this.applySeq}`;
    this.applies.set(id, { uri, range, text, version: doc?.version, created: !doc });
    // The proposed side is editable: Accept applies what it then holds.
    await this.showDiff(id, uri.fsPath, before, after, `${path.basename(uri.fsPath)} (${title})`, true);
    return id;
  }

  /** Whether proposal `id` (a proposeReplace) is still waiting for Accept or Reject. */
  isProposed(id: string): boolean {
    return this.applies.has(id);
  }

  private async acceptApply(id: string): Promise<void> {
    const a = this.applies.get(id)!;
    this.applies.delete(id);
    // The person changed the proposed side: it is the whole file as they want it.
    const whole = this.editedText(id);
    const doc = a.created ? undefined : await vscode.workspace.openTextDocument(a.uri);
    if (doc && doc.version !== a.version) {
      void vscode.window.showWarningMessage('dsh: the file changed since the diff was made; apply the code block again.');
      await this.closeDiff(id);
      return;
    }
    const edit = new vscode.WorkspaceEdit();
    if (a.created) { edit.createFile(a.uri, { ignoreIfExists: false }); edit.insert(a.uri, new vscode.Position(0, 0), whole ?? a.text); }
    else if (whole !== undefined) edit.replace(a.uri, new vscode.Range(doc!.positionAt(0), doc!.positionAt(doc!.getText().length)), whole);
    else edit.replace(a.uri, a.range!, a.text);
    const ok = await vscode.workspace.applyEdit(edit);
    await this.closeDiff(id);
    if (!ok) { void vscode.window.showErrorMessage('dsh: the edit could not be applied.'); return; }
    await vscode.window.showTextDocument(a.uri, { preview: false });
  }

  dispose(): void {
    this.cancelAll();
    for (const t of this.saveTimers.values()) clearTimeout(t);
    this.subs.forEach((s) => s.dispose());
  }
}

/** The same text but for its line ends. */
function sameText(a: string, b: string): boolean {
  return a === b || a.replace(/\r\n/g, '\n') === b.replace(/\r\n/g, '\n');
}

/** The document's symbols as offsets (nested), from the language's own provider; none when it has none. */
async function documentSymbols(doc: vscode.TextDocument): Promise<Symbol[]> {
  const found = await vscode.commands.executeCommand<Array<vscode.DocumentSymbol | vscode.SymbolInformation>>('vscode.executeDocumentSymbolProvider', doc.uri)
    .then((r) => r ?? [], () => []);
  const conv = (s: vscode.DocumentSymbol | vscode.SymbolInformation): Symbol => {
    const r = 'range' in s ? s.range : s.location.range;
    return { name: s.name, start: doc.offsetAt(r.start), end: doc.offsetAt(r.end), children: 'children' in s ? s.children.map(conv) : [] };
  };
  return found.map(conv);
}
