// Plan mode ends in a plan the person approves (issue 33.1, protocol.md §3 "Plan approval"), end to end
// in code-server + Chromium (the sidebar at its default width) with the real daemon and a scripted fake
// provider: in Plan mode the model's propose_plan is a card with the plan itself (markdown), a field
// for what to change and Revise / Approve: ask / Approve: accept edits; Revise sends the field's words
// back and the model proposes again; Approve: accept edits switches the header's mode and the plan
// runs at once as the next prompt (tagged as the approved plan), its edit made without a question.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { textReply, toolReply } from '../test/fakeProvider';
import { CodeServer } from './harness';

const PLAN = '1. Write `notes.txt` with the summary.\n2. Say what changed.';
const REVISED = `${PLAN}\n3. Mention the tests.`;

const cs = new CodeServer({ name: 'plan-approval', settings: { 'workbench.colorTheme': 'Default Dark Modern' } });

describe('a plan approved from the chat panel (issue 33.1)', () => {
  beforeAll(async () => { await cs.start(); }, 300000);
  afterAll(async () => { await cs.stop(); });

  it('Plan mode: the plan is a card; Revise sends words back; Approve: accept edits switches the mode and runs the plan', async () => {
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
  const frame = await cs.chatFrame();
  const box = c.getByLabel('message');
  await expect.poll(() => c.locator('.status').textContent(), { timeout: 60000 }).toBe('idle');
  const width = await frame.evaluate(() => document.documentElement.clientWidth);
  expect(width).toBeLessThan(360);

  // The header's mode picker (headerPickers.ts): a button whose list holds the modes.
  const modeButton = c.locator('.mode-picker .dropdown-button');
  const mode = { inputValue: () => modeButton.getAttribute('data-value') };
  await modeButton.waitFor({ timeout: 30000 });
  await modeButton.click();
  await c.locator('.mode-picker .dropdown-option', { hasText: 'Plan' }).click();
  await expect.poll(() => mode.inputValue(), { timeout: 15000 }).toBe('plan');

  fake.script(
    toolReply([{ id: 'call_p1', name: 'propose_plan', args: { plan: PLAN } }]),
    toolReply([{ id: 'call_p2', name: 'propose_plan', args: { plan: REVISED } }]),
    toolReply([{ id: 'call_w', name: 'write_file', args: { path: 'notes.txt', content: 'summary\n' } }]),
    textReply('All done.'),
  );
  await box.fill('Plan the notes');
  await box.press('Enter');

  // ---- The card: the plan as markdown, the field, three answers.
  const card = c.locator('.permission.plan-approval');
  await card.waitFor({ timeout: 60000 });
  expect(await card.locator('.permission-title').textContent()).toBe('Approve the plan?');
  expect(await card.locator('.plan-text li').allTextContents()).toEqual(['Write notes.txt with the summary.', 'Say what changed.']);
  expect(await card.locator('.plan-text code').textContent()).toBe('notes.txt');
  expect(await card.locator('.answers button').allTextContents()).toEqual(['Revise', 'Approve: ask', 'Approve: accept edits']);
  const offered = (fake.requests[0].body.tools as Array<{ function: { name: string } }>).map((t) => t.function.name);
  expect(offered).toContain('propose_plan');
  expect(offered).not.toContain('write_file');
  await page.mouse.move(900, 500); // no hover tooltip over the view
  await cs.shot('plan-card');
  const sidebarShot = join(cs.shots, 'plan-approval-sidebar-300px.png');
  await page.locator('.part.sidebar').screenshot({ path: sidebarShot });
  console.log(`screenshot: ${sidebarShot} (chat view ${width} px wide)`);

  // ---- Revise with words: they reach the model, which proposes again; still Plan mode.
  await card.getByLabel('What should change in the plan').fill('Mention the tests');
  await card.getByRole('button', { name: 'Revise' }).click();
  await expect.poll(() => c.locator('.permission.plan-approval .plan-text li').allTextContents(), { timeout: 60000 })
    .toEqual(['Write notes.txt with the summary.', 'Say what changed.', 'Mention the tests.']);
  const revised = JSON.stringify(fake.requests[1].body.messages);
  expect(revised).toContain('Mention the tests');
  expect(revised).toContain('still in plan mode');
  expect(await mode.inputValue()).toBe('plan');

  // ---- Approve: accept edits. The mode switches, the plan runs now; the write asks nothing.
  await c.locator('.permission.plan-approval').getByRole('button', { name: 'Approve: accept edits' }).click();
  await expect.poll(() => c.locator('.msg.assistant', { hasText: 'All done.' }).count(), { timeout: 60000 }).toBe(1);
  await expect.poll(() => mode.inputValue(), { timeout: 15000 }).toBe('accept-edits');
  const prompt = c.locator('.msg.user', { has: c.locator('.tag.approved-plan') });
  expect(await prompt.locator('.tag.approved-plan').textContent()).toBe('approved plan · accept edits');
  expect(await prompt.locator('.user-text').textContent()).toContain('Write `notes.txt` with the summary.');
  expect(await c.locator('.permission').count()).toBe(0);
  expect(JSON.stringify(fake.requests[2].body.messages)).toContain('Mention the tests.');
  await expect.poll(() => readFileSync(join(cs.ws, 'notes.txt'), 'utf8'), { timeout: 15000 }).toContain('summary');
  await page.mouse.move(900, 500);
  await cs.shot('plan-approved');
  await page.locator('.part.sidebar').screenshot({ path: join(cs.shots, 'plan-approval-sidebar-300px-after.png') });
}
