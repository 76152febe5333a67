// The commands run in VS Code's integrated terminals and what they printed, recorded through shell
// integration (the stable API of VS Code 1.93: onDidStartTerminalShellExecution → execution.read(),
// onDidEndTerminalShellExecution for the exit code), so the @ picker can attach the active terminal's
// last commands (the daemon's `terminal` context, protocol.md §6). No vscode import: the window's
// events are given (typed here, as the @types/vscode this package builds against predate them), so it
// is tested in plain Node.
import type { Chip, MentionItem } from './protocol/panelMessages';
import type { TerminalOutput } from './protocol/types';

/** Of each command's output, its last this many characters (the end of a build is where it failed). */
export const MAX_OUTPUT_CHARS = 16 * 1024;
/** Commands kept per terminal, the newest. */
export const COMMANDS_KEPT = 5;
/** Rows the @ picker offers for the active terminal (its newest commands). */
const ROWS = 3;
/** An escape sequence split across reads is held at most this long (longer: not one, dropped). */
const MAX_PENDING = 4096;

/** What the recorder needs of a terminal (a vscode.Terminal). */
export interface TerminalLike {
  readonly name: string;
  /** Set once shell integration is active in it (vscode.Terminal.shellIntegration, 1.93+). */
  readonly shellIntegration?: unknown;
  show?(preserveFocus?: boolean): void;
}

export interface ShellExecution {
  readonly commandLine: { readonly value: string };
  readonly cwd?: { readonly fsPath: string } | undefined;
  read(): AsyncIterable<string>;
}

interface Event<T> { (listener: (e: T) => unknown): { dispose(): unknown } }

/** The window's events (vscode.window); the shell-integration ones are absent before VS Code 1.93. */
export interface TerminalEvents<T extends TerminalLike> {
  readonly onDidStartTerminalShellExecution?: Event<{ readonly terminal: T; readonly execution: ShellExecution }>;
  readonly onDidEndTerminalShellExecution?: Event<{ readonly terminal: T; readonly execution: ShellExecution; readonly exitCode: number | undefined }>;
  readonly onDidCloseTerminal?: Event<T>;
}

/** One command as recorded so far (its output grows while it runs). */
export interface TerminalCommand {
  readonly id: number;
  readonly command: string;
  readonly cwd?: string;
  readonly running: boolean;
  readonly exitCode?: number;
  /** What it printed, escape sequences stripped, `\r` overwrites applied (its tail when `truncated`). */
  readonly output: string;
  readonly truncated: boolean;
}

interface Recorded {
  readonly id: number;
  readonly command: string;
  readonly cwd?: string;
  running: boolean;
  exitCode?: number;
  raw: string;
  truncated: boolean;
}

/** Removes a terminal's escape sequences (CSI: colours, cursor moves; OSC: titles, shell-integration
 *  marks; DCS and the like; two-byte ones) and its other control characters but line feeds, tabs and
 *  carriage returns. A sequence split between two reads is held until the rest comes. */
export class AnsiStripper {
  private pending = '';

  push(chunk: string): string {
    const s = this.pending + chunk;
    this.pending = '';
    let out = '';
    let run = 0; // where the text not yet copied to `out` starts
    let i = 0;
    while (i < s.length) {
      const c = s.charCodeAt(i);
      const control = (c < 0x20 && c !== 0x0a && c !== 0x09 && c !== 0x0d) || (c >= 0x7f && c <= 0x9f);
      if (!control) { i++; continue; }
      out += s.slice(run, i);
      if (c !== 0x1b) { run = ++i; continue; } // BEL, backspace and the like: dropped
      const end = escapeEnd(s, i);
      if (end < 0) { // not complete yet: held for the next read (a runaway one is dropped)
        if (s.length - i <= MAX_PENDING) this.pending = s.slice(i);
        return out;
      }
      run = i = end;
    }
    return out + s.slice(run);
  }
}

/** The index just after the escape sequence starting at `i` (an ESC), or -1 when it is not complete yet. */
function escapeEnd(s: string, i: number): number {
  if (i + 1 >= s.length) return -1;
  const kind = s[i + 1];
  if (kind === '[') { // CSI: parameters and intermediates, then a final byte in @..~
    for (let j = i + 2; j < s.length; j++) {
      const c = s.charCodeAt(j);
      if (c >= 0x40 && c <= 0x7e) return j + 1;
      if (c < 0x20 || c > 0x7e) return j; // malformed: what came so far is dropped
    }
    return -1;
  }
  if (kind === ']' || kind === 'P' || kind === 'X' || kind === '^' || kind === '_') { // a string, to BEL or ESC \
    for (let j = i + 2; j < s.length; j++) {
      if (s.charCodeAt(j) === 0x07) return j + 1;
      if (s.charCodeAt(j) === 0x1b) return j + 1 >= s.length ? -1 : s[j + 1] === '\\' ? j + 2 : j;
    }
    return -1;
  }
  // ESC, intermediates (space../), then one final byte: `ESC ( B`, `ESC =`, `ESC 7`.
  let j = i + 1;
  while (j < s.length && s.charCodeAt(j) >= 0x20 && s.charCodeAt(j) <= 0x2f) j++;
  return j < s.length ? j + 1 : -1;
}

