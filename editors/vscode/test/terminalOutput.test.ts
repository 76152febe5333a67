// The terminal recorder behind the @ picker's terminal rows (terminalOutput.ts), fed by shell-integration
// events as VS Code fires them: escape sequences stripped (also when split between reads), the output's
// tail kept, each terminal's own newest commands, the exit code from the end event, and what the rows
// and the daemon's `terminal` context say.
import { describe, expect, it } from 'vitest';
import {
  AnsiStripper, COMMANDS_KEPT, endWords, lineCount, MAX_OUTPUT_CHARS, screenText, terminalOutputNow, terminalRows,
  TerminalOutputRecorder, type ShellExecution, type TerminalEvents, type TerminalLike,
} from '../src/terminalOutput';

class Emitter<T> {
  private listeners: Array<(e: T) => unknown> = [];
  readonly event = (l: (e: T) => unknown) => { this.listeners.push(l); return { dispose: () => { this.listeners = this.listeners.filter((x) => x !== l); } }; };
  fire(e: T): void { this.listeners.forEach((l) => l(e)); }
}

/** A command's output as execution.read() yields it: what `write` gives, until `end`. */
class Execution implements ShellExecution {
  readonly commandLine: { value: string };
  readonly cwd?: { fsPath: string };
  private chunks: string[] = [];
  private done = false;
  private wake: (() => void) | undefined;
  constructor(command: string, cwd?: string) {
    this.commandLine = { value: command };
    if (cwd) this.cwd = { fsPath: cwd };
  }
  write(data: string): void { this.chunks.push(data); this.wake?.(); }
  end(): void { this.done = true; this.wake?.(); }
  async *read(): AsyncIterable<string> {
    for (;;) {
      while (this.chunks.length) yield this.chunks.shift()!;
      if (this.done) return;
      await new Promise<void>((r) => { this.wake = r; });
    }
  }
}

interface Term extends TerminalLike { name: string; shellIntegration?: unknown }

function setup(maxOutput?: number) {
  const start = new Emitter<{ terminal: Term; execution: ShellExecution }>();
  const end = new Emitter<{ terminal: Term; execution: ShellExecution; exitCode: number | undefined }>();
  const close = new Emitter<Term>();
  const events: TerminalEvents<Term> = { onDidStartTerminalShellExecution: start.event, onDidEndTerminalShellExecution: end.event, onDidCloseTerminal: close.event };
  const recorder = new TerminalOutputRecorder<Term>(events, maxOutput);
  /** Runs `command` in `terminal`: its output written as `chunks`, then its end with `exitCode`. */
  const run = async (terminal: Term, command: string, chunks: string[], exitCode: number | undefined, cwd?: string) => {
    const execution = new Execution(command, cwd);
    start.fire({ terminal, execution });
    for (const c of chunks) execution.write(c);
    execution.end();
    end.fire({ terminal, execution, exitCode });
    await settle();
    return execution;
  };
  return { recorder, start, end, close, run };
}

const settle = () => new Promise((r) => setTimeout(r, 0));

describe('AnsiStripper', () => {
  it('removes colours, cursor moves, titles and shell-integration marks, and keeps text, tabs and line feeds', () => {
    const s = new AnsiStripper();
    const raw = '\x1b]633;C\x07\x1b[1;31mFAIL\x1b[0m\tsrc/a.test.ts\r\n\x1b]0;title\x1b\\\x1b(B\x1b[?25lok\x07\x08\n\x1b]633;D;1\x07';
    expect(s.push(raw)).toBe('FAIL\tsrc/a.test.ts\r\nok\n');
  });

  it('holds a sequence split between two reads until its end comes', () => {
    const s = new AnsiStripper();
    expect(s.push('red: \x1b[3')).toBe('red: ');
    expect(s.push('1mtext\x1b')).toBe('text');
    expect(s.push('[0m done\x1b]633;P;Cwd=/tmp')).toBe(' done');
    expect(s.push('\x07\n')).toBe('\n');
  });
});

describe('screenText and lineCount', () => {
  it('shows CR LF as LF and a line rewritten after a lone CR as its last writing', () => {
    expect(screenText('a\r\nb\r\r\n 10%\r 50%\r100%\r\nend')).toBe('a\nb\n100%\nend');
    expect(lineCount('a\nb\n')).toBe(2);
    expect(lineCount('a\nb')).toBe(2);
    expect(lineCount('')).toBe(0);
  });
});

