// Inline chat (Ctrl+I, issue 36 item 4): a prompt box at the cursor whose answer is an edit shown as
// an inline diff in the editor, with Accept / Discard.
//
// The box is a comment thread of dsh's own comment controller, placed under the cursor's (or the
// selection's) lines: the stable API's one editable box inside a text editor (the editor's own
// inline chat widget is a proposed API). Its one comment, empty and in editing mode, is the prompt's
// input (VS Code focuses a new thread's editing comment, not its reply box); its button (Enter) asks.
// Then a thread without comments takes its place (one whose comments go from some to none breaks the
// Comments panel's model), its header saying what state it is in. The prompt goes to the
// session the chat shows with the selection (or the code around the cursor) as context, as the
// chat's other editor actions do, or to the folder's side session (src/inlineSession.ts: the
// `dsh.inlineChat.session` setting picks which one Enter asks in, the box's second button asks in the
// other); the reply's first code block replaces the target lines in the
// buffer, unsaved, drawn as a diff (added lines on the diff-inserted background, removed lines as
// ghost text in the diff-removed colour) with Accept / Discard as CodeLens, as the thread's actions
// and as keys (Ctrl+Enter / Escape) while it is pending. One at a time: a second Ctrl+I says where
// the pending one is. The proposal's range follows the person's edits, so Discard puts back exactly
// the old lines there and nothing else.
import * as path from 'node:path';
import * as vscode from 'vscode';
import { toRange } from './editorContext';
import { ghostText, inlineTarget, proposalLooks, proposalText, type Target, TrackedRange } from './inlineDiff';
import { type InlineSessionChoice, inlineSessionChoice, type SideFolder, sideSessionTitle } from './inlineSession';
import type { Chip } from './protocol/panelMessages';
import type { AnyEvent } from './protocol/types';
import { cancelPrompt, codeBlockOf, ReplyTracker } from './replyTracker';

export const INLINE_CONTROLLER = 'dsh.inlineChat';
/** Context key: the stage of the inline chat in the active editor's document ('' when none). */
export const INLINE_STATE = 'dsh.inlineChat.state';

/** Lines of code around the cursor sent with a prompt when nothing is selected (each side). */
const CURSOR_CONTEXT_LINES = 10;

export interface InlineChatHost {
  /** Sends a prompt with context in the session the chat shows, or with `side` in that folder's side
   *  session; `onEvent` gets the connection's events from before the send until `dispose`. */
  ask(text: string, chips: Chip[], onEvent?: (e: AnyEvent) => void, side?: SideFolder): Promise<{ sessionId: string; messageId: string; dispose(): void }>;
  /** Stops the running turn of `sessionId` (the prompt's own turn: a cancel while it runs). */
  stop?(sessionId: string): Promise<void>;
  /** Takes a still queued prompt out of `sessionId`'s queue; false when it is no longer there (a
   *  turn claimed it meanwhile). */
  unqueue?(sessionId: string, messageId: string): Promise<boolean>;
  focusChat(): Promise<void>;
  log(line: string): void;
}

type Stage = 'asking' | 'working' | 'pending';

interface Run {
  stage: Stage;
  doc: vscode.TextDocument;
  thread: vscode.CommentThread;
  /** The prompt's input: the thread's comment in editing mode while the box asks. */
  input: vscode.Comment;
  target: Target;
  /** The target's range, then the proposal's, in the document as it is now. */
  range: TrackedRange;
  chip: Chip;
  /** Resolves the wait for the reply with undefined (a cancel). */
  cancel?: () => void;
  /** Set while the extension's own edit lands: it is not the person's. */
  applying?: boolean;
  /** The proposal: the range's text before it, the whole text before it, whether it was saved then. */
  old?: string;
  before?: string;
  wasClean?: boolean;
}

/** The prompt inline chat sends: the person's words, then what the reply must be. */
export function inlinePrompt(instruction: string, rel: string, range: vscode.Range, empty: boolean): string {
  const lines = `${rel}:${range.start.line + 1}-${range.end.line + (range.end.character === 0 && range.end.line > range.start.line ? 0 : 1)}`;
  const target = empty
    ? `Write the code to insert at ${rel}:${range.start.line + 1} (the code around it is attached).`
    : `This is about the selected lines ${lines} (attached).`;
  return `${instruction.trim()}\n\n${target} Reply with only the new code for ${empty ? 'that place' : 'those lines'}, in one fenced code block; do not edit the file yourself: the editor shows your code as a diff to accept.`;
}

