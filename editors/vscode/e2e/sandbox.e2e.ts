// The sandbox, the plan and the budget as the chat panel shows them (issues 41.5, 33.1, 35.2), end to
// end in code-server + Chromium (dark theme, the sidebar at its default width) with the real daemon
// confining commands on this machine and a scripted fake provider: the header's shield, mode and level;
// an escalation card answered from the panel (what the model is then told); the plan pinned above the
// composer while the turn runs; a turn stopped by its budget; the mode changed from the header
// (full-access only after a confirmation), reaching the daemon through the setting.
import { mkdirSync, readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDaemon } from '../test/daemon';
import { textReply, toolReply } from '../test/fakeProvider';
import { CodeServer } from './harness';

const cs = new CodeServer({
  name: 'sandbox', daemon: 'setting',
  settings: { 'workbench.colorTheme': 'Default Dark Modern' },
  prepare: ({ state, ws, root }) => {
    writeFileSync(join(ws, 'notes.txt'), 'alpha\n');
    // Two directories outside the workspace a command may write only once the sandbox is widened
    // (a widening names paths that exist: the confinement is granted on them).
    mkdirSync(join(root, 'tool-cache'));
    mkdirSync(join(root, 'other-cache'));
    // Commands confined (the harness's default is full-access); a turn may make 3 model requests.
    writeFileSync(join(state, 'config.json'), JSON.stringify({ tools: { sandbox: { mode: 'workspace-write' } }, agent: { budget: { steps: 3 } } }));
  },
});

describe('sandbox, plan and budget in the chat panel (issues 41.5, 33.1, 35.2)', () => {
  beforeAll(async () => { await cs.start(); }, 300000);
  afterAll(async () => { await cs.stop(); });

  it('the header shows the sandbox; an escalation is answered from its card; the plan is pinned while the turn runs; a budget stop is explained; the mode changes from the header', async () => {
    try {
      await scenario();
    } catch (err) {
      await cs.shot('FAILED').catch(() => undefined);
      throw new Error(`${(err as Error).message}\n--- logs\n${cs.logs()}`, { cause: err });
    }
  });
});

/** Whether this daemon saves a widening to config.json (`persistWidening`), asked of it directly. */
async function daemonSavesWidenings(baseUrl: string): Promise<boolean> {
  const d = await startDaemon(baseUrl);
  try { return d.client.features?.persistWidening === true; } finally { await d.stop(); }
}

