// The reply to one prompt, from the session's events (no vscode import: tested in plain Node).
//
// A prompt is claimed by a turn (`agent/inbox/claimed` names it and the turn, sent when the turn takes
// it, before any reply to a request that came after; its `user/message` follows); the reply
// is that turn's last `assistant/message` text, known at its `turn/end`. Events may come before the
// send's reply names the message: they are kept until `expect` says which message to follow.
import type { AnyEvent } from './protocol/types';

export class ReplyTracker {
  private readonly seen: AnyEvent[] = [];
  private target: { sessionId: string; messageId: string } | undefined;
  private turn: number | undefined;
  private currentTurn: number | undefined;
  private text = '';
  private done: ((text: string) => void) | undefined;
  /** The reply's text (empty when the turn ended without one: stopped, failed). */
  readonly reply: Promise<string> = new Promise((r) => { this.done = r; });

  /** Whether the prompt's turn has started and not ended yet. */
  get running(): boolean { return this.turn !== undefined && this.done !== undefined; }

  /** Whether a turn has claimed the prompt (it is no longer queued). */
  get claimed(): boolean { return this.turn !== undefined; }

  /** Every event of the connection, in order. */
  take = (e: AnyEvent): void => {
    if (!this.target) { this.seen.push(e); return; }
    this.step(e);
  };

  /** The prompt to follow; the events kept so far are read first. */
  expect(sessionId: string, messageId: string): void {
    this.target = { sessionId, messageId };
    for (const e of this.seen.splice(0)) this.step(e);
  }

  private step(e: AnyEvent): void {
    if (!this.done || e.sessionId !== this.target!.sessionId) return;
    const d = e.data as any;
    if (e.type === 'turn/start') this.currentTurn = d.turn;
    else if (e.type === 'agent/inbox/claimed' && d?.message?.id === this.target!.messageId && this.turn === undefined) this.turn = d.turn;
    else if (e.type === 'user/message' && d?.id === this.target!.messageId && this.turn === undefined) this.turn = this.currentTurn;
    else if (e.type === 'assistant/message' && this.turn !== undefined && d.turn === this.turn) {
      const text = (d.message?.content ?? []).filter((b: any) => b?.type === 'text').map((b: any) => String(b.text ?? '')).join('');
      if (text.trim()) this.text = text;
    } else if (e.type === 'turn/end' && this.turn !== undefined && d.turn === this.turn) {
      const done = this.done;
      this.done = undefined;
      done(this.text);
    }
  }
}

/** Cancels the prompt `sent`, which `tracker` follows: one still queued (behind another turn) is
 *  taken out of the queue; one a turn claimed has that turn stopped while it runs. A claim in
 *  between is safe: the removal then finds nothing, and the claim's `agent/inbox/claimed` came
 *  before the removal's answer (the daemon sends everything in the order it happened), so the
 *  tracker knows the turn by then. */
export async function cancelPrompt(
  sent: { sessionId: string; messageId: string },
  tracker: ReplyTracker,
  ops: { unqueue?(sessionId: string, messageId: string): Promise<boolean>; stop?(sessionId: string): Promise<void>; log(line: string): void },
): Promise<'unqueued' | 'stopped' | 'none'> {
  const failed = (what: string) => (err: any) => { ops.log(`inline chat: ${what}: ${err?.message ?? err}`); return false as const; };
  if (!tracker.claimed && ops.unqueue && await ops.unqueue(sent.sessionId, sent.messageId).catch(failed('remove from the queue'))) return 'unqueued';
  if (!tracker.running || !ops.stop) return 'none';
  return await ops.stop(sent.sessionId).then(() => 'stopped' as const, (err) => { failed('stop')(err); return 'none' as const; });
}

/** The first fenced code block of a markdown reply, without its fences; undefined when it has none. */
export function codeBlockOf(markdown: string): string | undefined {
  const m = /^([ \t]*)(`{3,}|~{3,})[^\n]*\n([\s\S]*?)\n?^\1\2[ \t]*$/m.exec(markdown);
  if (!m) return undefined;
  const indent = m[1];
  return m[3].split('\n').map((l) => (l.startsWith(indent) ? l.slice(indent.length) : l)).join('\n');
}
