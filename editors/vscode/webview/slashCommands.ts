// The panel's own `/` commands (protocol.md §18: a client's built-in commands come before the
// session's custom ones of the same name). Each acts here or through one of the daemon's methods and
// sends no prompt: /compact (`dsh/session/compact`), /cost (the daemon's sum over the session's turns,
// `dsh/session/usage`, asked by the host), /context (the last `context/usage`), /undo and /rewind (`dsh/session/rewind`, the files shown first), /fork
// (`dsh/session/fork`), /mode (`dsh/session/setMode`), and /new, /sessions, /stop.
import type { WebviewToHost } from '../src/protocol/panelMessages';
import { MODE_LABELS, type SessionModel } from '../src/protocol/reducer';

export interface SlashContext {
  post(m: WebviewToHost): void;
  /** Says `text` under the composer. */
  note(text: string): void;
  model(): SessionModel;
  /** Opens the header's mode picker (`/mode` without a mode). */
  openModePicker(): void;
}

export interface BuiltinCommand { name: string; description: string; hint?: string; run(arg: string, ctx: SlashContext): void }

const MODES = ['ask', 'accept-edits', 'plan'] as const;

export const BUILTIN_COMMANDS: BuiltinCommand[] = [
  { name: 'new', description: 'Start a new session', run: (_a, c) => c.post({ type: 'newSession' }) },
  { name: 'sessions', description: 'Switch to another session', run: (_a, c) => c.post({ type: 'switchSession' }) },
  { name: 'stop', description: 'Stop the running turn (the queue stays)', run: (_a, c) => c.post({ type: 'cancel', keepInbox: true }) },
  { name: 'compact', description: 'Summarise the conversation now to free context', run: (_a, c) => c.post({ type: 'compact' }) },
  { name: 'cost', description: 'Tokens and cost of this session so far', run: (_a, c) => c.post({ type: 'cost' }) },
  { name: 'context', description: 'How full the model\'s context window is', run: (_a, c) => c.note(contextText(c.model())) },
  { name: 'undo', description: 'Take back the last prompt: its files and conversation (shown first)', run: (_a, c) => c.post({ type: 'undo' }) },
  { name: 'rewind', description: 'Go back to before an earlier prompt (pick it; files shown first)', run: (_a, c) => c.post({ type: 'rewindPick' }) },
  { name: 'fork', description: 'A new session with this conversation so far', run: (_a, c) => c.post({ type: 'forkLast' }) },
  {
    name: 'mode', hint: 'ask | accept-edits | plan', description: 'What the agent may do without asking',
    run: (arg, c) => {
      const want = arg.trim().toLowerCase().replace(/\s+/g, '-');
      if (!want) { c.openModePicker(); return; }
      const mode = MODES.find((m) => m === want || MODE_LABELS[m].toLowerCase().replace(/\s+/g, '-') === want || (want === 'edits' && m === 'accept-edits'));
      if (mode) c.post({ type: 'setMode', mode });
      else c.note(`No mode "${arg.trim()}": ask, accept-edits or plan.`);
    },
  },
];

/** `/name args` when `name` is one of the panel's own commands; else undefined (it goes as typed). */
export function parseBuiltin(text: string): { command: BuiltinCommand; arg: string } | undefined {
  const m = /^\s*\/([\w.-]+)(?:\s+([\s\S]*))?$/.exec(text);
  if (!m) return undefined;
  const command = BUILTIN_COMMANDS.find((c) => c.name === m[1]);
  if (!command) return undefined;
  const arg = (m[2] ?? '').trim();
  // Only /mode takes words; any other built-in followed by text is not this command (it is sent).
  if (arg && !command.hint) return undefined;
  return { command, arg };
}

const n = (x: number) => x.toLocaleString('en-US');

/** `/context`: the last request's input tokens against the model's window (`context/usage`). */
export function contextText(model: SessionModel): string {
  const c = model.context;
  if (!c) return 'Context: not known yet (no model request has reported its usage).';
  if (!c.window) return `Context: ${n(c.used)} tokens in the last request (the model's window is not known).`;
  const pct = Math.round((c.used / c.window) * 100);
  return `Context: ${n(c.used)} of ${n(c.window)} tokens (${pct}%)${pct >= 70 ? ' — /compact frees some' : ''}.`;
}