const short = (s: string, n = 40) => (s.length > n ? `${s.slice(0, n - 1)}…` : s);
const mac = process.platform === 'darwin';
export const ACCEPT_KEY = mac ? '⌘Enter' : 'Ctrl+Enter';
export const DISCARD_KEY = 'Escape';

export class InlineChat implements vscode.Disposable, vscode.CodeLensProvider {
  private run: Run | undefined;
  private readonly subs: vscode.Disposable[] = [];
  private readonly controller: vscode.CommentController;
  private readonly added: vscode.TextEditorDecorationType;
  private readonly ghost: vscode.TextEditorDecorationType;
  private readonly lensesChanged = new vscode.EventEmitter<void>();
  readonly onDidChangeCodeLenses = this.lensesChanged.event;

  constructor(private readonly host: InlineChatHost) {
    this.controller = vscode.comments.createCommentController(INLINE_CONTROLLER, 'dsh inline chat');
    this.added = vscode.window.createTextEditorDecorationType({
      isWholeLine: true,
      backgroundColor: new vscode.ThemeColor('diffEditor.insertedLineBackground'),
      overviewRulerColor: new vscode.ThemeColor('editorOverviewRuler.addedForeground'),
      overviewRulerLane: vscode.OverviewRulerLane.Left,
    });
    this.ghost = vscode.window.createTextEditorDecorationType({
      after: {
        color: new vscode.ThemeColor('editorGhostText.foreground'),
        backgroundColor: new vscode.ThemeColor('diffEditor.removedTextBackground'),
        textDecoration: 'line-through',
        fontStyle: 'italic',
        margin: '0 0 0 2ch',
      },
    });
    this.subs.push(this.controller, this.added, this.ghost, this.lensesChanged);
    this.subs.push(vscode.languages.registerCodeLensProvider({ scheme: 'file' }, this));
    this.subs.push(vscode.workspace.onDidChangeTextDocument((e) => this.onChange(e)));
    this.subs.push(vscode.workspace.onDidCloseTextDocument((doc) => { if (this.run?.doc === doc) this.end(this.run, 'its file was closed'); }));
    this.subs.push(vscode.window.onDidChangeActiveTextEditor(() => this.setContext()));
    this.subs.push(vscode.window.onDidChangeVisibleTextEditors(() => { if (this.run?.stage === 'pending') this.draw(this.run); }));
  }

  dispose(): void {
    if (this.run) this.end(this.run, 'the extension stopped');
    for (const s of this.subs) s.dispose();
  }

  /** Ctrl+I: opens the prompt box at the cursor (an unsent box elsewhere is replaced by it). */
  async open(): Promise<void> {
    const editor = vscode.window.activeTextEditor;
    if (!editor || editor.document.uri.scheme !== 'file') { void vscode.window.showInformationMessage('dsh: inline chat works in a file\'s editor.'); return; }
    const run = this.run;
    if (run && run.stage !== 'asking') {
      const where = `${path.basename(run.doc.uri.fsPath)}:${run.doc.positionAt(run.range.start).line + 1}`;
      void vscode.window.showInformationMessage(run.stage === 'working'
        ? `dsh: inline chat is already working at ${where}; cancel it (${DISCARD_KEY}) to ask again.`
        : `dsh: an inline chat proposal is waiting at ${where}: Accept (${ACCEPT_KEY}) or Discard (${DISCARD_KEY}) it first.`);
      await this.reveal(run);
      return;
    }
    if (run) this.end(run);
    const doc = editor.document;
    const sel = editor.selection;
    const target = inlineTarget(doc.lineCount, (i) => doc.lineAt(i).text, sel);
    const range = targetRange(doc, target);
    const input = inputComment();
    const thread = this.controller.createCommentThread(doc.uri, threadLine(target), [input]);
    thread.label = target.kind === 'insert'
      ? `dsh: code to insert at line ${target.line + 1}`
      : target.first === target.last ? `dsh: line ${target.first + 1}` : `dsh: lines ${target.first + 1}–${target.last + 1}`;
    thread.contextValue = 'asking';
    thread.canReply = false;
    thread.collapsibleState = vscode.CommentThreadCollapsibleState.Expanded;
    this.run = { stage: 'asking', doc, thread, input, target, range: new TrackedRange(doc.offsetAt(range.start), doc.offsetAt(range.end)), chip: contextChip(doc, sel) };
    this.setContext();
  }

