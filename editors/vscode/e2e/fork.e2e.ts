// A fork you can see (issue 36.2), end to end in code-server + Chromium (the sidebar at its default
// ~300 px, dark then light theme) with the real daemon and a scripted fake provider: a prompt sent
// while a turn runs is tagged "queued"; Fork from here on the turn it ran in opens the fork, which
// keeps that tag, says "Forked from «title» at turn 2" with Open original, and has a fork badge
// beside its title (the original on hover); Open original shows the original again, without the badge.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gate, textReply } from '../test/fakeProvider';
import { CodeServer } from './harness';

const cs = new CodeServer({ name: 'fork', daemon: 'setting', settings: { 'workbench.colorTheme': 'Default Dark Modern' } });

describe('a fork you can see (issue 36.2)', () => {
  beforeAll(async () => { await cs.start(); }, 300000);
  afterAll(async () => { await cs.stop(); });

  it('the fork keeps the queued tag, says where it came from, and opens the original', async () => {
    const held = gate();
    try {
      await cs.openWorkbench();
      await cs.openChat();
      const c = cs.chat();
      const box = c.getByLabel('message');
      await expect.poll(() => c.locator('.status').textContent(), { timeout: 60000 }).toBe('idle');
      cs.fake.script(textReply(['Working on', ' it.'], { gate: held.promise }), textReply('Second done.'));
      await box.fill('Plan the parser fix');
      await box.press('Enter');
      await expect.poll(() => c.locator('.msg.assistant.streaming').count(), { timeout: 30000 }).toBe(1);
      await box.fill('Then write the test');
      await box.press('Enter'); // queued behind the running turn
      await expect.poll(() => c.locator('.queue-item').count(), { timeout: 15000 }).toBe(1);
      held.open();
      await expect.poll(() => c.locator('.msg.assistant', { hasText: 'Second done.' }).count(), { timeout: 30000 }).toBe(1);
      const queuedPrompt = c.locator('.prompt', { hasText: 'Then write the test' });
      await expect.poll(() => queuedPrompt.locator('.tag.queued').count(), { timeout: 15000 }).toBe(1);

      const footer = c.locator('.footer').last();
      await footer.hover();
      await footer.getByRole('button', { name: 'Fork from here' }).click();
      await expect.poll(() => c.locator('.session-title').textContent(), { timeout: 30000 }).toBe('Plan the parser fix (fork)');
      const badge = c.locator('.fork-badge');
      await expect.poll(() => badge.isVisible(), { timeout: 15000 }).toBe(true);
      expect(await badge.getAttribute('title')).toBe('Forked from «Plan the parser fix» at turn 2');
      const line = c.locator('.notice.topic-fork');
      await expect.poll(() => line.locator('.notice-text').textContent(), { timeout: 15000 }).toBe('Forked from «Plan the parser fix» at turn 2.');
      // The fork was opened from a transcript page: the prompt that waited is still tagged.
      expect(await c.locator('.prompt', { hasText: 'Then write the test' }).locator('.tag.queued').count()).toBe(1);
      await sidebarShot('1-fork-dark');
      await cs.writeSettings({ ...cs.settings(), 'workbench.colorTheme': 'Default Light Modern' });
      await sidebarShot('2-fork-light');

      await line.getByRole('button', { name: 'Open original' }).click();
      await expect.poll(() => c.locator('.session-title').textContent(), { timeout: 30000 }).toBe('Plan the parser fix');
      expect(await badge.isVisible()).toBe(false);
      expect(await c.locator('.notice.topic-fork').count()).toBe(0);
      expect(await c.locator('.prompt', { hasText: 'Then write the test' }).locator('.tag.queued').count()).toBe(1);
      await sidebarShot('3-original-light');
    } catch (err) {
      await cs.shot('FAILED').catch(() => undefined);
      throw new Error(`${(err as Error).message}\n--- logs\n${cs.logs()}`, { cause: err });
    } finally {
      held.open();
    }
  });
});

async function sidebarShot(name: string): Promise<void> {
  await cs.page.mouse.move(900, 500); // no hover tooltip over the view
  const file = join(cs.shots, `fork-${name}-sidebar-300px.png`);
  await cs.page.locator('.part.sidebar').screenshot({ path: file });
  console.log(`screenshot: ${file}`);
}
