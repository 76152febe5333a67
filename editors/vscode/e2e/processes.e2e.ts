// Background processes, a project's hooks and custom slash commands as the chat panel shows them
// (issues 33.2, 35.3, 35.4 / 36.5), end to end in code-server + Chromium (dark theme, the sidebar at
// its default width) with the real daemon and a scripted fake provider: a background process the
// agent starts is shown in the processes strip (its output on demand) and stopped from there (the
// process is gone and its `process/exited` says the person stopped it); the project's hooks wait
// until the person trusts them in a dialog that lists them, then run (their context reaches the model
// and the transcript names it; a failing one is one warning line); `/` completes the project's
// custom command, which is sent as typed and expanded by the daemon.
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDaemon } from '../test/daemon';
import { textReply, toolReply } from '../test/fakeProvider';
import { CodeServer } from './harness';

const MARKER = 'tick-dsh-e2e-processes';

const cs = new CodeServer({
  name: 'processes', daemon: 'setting',
  settings: { 'workbench.colorTheme': 'Default Dark Modern' },
  prepare: ({ state, ws }) => {
    writeFileSync(join(ws, 'notes.txt'), 'alpha\n');
    mkdirSync(join(ws, '.dsh', 'commands'), { recursive: true });
    writeFileSync(join(ws, '.dsh', 'config.json'), JSON.stringify({
      hooks: {
        userPromptSubmit: [{ command: 'echo \'{"additionalContext": "CI says the build is green"}\'', name: 'ci-status' }],
        stop: [{ command: 'exit 3', name: 'flaky-stop' }],
      },
    }));
    writeFileSync(join(ws, '.dsh', 'commands', 'review.md'), '---\ndescription: Review a file for bugs\nargument-hint: PATH\n---\nReview $ARGUMENTS for bugs. Be brief.\n');
    // Commands confined (they run without asking); the harness's default is full-access.
    writeFileSync(join(state, 'config.json'), JSON.stringify({ tools: { sandbox: { mode: 'workspace-write' } } }));
  },
});

describe('background processes, hooks and custom commands in the chat panel (issues 33.2, 35.3, 35.4)', () => {
  beforeAll(async () => { await cs.start(); }, 300000);
  afterAll(async () => { await cs.stop(); });

  it('a background process is shown and stopped from the panel; the project\'s hooks are trusted there; / completes a custom command', async () => {
    try {
      await scenario();
    } catch (err) {
      await cs.shot('FAILED').catch(() => undefined);
      throw new Error(`${(err as Error).message}\n--- logs\n${cs.logs()}`, { cause: err });
    }
  });
});

