// What the panel's header pickers and the composer's own `/` commands ask of the daemon: the session's
// model and effort (`dsh/models/list {sessionId}`, `dsh/session/setModel`), compaction, the session's
// cost (`dsh/session/usage`), undo / rewind / fork of a turn, and edit-and-resend of a past prompt (what the rewind restores first, then the rewind
// and the edited prompt). The panel hands each message of these kinds here.
import * as vscode from 'vscode';
import { costWords, heldUsage } from './costWords';
import type { DshClient } from './protocol/client';
import type { Chip, HostToWebview } from './protocol/panelMessages';
import type { SessionModel } from './protocol/reducer';
import type { RewindResult } from './protocol/types';

/** What this module needs of the panel. */
export interface ComposerPanel {
  readonly model: SessionModel;
  drivable(): Promise<{ client: DshClient; sessionId: string }>;
  send(text: string, chips: Chip[], mode: 'followup' | 'steer'): Promise<string | undefined>;
  post(m: HostToWebview): void;
  rewindTo(turn: number): Promise<void>;
  forkAt(turn: number): Promise<void>;
  readonly daemonClient: DshClient | undefined;
}

/** The turns whose prompts the person typed (they start a turn), oldest first. */
export function promptTurns(model: SessionModel): Array<{ turn: number; text: string }> {
  const out: Array<{ turn: number; text: string }> = [];
  for (const it of model.items) {
    if (it.kind !== 'user' || it.message.source.kind !== 'user') continue;
    if (it.tags?.some((t) => t === 'steer' || t === 'inject' || t === 'rewound')) continue;
    if (out.some((o) => o.turn === it.turn)) continue;
    const text = it.message.content.map((c) => (c.type === 'text' ? c.text : '')).join('');
    out.push({ turn: it.turn, text });
  }
  return out;
}

/** The last turn that ended (fork's default: a running turn is left out). */
export function lastEndedTurn(model: SessionModel): number | undefined {
  let last: number | undefined;
  for (const it of model.items) if (it.kind === 'turnEnd' && (last === undefined || it.turn > last)) last = it.turn;
  return last;
}

/** The files a rewind to before `turn` takes back, one line each (the earliest turn decides). */
export function restoredFiles(turns: Array<{ turn: number; files: Array<{ path: string; created: boolean; dropped?: boolean | null }> }>, turn: number, rel: (p: string) => string): string[] {
  const files = new Map<string, string>();
  for (const t of [...turns].filter((x) => x.turn >= turn).sort((a, b) => a.turn - b.turn)) {
    for (const f of t.files) {
      if (files.has(f.path) && !f.dropped) continue;
      files.set(f.path, `${rel(f.path)}${f.dropped ? ' (cannot be restored)' : f.created ? ' (deleted: the agent created it)' : ''}`);
    }
  }
  return [...files.values()];
}

export class ComposerActions {
  constructor(private readonly panel: ComposerPanel) {}

  /** The models and the session's choice, for the header's picker. */
  async models(): Promise<void> {
    const client = this.panel.daemonClient;
    if (!client?.features?.models) { this.panel.post({ type: 'models', models: [], current: '', settable: false }); return; }
    const sessionId = this.panel.model.sessionId ?? undefined;
    const own = !!client.features.sessionModels && !!sessionId;
    const r = await client.modelsList(own ? sessionId : undefined);
    this.panel.post({ type: 'models', models: r.models, current: r.current, reasoningEffort: r.reasoningEffort ?? undefined, settable: own && !this.panel.model.readOnly });
  }

  async setModel(model: string, reasoningEffort: string | undefined): Promise<void> {
    const { client, sessionId } = await this.panel.drivable();
    if (!client.features?.sessionModels) throw new Error('This daemon cannot set a session\'s own model (update dsh-daemon).');
    await client.setModel(sessionId, reasoningEffort ? { model, reasoningEffort } : { model });
    await this.models();
  }

  async compact(): Promise<void> {
    const { client, sessionId } = await this.panel.drivable();
    const r = await client.compact(sessionId) as { compacted?: boolean; scheduled?: boolean; tokensBefore?: number | null; tokensAfter?: number | null; error?: { message?: string } | null };
    let text: string;
    if (r.error) text = `Compaction failed: ${r.error.message ?? 'the provider refused it'}`;
    else if (r.scheduled) text = 'Compaction is scheduled: the running turn compacts at its next step.';
    else if (r.compacted) text = `Compacted the conversation${r.tokensBefore && r.tokensAfter ? `: ${r.tokensBefore.toLocaleString('en-US')} → ${r.tokensAfter.toLocaleString('en-US')} tokens` : ''}.`;
    else text = 'Nothing to compact yet.';
    this.panel.post({ type: 'note', text });
  }