  /** The box's button (Enter): sends the prompt, in the session `where` names (default: the
   *  `dsh.inlineChat.session` setting's), and waits for the reply; its code becomes the proposal. */
  async ask(comment: vscode.Comment, where?: InlineSessionChoice): Promise<void> {
    const run = this.run;
    if (!run || comment !== run.input || run.stage !== 'asking') return;
    const { doc } = run;
    const choice = where ?? inlineSessionChoice(vscode.workspace.getConfiguration('dsh', doc.uri).get('inlineChat.session'));
    const side = choice === 'side' ? sideFolderOf(doc) : undefined;
    const instruction = (typeof comment.body === 'string' ? comment.body : comment.body.value).trim();
    if (!instruction) {
      // The button took the input out of editing mode: an empty prompt gets it back.
      run.input = inputComment();
      run.thread.comments = [run.input];
      return;
    }
    const box = run.thread;
    run.thread = this.controller.createCommentThread(doc.uri, box.range, []);
    run.thread.canReply = false;
    run.thread.collapsibleState = vscode.CommentThreadCollapsibleState.Expanded;
    box.dispose();
    this.stageTo(run, 'working', `dsh is working on “${short(instruction)}”${side ? ' in a side session' : ''}… (${DISCARD_KEY} cancels)`);
    await this.focusEditor(run);
    const rel = vscode.workspace.asRelativePath(doc.uri);
    const at = doc.positionAt(run.range.start);
    const promptRange = run.target.kind === 'insert' ? new vscode.Range(run.target.line, 0, run.target.line, 0) : new vscode.Range(at, doc.positionAt(run.range.end));
    // The tracker listens from before the send: the turn's events may come before the send's reply.
    const tracker = new ReplyTracker();
    const cancelled = new Promise<undefined>((r) => { run.cancel = () => r(undefined); });
    let sent: Awaited<ReturnType<InlineChatHost['ask']>>;
    try {
      sent = await this.host.ask(inlinePrompt(instruction, rel, promptRange, run.target.kind === 'insert'), [run.chip], tracker.take, side);
    } catch (err) {
      this.end(run);
      throw err;
    }
    try {
      tracker.expect(sent.sessionId, sent.messageId);
      const answer = await Promise.race([tracker.reply, cancelled]);
      if (answer === undefined || this.run !== run) {
        const how = await cancelPrompt(sent, tracker, this.host);
        if (how !== 'none') this.host.log(`inline chat: the prompt was ${how === 'unqueued' ? 'taken out of the queue' : 'stopped'}`);
        return;
      }
      const code = codeBlockOf(answer);
      if (code === undefined) {
        this.end(run);
        if (side) {
          void vscode.window.showInformationMessage(`dsh answered without code: the answer is in the session “${sideSessionTitle(side.name)}” (dsh: Switch Session opens it).`);
          return;
        }
        void vscode.window.showInformationMessage('dsh answered without code: the answer is in the chat.');
        await this.host.focusChat();
        return;
      }
      await this.propose(run, code);
    } finally {
      sent.dispose();
    }
  }

  /** Puts the reply's code in the buffer (unsaved) over the target's range as it is now. */
  private async propose(run: Run, code: string): Promise<void> {
    const { doc } = run;
    if (doc.isClosed) { this.end(run); return; }
    if (run.range.touched) this.host.log('inline chat: the lines changed while dsh worked; the proposal replaces them as they are now');
    const start = run.range.start;
    const range = new vscode.Range(doc.positionAt(start), doc.positionAt(run.range.end));
    const old = doc.getText(range);
    const text = proposalText(code, run.target, doc.eol === vscode.EndOfLine.CRLF ? '\r\n' : '\n');
    if (text === old) {
      this.end(run);
      void vscode.window.showInformationMessage('dsh proposes no change to these lines.');
      return;
    }
    run.before = doc.getText();
    run.wasClean = !doc.isDirty;
    const edit = new vscode.WorkspaceEdit();
    edit.replace(doc.uri, range, text);
    if (!await this.applyOwn(run, edit)) { this.end(run); throw new Error('the editor did not take the proposed edit.'); }
    run.old = old;
    run.range = new TrackedRange(start, start + text.length);
    // The edit's own change event came before applyEdit's answer (it was not tracked): the range is
    // set from what was put there, and checked.
    if (this.rangeText(run) !== text) this.host.log('inline chat: the proposal is not where it was put; its decorations may be off');
    const lines = text.split(/\r?\n/).length;
    // The proposal is drawn, not selected (a selection would hide its backgrounds).
    const shown = vscode.window.visibleTextEditors.find((e) => e.document === doc);
    if (shown) shown.selection = new vscode.Selection(range.start, range.start);
    this.stageTo(run, 'pending', `dsh proposes ${lines} line${lines === 1 ? '' : 's'}: Accept (${ACCEPT_KEY}) or Discard (${DISCARD_KEY})`);
    this.follow(run);
    await this.focusEditor(run);
  }

