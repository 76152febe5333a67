// The chat panel as a person uses it all day (issue 21), end to end in code-server + Chromium with the
// real daemon and a fake provider: the layout in a narrow sidebar, markdown with Apply / New file /
// Insert, the @ picker, Esc, Focus Chat, retries and errors with actions, edits decided in the diff
// editor, a read-only session driven by another daemon, "↓ New output", and a daemon that cannot start.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDaemon, type TestDaemon } from '../test/daemon';
import { gate, textReply, toolReply } from '../test/fakeProvider';
import { CodeServer } from './harness';

const cs = new CodeServer({
  name: 'panel', daemon: 'workspace-venv',
  prepare: ({ ws }) => {
    writeFileSync(join(ws, 'notes.txt'), 'alpha\nbeta\n');
    mkdirSync(join(ws, 'src'), { recursive: true });
    writeFileSync(join(ws, 'src', 'parser.py'), 'def parse(line):\n    return line.split(",")\n');
  },
});

describe('the chat panel, as a person uses it (issue 21)', () => {
  beforeAll(async () => { await cs.start(); }, 300000);
  afterAll(async () => { await cs.stop(); });

  it('layout, markdown actions, @ picker, keyboard, retries and errors, diff-editor decisions, read-only, a daemon that cannot start', async () => {
    try {
      await scenario();
    } catch (err) {
      await cs.shot('FAILED').catch(() => undefined);
      throw new Error(`${(err as Error).message}\n--- logs\n${cs.logs()}`, { cause: err });
    }
  });
});

const rowOf = (text: string) => cs.page.locator('.quick-input-list .monaco-list-row', { hasText: text }).first();

