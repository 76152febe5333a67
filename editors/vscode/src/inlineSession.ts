// Where an inline chat's prompt goes (issue 36.4): the session the chat shows, or a side session of
// the file's workspace folder, so that inline edits do not fill the main conversation's history and
// its running turn does not hold an inline prompt back. (No vscode import: tested against the real
// daemon in plain Node.)
//
// A side session is an ordinary session, made with `dsh/session/new` in the folder (the same cwd a
// panel session of that folder gets) and titled so the session list says what it is; the person can
// open it there like any other. One per folder, reused by every later inline chat of that folder;
// its id is kept in the workspace's state, so a reloaded window (a new daemon) attaches to it again
// instead of making another.
import type { DshClient } from './protocol/client';

/** The `dsh.inlineChat.session` setting: anything but "side" is the session the chat shows. */
export type InlineSessionChoice = 'current' | 'side';

export function inlineSessionChoice(value: unknown): InlineSessionChoice {
  return value === 'side' ? 'side' : 'current';
}

/** The other choice: what the box's second button asks in. */
export function otherChoice(choice: InlineSessionChoice): InlineSessionChoice {
  return choice === 'side' ? 'current' : 'side';
}

/** The side session's title, as the session list shows it. */
export function sideSessionTitle(folderName: string): string {
  return `Inline chat — ${folderName}`;
}

/** The folder an inline chat's file is in: its side session works there. */
export interface SideFolder {
  /** The folder's path (absent: the file is in no workspace folder; the daemon picks its default cwd). */
  cwd?: string;
  name: string;
}

/** Where the side sessions' ids are kept between windows (the workspace's state). */
export interface SideSessionStore {
  get(key: string): Record<string, string> | undefined;
  update(key: string, value: Record<string, string>): PromiseLike<void>;
}

const STORE_KEY = 'dsh.inlineChat.sideSessions';

export class SideSessions {
  private readonly known = new Map<string, Promise<string>>();

  constructor(private readonly store?: SideSessionStore, private readonly log: (line: string) => void = () => undefined) {}

  /** The side session of `folder`, driven by `client`: the one this window made or kept for the
   *  folder, else a new one. It is attached (nothing replayed) at every use: the chat may have shown
   *  it and detached it on leaving, and the prompt's reply is followed through its live events. Two
   *  inline chats that ask at once get the same session. */
  sessionFor(client: DshClient, folder: SideFolder): Promise<string> {
    const key = folder.cwd ?? '';
    const known = this.known.get(key);
    const entry = this.attachOrCreate(client, folder, known);
    this.known.set(key, entry);
    // A failed start is not kept: the next inline chat tries again.
    entry.catch(() => { if (this.known.get(key) === entry) this.known.delete(key); });
    return entry;
  }

  /** The session could not take a prompt (deleted, driven elsewhere): the folder's next inline chat
   *  makes a new one. */
  async forget(sessionId: string): Promise<void> {
    for (const [key, entry] of this.known) {
      if (await entry.catch(() => undefined) === sessionId && this.known.get(key) === entry) this.known.delete(key);
    }
    const stored = { ...this.store?.get(STORE_KEY) };
    for (const [key, id] of Object.entries(stored)) if (id === sessionId) delete stored[key];
    await this.store?.update(STORE_KEY, stored);
  }

  private async attachOrCreate(client: DshClient, folder: SideFolder, before?: Promise<string>): Promise<string> {
    const key = folder.cwd ?? '';
    const old = (before ? await before.catch(() => undefined) : undefined) ?? this.store?.get(STORE_KEY)?.[key];
    if (old) {
      const attached = await client.attach(old, undefined, 'none').then((r) => r, (err) => {
        this.log(`inline chat: side session ${old.slice(0, 8)} is gone (${err?.message ?? err}); a new one is made`);
        return undefined;
      });
      if (attached && !attached.readOnly) return old;
      if (attached) this.log(`inline chat: another window drives side session ${old.slice(0, 8)}; a new one is made`);
    }
    const { sessionId } = await client.newSession(folder.cwd ? { cwd: folder.cwd, title: sideSessionTitle(folder.name) } : { title: sideSessionTitle(folder.name) });
    this.log(`inline chat: side session ${sessionId.slice(0, 8)} for ${folder.name}`);
    await this.store?.update(STORE_KEY, { ...this.store.get(STORE_KEY), [key]: sessionId });
    return sessionId;
  }
}
