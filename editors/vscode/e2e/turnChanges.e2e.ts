// A turn's changed files (issue 33.3) and a subagent's nested card (issue 34.1), end to end in
// code-server + Chromium (the sidebar at its default ~300 px, dark then light theme) with the real
// daemon and a scripted fake provider:
// - the agent edits three hunks of one file; the "Changed files" bar under the turn says so (+/−),
//   its row opens the diff (before the turn ↔ now) with Keep / Undo CodeLens per hunk; the person
//   types a line of their own, then undoes hunk 2 from its CodeLens: the file keeps hunks 1 and 3
//   and the person's line, and the bar says 2 of 3 are left to review;
// - a parent runs a subagent: the run_subagent card holds a nested card with the child's tool call
//   and its summary; after Reload Window the card is drawn again from what is stored.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { textReply, toolReply } from '../test/fakeProvider';
import { CodeServer } from './harness';

const LINES = Array.from({ length: 24 }, (_, i) => `line_${i + 1} = ${i + 1}`);
const APP = LINES.join('\n') + '\n';
const MINE = '# a line the person typed';

const cs = new CodeServer({
  name: 'turn-changes', daemon: 'setting',
  settings: { 'workbench.colorTheme': 'Default Dark Modern' },
  prepare: ({ ws }) => {
    writeFileSync(join(ws, 'app.py'), APP);
    writeFileSync(join(ws, 'notes.txt'), 'the build uses make\n');
  },
});

describe('a turn\'s changed files and a subagent\'s card in the chat panel (issues 33.3, 34.1)', () => {
  beforeAll(async () => { await cs.start(); }, 300000);
  afterAll(async () => { await cs.stop(); });

  it('undo of one hunk from its CodeLens keeps the other two and the person\'s line; a subagent card shows its tool call and summary', async () => {
    try {
      await changedFiles();
      await subagent();
    } catch (err) {
      await cs.shot('FAILED').catch(() => undefined);
      throw new Error(`${(err as Error).message}\n--- logs\n${cs.logs()}`, { cause: err });
    }
  });
});

async function sidebarShot(name: string): Promise<void> {
  await cs.page.mouse.move(900, 500); // no hover tooltip over the view
  const file = join(cs.shots, `turn-changes-${name}-sidebar-300px.png`);
  await cs.page.locator('.part.sidebar').screenshot({ path: file });
  console.log(`screenshot: ${file}`);
}

