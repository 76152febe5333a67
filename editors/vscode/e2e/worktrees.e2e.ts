// Sessions in their own worktree (issue 34.2), end to end in code-server + Chromium with the real
// daemon and a scripted fake provider, in a workspace that is a real git repository:
// - "dsh: New Session in a Worktree" (branch fix-greet) opens a new session in the chat; the agent
//   writes NOTES.md there (in its worktree, not the workspace);
// - the Sessions view (the sidebar at ~300 px, dark then light) lists it with its state dot, selected
//   as the session the chat shows, and under it a row with its branch and "1 file changed";
// - its inline actions: Show Worktree Diff opens the patch, Apply to My Workspace writes NOTES.md
//   into the workspace; applied again over the person's own NOTES.md it names the conflict and
//   writes nothing;
// - deleting the session, keeping its worktree, lists it under "Worktrees without a session";
//   Discard (confirmed) removes folder and branch.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Locator } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { textReply, toolReply } from '../test/fakeProvider';
import { CodeServer } from './harness';

const git = (cwd: string, ...args: string[]) => execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', ...args], { cwd, encoding: 'utf8' });

const cs = new CodeServer({
  name: 'worktrees', daemon: 'setting',
  settings: { 'workbench.colorTheme': 'Default Dark Modern' },
  prepare: ({ ws }) => {
    writeFileSync(join(ws, 'app.py'), 'def greet():\n    return "hello"\n');
    git(ws, 'init', '-q', '-b', 'main');
    git(ws, 'add', '-A');
    git(ws, 'commit', '-q', '-m', 'start');
  },
});

describe('a session in its own worktree, from the Sessions view (issue 34.2)', () => {
  beforeAll(async () => { await cs.start(); }, 300000);
  afterAll(async () => { await cs.stop(); });

  it('lists the worktree session with its changed file, shows its diff, applies it, names a conflict, and lists its worktree once the session is deleted', async () => {
    try {
      await scenario();
    } catch (err) {
      await cs.shot('FAILED').catch(() => undefined);
      throw new Error(`${(err as Error).message}\n--- logs\n${cs.logs()}`, { cause: err });
    }
  });
});

async function sidebarShot(name: string): Promise<void> {
  await cs.page.mouse.move(900, 500); // no hover tooltip over the view
  const file = join(cs.shots, `worktrees-${name}-sidebar-300px.png`);
  await cs.page.locator('.part.sidebar').screenshot({ path: file });
  console.log(`screenshot: ${file}`);
}

/** Runs a row's inline action (shown on hover). */
async function inline(row: Locator, title: string): Promise<void> {
  await row.hover();
  await row.locator(`.action-label[aria-label^="${title}"]`).click();
}

/** Runs a row's context-menu item. */
async function contextItem(row: Locator, title: string): Promise<void> {
  await row.click({ button: 'right' });
  const item = cs.page.locator('.monaco-menu .action-item', { hasText: title }).first();
  await item.waitFor({ timeout: 15000 });
  // The menu can drop a click that comes right as it opens: hover first (which focuses the item),
  // and if the menu is still up after the click, Enter runs the focused item.
  await item.hover();
  await cs.page.waitForTimeout(300);
  await item.click();
  await cs.page.waitForTimeout(300);
  if (await item.isVisible().catch(() => false)) await cs.page.keyboard.press('Enter');
}

