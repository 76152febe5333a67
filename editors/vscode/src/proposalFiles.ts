// The two sides of a proposal's diff tab, as files in memory (scheme `dsh-diff`): the text before
// (read-only) and the proposed text, which the person may change before accepting when the daemon can
// take a changed proposal (`editedAccept`). A file system rather than a content provider, because a
// content provider's documents are read-only. Nothing here touches the disk.
//
// A side's path is the file's own path in the workspace (`/src/app.py`), so the diff editor's
// breadcrumb and the language read as the file; which proposal and which side it is rides in the
// query (`?id=call_1&side=proposed`), which VS Code shows nowhere.
import * as vscode from 'vscode';

export const DIFF_SCHEME = 'dsh-diff';

export type Side = 'original' | 'proposed';

/** The in-memory side `side` of proposal `id` for the file at workspace-relative `rel`. */
export function sideUri(id: string, rel: string, side: Side): vscode.Uri {
  const path = '/' + rel.replace(/\\/g, '/').replace(/^\/+/, '');
  return vscode.Uri.from({ scheme: DIFF_SCHEME, path, query: `id=${encodeURIComponent(id)}&side=${side}` });
}

/** The proposal a diff side belongs to (undefined: not a diff side). */
export function proposalOf(uri: vscode.Uri | undefined): string | undefined {
  if (uri?.scheme !== DIFF_SCHEME) return undefined;
  const id = /(?:^|&)id=([^&]*)/.exec(uri.query)?.[1];
  return id === undefined ? undefined : decodeURIComponent(id);
}

const keyOf = (uri: vscode.Uri) => `${uri.path}?${uri.query}`;

interface Entry { data: Uint8Array; mtime: number; readonly: boolean; id: string | undefined }

export class ProposalFiles implements vscode.FileSystemProvider, vscode.Disposable {
  private readonly files = new Map<string, Entry>();
  private readonly changed = new vscode.EventEmitter<vscode.FileChangeEvent[]>();
  readonly onDidChangeFile = this.changed.event;
  private readonly registration: vscode.Disposable;

  constructor() {
    this.registration = vscode.workspace.registerFileSystemProvider(DIFF_SCHEME, this, { isCaseSensitive: true });
  }

  /** Puts a side in (or replaces it: a View diff again shows the proposal as it stands). */
  set(uri: vscode.Uri, text: string, readonly: boolean): void {
    const had = this.files.has(keyOf(uri));
    this.files.set(keyOf(uri), { data: new TextEncoder().encode(text), mtime: Date.now(), readonly, id: proposalOf(uri) });
    if (had) this.changed.fire([{ type: vscode.FileChangeType.Changed, uri }]);
  }

  has(uri: vscode.Uri): boolean { return this.files.has(keyOf(uri)); }

  /** The side's text as stored (the person's typing is in the open document until it is saved). */
  text(uri: vscode.Uri): string | undefined {
    const e = this.files.get(keyOf(uri));
    return e ? new TextDecoder().decode(e.data) : undefined;
  }

  /** Forgets both sides of proposal `id`. */
  drop(id: string): void {
    for (const [k, e] of [...this.files]) if (e.id === id) this.files.delete(k);
  }

  /** The paths of the sides kept (a directory is any prefix of one). */
  private paths(): string[] { return [...this.files.keys()].map((k) => k.slice(0, k.indexOf('?'))); }

  // ---- vscode.FileSystemProvider --------------------------------------------------------------------

  watch(): vscode.Disposable { return { dispose: () => undefined }; }

  stat(uri: vscode.Uri): vscode.FileStat {
    const e = this.files.get(keyOf(uri));
    if (e) return { type: vscode.FileType.File, ctime: 0, mtime: e.mtime, size: e.data.byteLength, ...(e.readonly ? { permissions: vscode.FilePermission.Readonly } : {}) };
    const dir = uri.path.endsWith('/') ? uri.path : uri.path + '/';
    if (this.paths().some((k) => k.startsWith(dir))) return { type: vscode.FileType.Directory, ctime: 0, mtime: 0, size: 0 };
    throw vscode.FileSystemError.FileNotFound(uri);
  }

  readDirectory(uri: vscode.Uri): [string, vscode.FileType][] {
    const dir = uri.path.endsWith('/') ? uri.path : uri.path + '/';
    const out = new Map<string, vscode.FileType>();
    for (const k of this.paths()) {
      if (!k.startsWith(dir)) continue;
      const [name, ...rest] = k.slice(dir.length).split('/');
      out.set(name, rest.length ? vscode.FileType.Directory : vscode.FileType.File);
    }
    return [...out];
  }

  readFile(uri: vscode.Uri): Uint8Array {
    const e = this.files.get(keyOf(uri));
    if (!e) throw vscode.FileSystemError.FileNotFound(uri);
    return e.data;
  }

  /** A save of the proposed side (the extension saves it as the person types: closing its tab then
   *  never asks whether to save an in-memory file). */
  writeFile(uri: vscode.Uri, content: Uint8Array): void {
    const e = this.files.get(keyOf(uri));
    if (!e) throw vscode.FileSystemError.NoPermissions(uri); // only the sides the extension made
    if (e.readonly) throw vscode.FileSystemError.NoPermissions(uri);
    this.files.set(keyOf(uri), { ...e, data: content, mtime: Math.max(Date.now(), e.mtime + 1) });
  }

  createDirectory(uri: vscode.Uri): void { throw vscode.FileSystemError.NoPermissions(uri); }
  delete(uri: vscode.Uri): void { throw vscode.FileSystemError.NoPermissions(uri); }
  rename(uri: vscode.Uri): void { throw vscode.FileSystemError.NoPermissions(uri); }

  dispose(): void {
    this.registration.dispose();
    this.changed.dispose();
    this.files.clear();
  }
}