/** The text a terminal shows for `raw`: CR LF as LF, and a line rewritten after a lone CR (a progress
 *  bar) as its last writing. */
export function screenText(raw: string): string {
  return raw.replace(/\r+\n/g, '\n').split('\n').map((line) => {
    const parts = line.split('\r').filter((p) => p !== '');
    return parts.length ? parts[parts.length - 1] : '';
  }).join('\n');
}

/** The lines of `output` (a last line without its line feed counts; the empty output has none). */
export function lineCount(output: string): number {
  if (!output) return 0;
  return output.split('\n').length - (output.endsWith('\n') ? 1 : 0);
}

/** `text`'s last `max` characters, never starting inside a surrogate pair. */
function tail(text: string, max: number): string {
  let out = text.slice(-max);
  const first = out.charCodeAt(0);
  if (first >= 0xdc00 && first <= 0xdfff) out = out.slice(1);
  return out;
}

/** The commands of each open terminal, the newest COMMANDS_KEPT, with their output as it is read. */
export class TerminalOutputRecorder<T extends TerminalLike> {
  /** Whether this VS Code has the shell-integration API (1.93+). */
  readonly available: boolean;
  private readonly commands = new Map<T, Recorded[]>();
  private readonly executions = new WeakMap<ShellExecution, Recorded>();
  private readonly subscriptions: Array<{ dispose(): unknown }> = [];
  private nextId = 1;

  constructor(events: TerminalEvents<T>, private readonly maxOutput = MAX_OUTPUT_CHARS) {
    this.available = typeof events.onDidStartTerminalShellExecution === 'function';
    if (events.onDidStartTerminalShellExecution) this.subscriptions.push(events.onDidStartTerminalShellExecution((e) => this.started(e.terminal, e.execution)));
    if (events.onDidEndTerminalShellExecution) this.subscriptions.push(events.onDidEndTerminalShellExecution((e) => this.ended(e.execution, e.exitCode)));
    if (events.onDidCloseTerminal) this.subscriptions.push(events.onDidCloseTerminal((t) => this.commands.delete(t)));
  }

  /** `terminal`'s recorded commands, the newest first. */
  of(terminal: T): TerminalCommand[] {
    return (this.commands.get(terminal) ?? []).map((r) => this.view(r)).reverse();
  }

  /** The command recorded as `id` and its terminal (undefined once the terminal closed or it was dropped). */
  find(id: number): { terminal: T; command: TerminalCommand } | undefined {
    for (const [terminal, list] of this.commands) {
      const r = list.find((x) => x.id === id);
      if (r) return { terminal, command: this.view(r) };
    }
    return undefined;
  }

  dispose(): void {
    this.subscriptions.forEach((s) => s.dispose());
    this.commands.clear();
  }

  private started(terminal: T, execution: ShellExecution): void {
    const record: Recorded = { id: this.nextId++, command: execution.commandLine.value, cwd: execution.cwd?.fsPath, running: true, raw: '', truncated: false };
    const list = this.commands.get(terminal) ?? [];
    // A command starting means the one before ended, even if its end was never reported.
    for (const earlier of list) earlier.running = false;
    list.push(record);
    if (list.length > COMMANDS_KEPT) list.splice(0, list.length - COMMANDS_KEPT);
    this.commands.set(terminal, list);
    this.executions.set(execution, record);
    void this.read(record, execution);
  }

  private async read(record: Recorded, execution: ShellExecution): Promise<void> {
    const strip = new AnsiStripper();
    try {
      for await (const data of execution.read()) {
        record.raw += strip.push(data);
        // Held a little over the cap: a lone CR's rewrite can only shorten what is shown.
        if (record.raw.length > this.maxOutput * 2) this.cut(record);
      }
    } catch { /* the terminal went away mid-read: what came is kept */ }
    this.cut(record);
  }

  private cut(record: Recorded): void {
    const text = screenText(record.raw);
    if (text.length > this.maxOutput) {
      record.raw = tail(text, this.maxOutput);
      record.truncated = true;
    }
  }