async function changedFiles(): Promise<void> {
  const { page, fake } = cs;
  await cs.openWorkbench();
  await cs.openChat();
  const c = cs.chat();
  const frame = await cs.chatFrame();
  const box = c.getByLabel('message');
  await expect.poll(() => c.locator('.status').textContent(), { timeout: 60000 }).toBe('idle');
  expect(await frame.evaluate(() => document.documentElement.clientWidth)).toBeLessThan(360);

  // ---- Three edits of app.py, far enough apart to be three hunks.
  const edit = (id: string, n: number, to: string) => ({ id, name: 'edit_file', args: { path: 'app.py', old_string: `line_${n} = ${n}\n`, new_string: to } });
  fake.script(
    toolReply([edit('e1', 3, 'line_3 = 300\n'), edit('e2', 12, 'line_12 = 1200\nline_12b = 1201\n'), edit('e3', 21, 'line_21 = 2100\n')]),
    textReply('Three changes made.'),
  );
  await box.fill('Change lines 3, 12 and 21');
  await box.press('Enter');
  // Each edit asks first: Allow once, as a person would. The bar follows the turn live.
  const bar = c.locator('.changed-files');
  for (let i = 0; i < 3; i++) {
    const allow = c.getByRole('button', { name: 'Allow once' }).first();
    await allow.waitFor({ timeout: 60000 });
    await page.waitForTimeout(700); // the card's buttons arm after 600 ms
    await allow.click();
    await expect.poll(() => c.getByRole('button', { name: 'Allow once' }).count(), { timeout: 30000 }).toBeLessThan(3 - i);
    // While the next edit waits for its answer, the turn's first change is in the bar already.
    if (i === 0) await expect.poll(() => bar.locator('.changed-summary').textContent(), { timeout: 30000 }).toMatch(/^1 changed file so far\+\d−\d1 to review$/);
  }
  await expect.poll(() => c.locator('.msg.assistant', { hasText: 'Three changes made.' }).count(), { timeout: 90000 }).toBe(1);
  await expect.poll(() => bar.locator('.changed-summary').textContent(), { timeout: 30000 }).toBe('1 changed file+4−33 to review');
  const row = bar.locator('.changed-file', { hasText: 'app.py' });
  expect(await row.locator('.changed-counts').textContent()).toBe('+4−3');
  expect(await row.locator('.changed-state').textContent()).toBe('3/3');
  await sidebarShot('dark');

  // ---- The row opens the diff: the file before the turn on the left, the file now on the right.
  await row.locator('.changed-open').click();
  const tab = page.locator('.tabs-container .tab', { hasText: 'before turn 1' });
  await tab.waitFor({ timeout: 30000 });
  const diff = page.locator('.monaco-diff-editor');
  await diff.waitFor({ timeout: 15000 });
  await expect.poll(() => diff.locator('.editor.original .view-line', { hasText: 'line_12 = 12' }).count(), { timeout: 15000 }).toBe(1);
  const modified = diff.locator('.editor.modified');
  await expect.poll(() => modified.locator('.view-line', { hasText: 'line_12b = 1201' }).count(), { timeout: 15000 }).toBe(1);
  // The hunks' CodeLens on the right side.
  const lens = (text: string) => modified.locator('.codelens-decoration', { hasText: text });
  await lens('Keep (hunk 2)').waitFor({ timeout: 30000 });
  expect(await lens('Keep (hunk 1)').count()).toBe(1);
  expect(await lens('Keep (hunk 3)').count()).toBe(1);
  expect(await lens('Keep all').count()).toBe(1);

  // ---- The person types a line of their own (below hunk 3, left unsaved), then undoes hunk 2.
  await modified.locator('.view-line', { hasText: 'line_24 = 24' }).click();
  await page.keyboard.press('End');
  await page.keyboard.press('Enter');
  await page.keyboard.insertText(MINE);
  await expect.poll(() => modified.locator('.view-line', { hasText: MINE }).count(), { timeout: 15000 }).toBe(1);
  await cs.shot('diff-with-codelens');
  await lens('Keep (hunk 2)').getByText('Undo', { exact: true }).click();
  await expect.poll(() => modified.locator('.view-line', { hasText: 'line_12 = 12' }).count(), { timeout: 30000 }).toBe(1);
  // The undo's edit may reach the diff editor's view in more than one update: poll, not read once.
  await expect.poll(() => modified.locator('.view-line', { hasText: 'line_12b' }).count(), { timeout: 30000 }).toBe(0);
  expect(await modified.locator('.view-line', { hasText: 'line_3 = 300' }).count()).toBe(1);
  expect(await modified.locator('.view-line', { hasText: 'line_21 = 2100' }).count()).toBe(1);
  expect(await modified.locator('.view-line', { hasText: MINE }).count()).toBe(1);
  await expect.poll(() => lens('Keep (hunk 2)').count(), { timeout: 15000 }).toBe(0);
  // The bar: two of three left to review, and what the undo did in words.
  await expect.poll(() => row.locator('.changed-state').textContent(), { timeout: 30000 }).toBe('2/3');
  expect(await bar.locator('.changed-note').textContent()).toBe('Undid hunk 2 of app.py.');
  // Saved, the file holds hunks 1 and 3 and the person's line, hunk 2 taken back.
  await page.keyboard.press('Control+S');
  const want = APP.replace('line_3 = 3\n', 'line_3 = 300\n').replace('line_21 = 21\n', 'line_21 = 2100\n') + MINE + '\n';
  await expect.poll(() => readFileSync(join(cs.ws, 'app.py'), 'utf8'), { timeout: 15000 }).toBe(want);
  await cs.shot('after-undo');
  await sidebarShot('dark-after-undo');

  // ---- A conflict, in words: the person changes hunk 3's line, then Undo (the whole file) in the
  //      bar: hunk 1 is taken back, hunk 3 is named and left as the person has it.
  await modified.locator('.view-line', { hasText: 'line_21 = 2100' }).click();
  await page.keyboard.press('End');
  await page.keyboard.insertText(' # checked');
  await page.keyboard.press('Control+S');
  await expect.poll(() => readFileSync(join(cs.ws, 'app.py'), 'utf8'), { timeout: 15000 }).toContain('line_21 = 2100 # checked\n');
  await expect.poll(() => lens('Keep (hunk 3)').count(), { timeout: 15000 }).toBe(0); // its lines changed: no lens
  await row.getByRole('button', { name: 'Undo' }).click();
  const note = bar.locator('.changed-note');
  await expect.poll(() => note.textContent(), { timeout: 30000 }).toMatch(/^Undid hunk 1 of app\.py\. Hunk 3 was not undone: .+\.$/);
  expect(await note.evaluate((e) => e.classList.contains('warning'))).toBe(true);
  await expect.poll(() => modified.locator('.view-line', { hasText: 'line_3 = 3' }).count(), { timeout: 15000 }).toBe(1);
  expect(await modified.locator('.view-line', { hasText: 'line_3 = 300' }).count()).toBe(0);
  expect(await modified.locator('.view-line', { hasText: 'line_21 = 2100 # checked' }).count()).toBe(1);
  expect(await modified.locator('.view-line', { hasText: MINE }).count()).toBe(1);
  await modified.locator('.view-line', { hasText: MINE }).click();
  await page.keyboard.press('Control+S');
  await expect.poll(() => readFileSync(join(cs.ws, 'app.py'), 'utf8'), { timeout: 15000 })
    .toBe(APP.replace('line_21 = 21\n', 'line_21 = 2100 # checked\n') + MINE + '\n');
  await sidebarShot('dark-conflict');

  // ---- Keep, from the bar: what is left (hunk 3) is marked reviewed; the file is not touched.
  await row.getByRole('button', { name: 'Keep' }).click();
  await expect.poll(() => row.locator('.changed-state').textContent(), { timeout: 30000 }).toBe('✓');
  expect(await bar.locator('.changed-pending').textContent()).toBe('reviewed');
  expect(await bar.locator('.changed-note').textContent()).toBe('Kept hunk 3 of app.py.');
  expect(readFileSync(join(cs.ws, 'app.py'), 'utf8')).toBe(APP.replace('line_21 = 21\n', 'line_21 = 2100 # checked\n') + MINE + '\n');
  // The light theme: the same bar.
  await cs.writeSettings({ ...cs.settings(), 'workbench.colorTheme': 'Default Light Modern' });
  await page.locator('.monaco-workbench.vs:not(.vs-dark)').waitFor({ timeout: 30000 });
  await sidebarShot('light-reviewed');
  await cs.runCommand('View: Close All Editors');
}