describe('TerminalOutputRecorder', () => {
  it('keeps each terminal\'s own newest commands, newest first, with their exit codes; a closed terminal\'s go', async () => {
    const { recorder, close, run } = setup();
    const bash: Term = { name: 'bash', shellIntegration: {} };
    const zsh: Term = { name: 'zsh', shellIntegration: {} };
    await run(bash, 'echo one', ['one\r\n'], 0, '/work');
    await run(zsh, 'false', [], 1);
    await run(bash, 'npm test', ['\x1b[31mFAIL\x1b[0m\r\n', '2 failed\r\n'], 1, '/work');
    expect(recorder.of(bash).map((c) => [c.command, c.exitCode, c.output, c.cwd])).toEqual([
      ['npm test', 1, 'FAIL\n2 failed\n', '/work'],
      ['echo one', 0, 'one\n', '/work'],
    ]);
    expect(recorder.of(zsh).map((c) => [c.command, c.exitCode, c.output, c.running])).toEqual([['false', 1, '', false]]);
    for (let i = 0; i < COMMANDS_KEPT + 2; i++) await run(bash, `echo ${i}`, [`${i}\n`], 0);
    expect(recorder.of(bash).map((c) => c.command)).toEqual([6, 5, 4, 3, 2].map((i) => `echo ${i}`));
    close.fire(bash);
    expect(recorder.of(bash)).toEqual([]);
    expect(recorder.of(zsh)).toHaveLength(1);
  });

  it('keeps the tail of a long output and says it was cut', async () => {
    const { recorder, run } = setup();
    const bash: Term = { name: 'bash', shellIntegration: {} };
    const lines = Array.from({ length: 3000 }, (_, i) => `line ${i}\r\n`);
    await run(bash, 'seq', lines, 0);
    const [c] = recorder.of(bash);
    expect(c.truncated).toBe(true);
    expect(c.output.length).toBeLessThanOrEqual(MAX_OUTPUT_CHARS);
    expect(c.output.endsWith('line 2999\n')).toBe(true);
    expect(c.output).not.toContain('line 0\n');
    expect(MAX_OUTPUT_CHARS).toBe(16 * 1024);
  });

  it('shows a running command\'s output so far, without an exit code', async () => {
    const { recorder, start, run } = setup();
    const bash: Term = { name: 'bash', shellIntegration: {} };
    const execution = new Execution('make');
    start.fire({ terminal: bash, execution });
    execution.write('building\r\n');
    await settle();
    const [c] = recorder.of(bash);
    expect([c.running, c.exitCode, c.output]).toEqual([true, undefined, 'building\n']);
    const chip = terminalRows(recorder, bash, '')[0].chips[0];
    expect(terminalOutputNow(recorder, chip)).toEqual({ name: 'bash', command: 'make', output: 'building\n' });
    // The next command starting means this one ended, though its end was never reported.
    start.fire({ terminal: bash, execution: new Execution('ls') });
    expect(recorder.of(bash).map((x) => [x.command, endWords(x)])).toEqual([['ls', 'running'], ['make', 'no exit code']]);
    // A finished command of which nothing was read says why that may be.
    const [, made] = terminalRows(recorder, bash, 'bash');
    expect(made.label).toBe('no exit code · 1 line · `make`');
    await run(bash, 'true', [], 0, '/w');
    expect(terminalRows(recorder, bash, 'true')[0]).toMatchObject({ label: 'exit 0 · no output read · `true`', detail: 'bash · /w · VS Code passes no output of a command that ends as it starts' });
  });
});

describe('the @ picker\'s terminal rows', () => {
  it('offer the active terminal\'s newest commands as chips whose output is read when sent', async () => {
    const { recorder, close, run } = setup();
    const bash: Term = { name: 'bash', shellIntegration: {} };
    await run(bash, 'echo ok', ['ok\n'], 0);
    await run(bash, 'echo term36-marker; false', ['term36-marker\r\n'], 1, '/home/ann/p');
    const rows = terminalRows(recorder, bash, 'term');
    expect(rows.map((r) => [r.kind, r.label, r.detail])).toEqual([
      ['terminal', 'exit 1 · 1 line · `echo term36-marker; false`', 'bash · /home/ann/p'],
      ['terminal', 'exit 0 · 1 line · `echo ok`', 'bash'],
    ]);
    const chip = rows[0].chips[0];
    expect(chip).toMatchObject({ kind: 'terminal', uri: expect.stringMatching(/^terminal:\/\d+\/bash$/), label: 'bash: echo term36-marker; false' });
    expect(chip.uri).not.toBe(rows[1].chips[0].uri); // two chips, not one
    expect(terminalOutputNow(recorder, chip)).toEqual({ name: 'bash', command: 'echo term36-marker; false', cwd: '/home/ann/p', exitCode: 1, output: 'term36-marker\n' });
    // A bare @ offers the newest; a query the terminal's name or a command fits, the newest three.
    expect(terminalRows(recorder, bash, '').map((r) => r.label)).toEqual([rows[0].label]);
    expect(terminalRows(recorder, bash, 'BASH')).toHaveLength(2);
    expect(terminalRows(recorder, bash, 'marker')).toHaveLength(2);
    expect(terminalRows(recorder, bash, 'calc.py')).toEqual([]);
    expect(terminalRows(recorder, undefined, 'term')).toEqual([]);
    close.fire(bash);
    expect(() => terminalOutputNow(recorder, chip)).toThrow(/no longer kept/);
  });

  it('say why a terminal offers nothing: no shell integration, nothing run yet, an older VS Code', () => {
    const { recorder } = setup();
    const [plain] = terminalRows(recorder, { name: 'sh' }, 'term');
    expect([plain.label, plain.chips]).toEqual(['sh: no shell integration: its output cannot be read', []]);
    expect(plain.detail).toContain('terminal.integrated.shellIntegration.enabled');
    expect(terminalRows(recorder, { name: 'sh' }, '')).toEqual([]); // not on every bare @
    expect(terminalRows(recorder, { name: 'bash', shellIntegration: {} }, 'bash')[0].label).toBe('bash: no command run yet');
    const old = new TerminalOutputRecorder<Term>({});
    expect(old.available).toBe(false);
    expect(terminalRows(old, { name: 'bash' }, 'term')[0].label).toBe('bash: this VS Code cannot read terminal output');
  });
});