  /** `/cost`: the daemon's sum over all the session's turns (those of older pages and other windows
   *  too); from a daemon without it, or before a session exists, the turns the panel holds. */
  async cost(): Promise<void> {
    const client = this.panel.daemonClient;
    const sessionId = this.panel.model.sessionId;
    const usage = client?.features?.sessionUsage && sessionId ? await client.sessionUsage(sessionId) : heldUsage(this.panel.model);
    this.panel.post({ type: 'note', text: costWords(usage) });
  }

  /** `/undo`: the checkpoint before the last prompt (asked first, as Restore checkpoint does). */
  async undo(): Promise<void> {
    const turns = promptTurns(this.panel.model);
    if (!turns.length) { this.panel.post({ type: 'note', text: 'Nothing to undo: no prompt in this session yet.' }); return; }
    await this.panel.rewindTo(turns[turns.length - 1].turn);
  }

  /** `/rewind`: pick the prompt to go back before. */
  async rewindPick(): Promise<void> {
    const turns = promptTurns(this.panel.model).reverse();
    if (!turns.length) { this.panel.post({ type: 'note', text: 'Nothing to rewind: no prompt in this session yet.' }); return; }
    const pick = await vscode.window.showQuickPick(turns.map((t) => ({ label: firstLine(t.text), description: `turn ${t.turn}`, turn: t.turn })), {
      title: 'Rewind to before which prompt?', placeHolder: 'The files and the conversation go back to before it (shown first)',
    });
    if (pick) await this.panel.rewindTo(pick.turn);
  }

  /** `/fork`: a new session from the last turn that ended. */
  async fork(): Promise<void> {
    const turn = lastEndedTurn(this.panel.model);
    if (turn === undefined) { this.panel.post({ type: 'note', text: 'Nothing to fork yet: no turn has ended.' }); return; }
    await this.panel.forkAt(turn);
  }

  /** What editing the prompt of `turn` would take back: answered with `editPreview`. */
  async editPreview(turn: number): Promise<void> {
    const { client, sessionId } = await this.panel.drivable();
    let files: string[] = [];
    if (client.features?.rewind) files = restoredFiles((await client.checkpoints(sessionId)).turns, turn, (p) => vscode.workspace.asRelativePath(p));
    const later = promptTurns(this.panel.model).filter((t) => t.turn > turn).length;
    this.panel.post({ type: 'editPreview', turn, files, laterPrompts: later, canRewind: !!client.features?.rewind });
  }

  /** The edited prompt of `turn`: the session goes back to before it (files and conversation), then the
   *  edited text goes as a new prompt. A file changed since by someone else stops it unless the person
   *  says to overwrite it; then nothing was sent, and the composer keeps the text. */
  async editResend(turn: number, text: string, chips: Chip[]): Promise<void> {
    const { client, sessionId } = await this.panel.drivable();
    if (!client.features?.rewind) throw new Error('This daemon cannot rewind a session: the edited prompt was not sent.');
    if (this.panel.model.status === 'running') throw new Error('Stop the running turn first, then send the edited prompt.');
    let result: RewindResult = await client.rewind(sessionId, turn);
    if (result.conflicts.length) {
      const changed = result.conflicts.map((c) => `  ${c.path ? vscode.workspace.asRelativePath(c.path) : '?'}`);
      const force = await vscode.window.showWarningMessage('Some files were changed after the agent changed them. Nothing was restored or sent yet.', {
        modal: true, detail: ['Changed since (your changes there would be lost):', ...changed, '', 'Overwrite them and send the edited prompt?'].join('\n'),
      }, 'Overwrite and send');
      if (force !== 'Overwrite and send') throw new Error('Not sent: files changed since the agent changed them (nothing was restored).');
      result = await client.rewind(sessionId, turn, true);
    }
    await this.panel.send(text, chips, 'followup');
  }
}

function firstLine(text: string): string {
  const line = text.split('\n')[0].trim();
  return line.length > 70 ? line.slice(0, 69) + '…' : line || '(no text)';
}