  /** Accept: the edit stays. A file that was saved before the proposal is saved with it (as an agent's
   *  accepted edit is); one that had unsaved changes keeps them unsaved, with the edit. */
  async accept(): Promise<void> {
    const run = this.run;
    if (!run || run.stage !== 'pending') return;
    this.end(run);
    if (run.wasClean && !run.doc.isClosed) await run.doc.save();
  }

  /** Discard: the proposal's range gets back exactly the text it held before (the person's edits
   *  elsewhere stay; edits inside the proposal are lost, and that is asked first). A file that was
   *  saved before the proposal, and holds what is on disk again, is clean again. */
  async discard(): Promise<void> {
    const run = this.run;
    if (!run || run.stage !== 'pending') return;
    if (run.range.touched) {
      const pick = await vscode.window.showWarningMessage(
        'You changed the proposed lines. Discard puts back the lines as they were before the proposal: your changes in them are lost.',
        { modal: true }, 'Discard');
      if (pick !== 'Discard' || this.run !== run) return;
    }
    const { doc } = run;
    const edit = new vscode.WorkspaceEdit();
    edit.replace(doc.uri, new vscode.Range(doc.positionAt(run.range.start), doc.positionAt(run.range.end)), run.old!);
    if (!await this.applyOwn(run, edit)) throw new Error('the editor did not take back the proposed edit.');
    this.end(run);
    if (run.wasClean && doc.getText() === run.before) await this.markClean(doc);
  }

  /** Escape / the close button: closes the box, cancels the wait, or discards the proposal. */
  async close(): Promise<void> {
    const run = this.run;
    if (!run) return;
    if (run.stage === 'pending') return this.discard();
    this.end(run, run.stage === 'working' ? 'cancelled' : undefined);
  }

  provideCodeLenses(doc: vscode.TextDocument): vscode.CodeLens[] {
    const run = this.run;
    if (!run || run.stage !== 'pending' || run.doc !== doc) return [];
    const at = new vscode.Range(doc.positionAt(run.range.start), doc.positionAt(run.range.start));
    return [
      new vscode.CodeLens(at, { title: `$(check) Accept (${ACCEPT_KEY})`, command: 'dsh.inlineChat.accept', tooltip: 'Keep dsh\'s proposed lines' }),
      new vscode.CodeLens(at, { title: `$(discard) Discard (${DISCARD_KEY})`, command: 'dsh.inlineChat.discard', tooltip: 'Put back the lines as they were' }),
    ];
  }

  private async applyOwn(run: Run, edit: vscode.WorkspaceEdit): Promise<boolean> {
    run.applying = true;
    try { return await vscode.workspace.applyEdit(edit); } finally { run.applying = false; }
  }

  private onChange(e: vscode.TextDocumentChangeEvent): void {
    const run = this.run;
    if (!run || e.document !== run.doc || run.applying || !e.contentChanges.length) return;
    run.range.applyAll(e.contentChanges);
    if (run.stage !== 'pending') return;
    // Undone (Ctrl+Z) back to what was there: nothing is proposed any more.
    if (this.rangeText(run) === run.old) { this.end(run, 'the proposed edit was undone'); return; }
    this.follow(run);
  }

  private rangeText(run: Run): string {
    return run.doc.getText(new vscode.Range(run.doc.positionAt(run.range.start), run.doc.positionAt(run.range.end)));
  }

  /** The decorations, the CodeLens and the box follow the proposal's range. */
  private follow(run: Run): void {
    const last = run.doc.positionAt(Math.max(run.range.start, run.range.end - 1)).line;
    if (run.thread.range.end.line !== last) run.thread.range = new vscode.Range(last, 0, last, 0);
    this.draw(run);
    this.lensesChanged.fire();
  }

  private draw(run: Run): void {
    const { doc } = run;
    const base = doc.positionAt(run.range.start).line;
    const looks = proposalLooks(run.old!, this.rangeText(run));
    const hover = new vscode.MarkdownString(`dsh's proposal: **Accept** (${ACCEPT_KEY}) or **Discard** (${DISCARD_KEY})`);
    const added = looks.added.map((i) => ({ range: doc.lineAt(Math.min(base + i, doc.lineCount - 1)).range, hoverMessage: hover }));
    const ghosts = looks.ghosts.map((g) => {
      const line = doc.lineAt(Math.min(base + g.line, doc.lineCount - 1));
      const removed = new vscode.MarkdownString().appendText('Removed by dsh\'s proposal:').appendCodeblock(g.removed.join('\n'), doc.languageId);
      return { range: new vscode.Range(line.range.end, line.range.end), hoverMessage: removed, renderOptions: { after: { contentText: `− ${ghostText(g.removed)}` } } };
    });
    for (const editor of vscode.window.visibleTextEditors) {
      if (editor.document !== doc) continue;
      editor.setDecorations(this.added, added);
      editor.setDecorations(this.ghost, ghosts);
    }
  }