async function scenario(): Promise<void> {
  const { page, fake } = cs;
  const saves = await daemonSavesWidenings(fake.baseUrl);
  await cs.openWorkbench();
  await cs.openChat();
  const c = cs.chat();
  const frame = await cs.chatFrame();
  const box = c.getByLabel('message');
  await expect.poll(() => c.locator('.status').textContent(), { timeout: 60000 }).toBe('idle');
  const width = await frame.evaluate(() => document.documentElement.clientWidth);
  expect(width).toBeLessThan(360);

  const cacheDir = realpathSync(cs.root) + '/tool-cache';
  const otherDir = realpathSync(cs.root) + '/other-cache';
  const plan = (statuses: string[]) => ({ steps: ['Read the failing test', 'Fill the tool cache', 'Run the tests'].map((title, i) => ({ title, status: statuses[i] })) });
  fake.script(
    toolReply([
      { id: 'call_plan', name: 'update_plan', args: plan(['done', 'in_progress', 'pending']) },
      { id: 'call_w1', name: 'run_command', args: { command: `echo cached > ${cacheDir}/x && cat ${cacheDir}/x`, escalate: { reason: 'the tool keeps its cache there', writable: [cacheDir] } } },
    ]),
    toolReply([{ id: 'call_w2', name: 'run_command', args: { command: `echo other > ${otherDir}/y && cat ${otherDir}/y`, escalate: { reason: 'a second cache', writable: [otherDir] } } }]),
    textReply('Cache filled.'),
  );
  await box.fill('Fill the cache');
  await box.press('Enter');

  // ---- The header: a shield and the mode; the level reached in its tooltip (this machine confines).
  const sandbox = c.locator('.header .sandbox');
  await sandbox.waitFor({ timeout: 30000 });
  expect(await sandbox.getAttribute('class')).toBe('sandbox confined');
  expect(await c.getByRole('combobox', { name: 'Sandbox mode' }).inputValue()).toBe('workspace-write');
  const tip = (await sandbox.getAttribute('title'))!;
  expect(tip).toMatch(/^Sandbox: workspace-write\nLevel: Landlock \d+/);

  // ---- The plan, pinned above the composer while the turn runs; the escalation card below it.
  const card = c.locator('.permission.escalation');
  await card.waitFor({ timeout: 30000 });
  const planBox = c.locator('details.plan');
  await expect.poll(() => planBox.isVisible(), { timeout: 15000 }).toBe(true);
  expect(await c.locator('.plan-step').allTextContents()).toEqual(['✓done: Read the failing test', '◐in progress: Fill the tool cache', '○to do: Run the tests']);
  expect(await card.locator('.permission-title').textContent()).toBe('Widen the sandbox for a command?');
  expect(await card.locator('.escalation-reason').textContent()).toBe('The agent says: the tool keeps its cache there');
  expect(await card.locator('.widening li').allTextContents()).toEqual([`write ${cacheDir}`]);
  const answers = await card.locator('.answers button').allTextContents();
  expect(answers).toEqual(['Reject', 'Allow once', 'Allow for this session', ...(saves ? ['Always (saved to config)'] : [])]);
  await page.waitForTimeout(700); // the answers are armed a moment after the card appears
  await page.mouse.move(900, 500); // no hover tooltip over the view
  await cs.shot('escalation-and-plan');
  const sidebarShot = join(cs.shots, 'sandbox-sidebar-300px.png');
  await page.locator('.part.sidebar').screenshot({ path: sidebarShot });
  console.log(`screenshot: ${sidebarShot} (chat view ${width} px wide)`);

  // ---- Allow for this session: the command runs widened; the model is told its output; the
  //      session's sandbox now has the path (the header's tooltip says so).
  await card.getByRole('button', { name: 'Allow for this session' }).click();
  await expect.poll(() => fake.requests.length, { timeout: 30000 }).toBeGreaterThanOrEqual(2);
  const toolMessage = (i: number, callId: string) => fake.requests[i].body.messages.find((m: any) => m.role === 'tool' && m.tool_call_id === callId);
  expect(String(toolMessage(1, 'call_w1')?.content)).toContain('cached');
  expect(readFileSync(join(cacheDir, 'x'), 'utf8')).toBe('cached\n');
  await expect.poll(() => c.locator('.notice.info', { hasText: 'Sandbox widened for this session' }).textContent(), { timeout: 15000 })
    .toBe(`Sandbox widened for this session: writable ${cacheDir}.`);
  await expect.poll(() => sandbox.getAttribute('title'), { timeout: 15000 }).toContain(`Also writable: ${cacheDir}`);

  // ---- The second widening: "Always (saved to config)" where the daemon saves it (then it is in
  //      config.json), else Allow once.
  await expect.poll(() => card.locator('.widening li').allTextContents(), { timeout: 30000 }).toEqual([`write ${otherDir}`]);
  await page.waitForTimeout(700);
  await card.getByRole('button', { name: saves ? 'Always (saved to config)' : 'Allow once' }).click();
  await expect.poll(() => c.locator('.msg.assistant', { hasText: 'Cache filled.' }).count(), { timeout: 30000 }).toBe(1);
  expect(String(toolMessage(2, 'call_w2')?.content)).toContain('other');
  if (saves) expect(JSON.parse(readFileSync(join(cs.state, 'config.json'), 'utf8')).tools.sandbox.writable).toContain(otherDir);
  else expect(await c.locator('.notice.info', { hasText: 'Sandbox widened for this command' }).count()).toBe(1);
  // The turn ended: the plan is no longer pinned.
  await expect.poll(() => planBox.isVisible(), { timeout: 15000 }).toBe(false);

  // ---- A turn stopped by its budget (3 model requests a turn, config.json's agent.budget).
  fake.script(
    toolReply([{ id: 'call_b1', name: 'run_command', args: { command: 'echo one' } }]),
    toolReply([{ id: 'call_b2', name: 'run_command', args: { command: 'echo two' } }]),
    toolReply([{ id: 'call_b3', name: 'run_command', args: { command: 'echo three' } }]),
    textReply('never asked for'),
  );
  const before = fake.requests.length;
  await box.fill('Count to three');
  await box.press('Enter');
  await expect.poll(() => c.locator('.footer.budget .budget-text').textContent(), { timeout: 30000 })
    .toBe("■ Stopped: the turn's budget of 3 model requests is spent (3 made) — raise agent.budget (config.json) to go on; what is queued waits.");
  expect(fake.requests.length).toBe(before + 3);
  expect(await c.locator('.footer.budget .footer-text').textContent()).toMatch(/^\d+ in · \d+ out tokens/);
  await cs.shot('budget');

  // ---- The mode from the header: read-only reaches the daemon through the user setting; full-access
  //      asks first (Enter keeps the sandbox: nothing changes), then, picked, applies.
  const picker = c.getByRole('combobox', { name: 'Sandbox mode' });
  await picker.selectOption('read-only');
  await expect.poll(() => cs.settings()['dsh.sandbox.mode'], { timeout: 15000 }).toBe('read-only');
  await expect.poll(() => sandbox.getAttribute('title'), { timeout: 15000 }).toMatch(/^Sandbox: read-only\n/);
  await picker.selectOption('full-access');
  const confirm = page.locator('.quick-input-widget');
  await confirm.waitFor({ timeout: 15000 });
  expect(await confirm.textContent()).toContain('without a sandbox (full-access)');
  await cs.shot('full-access-confirm');
  // Enter takes the active row, which keeps the sandbox: a stray key cannot confirm it.
  await page.keyboard.press('Enter');
  await confirm.waitFor({ state: 'hidden', timeout: 15000 });
  await expect.poll(() => picker.inputValue(), { timeout: 15000 }).toBe('read-only');
  expect(cs.settings()['dsh.sandbox.mode']).toBe('read-only');
  await picker.selectOption('full-access');
  await confirm.waitFor({ timeout: 15000 });
  await page.locator('.quick-input-list .monaco-list-row', { hasText: 'Use full-access' }).first().click();
  await expect.poll(() => sandbox.getAttribute('class'), { timeout: 15000 }).toBe('sandbox unconfined');
  expect(cs.settings()['dsh.sandbox.mode']).toBe('full-access');
  expect(await sandbox.getAttribute('title')).toMatch(/^Sandbox: full-access\n[^]*Commands run unconfined, with your whole account; each one asks first/);
  await cs.shot('full-access');
}