async function scenario(): Promise<void> {
  const { page, fake, ws } = cs;
  await cs.openWorkbench();
  await cs.openChat();
  const c = cs.chat();
  const frame = await cs.chatFrame();
  const box = c.getByLabel('message');

  // ---- 7. The header in the sidebar; New / Sessions are the view's own icons. 8. The daemon came
  //         from the workspace's .venv (dsh.serverCommand is not set).
  await expect.poll(() => c.locator('.status').textContent(), { timeout: 60000 }).toBe('idle');
  // With the Sessions view beside it the chat's actions sit in its own pane header, not the sidebar's
  // title (VS Code merges them only for a lone view): found in the sidebar by label and key binding.
  expect(await page.locator('.part.sidebar [aria-label^="New Session ("]').count()).toBe(1);
  expect(await page.locator('.part.sidebar [aria-label^="Switch Session ("]').count()).toBe(1);
  expect(await c.getByRole('button', { name: 'New', exact: true }).count()).toBe(0);
  expect(await c.getByRole('button', { name: /Set API key/ }).filter({ visible: true }).count()).toBe(0); // a key is set
  const width = await frame.evaluate(() => document.documentElement.clientWidth);
  expect(width).toBeLessThan(360);

  // ---- 5. Markdown: a table, a code block naming a file; Apply shows VS Code's diff first; Accept applies.
  fake.script(textReply([
    'Here is the change:\n\n| file | change |\n|---|---|\n| `notes.txt` | beta → delta |\n\n',
    '```text notes.txt\nalpha\ndelta\n```\n\nAnd a helper:\n\n```python\ndef helper():\n    return 42\n```\n',
  ], { delayMs: 40 }));
  await box.fill('Show me the change');
  await box.press('Enter');
  await expect.poll(() => c.locator('.footer').count(), { timeout: 30000 }).toBe(1);
  expect(await c.locator('.md table td').first().textContent()).toBe('notes.txt');
  expect(await c.locator('.codeblock code .hljs-keyword').first().textContent()).toBe('def');
  await cs.shot('markdown');
  await c.locator('.codeblock').first().getByRole('button', { name: /Apply to notes\.txt/ }).click();
  const applyTab = page.locator('.tabs-container .tab', { hasText: 'code block from dsh' });
  await applyTab.waitFor({ timeout: 15000 });
  await page.locator('.monaco-diff-editor').first().waitFor();
  const accept = page.locator('.editor-actions [aria-label^="Accept Proposed Edit"]').first();
  await accept.waitFor({ timeout: 15000 });
  await cs.shot('apply-diff-with-accept');
  await page.waitForTimeout(700); // Accept is armed a moment after the diff opens
  await accept.click();
  await expect.poll(() => applyTab.count(), { timeout: 15000 }).toBe(0);
  await expect.poll(() => page.locator('.monaco-editor .view-lines').first().textContent(), { timeout: 15000 }).toContain('delta');
  // The applied block is the person's change, unsaved until they save it (an agent's edit never
  // writes a person's unsaved text, issue 37.1): they save it, so the later edits start from disk.
  await page.locator('.monaco-editor .view-lines').first().click();
  await page.keyboard.press('Control+S');
  await expect.poll(() => readFileSync(join(ws, 'notes.txt'), 'utf8'), { timeout: 15000 }).toBe('alpha\ndelta\n');
  // New file: an untitled editor with the code; Insert: at the cursor of the editor.
  await c.locator('.codeblock').nth(1).getByRole('button', { name: /new file/ }).click();
  await expect.poll(() => page.locator('.tabs-container .tab.active').textContent(), { timeout: 15000 }).toMatch(/Untitled/);
  await expect.poll(() => page.locator('.monaco-editor .view-lines').first().textContent()).toMatch(/def\shelper\(\):/); // (Monaco shows spaces as no-break spaces)
  await cs.runCommand('View: Revert and Close Editor');
  await cs.openFile('parser.py');
  await page.locator('.monaco-editor .view-lines', { hasText: /def\sparse/ }).first().click();
  await page.keyboard.press('Control+End');
  await c.locator('.codeblock').nth(1).getByRole('button', { name: /at the cursor/ }).click();
  await expect.poll(() => page.locator('.monaco-editor .view-lines').first().textContent(), { timeout: 15000 }).toMatch(/return\s42/);

  // ---- 6. The @ picker; Focus Chat's keybinding; Esc stops a running turn and keeps the queue.
  await page.locator('.monaco-editor .view-lines').first().click();
  await page.keyboard.press('Control+Alt+D');
  await expect.poll(() => frame.evaluate(() => document.activeElement?.getAttribute('aria-label')), { timeout: 10000 }).toBe('message');
  await box.pressSequentially('explain @pars');
  await c.getByRole('option', { name: /parser\.py/ }).first().waitFor({ timeout: 15000 });
  await cs.shot('mention-picker');
  await box.press('Enter');
  await expect.poll(() => c.locator('.chips .chip').allTextContents()).toEqual(['parser.py✕']);
  expect(await box.inputValue()).toBe('explain ');
  const g = gate();
  fake.script(textReply(['Reading the parser', ' and thinking'], { gate: g.promise }), textReply('The queued one ran.'));
  await box.fill('explain the parser');
  await box.press('Enter');
  await expect.poll(() => fake.requests.at(-1)?.body.messages.map((m: any) => String(m.content)).join('\n') ?? '', { timeout: 15000 }).toContain('def parse(line)');
  await box.fill('then the tests');
  await box.press('Enter');
  await expect.poll(() => c.locator('.queue-item .queue-text').allTextContents(), { timeout: 15000 }).toEqual(['then the tests']);
  await box.press('Escape');
  await expect.poll(() => c.locator('.footer.aborted').count(), { timeout: 15000 }).toBe(1);
  expect(await c.locator('.queue-item .queue-text').allTextContents()).toEqual(['then the tests']);
  g.open();
  await c.getByRole('button', { name: 'Run queue' }).click();
  await expect.poll(() => c.locator('.msg.assistant', { hasText: 'The queued one ran.' }).count(), { timeout: 30000 }).toBe(1);
  expect(await c.locator('.msg.user', { hasText: 'then the tests' }).locator('.tag').textContent()).toBe('queued');

  // ---- 3. Retries fold into one line where they happen; a failure is one block with actions.
  fake.script({ chunks: [], status: 500 }, { chunks: [], status: 500 }, textReply('Third time lucky.'));
  await box.fill('flaky provider');
  await box.press('Enter');
  await expect.poll(() => c.locator('.retry-line').last().textContent(), { timeout: 30000 }).toMatch(/^↻ Retrying [12]\/5 in .* s… \(server error 500\)$/);
  await cs.shot('retrying');
  await expect.poll(() => c.locator('.msg.assistant', { hasText: 'Third time lucky.' }).count(), { timeout: 30000 }).toBe(1);
  expect(await c.locator('.retry-line').last().textContent()).toBe('↻ Recovered after 2 retries (server error 500)');
  expect(await c.locator('.retry-line').filter({ visible: true }).count()).toBe(1);
  fake.script({ chunks: [], status: 401 });
  await box.fill('with a bad key');
  await box.press('Enter');
  await expect.poll(() => c.locator('.error-block').count(), { timeout: 30000 }).toBe(1);
  expect(await c.locator('.error-block .error-title').textContent()).toBe('✗ The turn failed: the API key was refused');
  expect(await c.locator('.notice').count()).toBe(0);
  expect(await c.locator('.header').getByRole('button', { name: /Set API key/ }).isVisible()).toBe(true);
  await cs.shot('auth-error');
  fake.script(textReply('Now it works.'));
  await c.locator('.error-block').getByRole('button', { name: 'Retry' }).click();
  await expect.poll(() => c.locator('.msg.assistant', { hasText: 'Now it works.' }).count(), { timeout: 30000 }).toBe(1);
  expect(fake.requests.at(-1)!.body.messages.at(-1)).toMatchObject({ role: 'user', content: 'with a bad key' });

  // ---- 4. Edits decided in the diff editor: Accept / Reject in its title; the tab closes when the
  //         request is answered anywhere (here: the card).
  await cs.openFile('notes.txt');
  fake.script(
    toolReply([{ id: 'call_e1', name: 'edit_file', args: { path: 'notes.txt', old_string: 'alpha', new_string: 'ALPHA' } }]), textReply('Accepted in the diff.'),
    toolReply([{ id: 'call_e2', name: 'edit_file', args: { path: 'notes.txt', old_string: 'ALPHA', new_string: 'omega' } }]), textReply('Rejected in the card.'),
  );
  await box.fill('Capitalise alpha');
  await box.press('Enter');
  await c.locator('.permission').waitFor({ timeout: 30000 });
  await c.getByRole('button', { name: 'View diff' }).click();
  const diffTab = page.locator('.tabs-container .tab', { hasText: 'proposed by dsh' });
  await diffTab.waitFor({ timeout: 15000 });
  await page.locator('.editor-actions [aria-label^="Reject Proposed Edit"]').first().waitFor();
  // The diff reads as the file: its breadcrumb is the file's workspace path, not the in-memory one.
  const crumbs = page.locator('.editor-group-container.active .breadcrumbs-control').first();
  await expect.poll(() => crumbs.textContent(), { timeout: 15000 }).toContain('notes.txt');
  expect(await crumbs.textContent()).not.toContain('call_e1');
  await cs.shot('diff-editor-accept-reject');
  // The person changes the proposed side before accepting: the file gets their version, and the
  // model and the transcript are told.
  expect(await diffTab.textContent()).toContain('proposed by dsh, editable');
  await page.locator('.monaco-diff-editor .modified .view-line', { hasText: 'ALPHA' }).first().click();
  await page.keyboard.press('End');
  await page.keyboard.type(' (by hand)');
  await expect.poll(() => page.locator('.monaco-diff-editor .modified .view-lines').first().textContent(), { timeout: 15000 }).toMatch(/ALPHA\s\(by\shand\)/);
  await expect.poll(() => c.locator('.permission .proposal-edited').isVisible(), { timeout: 15000 }).toBe(true);
  await cs.shot('diff-edited-before-accept');
  await page.waitForTimeout(700);
  await page.locator('.editor-actions [aria-label^="Accept Proposed Edit"]').first().click();
  await expect.poll(() => c.locator('.msg.assistant', { hasText: 'Accepted in the diff.' }).count(), { timeout: 30000 }).toBe(1);
  await expect.poll(() => diffTab.count(), { timeout: 15000 }).toBe(0);
  expect(await page.locator('.monaco-dialog-box').count()).toBe(0); // closing the edited side asked nothing
  expect(await c.locator('.permission').count()).toBe(0);
  await expect.poll(() => readFileSync(join(ws, 'notes.txt'), 'utf8'), { timeout: 15000 }).toBe('ALPHA (by hand)\ndelta\n');
  expect(await c.locator('.tool .edited-by-you').last().textContent()).toBe('✎ You changed the proposal before accepting it: notes.txt holds your version.');
  expect(JSON.stringify(fake.requests.at(-1)!.body.messages)).toContain('The user changed your proposed edit of notes.txt before accepting it');
  await cs.shot('accepted-your-version');
  await box.fill('Now omega');
  await box.press('Enter');
  await c.locator('.permission').waitFor({ timeout: 30000 });
  await c.getByRole('button', { name: 'View diff' }).click();
  await diffTab.waitFor({ timeout: 15000 });
  await c.getByRole('button', { name: 'Reject' }).click();
  await expect.poll(() => diffTab.count(), { timeout: 15000 }).toBe(0);
  await expect.poll(() => c.locator('.msg.assistant', { hasText: 'Rejected in the card.' }).count(), { timeout: 30000 }).toBe(1);
  await page.locator('.tabs-container .tab', { hasText: 'notes.txt' }).first().click();
  await expect.poll(() => page.locator('.monaco-editor .view-lines').first().textContent()).toContain('ALPHA');
  // Accepted from the keyboard in the diff editor (Ctrl+Alt+Enter; a key typed as it opens does nothing).
  fake.script(toolReply([{ id: 'call_e3', name: 'edit_file', args: { path: 'notes.txt', old_string: 'delta', new_string: 'DELTA' } }]), textReply('Accepted with the keyboard.'));
  await box.fill('Capitalise delta');
  await box.press('Enter');
  await c.locator('.permission').waitFor({ timeout: 30000 });
  await c.getByRole('button', { name: 'View diff' }).click();
  await diffTab.waitFor({ timeout: 15000 });
  await page.waitForTimeout(700); // (a key at once is ignored: test/permissions.test.ts)
  await page.locator('.monaco-diff-editor .modified .view-lines').first().click();
  await page.keyboard.press('Control+Alt+Enter');
  await expect.poll(() => c.locator('.msg.assistant', { hasText: 'Accepted with the keyboard.' }).count(), { timeout: 30000 }).toBe(1);
  await expect.poll(() => diffTab.count(), { timeout: 15000 }).toBe(0);
  // The chat hidden: the request asks in a notification too, whose primary action (the one a key
  // can run: notification.acceptPrimaryAction) only shows the chat.
  await cs.runCommand('View: Show Explorer');
  await page.locator('.explorer-folders-view').waitFor({ timeout: 15000 });
  fake.script(toolReply([{ id: 'call_n', name: 'edit_file', args: { path: 'notes.txt', old_string: 'DELTA', new_string: 'delta' } }]), textReply('Asked in a notification.'));
  await page.locator('.tabs-container .tab', { hasText: 'notes.txt' }).first().click();
  await page.locator('.monaco-editor .view-lines').first().click();
  await page.keyboard.press('Control+Home');
  await page.keyboard.press('Shift+End');
  await cs.runCommand('dsh: Steer with Selection');
  const toast = page.locator('.notifications-toasts .notification-toast', { hasText: 'dsh:' }).first();
  await toast.waitFor({ timeout: 30000 });
  expect((await toast.locator('.monaco-button').allTextContents()).map((t) => t.trim())).toEqual(['Show', 'Reject', 'Allow once']);
  await cs.shot('permission-notification');
  await toast.locator('.monaco-button', { hasText: 'Show' }).click();
  await expect.poll(() => c.locator('.permission').count(), { timeout: 15000 }).toBe(1); // shown, still asking
  expect(await c.locator('.msg.assistant', { hasText: 'Asked in a notification.' }).count()).toBe(0);
  await c.locator('.permission').getByRole('button', { name: 'Allow once' }).click();
  await expect.poll(() => c.locator('.msg.assistant', { hasText: 'Asked in a notification.' }).count(), { timeout: 30000 }).toBe(1);

  // ---- 7. Scrolled up while a reply streams: the view stays, "↓ New output" brings the end back.
  const slow = gate();
  fake.script(textReply(Array.from({ length: 60 }, (_, i) => `Line ${i} of a long answer.\n\n`), { delayMs: 40, gate: slow.promise }));
  await box.fill('A long answer, please');
  await box.press('Enter');
  await expect.poll(() => c.locator('.msg.assistant.streaming').count(), { timeout: 30000 }).toBe(1);
  // One dsh item in the status bar while a turn runs: no second, spinning work-done progress item.
  expect(await page.locator('.statusbar-item', { hasText: 'dsh:' }).count()).toBe(1);
  expect(await page.locator('.statusbar-item', { hasText: 'agent turn' }).count()).toBe(0);
  await frame.evaluate(() => { (document.querySelector('.transcript') as HTMLElement).scrollTop = 0; });
  await expect.poll(() => c.locator('.new-output').textContent(), { timeout: 15000 }).toBe('↓ New output');
  await cs.shot('new-output');
  await c.locator('.new-output').click();
  slow.open();
  await expect.poll(() => c.locator('.footer').last().textContent(), { timeout: 30000 }).toContain('completed');
  expect(await frame.evaluate(() => { const t = document.querySelector('.transcript') as HTMLElement; return t.scrollHeight - t.scrollTop - t.clientHeight < 4; })).toBe(true);

  // ---- 2. A session another daemon drives: read-only, one line, nothing to drive, no ids.
  let other: TestDaemon | undefined = await startDaemon(fake.baseUrl, { state: cs.state, root: ws });
  try {
    const { sessionId } = await other.client.newSession({ cwd: ws });
    const held = gate();
    fake.script(textReply(['The other window works', ' on it.'], { gate: held.promise }));
    await other.client.followup(sessionId, 'A prompt from the other window');
    await other.client.followup(sessionId, 'Queued in the other window');
    await cs.runCommand('dsh: Switch Session');
    await rowOf('A prompt from the other window').click({ timeout: 15000 });
    await expect.poll(() => c.locator('.readonly-bar').isVisible(), { timeout: 30000 }).toBe(true);
    expect(await c.locator('.readonly-bar').textContent()).toContain('Driven by another window');
    expect(await c.getByRole('button', { name: 'Take over' }).isVisible()).toBe(true);
    // No label breaks in the sidebar: each is one line.
    expect(await frame.evaluate(() => [...document.querySelectorAll<HTMLElement>('.readonly-bar button, .readonly-text')].map((b) => {
      const r = document.createRange();
      r.selectNodeContents(b);
      return [b.textContent, new Set([...r.getClientRects()].map((x) => Math.round(x.top))).size];
    }))).toEqual([['Driven by another window', 1], ['Take over', 1], ['New session', 1]]);
    expect(await c.locator('.mode-picker').isVisible()).toBe(false); // nothing that drives it
    for (const name of ['Stop', 'Stop and clear', 'Steer', 'Send', 'Queue', 'Add selection', 'Add file', 'Run queue', 'Continue']) {
      expect(await c.getByRole('button', { name, exact: true }).filter({ visible: true }).count(), name).toBe(0);
    }
    expect(await box.isVisible()).toBe(false);
    await expect.poll(() => c.locator('.queue-item .queue-text').allTextContents(), { timeout: 15000 }).toEqual(['Queued in the other window']);
    const text = await frame.evaluate(() => document.body.innerText);
    expect(text).not.toContain(sessionId);
    expect(text).not.toMatch(new RegExp(`\\bpid\\b|\\b${other.proc.pid}\\b`));
    await cs.runCommand('dsh: Stop');
    await page.locator('.notifications-toasts', { hasText: 'Another window drives this session' }).waitFor({ timeout: 15000 });
    expect(await page.locator('.notifications-toasts').textContent()).not.toContain(sessionId);
    await cs.shot('read-only');
    await page.keyboard.press('Escape');
    // The other window finishes and lets go: this window drives it, live, without reopening it.
    held.open();
    await other.waitFor(() => other!.of(sessionId, 'turn/end').length === 2, 'their two turns');
    await other.client.detach(sessionId);
    await other.stop();
    other = undefined;
    await expect.poll(() => box.isVisible(), { timeout: 30000 }).toBe(true);
    expect(await c.locator('.readonly-bar').isVisible()).toBe(false);
    await expect.poll(() => c.locator('.msg.assistant', { hasText: 'The other window works on it.' }).count(), { timeout: 15000 }).toBe(1);
  } finally {
    await other?.stop();
  }
  // Switching sessions lands at the newest message.
  await cs.runCommand('dsh: Switch Session');
  await rowOf('Show me the change').click({ timeout: 15000 });
  await expect.poll(() => c.locator('.msg.user').first().textContent(), { timeout: 15000 }).toContain('Show me the change');
  await expect.poll(() => frame.evaluate(() => { const t = document.querySelector('.transcript') as HTMLElement; return t.scrollHeight - t.scrollTop - t.clientHeight < 4; }), { timeout: 15000 }).toBe(true);

  // ---- 3. A daemon that cannot start: one block with what to do, no toasts; a send keeps its text;
  //         dsh: Show Daemon Log tells why. 8. Putting the setting right brings it back.
  const good = cs.settings();
  await cs.writeSettings({ ...good, 'dsh.serverCommand': '/nowhere/dsh-daemon' });
  // The offer is a block above the composer that stays until answered (issue 36.7), not a toast.
  const offer = c.locator('.daemon-error.restart-offer', { hasText: 'after a restart' });
  await offer.waitFor({ timeout: 15000 });
  await offer.getByRole('button', { name: 'Restart daemon' }).click();
  await expect.poll(() => c.locator('.daemon-error').isVisible(), { timeout: 30000 }).toBe(true);
  expect(await c.locator('.daemon-error .error-title').textContent()).toBe('✗ The daemon command in your settings was not found.');
  expect(await c.locator('.daemon-error .error-message').textContent()).toBe('dsh.serverCommand is "/nowhere/dsh-daemon", which is not an executable file.');
  expect(await c.locator('.status').textContent()).toBe('daemon failed to start');
  await box.fill('this must not be lost');
  await box.press('Enter');
  await expect.poll(() => c.locator('.composer-error').textContent(), { timeout: 15000 }).toBe('Not sent: the daemon is not running. The message stays here.');
  expect(await box.inputValue()).toBe('this must not be lost');
  expect(await page.locator('.notifications-toasts .notification-toast').count()).toBe(0);
  await cs.shot('daemon-not-found');
  await c.locator('.daemon-error').getByRole('button', { name: 'Show log' }).click();
  await expect.poll(() => page.locator('.output-view, .part.panel').first().textContent(), { timeout: 15000 }).toMatch(/dsh\.serverCommand\sis\s"\/nowhere\/dsh-daemon"/);
  expect(await page.locator('.part.panel').first().textContent()).toMatch(/send\sfailed/);
  await cs.shot('daemon-log');
  await cs.writeSettings(good);
  await expect.poll(() => c.locator('.status').textContent(), { timeout: 60000 }).toBe('idle');
  expect(await c.locator('.daemon-error').isVisible()).toBe(false);
  fake.script(textReply('Back, and nothing was lost.'));
  await box.press('Enter');
  await expect.poll(() => c.locator('.msg.assistant', { hasText: 'Back, and nothing was lost.' }).count(), { timeout: 30000 }).toBe(1);

  // ---- 6. A file dragged from the Explorer becomes a chip. The chat moves to the secondary side bar,
  //         beside the Explorer; VS Code hands a drop to a webview while Shift is held.
  await cs.runCommand('View: Toggle Secondary Side Bar Visibility');
  const icon = page.locator('.activitybar .action-item').filter({ has: page.locator('[aria-label^="dsh"]') }).first();
  const ib = (await icon.boundingBox())!;
  const aux = (await page.locator('.part.auxiliarybar').boundingBox())!;
  await page.mouse.move(ib.x + ib.width / 2, ib.y + ib.height / 2);
  await page.mouse.down();
  await page.mouse.move(ib.x + 30, ib.y + 30, { steps: 5 });
  await page.mouse.move(aux.x + aux.width / 2, aux.y + aux.height / 2, { steps: 15 });
  await page.mouse.up();
  await cs.runCommand('View: Show Explorer');
  const row = page.locator('.explorer-folders-view .monaco-list-row', { hasText: 'notes.txt' }).first();
  await row.waitFor({ timeout: 15000 });
  const c2 = cs.chat();
  const target = c2.getByLabel('message', { exact: true });
  await target.waitFor({ timeout: 30000 });
  const from = (await row.boundingBox())!;
  const to = (await target.boundingBox())!;
  await page.mouse.move(from.x + 30, from.y + from.height / 2);
  await page.mouse.down();
  await page.mouse.move(from.x + 10, from.y + from.height / 2 + 20, { steps: 5 });
  await page.keyboard.down('Shift');
  await page.mouse.move(to.x + to.width / 2, to.y + to.height / 2, { steps: 10 });
  await page.mouse.up();
  await page.keyboard.up('Shift');
  await expect.poll(() => c2.locator('.chips .chip').allTextContents(), { timeout: 15000 }).toEqual(['notes.txt✕']);
  await cs.shot('explorer-drag-chip');
  // code-server hands the drop over as a vscode-remote: URI; the chip names the file the daemon reads.
  fake.script(textReply('It holds your notes.'));
  await target.fill('What is in this file?');
  await target.press('Enter');
  await expect.poll(() => c2.locator('.msg.assistant', { hasText: 'It holds your notes.' }).count(), { timeout: 30000 }).toBe(1);
  expect(JSON.stringify(fake.requests.at(-1)!.body.messages)).toContain('ALPHA (by hand)');
  expect(await c2.locator('.composer-error').filter({ visible: true }).count()).toBe(0);
  expect(await c2.locator('.chips .chip').count()).toBe(0);

  // ---- 25. Restore checkpoint: VS Code's own modal lists the files first; the turn stays, tagged
  //          rewound, the file is back. Fork from here: a new session with the conversation so far.
  writeFileSync(join(ws, 'plan.txt'), 'one\ntwo\n');
  fake.script(toolReply([{ id: 'call_rw', name: 'edit_file', args: { path: 'plan.txt', old_string: 'two', new_string: 'TWO' } }]), textReply('Made it loud.'));
  await target.fill('Make two loud in plan.txt');
  await target.press('Enter');
  await c2.locator('.permission').waitFor({ timeout: 30000 });
  await c2.getByRole('button', { name: 'Allow once' }).click();
  await expect.poll(() => c2.locator('.msg.assistant', { hasText: 'Made it loud.' }).count(), { timeout: 30000 }).toBe(1);
  await expect.poll(() => readFileSync(join(ws, 'plan.txt'), 'utf8'), { timeout: 15000 }).toBe('one\nTWO\n');
  const asked = c2.locator('.msg.user', { hasText: 'Make two loud' });
  const prompt = c2.locator('.prompt', { hasText: 'Make two loud' }); // the prompt and its button beside it
  await prompt.hover();
  await prompt.getByRole('button', { name: 'Restore checkpoint' }).click();
  const dialog = page.locator('.monaco-dialog-box');
  await dialog.waitFor({ timeout: 15000 });
  expect(await dialog.textContent()).toContain('Restore the checkpoint before "Make two loud in plan.txt"?');
  expect(await dialog.textContent()).toContain('plan.txt');
  await cs.shot('restore-checkpoint-preview');
  await dialog.getByRole('button', { name: 'Restore', exact: true }).click();
  await expect.poll(() => asked.locator('.tag.rewound').count(), { timeout: 15000 }).toBe(1);
  await expect.poll(() => c2.locator('.notice', { hasText: 'Checkpoint restored' }).count(), { timeout: 15000 }).toBe(1);
  await expect.poll(() => readFileSync(join(ws, 'plan.txt'), 'utf8'), { timeout: 15000 }).toBe('one\ntwo\n');
  await cs.shot('checkpoint-restored');
  const footer = c2.locator('.footer').last();
  await footer.hover();
  await footer.getByRole('button', { name: 'Fork from here' }).click();
  await expect.poll(() => c2.locator('.session-title').textContent(), { timeout: 30000 }).toContain('(fork)');
  await cs.shot('forked');
  // The mode picker: Plan.
  await c2.locator('.mode-picker .dropdown-button').click();
  await c2.locator('.mode-picker .dropdown-option', { hasText: 'Plan' }).click();
  await expect.poll(() => c2.locator('.mode-picker .dropdown-button').getAttribute('data-value'), { timeout: 15000 }).toBe('plan');
  await cs.shot('mode-plan');
}
