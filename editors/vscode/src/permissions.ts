// Permission requests from the daemon: a card in the panel answers them; "View diff" opens VS Code's
// diff editor over a read-only content provider: the preview's oldText/newText when the daemon sends
// them, else rebuilt from the file and the request's arguments.
import * as path from 'node:path';
import * as vscode from 'vscode';
import type { PermissionOutcome, PermissionRequest } from './protocol/types';

export const DIFF_SCHEME = 'dsh-diff';

export class Permissions implements vscode.TextDocumentContentProvider, vscode.Disposable {
  private readonly pending = new Map<string, { req: PermissionRequest; resolve: (o: PermissionOutcome) => void }>();
  private readonly contents = new Map<string, string>();
  /** Files the agent edited (fsPath), saved before its next run_command so commands see them. */
  readonly edited = new Set<string>();
  private readonly registration: vscode.Disposable;

  constructor(private readonly onRequest: (req: PermissionRequest) => void, private readonly onDone: (callId: string) => void) {
    this.registration = vscode.workspace.registerTextDocumentContentProvider(DIFF_SCHEME, this);
  }

  /** The DshClient permission handler: resolves when the person answers in the panel. */
  handle = async (req: PermissionRequest): Promise<PermissionOutcome> => {
    const outcome = await new Promise<PermissionOutcome>((resolve) => {
      this.pending.set(req.callId, { req, resolve });
      this.onRequest(req);
    });
    this.pending.delete(req.callId);
    this.onDone(req.callId);
    if (req.tool === 'run_command' && (outcome === 'allow-once' || outcome === 'allow-always')) await this.saveEdited();
    return outcome;
  };

  /** The daemon settled `callId` some other way (a timeout, a cancel, another client): the answer
   *  this window would send is no longer waited for, and its card goes. */
  settled(callId: string): void {
    this.pending.get(callId)?.resolve('cancelled');
  }

  /** The requests of `sessionId` still waiting for an answer here. */
  openFor(sessionId: string): PermissionRequest[] {
    return [...this.pending.values()].filter((p) => p.req.sessionId === sessionId).map((p) => p.req);
  }

  answer(callId: string, outcome: PermissionOutcome): void {
    this.pending.get(callId)?.resolve(outcome);
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

  async viewDiff(callId: string, cwd: string | undefined): Promise<void> {
    const p = this.pending.get(callId);
    if (!p) return;
    const args = p.req.arguments as { path?: string; old_string?: string; new_string?: string; content?: string; replace_all?: boolean };
    const rel = String(p.req.preview?.path ?? args.path ?? 'file');
    const abs = path.isAbsolute(rel) ? rel : path.join(cwd ?? vscode.workspace.workspaceFolders?.[0]?.uri.fsPath ?? '/', rel);
    const fileUri = vscode.Uri.file(abs);
    const preview = p.req.preview;
    const title = `dsh: ${path.basename(abs)} (proposed edit${preview?.truncated ? ', cut to 1 MB' : ''})`;
    if (typeof preview?.oldText === 'string' && typeof preview.newText === 'string') {
      // The daemon's own before/after texts: exactly what the edit would do.
      return this.showDiff(callId, abs, preview.oldText, preview.newText, title);
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
    return this.showDiff(callId, abs, before, after, title);
  }

  private async showDiff(callId: string, abs: string, before: string, after: string, title: string): Promise<void> {
    const base = `/${callId}/${path.basename(abs)}`;
    const left = vscode.Uri.from({ scheme: DIFF_SCHEME, path: base, query: 'before' });
    const right = vscode.Uri.from({ scheme: DIFF_SCHEME, path: base, query: 'after' });
    this.contents.set(left.toString(), before);
    this.contents.set(right.toString(), after);
    await vscode.commands.executeCommand('vscode.diff', left, right, title, { preview: true });
  }

  provideTextDocumentContent(uri: vscode.Uri): string {
    return this.contents.get(uri.toString()) ?? '';
  }

  dispose(): void {
    this.cancelAll();
    this.registration.dispose();
  }
}
