// The active terminal's last command as context (issue 36 item 6), end to end in code-server with the
// real daemon, the model being the fake provider: a person opens a terminal (bash, with VS Code's
// shell integration, which is what lets the extension read a command's output and exit code), runs
// commands that print `term36-marker` and fail, picks the terminal row of the @ picker and sends;
// the request the provider gets holds the command, its output and its exit code.
// The terminal is bash from a profile with HOME in a temporary folder: its rc files and history are
// not the person's (and VS Code injects its shell integration into bash, not into `sh`).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { textReply } from '../test/fakeProvider';
import { CodeServer } from './harness';

const home = mkdtempSync(join(tmpdir(), 'dsh-e2e-term-home-'));

const cs = new CodeServer({
  name: 'terminal-context', daemon: 'setting',
  settings: {
    'terminal.integrated.profiles.linux': { 'e2e-bash': { path: '/bin/bash', env: { HOME: home, HISTFILE: join(home, '.bash_history') } } },
    'terminal.integrated.defaultProfile.linux': 'e2e-bash',
    'terminal.integrated.shellIntegration.enabled': true,
    'terminal.integrated.enablePersistentSessions': false,
  },
});

describe('the @ picker attaches the active terminal\'s last command (issue 36)', () => {
  beforeAll(async () => { await cs.start(); }, 300000);
  afterAll(async () => {
    await cs.stop();
    rmSync(home, { recursive: true, force: true });
  });

  it('a command run in the terminal, its output and exit code reach the model', async () => {
    try {
      await scenario();
    } catch (err) {
      await cs.shot('FAILED').catch(() => undefined);
      throw new Error(`${(err as Error).message}\n--- logs\n${cs.logs()}`, { cause: err });
    }
  });
});

async function scenario(): Promise<void> {
  const { page, fake } = cs;
  await cs.openWorkbench();
  await cs.openChat();
  const c = cs.chat();
  await expect.poll(() => c.locator('.status').textContent(), { timeout: 60000 }).toBe('idle');
  await cs.runCommand('Terminal: Create New Terminal');
  const term = page.locator('.terminal-wrapper .xterm').first();
  await term.waitFor({ timeout: 30000 });

  // Before anything ran, the row says so (and that shell integration is on: without it, it says that).
  const box = c.getByLabel('message');
  const rows = c.locator('.mentions .mention').filter({ has: c.locator('.mention-kind.terminal') });
  await expect.poll(async () => {
    await box.fill('');
    await box.fill('@term');
    await rows.first().waitFor({ timeout: 5000 }).catch(() => undefined);
    return (await rows.allTextContents()).join(' | ');
  }, { timeout: 60000, interval: 1000 }).toContain('bash: no command run yet');
  await box.press('Escape');

  await term.click();
  // A command that ends as it starts (`echo x; false`) gets its row, its command line and its exit code,
  // but VS Code hands an extension none of its output: its start, output and end reach the extension
  // host in one batch, and execution.read()'s stream starts listening a microtask later (see
  // terminalOutput.ts). So the command whose output is checked prints it a moment after it starts.
  const fast = rows.filter({ hasText: 'echo term36-fast; false' }).filter({ hasText: 'exit 1 ·' });
  const row = rows.filter({ hasText: 'sleep 1; echo term36-marker; sleep 1; false' }).filter({ hasText: 'exit 1 ·' });
  /** Asks the picker for `@term` until `wanted` shows (what it lists then, for the failure message). */
  const untilShown = (wanted: typeof row) => expect.poll(async () => {
    await box.fill('');
    await box.fill('@term');
    await wanted.first().waitFor({ timeout: 5000 }).catch(() => undefined);
    return `${await wanted.count()} ${(await rows.allTextContents()).join(' | ')}`;
  }, { timeout: 60000, interval: 1000 }).toMatch(/^1 /);
  // Each command is typed at its prompt (typed ahead, VS Code takes both lines for the first's command line).
  await page.keyboard.type('echo term36-fast; false');
  await page.keyboard.press('Enter');
  await untilShown(fast);
  await box.press('Escape');
  await term.click();
  await page.keyboard.type('sleep 1; echo term36-marker; sleep 1; false');
  await page.keyboard.press('Enter');
  await untilShown(row);
  console.log('rows:', JSON.stringify(await rows.allTextContents()));
  expect(await row.first().textContent()).toContain('exit 1 · 1 line · `sleep 1; echo term36-marker; sleep 1; false`');
  await cs.shot('terminal-row');
  await row.first().click();
  const chip = c.locator('.chip', { hasText: 'bash: sleep 1; echo term36-marker; sleep 1;' });
  await expect.poll(() => chip.count(), { timeout: 15000 }).toBe(1);

  fake.script(textReply('`false` exits with 1.'));
  const before = fake.requests.length;
  await box.fill('why did it fail?');
  await box.press('Enter');
  await fake.waitRequests(before + 1, 60000);
  const users = (fake.requests.at(-1)!.body.messages as Array<{ role: string; content: unknown }>)
    .filter((m) => m.role === 'user').map((m) => typeof m.content === 'string' ? m.content : JSON.stringify(m.content));
  const attached = users.find((u) => u.startsWith('A command in the terminal "bash"'));
  expect(attached, users.join('\n---\n')).toBeDefined();
  expect(attached).toMatch(/^A command in the terminal "bash" \(in [^)]*\), exit code 1:\n```console\n\$ sleep 1; echo term36-marker; sleep 1; false\n/);
  // The output, not only the command line: the marker on a line of its own.
  expect(attached!.split('\n')).toContain('term36-marker');
  expect(users.indexOf(attached!)).toBe(users.indexOf('why did it fail?') - 1);
  await expect.poll(() => c.locator('.msg.assistant', { hasText: 'exits with 1' }).count(), { timeout: 60000 }).toBe(1);
  await cs.shot('sent');
}
