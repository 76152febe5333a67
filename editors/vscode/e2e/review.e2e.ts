// A review's finding in the Problems panel (issue 33.4), end to end in code-server + Chromium with the
// real daemon and a scripted fake provider: "dsh: Review Uncommitted Changes" in a git work tree
// queues the review, the transcript shows the request (not the diff), the finding is a `dsh review`
// problem on its lines, and its Dismiss quick fix dismisses it on the daemon too.
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDaemon } from '../test/daemon';
import { textReply, toolReply } from '../test/fakeProvider';
import { CodeServer } from './harness';

const APP = 'def total(xs):\n    s = 0\n    for x in xs: s += x\n    return s\n\n\ndef mean(xs):\n    return total(xs) / len(xs)\n';
const TITLE = 'mean of an empty list divides by zero';

const cs = new CodeServer({
  name: 'review',
  prepare: ({ ws, state }) => {
    const git = (...args: string[]) => execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', ...args],
      { cwd: ws, stdio: 'pipe', env: { ...process.env, HOME: join(state, 'home'), GIT_CONFIG_NOSYSTEM: '1' } });
    git('init', '-q');
    writeFileSync(join(ws, 'app.py'), 'def total(xs):\n    return sum(xs)\n');
    git('add', 'app.py');
    git('commit', '-q', '-m', 'first');
    writeFileSync(join(ws, 'app.py'), APP);
  },
});

describe('review findings in the Problems panel (issue 33.4)', () => {
  beforeAll(async () => { await cs.start(); }, 300000);
  afterAll(async () => { await cs.stop(); });

  it('a review\'s finding is a problem on its lines; Dismiss dismisses it on the daemon', async () => {
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

  fake.script(
    toolReply([{ id: 'f1', name: 'report_finding', args: { path: 'app.py', startLine: 8, endLine: 8, severity: 'warning', title: TITLE, body: 'len(xs) is 0 for [].' } }]),
    textReply('One finding.'),
  );
  await cs.runCommand('dsh: Review Uncommitted Changes');
  await expect.poll(() => c.locator('.msg.assistant', { hasText: 'One finding.' }).count(), { timeout: 90000 }).toBe(1);
  // The transcript shows what the person asked for, not the review prompt with the diff.
  expect(await c.locator('.msg.user .user-text').last().textContent()).toBe('Review uncommitted changes');
  expect(JSON.stringify(fake.requests[0].body.messages)).toContain('return total(xs) / len(xs)');

  // The Problems panel: one warning of source `dsh review` at line 8.
  await cs.runCommand('View: Focus Problems');
  const row = page.locator('.markers-panel .monaco-list-row', { hasText: TITLE }).first();
  await row.waitFor({ timeout: 30000 });
  const text = (await row.textContent()) ?? '';
  expect(text).toContain('dsh review');
  expect(text).toMatch(/Ln 8, Col 1/);
  await page.mouse.move(900, 100);
  await cs.shot('problems');
  const panelShot = join(cs.shots, 'review-problems.png');
  await page.locator('.part.panel').screenshot({ path: panelShot });
  const sidebarShot = join(cs.shots, 'review-sidebar-300px.png');
  await page.locator('.part.sidebar').screenshot({ path: sidebarShot });
  console.log(`screenshots: ${panelShot} ${sidebarShot}`);

  // Its quick fixes, from the problem's line: Dismiss takes it out, and the daemon's list too.
  await row.click();
  await page.locator('.tabs-container .tab', { hasText: 'app.py' }).first().waitFor({ timeout: 15000 });
  // The editor's Quick Fix on the finding's line (the Problems row's click left the focus in the list).
  await page.locator('.monaco-editor .view-line', { hasText: 'return total(xs) / len(xs)' }).click();
  // Ctrl+. right after the click can come before the editor has the code actions for the new
  // cursor: the lightbulb says they are there, and a press that opened nothing is retried.
  await page.locator('.monaco-editor .lightBulbWidget').first().waitFor({ timeout: 15000 }).catch(() => undefined);
  const menu = page.locator('.action-widget');
  await expect.poll(async () => {
    if (await menu.getByText('Ask dsh to fix').isVisible()) return true;
    await page.keyboard.press('Escape');
    await page.keyboard.press('Control+.');
    return menu.getByText('Ask dsh to fix').waitFor({ timeout: 3000 }).then(() => true, () => false);
  }, { timeout: 30000, interval: 250 }).toBe(true);
  await cs.shot('quick-fixes');
  await menu.getByText('Dismiss', { exact: true }).click();
  await expect.poll(() => page.locator('.markers-panel .monaco-list-row', { hasText: TITLE }).count(), { timeout: 15000 }).toBe(0);
  const second = await startDaemon(fake.baseUrl, { state: cs.state, root: cs.ws });
  try {
    const { sessions } = await second.client.listSessions({});
    const listed = await second.client.reviewList(sessions[0].sessionId);
    expect(listed.findings).toEqual([]);
    expect(listed.reviews.map((r) => r.findings)).toEqual([1]);
  } finally {
    await second.stop();
  }
}
