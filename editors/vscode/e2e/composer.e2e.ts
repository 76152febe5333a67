// The panel basics of issue 36.5, end to end in code-server + Chromium (the sidebar at its default
// ~300 px, dark then light theme) with the real daemon and a scripted fake provider: the header's model
// picker changes the session's model and the next request names it; the mode picker (keyboard) marks
// the change in the transcript and lets the agent write without asking; `/` commands (/cost says the
// session's cost, /mode plan sets the mode through the daemon); Edit on a past prompt shows what the
// rewind restores, then rewinds (the file the agent created goes) and sends the edited prompt.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { textReply, toolReply } from '../test/fakeProvider';
import { CodeServer } from './harness';

const cs = new CodeServer({ name: 'composer', daemon: 'setting', settings: { 'workbench.colorTheme': 'Default Dark Modern' } });

describe('panel basics: model picker, / commands, edit-and-resend (issue 36.5)', () => {
  beforeAll(async () => { await cs.start(); }, 300000);
  afterAll(async () => { await cs.stop(); });

  it('a model switch reaches the next request; /cost and /mode; Edit rewinds and resends', async () => {
    try {
      await cs.openWorkbench();
      await cs.openChat();
      const c = cs.chat();
      const box = c.getByLabel('message');
      await expect.poll(() => c.locator('.status').textContent(), { timeout: 60000 }).toBe('idle');

      // ---- The model picker: V4 Pro at max effort, the session's own; the next request names it.
      cs.fake.script(textReply('Hello from the first turn.'));
      await box.fill('Say hello');
      await box.press('Enter');
      await expect.poll(() => c.locator('.msg.assistant', { hasText: 'Hello from the first turn.' }).count(), { timeout: 60000 }).toBe(1);
      expect(cs.fake.requests.at(-1)!.body.model).toBe('deepseek-v4-flash');
      const modelButton = c.locator('.model-picker .dropdown-button');
      await modelButton.waitFor({ timeout: 30000 });
      await modelButton.click();
      await c.locator('.model-picker .dropdown-option', { hasText: 'DeepSeek V4 Pro · max' }).click();
      await expect.poll(() => c.locator('.notice', { hasText: 'Model: deepseek-v4-pro, max effort' }).count(), { timeout: 15000 }).toBe(1);
      await expect.poll(() => modelButton.getAttribute('data-value'), { timeout: 15000 }).toBe('deepseek-v4-pro@max');

      // ---- The mode picker by keyboard: Accept edits, marked in the transcript; the write asks nothing.
      await c.locator('.mode-picker .dropdown-button').focus();
      await cs.page.keyboard.press('ArrowDown');
      await cs.page.keyboard.press('ArrowDown');
      await cs.page.keyboard.press('Enter');
      await expect.poll(() => c.locator('.notice', { hasText: 'Mode: Accept edits' }).count(), { timeout: 15000 }).toBe(1);
      const before = cs.fake.requests.length;
      cs.fake.script(toolReply([{ id: 'call_w', name: 'write_file', args: { path: 'notes.txt', content: 'long notes\n' } }]), textReply('Wrote the notes.'));
      await box.fill('Write the notes');
      await box.press('Enter');
      await expect.poll(() => c.locator('.msg.assistant', { hasText: 'Wrote the notes.' }).count(), { timeout: 60000 }).toBe(1);
      expect(cs.fake.requests[before].body.model).toBe('deepseek-v4-pro');
      expect(existsSync(join(cs.ws, 'notes.txt'))).toBe(true);
      expect(await c.locator('.permission').count()).toBe(0);

      // ---- `/` commands: /cost completes from /co and says the cost here; nothing is sent.
      await box.click();
      await box.pressSequentially('/cos');
      await expect.poll(() => c.locator('.slash-menu .command-name').allTextContents(), { timeout: 15000 }).toEqual(['/cost']);
      await box.press('Tab');
      expect(await box.inputValue()).toBe('/cost ');
      const sent = cs.fake.requests.length;
      await box.press('Enter');
      await expect.poll(() => c.locator('.composer-note-text').textContent(), { timeout: 15000 }).toMatch(/^Cost: .* over 2 turns\.$/);
      await sidebarShot('0-cost-dark');

      // ---- Edit the second prompt: what the rewind restores, then rewind + the edited prompt.
      const prompt = c.locator('.prompt', { hasText: 'Write the notes' });
      await prompt.hover();
      await prompt.getByRole('button', { name: 'Edit' }).click();
      expect(await box.inputValue()).toBe('Write the notes');
      const bar = c.locator('.edit-bar');
      await expect.poll(() => bar.locator('.edit-preview').textContent(), { timeout: 15000 }).toContain('Files restored (1): notes.txt (deleted: the agent created it)');
      await sidebarShot('1-edit-dark');
      cs.fake.script(textReply('Short notes it is.'));
      await box.fill('Write short notes');
      await box.press('Enter');
      await expect.poll(() => c.locator('.msg.assistant', { hasText: 'Short notes it is.' }).count(), { timeout: 60000 }).toBe(1);
      expect(existsSync(join(cs.ws, 'notes.txt'))).toBe(false); // the rewind deleted what the agent created
      const last = JSON.stringify(cs.fake.requests.at(-1)!.body.messages);
      expect(last).toContain('Write short notes');
      expect(last).not.toContain('Write the notes'); // the model forgot the edited turn
      expect(cs.fake.requests.length).toBe(sent + 1); // /cost sent nothing

      // ---- /mode plan: through the daemon, marked in the transcript, the picker follows.
      await box.fill('/mode plan');
      await box.press('Escape');
      await box.press('Enter');
      await expect.poll(() => c.locator('.notice', { hasText: 'Mode: Plan' }).count(), { timeout: 15000 }).toBe(1);
      await expect.poll(() => c.locator('.mode-picker .dropdown-button').getAttribute('data-value'), { timeout: 15000 }).toBe('plan');
      await cs.writeSettings({ ...cs.settings(), 'workbench.colorTheme': 'Default Light Modern' });
      await c.locator('.model-picker .dropdown-button').click();
      await sidebarShot('2-model-list-light');
      await cs.page.keyboard.press('Escape');
    } catch (err) {
      await cs.shot('FAILED').catch(() => undefined);
      throw new Error(`${(err as Error).message}\n--- logs\n${cs.logs()}`, { cause: err });
    }
  });
});

async function sidebarShot(name: string): Promise<void> {
  const file = join(cs.shots, `composer-${name}-sidebar-300px.png`);
  await cs.page.locator('.part.sidebar').screenshot({ path: file });
  console.log(`screenshot: ${file}`);
}