  private ended(execution: ShellExecution, exitCode: number | undefined): void {
    const record = this.executions.get(execution);
    if (!record) return;
    record.running = false;
    record.exitCode = exitCode;
  }

  /** `record` as the terminal shows it, its output cut to its tail. */
  private view(r: Recorded): TerminalCommand {
    let output = screenText(r.raw);
    let truncated = r.truncated;
    if (output.length > this.maxOutput) { output = tail(output, this.maxOutput); truncated = true; }
    return { id: r.id, command: r.command, cwd: r.cwd, running: r.running, exitCode: r.exitCode, output, truncated };
  }
}

/** The chip's `uri`: names the command for the person and the daemon (`terminal:/ID/NAME`). */
export function terminalUri(id: number, name: string): string {
  return `terminal:/${id}/${encodeURIComponent(name)}`;
}

function short(text: string, max: number): string {
  const one = text.replace(/\s+/g, ' ').trim();
  return one.length > max ? one.slice(0, max - 1) + '…' : one;
}

/** How the command ended, in a few words: "exit 1", "running", "no exit code". */
export function endWords(c: TerminalCommand): string {
  return c.running ? 'running' : c.exitCode !== undefined ? `exit ${c.exitCode}` : 'no exit code';
}

/** The @ picker's rows for the active terminal, for `query` (what follows the @): its newest commands,
 *  each a chip (a bare @ offers the newest one), or, when the query names the terminal, a row that says
 *  why it offers none (no shell integration, nothing run yet, an older VS Code). None without a
 *  terminal, or for a query that fits neither "terminal", its name nor a command. */
export function terminalRows<T extends TerminalLike>(recorder: TerminalOutputRecorder<T>, terminal: T | undefined, query: string): MentionItem[] {
  if (!terminal) return [];
  const q = query.toLowerCase();
  const match = (s: string) => s.toLowerCase().includes(q);
  const name = terminal.name;
  const commands = recorder.of(terminal);
  if (!q) return commands.slice(0, 1).map((c) => commandRow(name, c));
  if (!match('terminal') && !match(name) && !commands.some((c) => match(c.command))) return [];
  if (!commands.length) {
    const why = !recorder.available
      ? ['this VS Code cannot read terminal output', 'shell integration needs VS Code 1.93 or later']
      : !terminal.shellIntegration
        ? ['no shell integration: its output cannot be read', 'needs bash, zsh, fish or pwsh with terminal.integrated.shellIntegration.enabled (a new terminal)']
        : ['no command run yet', 'the output of the commands you run in it can be attached'];
    return [{ kind: 'terminal', label: `${name}: ${why[0]}`, detail: why[1], chips: [] }];
  }
  return commands.slice(0, ROWS).map((c) => commandRow(name, c));
}

function commandRow(name: string, c: TerminalCommand): MentionItem {
  const lines = lineCount(c.output);
  const size = lines ? `${lines} line${lines === 1 ? '' : 's'}${c.truncated ? ' (the last 16 KiB)' : ''}` : 'no output read';
  const chip: Chip = { kind: 'terminal', uri: terminalUri(c.id, name), label: `${name}: ${short(c.command, 40)}`, terminalCommand: c.id };
  // VS Code hands an extension nothing of a command that starts and ends within one moment (`echo x`):
  // its start, output and end reach the extension host together, and execution.read()'s stream only
  // starts listening a microtask later. Said where it shows, so an empty output is not taken as the command's.
  const why = !lines && !c.running ? 'VS Code passes no output of a command that ends as it starts' : undefined;
  // How it ended and how much it printed lead the row: the 300 px sidebar cuts its end, and they are
  // what tells two runs of one command apart.
  const detail = [name, c.cwd, why].filter(Boolean).join(' · ');
  return { kind: 'terminal', label: `${endWords(c)} · ${size} · \`${short(c.command, 60)}\``, detail, chips: [chip] };
}

/** A terminal chip's record as the daemon's `terminal` context, read now (a running command's output so
 *  far); throws when its terminal was closed or the command dropped. */
export function terminalOutputNow<T extends TerminalLike>(recorder: TerminalOutputRecorder<T>, chip: Chip): TerminalOutput {
  const found = chip.terminalCommand === undefined ? undefined : recorder.find(chip.terminalCommand);
  if (!found) throw new Error(`The output of ${chip.label} is no longer kept (its terminal was closed, or ${COMMANDS_KEPT} newer commands ran there).`);
  const { terminal, command: c } = found;
  const out: TerminalOutput = { name: terminal.name, command: c.command, output: c.output };
  if (c.cwd) out.cwd = c.cwd;
  if (c.exitCode !== undefined && !c.running) out.exitCode = c.exitCode;
  if (c.truncated) out.truncated = true;
  return out;
}