async function scenario(): Promise<void> {
  const { page, fake } = cs;
  await cs.openWorkbench();
  await cs.openChat();
  const c = cs.chat();
  await expect.poll(() => c.locator('.status').textContent(), { timeout: 60000 }).toBe('idle');

  // ---- A new session in a worktree of its own, on branch fix-greet.
  await cs.runCommand('dsh: New Session in a Worktree');
  const input = page.locator('.quick-input-widget input');
  await page.locator('.quick-input-widget', { hasText: 'New dsh session in a worktree' }).waitFor({ timeout: 30000 });
  await input.fill('fix-greet');
  await input.press('Enter');
  const worktree = `${cs.ws}.dsh-worktrees/fix-greet`;
  await expect.poll(() => existsSync(join(worktree, 'app.py')), { timeout: 60000 }).toBe(true);

  // ---- The agent writes NOTES.md, in the worktree (asked first: Allow once).
  fake.script(toolReply([{ id: 'w1', name: 'write_file', args: { path: 'NOTES.md', content: 'greet says hello\n' } }]), textReply('Wrote NOTES.md.'));
  const box = c.getByLabel('message');
  await box.fill('Write NOTES.md');
  await box.press('Enter');
  const allow = c.getByRole('button', { name: 'Allow once' }).first();
  await allow.waitFor({ timeout: 60000 });
  await page.waitForTimeout(700); // the card's buttons arm after 600 ms
  await allow.click();
  await expect.poll(() => c.locator('.msg.assistant', { hasText: 'Wrote NOTES.md.' }).count(), { timeout: 90000 }).toBe(1);
  expect(readFileSync(join(worktree, 'NOTES.md'), 'utf8')).toBe('greet says hello\n');
  expect(existsSync(join(cs.ws, 'NOTES.md'))).toBe(false);

  // ---- The Sessions view: the worktree session with its branch and figures, and the plain one.
  const header = page.locator('.part.sidebar .pane-header', { hasText: 'Sessions' });
  await header.waitFor({ timeout: 30000 });
  if ((await header.getAttribute('aria-expanded')) !== 'true') await header.click();
  const pane = page.locator('.part.sidebar .pane', { has: page.locator('.pane-header', { hasText: 'Sessions' }) });
  const rows = pane.locator('.monaco-list-row');
  const sessionRow = rows.filter({ hasText: 'Write NOTES.md' });
  const row = rows.filter({ hasText: 'fix-greet' }); // the worktree's row, under its session's
  await expect.poll(() => row.textContent(), { timeout: 60000 }).toContain('1 file changed');
  await expect.poll(() => sessionRow.getAttribute('aria-selected'), { timeout: 15000 }).toBe('true'); // the session the chat shows
  expect(await sessionRow.locator('.codicon-circle-outline').count()).toBe(1); // idle
  expect(await row.locator('.codicon-git-branch').count()).toBe(1);
  expect(Number(await row.getAttribute('aria-level'))).toBe(Number(await sessionRow.getAttribute('aria-level')) + 1);
  await sidebarShot('dark');

  // ---- Its whole diff, as a patch.
  await inline(row, 'Show Worktree Diff');
  await page.locator('.tabs-container .tab', { hasText: 'fix-greet.diff' }).waitFor({ timeout: 30000 });
  const editor = page.locator('.editor-instance .monaco-editor').first();
  await expect.poll(() => editor.locator('.view-line', { hasText: '+greet says hello' }).count(), { timeout: 30000 }).toBe(1);
  expect(await editor.locator('.view-line', { hasText: '# branch fix-greet against HEAD' }).count()).toBe(1);
  await cs.shot('diff');
  await cs.runCommand('View: Close All Editors');

  // ---- Apply to my workspace: NOTES.md lands in the workspace as an uncommitted change.
  await inline(row, 'Apply to My Workspace');
  await page.locator('.notifications-toasts', { hasText: 'applied fix-greet to your workspace' }).waitFor({ timeout: 30000 });
  expect(readFileSync(join(cs.ws, 'NOTES.md'), 'utf8')).toBe('greet says hello\n');
  expect(git(cs.ws, 'status', '--porcelain')).toBe('?? NOTES.md\n');
  // The person changes it; applying again names the conflict and writes nothing.
  writeFileSync(join(cs.ws, 'NOTES.md'), 'mine\n');
  await inline(row, 'Apply to My Workspace');
  await page.locator('.notifications-toasts', { hasText: 'nothing was applied' }).filter({ hasText: 'NOTES.md' }).waitFor({ timeout: 30000 });
  expect(readFileSync(join(cs.ws, 'NOTES.md'), 'utf8')).toBe('mine\n');

  // ---- The light theme: the same view.
  await cs.writeSettings({ ...cs.settings(), 'workbench.colorTheme': 'Default Light Modern' });
  await page.locator('.monaco-workbench.vs:not(.vs-dark)').waitFor({ timeout: 30000 });
  await sidebarShot('light');

  // ---- Deleting the session asks about its worktree; kept, it is listed without a session.
  await contextItem(sessionRow, 'Delete Session');
  await page.locator('.monaco-dialog-box').getByRole('button', { name: 'Delete, Keep Worktree' }).click();
  const orphans = rows.filter({ hasText: 'Worktrees without a session' });
  await orphans.waitFor({ timeout: 30000 });
  const orphan = rows.filter({ hasText: 'fix-greet' });
  await expect.poll(() => sessionRow.count(), { timeout: 30000 }).toBe(0);
  await expect.poll(() => orphan.textContent(), { timeout: 30000 }).toContain('1 file changed');
  expect(existsSync(join(worktree, 'NOTES.md'))).toBe(true);
  await sidebarShot('light-orphan');
  // Discard, confirmed: folder and branch gone, the node with them.
  await contextItem(orphan, 'Discard Worktree');
  await page.locator('.monaco-dialog-box').getByRole('button', { name: 'Discard' }).click();
  await expect.poll(() => orphans.count(), { timeout: 30000 }).toBe(0);
  expect(existsSync(worktree)).toBe(false);
  expect(git(cs.ws, 'branch', '--list', 'fix-greet')).toBe('');
}
