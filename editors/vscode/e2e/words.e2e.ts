// Words, not codes (issue 36.7), end to end in code-server + Chromium (the sidebar at its default
// ~300 px, dark then light theme) with the real daemon and a scripted fake provider: a write the
// model tries in Plan mode is a quiet card that says "Not allowed in Plan mode"; a command the person
// rejects is a grey "rejected" card, not a red error; @git offers the workspace's uncommitted changes
// and the prompt carries that diff; a fork is marked "fork of «…»" in Switch Session.
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { textReply, toolReply } from '../test/fakeProvider';
import { CodeServer } from './harness';

const cs = new CodeServer({
  name: 'words',
  settings: { 'workbench.colorTheme': 'Default Dark Modern' },
  prepare: ({ ws }) => {
    const git = (...args: string[]) => execFileSync('git', ['-c', 'user.email=t@t', '-c', 'user.name=t', ...args], { cwd: ws, env: { ...process.env, GIT_CONFIG_GLOBAL: '/dev/null' } });
    git('init', '-q');
    writeFileSync(join(ws, 'rate.py'), 'RATE = 1\n');
    git('add', 'rate.py');
    git('commit', '-q', '-m', 'rate');
    writeFileSync(join(ws, 'rate.py'), 'RATE = 2\n'); // uncommitted
  },
});

describe('words, not codes (issue 36.7)', () => {
  beforeAll(async () => { await cs.start(); }, 300000);
  afterAll(async () => { await cs.stop(); });

  it('refused and rejected calls are quiet cards in words; @git attaches the diff; a fork is marked in Switch Session', async () => {
    try {
      await cs.openWorkbench();
      await cs.openChat();
      const c = cs.chat();
      const page = cs.page;
      const box = c.getByLabel('message');
      await expect.poll(() => c.locator('.status').textContent(), { timeout: 60000 }).toBe('idle');

      // Plan mode: the model tries a write anyway; the daemon refuses it (DENIED, meta.denied).
      // The header's mode picker (headerPickers.ts): a button whose list holds the modes.
      const modeButton = c.locator('.mode-picker .dropdown-button');
      const setMode = async (label: string, value: string) => {
        await modeButton.click();
        await c.locator('.mode-picker .dropdown-option', { hasText: label }).first().click();
        await expect.poll(() => modeButton.getAttribute('data-value'), { timeout: 15000 }).toBe(value);
      };
      await modeButton.waitFor({ timeout: 30000 });
      await setMode('Plan', 'plan');
      cs.fake.script(toolReply([{ id: 'call_w', name: 'write_file', args: { path: join(cs.ws, 'notes.txt'), content: 'x' } }]), textReply('I will plan first.'));
      await box.fill('Write notes.txt');
      await box.press('Enter');
      const denied = c.locator('.tool.denied');
      await denied.waitFor({ timeout: 30000 });
      expect(await denied.locator('.badge').textContent()).toBe('not allowed');
      expect(await denied.locator('.tool-why').textContent()).toBe('Not allowed in Plan mode');
      expect(await c.locator('.tool.error').count()).toBe(0);
      await expect.poll(() => c.locator('.msg.assistant', { hasText: 'I will plan first.' }).count(), { timeout: 30000 }).toBe(1);

      // Ask mode: a command the person rejects.
      await setMode('Ask', 'ask');
      cs.fake.script(toolReply([{ id: 'call_r', name: 'run_command', args: { command: 'rm -rf build' } }]), textReply('Left it alone.'));
      await box.fill('Clean the build');
      await box.press('Enter');
      const card = c.locator('.permission');
      await card.waitFor({ timeout: 30000 });
      await page.waitForTimeout(700); // a click at once is ignored (test/permissions.test.ts)
      await card.getByRole('button', { name: 'Reject' }).click();
      const rejected = c.locator('.tool.rejected');
      await rejected.waitFor({ timeout: 30000 });
      expect(await rejected.locator('.badge').textContent()).toBe('rejected');
      expect(await c.locator('.tool.error').count()).toBe(0);
      await expect.poll(() => c.locator('.msg.assistant', { hasText: 'Left it alone.' }).count(), { timeout: 30000 }).toBe(1);
      await sidebarShot('1-cards-dark');

      // @git: the workspace's uncommitted changes, sent with the prompt.
      await box.fill('@git');
      const row = c.locator('.mention', { hasText: 'git diff' });
      await row.waitFor({ timeout: 15000 });
      expect(await row.locator('.mention-kind').textContent()).toBe('changes');
      await sidebarShot('2-at-git-dark');
      await box.press('Enter');
      await expect.poll(() => c.locator('.chip').allTextContents(), { timeout: 15000 }).toEqual(['git diff✕']);
      cs.fake.script(textReply('RATE went from 1 to 2.'));
      await box.fill('What did I change?');
      await box.press('Enter');
      await expect.poll(() => c.locator('.msg.assistant', { hasText: 'RATE went from 1 to 2.' }).count(), { timeout: 30000 }).toBe(1);
      const sent = JSON.stringify(cs.fake.requests.at(-1)!.body.messages);
      expect(sent).toContain('(git diff HEAD):');
      expect(sent).toContain('-RATE = 1\\n+RATE = 2');

      // Fork from here, then Switch Session: the fork says what it was forked from.
      const footer = c.locator('.footer').last();
      await footer.hover();
      await footer.getByRole('button', { name: 'Fork from here' }).click();
      await expect.poll(() => c.locator('.session-title').textContent(), { timeout: 30000 }).toMatch(/\(fork\)$/);
      await cs.runCommand('dsh: Switch Session');
      const forkRow = page.locator('.quick-input-list .monaco-list-row', { hasText: 'fork of «' }).first();
      await forkRow.waitFor({ timeout: 15000 });
      expect(await forkRow.locator('.codicon-repo-forked').count()).toBe(1);
      await page.locator('.quick-input-widget').screenshot({ path: join(cs.shots, 'words-3-switch-session-dark.png') });
      await page.keyboard.press('Escape');

      await cs.writeSettings({ ...cs.settings(), 'workbench.colorTheme': 'Default Light Modern' });
      await sidebarShot('4-cards-fork-light');
      // The Sessions view: the fork's row says it too.
      await page.locator('.part.sidebar .pane-header', { hasText: 'Sessions' }).click();
      const sessionRow = page.locator('.part.sidebar .monaco-list-row', { hasText: '(fork)' }).first();
      await sessionRow.waitFor({ timeout: 15000 });
      await expect.poll(() => sessionRow.locator('.label-description').textContent(), { timeout: 15000 }).toBe('fork of «Write notes.txt»');
      await sidebarShot('5-sessions-light');
    } catch (err) {
      await cs.shot('FAILED').catch(() => undefined);
      throw new Error(`${(err as Error).message}\n--- logs\n${cs.logs()}`, { cause: err });
    }
  });
});

async function sidebarShot(name: string): Promise<void> {
  await cs.page.mouse.move(900, 500); // no hover tooltip over the view
  const file = join(cs.shots, `words-${name}-sidebar-300px.png`);
  await cs.page.locator('.part.sidebar').screenshot({ path: file });
  console.log(`screenshot: ${file}`);
}