/** Pids of live processes whose command line holds MARKER. */
function withMarker(): number[] {
  const out: number[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try { if (readFileSync(`/proc/${d}/cmdline`, 'utf8').includes(MARKER)) out.push(Number(d)); } catch { /* gone */ }
  }
  return out;
}

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

  // ---- The agent starts a background process; the panel's strip shows it running.
  fake.script(
    toolReply([{ id: 'call_bg', name: 'run_command', args: { command: `while :; do echo ${MARKER}; sleep 0.3; done`, background: true, name: 'ticker' } }]),
    textReply('The ticker runs in the background.'),
  );
  await box.fill('Start the ticker');
  await box.press('Enter');
  await expect.poll(() => c.locator('.msg.assistant', { hasText: 'The ticker runs in the background.' }).count(), { timeout: 60000 }).toBe(1);
  const row = c.locator('.processes .process', { hasText: 'ticker' });
  await row.waitFor({ timeout: 30000 });
  expect(await row.locator('.process-state').textContent()).toBe('running');
  expect(await row.locator('.process-command').textContent()).toBe(`while :; do echo ${MARKER}; sleep 0.3; done`);
  expect(await c.locator('.processes-count').textContent()).toBe('1 running');
  expect(withMarker().length).toBeGreaterThan(0);
  // Its output, read when asked for.
  await row.getByRole('button', { name: 'Output' }).click();
  await expect.poll(() => row.locator('.process-output-text').textContent(), { timeout: 15000 }).toContain(MARKER);

  // ---- The project's hooks wait for the person: one bar saying so.
  const hooksBar = c.locator('.hooks-bar');
  await hooksBar.waitFor({ timeout: 30000 });
  expect(await hooksBar.locator('.hooks-text').textContent()).toBe('This project has hooks (2 hooks: userPromptSubmit, stop). They do not run until you trust them.');
  // The first prompt ran without them: its request has no hook context.
  expect(JSON.stringify(fake.requests[0].body.messages)).not.toContain('CI says the build is green');

  await page.mouse.move(900, 500); // no hover tooltip over the view
  await cs.shot('process-and-hooks');
  const sidebarShot = join(cs.shots, 'processes-sidebar-300px.png');
  await page.locator('.part.sidebar').screenshot({ path: sidebarShot });
  console.log(`screenshot: ${sidebarShot} (chat view ${width} px wide)`);

  // ---- Stop, from the strip: the process tree is gone and the log says the person stopped it.
  await row.getByRole('button', { name: 'Stop' }).click();
  await expect.poll(() => row.locator('.process-state').textContent(), { timeout: 15000 }).toMatch(/^stopped by you/);
  expect(await row.getByRole('button', { name: 'Stop' }).count()).toBe(0);
  expect(await c.locator('.processes-count').textContent()).toBe('none running');
  await expect.poll(() => withMarker(), { timeout: 10000 }).toEqual([]);
  const second = await startDaemon(fake.baseUrl, { state: cs.state, root: cs.ws });
  try {
    const { sessions } = await second.client.listSessions({});
    expect(sessions).toHaveLength(1);
    const id = sessions[0].sessionId;
    await second.client.attach(id); // read-only (the window's daemon drives it): the stored events replayed
    const exited = second.of(id, 'process/exited').map((e) => e.data as { processId: string; stoppedBy?: string });
    const started = second.of(id, 'process/started').map((e) => e.data as { processId: string; name: string });
    expect(started.map((s) => s.name)).toEqual(['ticker']);
    expect(exited).toEqual([expect.objectContaining({ processId: started[0].processId, stoppedBy: 'person' })]);
  } finally {
    await second.stop();
  }

  // ---- Trust: the dialog lists the hooks first; once trusted the bar goes.
  await hooksBar.getByRole('button', { name: 'Trust…' }).click();
  const dialog = page.locator('.monaco-dialog-box');
  await dialog.waitFor({ timeout: 15000 });
  const said = (await dialog.textContent()) ?? '';
  expect(said).toContain('userPromptSubmit: ci-status: echo');
  expect(said).toContain('stop: flaky-stop: exit 3');
  await cs.shot('trust-dialog');
  // The dialog focuses Show hooks, not Trust: a stray Enter cannot trust them.
  await expect.poll(() => page.evaluate(() => document.activeElement?.textContent?.trim()), { timeout: 5000 }).toBe('Show hooks');
  await dialog.getByRole('button', { name: 'Trust', exact: true }).click();
  await hooksBar.waitFor({ state: 'hidden', timeout: 15000 });
  const trusted = JSON.parse(readFileSync(join(cs.state, 'trusted-projects.json'), 'utf8'));
  expect(JSON.stringify(trusted)).toContain(cs.ws.split('/').pop());

  // ---- `/` completes the project's custom command (its description and argument hint), next to
  //      the panel's own; the line goes as typed and the daemon expands it; the hooks now run.
  fake.script(textReply('No bugs in notes.txt.'));
  const before = fake.requests.length;
  await box.click();
  await box.pressSequentially('/re');
  const menu = c.locator('.slash-menu');
  await menu.waitFor({ timeout: 15000 });
  const review = menu.locator('.mention.command', { hasText: '/review' });
  await review.waitFor({ timeout: 15000 });
  expect(await review.locator('.command-hint').textContent()).toBe('PATH');
  expect(await review.locator('.command-description').textContent()).toBe('Review a file for bugs');
  expect(await review.locator('.mention-kind').textContent()).toBe('project');
  await box.press('Backspace');
  await box.press('Backspace');
  await expect.poll(() => menu.locator('.command-name').allTextContents(), { timeout: 15000 }).toEqual(['/new', '/sessions', '/stop', '/compact', '/cost', '/context', '/undo', '/rewind', '/fork', '/mode', '/review']);
  await box.pressSequentially('rev');
  await cs.shot('slash-menu');
  await box.press('Tab');
  expect(await box.inputValue()).toBe('/review ');
  await box.pressSequentially('notes.txt');
  await box.press('Enter');
  await expect.poll(() => c.locator('.msg.assistant', { hasText: 'No bugs in notes.txt.' }).count(), { timeout: 60000 }).toBe(1);
  const sent = JSON.stringify(fake.requests[before].body.messages);
  expect(sent).toContain('Review notes.txt for bugs. Be brief.');
  expect(sent).toContain('CI says the build is green');
  expect(await c.locator('.msg.user .user-text').last().textContent()).toBe('/review notes.txt');
  const hookLine = c.locator('details.hook-message').last();
  expect(await hookLine.locator('.hook-label').textContent()).toBe('hook ci-status');
  expect(await hookLine.locator('.hook-text').textContent()).toContain('CI says the build is green');
  // The failing stop hook: one warning line.
  await expect.poll(() => c.locator('.notice.warning.topic-hook').count(), { timeout: 30000 }).toBe(1);
  expect(await c.locator('.notice.topic-hook .notice-text').textContent()).toMatch(/^The stop hook flaky-stop \(the project's\) failed and was ignored: /);
  await page.mouse.move(900, 500);
  await cs.shot('command-and-hooks');
  await page.locator('.part.sidebar').screenshot({ path: join(cs.shots, 'processes-sidebar-300px-after.png') });
}
