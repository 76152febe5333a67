// Take over that explains itself (issue 36.1), end to end in code-server + Chromium (the sidebar at
// its default ~300 px) with the real daemon, and the test's own second daemon on the same state dir
// standing in for the other window:
// - driving side: a turn runs in the panel; the other daemon attaches the session and asks to take it
//   over: the panel says "Another window asked to take over this session" with Hand over now; pressed,
//   the turn ends (handed over), the panel follows read-only, and a line in the transcript says so;
// - asking side: the other daemon now runs a turn that hangs; Take over in the panel says it waits for
//   that turn, with Take over now; pressed, the other turn ends and the panel drives the session, a
//   line saying so.
// Screenshots of the sidebar: the driving side in the dark theme, the asking side in the light one.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDaemon, type TestDaemon } from '../test/daemon';
import { gate, textReply } from '../test/fakeProvider';
import { CodeServer } from './harness';

const cs = new CodeServer({ name: 'take-over', daemon: 'setting', settings: { 'workbench.colorTheme': 'Default Dark Modern' } });

describe('take over between two windows, said in each (issue 36.1)', () => {
  beforeAll(async () => { await cs.start(); }, 300000);
  afterAll(async () => { await cs.stop(); });

  it('Hand over now in the driving panel; Take over, then Take over now, in the asking panel', async () => {
    let other: TestDaemon | undefined;
    const held = gate();
    const theirs = gate();
    try {
      await cs.openWorkbench();
      await cs.openChat();
      const c = cs.chat();
      const frame = await cs.chatFrame();
      const box = c.getByLabel('message');
      await expect.poll(() => c.locator('.status').textContent(), { timeout: 60000 }).toBe('idle');
      expect(await frame.evaluate(() => document.documentElement.clientWidth)).toBeLessThan(360);

      // ---- Driving side: our turn hangs; the other daemon asks for the session.
      cs.fake.script(textReply(['Working on', ' a long answer.'], { gate: held.promise }));
      await box.fill('A long answer, please');
      await box.press('Enter');
      await expect.poll(() => c.locator('.msg.assistant.streaming').count(), { timeout: 30000 }).toBe(1);
      other = await startDaemon(cs.fake.baseUrl, { state: cs.state, root: cs.ws });
      const { sessions } = await other.client.listSessions({});
      expect(sessions).toHaveLength(1);
      const sessionId = sessions[0].sessionId;
      expect((await other.client.attach(sessionId)).readOnly).toBe(true);
      await other.client.takeOver(sessionId);
      const handover = c.locator('.handover-bar');
      await expect.poll(() => handover.isVisible(), { timeout: 30000 }).toBe(true);
      expect(await handover.locator('.handover-text').textContent()).toBe('Another window asked to take over this session.');
      await sidebarShot('1-handover-asked-dark');
      await handover.getByRole('button', { name: 'Hand over now' }).click();
      await expect.poll(() => c.locator('.readonly-bar').isVisible(), { timeout: 30000 }).toBe(true);
      await other.waitFor(() => other!.of(sessionId, 'session/lease').some((e: any) => e.data.readOnly === false), 'the other drives it', 30000);
      expect(await handover.isVisible()).toBe(false);
      await expect.poll(() => c.locator('.notice.topic-lease').allTextContents(), { timeout: 15000 })
        .toEqual(['windowAnother window took this session over: this window follows it from here on.']);
      expect(await c.locator('.footer').last().textContent()).toContain('stopped (handed over to another window)');
      await sidebarShot('2-handed-over-dark');

      // ---- Asking side, in the light theme: the other window runs a turn that hangs; Take over waits for it.
      await cs.writeSettings({ ...cs.settings(), 'workbench.colorTheme': 'Default Light Modern' });
      cs.fake.script(textReply(['The other window', ' works on it.'], { gate: theirs.promise }));
      await other.client.followup(sessionId, 'A prompt from the other window');
      await expect.poll(() => c.locator('.msg.assistant.streaming').count(), { timeout: 30000 }).toBe(1);
      await c.getByRole('button', { name: 'Take over', exact: true }).click();
      await expect.poll(() => c.locator('.readonly-text').textContent(), { timeout: 15000 }).toBe("Waiting for the other window's turn to finish…");
      await other.waitFor(() => other!.of(sessionId, 'session/handover').length === 1, 'the other window told', 15000);
      await sidebarShot('3-waiting-light');
      await c.getByRole('button', { name: 'Take over now' }).click();
      await expect.poll(() => box.isVisible(), { timeout: 30000 }).toBe(true);
      await expect.poll(() => c.locator('.notice.topic-lease').allTextContents(), { timeout: 15000 }).toEqual([
        'windowAnother window took this session over: this window follows it from here on.',
        'windowThis window took the session over: it drives it from here on.',
      ]);
      expect(await c.locator('.readonly-bar').isVisible()).toBe(false);
      expect(await frame.evaluate(() => document.body.innerText)).not.toMatch(new RegExp(`\\bpid\\b|${other.proc.pid}|${sessionId}`));
      await sidebarShot('4-taken-over-light');
      // Driven here: a prompt runs from this panel.
      cs.fake.script(textReply('Done here.'));
      await box.fill('Now from here');
      await box.press('Enter');
      await expect.poll(() => c.locator('.msg.assistant', { hasText: 'Done here.' }).count(), { timeout: 30000 }).toBe(1);
    } catch (err) {
      await cs.shot('FAILED').catch(() => undefined);
      throw new Error(`${(err as Error).message}\n--- logs\n${cs.logs()}`, { cause: err });
    } finally {
      held.open();
      theirs.open();
      await other?.stop();
    }
  });
});

async function sidebarShot(name: string): Promise<void> {
  await cs.page.mouse.move(900, 500); // no hover tooltip over the view
  const file = join(cs.shots, `take-over-${name}-sidebar-300px.png`);
  await cs.page.locator('.part.sidebar').screenshot({ path: file });
  console.log(`screenshot: ${file}`);
}