  private stageTo(run: Run, stage: Stage, label: string): void {
    run.stage = stage;
    run.thread.contextValue = stage;
    run.thread.label = label;
    this.setContext();
  }

  /** Ends the inline chat: the box goes, the decorations and CodeLens go, a wait is cancelled. */
  private end(run: Run, why?: string): void {
    if (why) this.host.log(`inline chat ended: ${why}`);
    if (this.run === run) this.run = undefined;
    run.cancel?.();
    run.thread.dispose();
    for (const editor of vscode.window.visibleTextEditors) {
      if (editor.document !== run.doc) continue;
      editor.setDecorations(this.added, []);
      editor.setDecorations(this.ghost, []);
    }
    this.lensesChanged.fire();
    this.setContext();
  }

  private setContext(): void {
    const run = this.run;
    const active = vscode.window.activeTextEditor?.document;
    void vscode.commands.executeCommand('setContext', INLINE_STATE, run && active === run.doc ? run.stage : '');
  }

  private async focusEditor(run: Run): Promise<void> {
    const shown = vscode.window.visibleTextEditors.find((e) => e.document === run.doc);
    await vscode.window.showTextDocument(run.doc, { viewColumn: shown?.viewColumn, preserveFocus: false });
  }

  private async reveal(run: Run): Promise<void> {
    await this.focusEditor(run);
    const at = run.doc.positionAt(run.range.start);
    vscode.window.activeTextEditor?.revealRange(new vscode.Range(at, at), vscode.TextEditorRevealType.InCenterIfOutsideViewport);
  }

  /** The document holds what its file holds on disk again (checked byte for byte): it is reverted
   *  to it, which changes no text and makes it clean. */
  private async markClean(doc: vscode.TextDocument): Promise<void> {
    let disk: Uint8Array;
    try { disk = await vscode.workspace.fs.readFile(doc.uri); } catch { return; }
    if (Buffer.compare(Buffer.from(disk), Buffer.from(doc.getText(), 'utf8')) !== 0) return;
    await vscode.window.showTextDocument(doc, { preserveFocus: false });
    if (vscode.window.activeTextEditor?.document === doc) await vscode.commands.executeCommand('workbench.action.files.revert');
  }
}

/** The workspace folder of the file (the first one for a file outside them): its side session's. */
function sideFolderOf(doc: vscode.TextDocument): SideFolder {
  const folder = vscode.workspace.getWorkspaceFolder(doc.uri) ?? vscode.workspace.workspaceFolders?.[0];
  return folder ? { cwd: folder.uri.fsPath, name: folder.name } : { name: path.basename(path.dirname(doc.uri.fsPath)) };
}

/** The box's input: an empty comment in editing mode (VS Code focuses it when the thread opens). */
function inputComment(): vscode.Comment {
  return { body: '', mode: vscode.CommentMode.Editing, author: { name: 'Ask dsh' }, contextValue: 'asking' };
}

/** The range the target's lines cover (empty for an insertion). */
function targetRange(doc: vscode.TextDocument, t: Target): vscode.Range {
  if (t.kind === 'insert') return new vscode.Range(t.at.line, t.at.character, t.at.line, t.at.character);
  return new vscode.Range(t.first, 0, t.last, doc.lineAt(t.last).text.length);
}

/** The line the box sits under: the target's last line, or for an insertion the line above it. */
function threadLine(t: Target): vscode.Range {
  const line = t.kind === 'insert' ? Math.max(0, t.line - 1) : t.last;
  return new vscode.Range(line, 0, line, 0);
}

/** The context the prompt goes with: the selection, or the code around the cursor. */
function contextChip(doc: vscode.TextDocument, sel: vscode.Selection): Chip {
  const first = sel.isEmpty ? Math.max(0, sel.active.line - CURSOR_CONTEXT_LINES) : sel.start.line;
  const range = sel.isEmpty ? new vscode.Range(first, 0, Math.min(doc.lineCount - 1, sel.active.line + CURSOR_CONTEXT_LINES) + 1, 0) : new vscode.Range(sel.start, sel.end);
  return { kind: 'selection', uri: doc.uri.toString(), range: toRange(range), label: `${path.basename(doc.uri.fsPath)}:${range.start.line + 1}-${range.end.line + 1}` };
}