async function subagent(): Promise<void> {
  const { fake } = cs;
  const c = cs.chat();
  const box = c.getByLabel('message');
  fake.script(
    toolReply([{ id: 'p1', name: 'run_subagent', args: { description: 'find the build tool', prompt: 'Read notes.txt and say which build tool the project uses.' } }]),
    // The child: one read, then its summary.
    toolReply([{ id: 'k1', name: 'read_file', args: { path: 'notes.txt' } }]),
    textReply('The project builds with make (notes.txt).'),
    textReply('It uses make.'),
  );
  await box.fill('Which build tool?');
  await box.press('Enter');
  await expect.poll(() => c.locator('.msg.assistant', { hasText: 'It uses make.' }).count(), { timeout: 120000 }).toBe(1);
  const card = c.locator('.tool.has-subagent details.subagent');
  await card.waitFor({ timeout: 15000 });
  expect(await card.locator('.subagent-desc').textContent()).toBe('find the build tool');
  expect(await card.locator('.subagent-state').textContent()).toBe('done');
  // Closed once it ended: open it.
  if (!await card.evaluate((d) => (d as HTMLDetailsElement).open)) await card.locator('summary').click();
  const call = card.locator('.subagent-call');
  expect(await call.count()).toBe(1);
  expect(await call.locator('.subagent-call-name').textContent()).toBe('read_file');
  expect(await call.locator('.subagent-call-args').textContent()).toBe('notes.txt');
  expect(await call.evaluate((li) => li.className)).toContain('ok');
  expect(await card.locator('.subagent-summary-text').textContent()).toBe('The project builds with make (notes.txt).');
  await card.scrollIntoViewIfNeeded();
  await sidebarShot('subagent-light');

  // ---- Reload Window: the card is drawn again from what is stored: the description, state and
  //      summary from the parent's call, the child's tool call from the child's own session.
  await cs.runCommand('Developer: Reload Window');
  await cs.page.locator('.monaco-workbench').waitFor({ timeout: 60000 });
  await cs.openChat();
  const again = cs.chat().locator('.tool.has-subagent details.subagent');
  await again.waitFor({ timeout: 60000 });
  expect(await again.locator('.subagent-desc').textContent()).toBe('find the build tool');
  expect(await again.locator('.subagent-state').textContent()).toBe('done');
  if (!await again.evaluate((d) => (d as HTMLDetailsElement).open)) await again.locator('summary').click();
  expect(await again.locator('.subagent-summary-text').textContent()).toBe('The project builds with make (notes.txt).');
  await expect.poll(() => again.locator('.subagent-call .subagent-call-name').allTextContents(), { timeout: 30000 }).toEqual(['read_file']);
  expect(await again.locator('.subagent-call .subagent-call-args').textContent()).toBe('notes.txt');
  await again.scrollIntoViewIfNeeded();
  await sidebarShot('subagent-light-reloaded');
  // And dark.
  await cs.writeSettings({ ...cs.settings(), 'workbench.colorTheme': 'Default Dark Modern' });
  await cs.page.locator('.monaco-workbench.vs-dark').waitFor({ timeout: 30000 });
  await again.scrollIntoViewIfNeeded();
  await sidebarShot('subagent-dark-reloaded');
}
