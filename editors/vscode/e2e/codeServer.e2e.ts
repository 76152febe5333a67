// End to end in a real VS Code: code-server with the packaged .vsix, driven by playwright-core and
// Debian Chromium. The extension finds the real daemon in the workspace's .venv (dsh.serverCommand is
// not set) and it talks to a fake provider on 127.0.0.1. Screenshots go to $DSH_E2E_SHOTS (default: a
// new temp dir, printed).
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gate, textReply, toolReply } from '../test/fakeProvider';
import { CodeServer } from './harness';

const cs = new CodeServer({
  name: 'main', daemon: 'workspace-venv',
  prepare: ({ ws }) => { writeFileSync(join(ws, 'notes.txt'), 'alpha\nbeta\n'); writeFileSync(join(ws, 'draft.txt'), 'draft\n'); },
});
const shot = (name: string) => cs.shot(name);

describe('the dsh extension in code-server', () => {
  beforeAll(async () => {
    await cs.start();
  }, 300000);
  afterAll(async () => {
    await cs.stop();
  });

  it('streams a reply, queues while busy, stops keeping the queue, runs it, approves an edit from the diff card, and survives Reload Window', async () => {
    try {
      await scenario();
    } catch (err) {
      await shot('FAILED').catch(() => undefined);
      throw new Error(`${(err as Error).message}\n--- logs\n${cs.logs()}`, { cause: err });
    }
  });
});
async function scenario(): Promise<void> {
    const fake = cs.fake;
    const ws = cs.ws;
    const page = cs.page;
    await cs.openWorkbench();
    await cs.openChat();
    const c = cs.chat();

    // 1. Streamed text.
    fake.script(textReply('Hello from **dsh**, streaming word by word through the fake provider. Here is code:\n\n```python\nprint("hi")\n```\n'.split(/(?<= )/), { delayMs: 60 }));
    await c.getByLabel('message').fill('Say hello');
    await c.getByLabel('message').press('Enter');
    await expect.poll(() => c.locator('.msg.assistant.streaming').count(), { timeout: 30000 }).toBe(1);
    await shot('streaming');
    await expect.poll(() => c.locator('.footer').count(), { timeout: 30000 }).toBe(1);
    expect(await c.locator('.msg.assistant strong').first().textContent()).toBe('dsh');
    expect(await c.locator('.footer').first().textContent()).toContain('completed');
    await shot('reply-done');

    // 2. Queue while busy, Stop keeps it, Run queue runs it.
    const g = gate();
    fake.script(textReply(['Working on a long task', ' and still working'], { gate: g.promise }), textReply('The queued prompt ran.'));
    await c.getByLabel('message').fill('A long task');
    await c.getByLabel('message').press('Enter');
    await fake.waitRequests(2);
    await c.getByLabel('message').fill('Second prompt, queued');
    await c.getByLabel('message').press('Enter');
    await expect.poll(() => c.locator('.queue-item .queue-text').allTextContents(), { timeout: 15000 }).toEqual(['Second prompt, queued']);
    await expect.poll(() => page.locator('.statusbar-item', { hasText: 'dsh:' }).first().textContent()).toContain('queued 1');
    await shot('queued-while-busy');
    await c.getByRole('button', { name: 'Stop', exact: true }).click();
    await expect.poll(() => c.locator('.footer.aborted').count(), { timeout: 15000 }).toBe(1);
    expect(await c.locator('.queue-item .queue-text').allTextContents()).toEqual(['Second prompt, queued']);
    await c.getByRole('button', { name: 'Run queue' }).waitFor();
    await shot('stopped-queue-kept');
    await c.getByRole('button', { name: 'Run queue' }).click();
    await expect.poll(() => c.locator('.msg.assistant', { hasText: 'The queued prompt ran.' }).count(), { timeout: 15000 }).toBe(1);
    await expect.poll(() => c.locator('.queue-item').count()).toBe(0);
    g.open();

    // 3. An edit approved from the permission card, after a look at the diff; the buffer changes.
    // The person's own unsaved change in another file: no agent edit or command may save it.
    await cs.openFile('draft.txt');
    await page.locator('.monaco-editor .view-lines', { hasText: 'draft' }).first().click();
    await page.keyboard.press('Control+End');
    await page.keyboard.type('mine');
    await page.locator('.tabs-container .tab.dirty', { hasText: 'draft.txt' }).waitFor({ timeout: 15000 });
    await cs.openFile('notes.txt');
    await page.locator('.monaco-editor .view-lines', { hasText: 'beta' }).first().waitFor();
    fake.script(toolReply([{ id: 'call_edit', name: 'edit_file', args: { path: 'notes.txt', old_string: 'beta', new_string: 'gamma' } }]), textReply('Changed beta to gamma.'));
    await c.getByLabel('message').fill('Replace beta with gamma in notes.txt');
    await c.getByLabel('message').press('Enter');
    await c.locator('.permission').waitFor({ timeout: 30000 });
    expect(await c.locator('.permission .diff').textContent()).toContain('+gamma');
    await shot('permission-card');
    await c.getByRole('button', { name: 'View diff' }).click();
    await page.locator('.monaco-diff-editor').first().waitFor({ timeout: 15000 });
    await shot('diff-editor');
    await c.getByRole('button', { name: 'Allow once' }).click();
    await expect.poll(() => c.locator('.msg.assistant', { hasText: 'Changed beta to gamma.' }).count(), { timeout: 30000 }).toBe(1);
    expect(await c.locator('.tool.ok .tool-name').last().textContent()).toBe('edit_file');
    // Answered in the card: the diff tab closed by itself; the file's buffer holds the edit, and the
    // editor saved it when the daemon asked (dsh/document/save), so commands see it; the person's
    // unsaved draft stays unsaved.
    await expect.poll(() => page.locator('.tabs-container .tab', { hasText: 'proposed by dsh' }).count(), { timeout: 15000 }).toBe(0);
    await page.locator('.tabs-container .tab', { hasText: 'notes.txt' }).first().click();
    await expect.poll(() => page.locator('.monaco-editor .view-lines').first().textContent(), { timeout: 15000 }).toContain('gamma');
    expect(readFileSync(join(ws, 'notes.txt'), 'utf8')).toBe('alpha\ngamma\n');
    expect(await page.locator('.tabs-container .tab.dirty', { hasText: 'notes.txt' }).count()).toBe(0);
    expect(await page.locator('.tabs-container .tab.dirty', { hasText: 'draft.txt' }).count()).toBe(1);
    expect(readFileSync(join(ws, 'draft.txt'), 'utf8')).toBe('draft\n');
    await shot('buffer-edited-and-saved');

    // A command after an edit: the command card shows command and cwd; the edited file is saved first.
    fake.script(toolReply([{ id: 'call_cat', name: 'run_command', args: { command: 'cat notes.txt' } }]), textReply('The file now says gamma.'));
    await c.getByLabel('message').fill('Show me the file');
    await c.getByLabel('message').press('Enter');
    await c.locator('.permission').waitFor({ timeout: 30000 });
    expect(await c.locator('.permission pre.command').textContent()).toContain('$ cat notes.txt');
    await shot('command-permission');
    await c.getByRole('button', { name: 'Allow once' }).click();
    await expect.poll(() => c.locator('.msg.assistant', { hasText: 'The file now says gamma.' }).count(), { timeout: 30000 }).toBe(1);
    const cat = c.locator('.tool', { hasText: 'run_command' }).last();
    expect(await cat.locator('.badge').textContent()).toBe('ok');
    expect(readFileSync(join(ws, 'notes.txt'), 'utf8')).toBe('alpha\ngamma\n');
    expect(await cat.textContent()).toContain('gamma');
    // The command was told about the draft, and the draft was not written.
    expect(await cat.textContent()).toContain('draft.txt has unsaved changes in the editor');
    expect(readFileSync(join(ws, 'draft.txt'), 'utf8')).toBe('draft\n');
    await shot('command-ran-on-saved-file');
    // An agent edit of the draft's own file, apart from the person's change (issue 37): the file gets
    // the saved text plus the edit only, the tab keeps both and stays dirty, and the person's own save
    // afterwards is no "file is newer" conflict (the editor wrote the file through the document).
    await cs.openFile('draft.txt');
    fake.script(toolReply([{ id: 'call_draft', name: 'edit_file', args: { path: 'draft.txt', old_string: 'draft', new_string: 'DRAFT' } }]), textReply('Capitalised it.'));
    await c.getByLabel('message').fill('Capitalise draft.txt');
    await c.getByLabel('message').press('Enter');
    await c.locator('.permission').waitFor({ timeout: 30000 });
    expect(await c.locator('.permission .unsaved-note').textContent()).toContain('draft.txt has unsaved changes: they stay unsaved');
    await c.getByRole('button', { name: 'Allow once' }).click();
    await expect.poll(() => c.locator('.msg.assistant', { hasText: 'Capitalised it.' }).count(), { timeout: 30000 }).toBe(1);
    await expect.poll(() => readFileSync(join(ws, 'draft.txt'), 'utf8'), { timeout: 15000 }).toBe('DRAFT\n');
    await page.locator('.tabs-container .tab', { hasText: 'draft.txt' }).first().click();
    await expect.poll(() => page.locator('.monaco-editor .view-lines').first().textContent(), { timeout: 15000 }).toContain('mine');
    expect(await page.locator('.monaco-editor .view-lines').first().textContent()).toContain('DRAFT');
    expect(await page.locator('.tabs-container .tab.dirty', { hasText: 'draft.txt' }).count()).toBe(1);
    await shot('draft-kept-edit-written');
    // Ctrl+S, not the palette: typing "File: Save" there may pick "Compare Active File with Saved".
    await page.keyboard.press('Control+S');
    await expect.poll(() => page.locator('.tabs-container .tab.dirty', { hasText: 'draft.txt' }).count(), { timeout: 15000 }).toBe(0);
    await shot('person-saved');
    await expect.poll(() => readFileSync(join(ws, 'draft.txt'), 'utf8'), { timeout: 15000 }).toBe('DRAFT\nmine');
    expect(await page.getByText('The content of the file is newer').count()).toBe(0);
    writeFileSync(join(ws, 'draft.txt'), 'draft\n');
    await cs.runCommand('File: Revert File');
    await expect.poll(() => page.locator('.tabs-container .tab.dirty', { hasText: 'draft.txt' }).count(), { timeout: 15000 }).toBe(0);

    // 4. The editor selection as a chip on a prompt queued while a turn runs: the chip travels with that
    //    prompt (context on the followup) into its own turn, never into the running one.
    const before = fake.requests.length;
    const g4 = gate();
    fake.script(
      { ...toolReply([{ id: 'call_ls', name: 'list_dir', args: { path: '.' } }]), gate: g4.promise },
      textReply('Looked around.'),
      textReply('That line says alpha.'),
    );
    await c.getByLabel('message').fill('Look around first');
    await c.getByLabel('message').press('Enter');
    await expect.poll(() => fake.requests.length, { timeout: 15000 }).toBe(before + 1);
    await page.locator('.tabs-container .tab', { hasText: 'notes.txt' }).first().click();
    await page.locator('.monaco-editor .view-lines').first().click();
    await page.keyboard.press('Control+Home');
    await page.keyboard.press('Shift+End');
    await cs.runCommand('dsh: Add Selection to Chat');
    await expect.poll(() => c.locator('.chips .chip').allTextContents(), { timeout: 15000 }).toEqual(['notes.txt:1-1✕']);
    await c.getByLabel('message').fill('What does this line say?');
    await c.getByLabel('message').press('Enter');
    await expect.poll(() => c.locator('.queue-item .queue-text').allTextContents(), { timeout: 15000 }).toEqual(['What does this line say?']);
    expect(await c.locator('.queue-item .badge').allTextContents()).toEqual(['followup']);
    expect(await c.locator('.queue-item .queue-context .chip').allTextContents()).toEqual(['selection notes.txt:1-1']);
    await shot('selection-chip-queued');
    g4.open();
    await expect.poll(() => c.locator('.msg.assistant', { hasText: 'That line says alpha.' }).count(), { timeout: 30000 }).toBe(1);
    const userText = (i: number) => fake.requests[before + i].body.messages.filter((m: any) => m.role !== 'system').map((m: any) => String(m.content)).join('\n');
    expect(fake.requests.length).toBe(before + 3);
    expect(userText(1)).not.toMatch(/Selection in .*notes\.txt/); // the running turn's second step
    expect(userText(2)).toMatch(/Selection in .*notes\.txt/); // the queued prompt's own turn
    expect(userText(2)).toContain('alpha');
    expect(await c.locator('details.context-chip summary').allTextContents()).toContain('selection notes.txt:1-1');
    await shot('selection-chip-ran-with-its-prompt');

    // 5. Reload Window in the middle of a turn with a queued prompt and a steer: session, transcript and
    //    queue come back, labelled from each item's verb (the reloaded host never saw them sent).
    fake.script(textReply(['Never finishes'], { gate: new Promise(() => {}) }));
    await c.getByLabel('message').fill('A turn cut short by a reload');
    await c.getByLabel('message').press('Enter');
    await expect.poll(() => fake.requests.length, { timeout: 15000 }).toBe(before + 4);
    await c.getByLabel('message').fill('Queued before the reload');
    await c.getByLabel('message').press('Enter');
    // Ctrl+Enter steers only while the panel shows the turn running (idle, it sends a normal prompt).
    await expect.poll(() => c.getByRole('button', { name: 'Steer' }).isEnabled(), { timeout: 15000 }).toBe(true);
    await c.getByLabel('message').fill('Steered before the reload');
    await c.getByLabel('message').press('Control+Enter');
    await expect.poll(() => c.locator('.queue-item').count(), { timeout: 15000 }).toBe(2);
    await cs.runCommand('Developer: Reload Window');
    await page.locator('.monaco-workbench').waitFor({ timeout: 60000 });
    await cs.openChat();
    const c2 = cs.chat();
    await expect.poll(() => c2.locator('.queue-item .queue-text').allTextContents(), { timeout: 60000 }).toEqual(['Steered before the reload', 'Queued before the reload']);
    expect(await c2.locator('.queue-item .badge').allTextContents()).toEqual(['steer', 'followup']);
    await expect.poll(() => c2.locator('.msg.user').allTextContents(), { timeout: 30000 }).toContain('Say hello');
    expect(await c2.locator('.msg.assistant', { hasText: 'The queued prompt ran.' }).count()).toBe(1);
    await expect.poll(() => c2.locator('.footer').last().textContent(), { timeout: 30000 }).toContain('stopped (the daemon shut down)');
    await c2.getByRole('button', { name: 'Run queue' }).waitFor();
    await shot('after-reload');
    fake.script(textReply('Back after the reload.'));
    await c2.getByRole('button', { name: 'Run queue' }).click();
    await expect.poll(() => c2.locator('.msg.assistant', { hasText: 'Back after the reload.' }).count(), { timeout: 30000 }).toBe(1);
    await shot('after-reload-ran-queue');

    // 6. dsh: Set API Key stores the key in SecretStorage and restarts the daemon; the panel reattaches
    //    after its last seq: nothing missing, nothing twice.
    const users = await c2.locator('.msg.user').count();
    const replies = await c2.locator('.msg.assistant').count();
    await cs.runCommand('dsh: Set API Key');
    const keyInput = page.locator('.quick-input-widget input[type="password"]');
    await keyInput.waitFor({ state: 'visible' });
    await keyInput.fill('sk-from-secret-storage');
    await page.keyboard.press('Enter');
    await page.locator('.notifications-toasts', { hasText: 'API key saved' }).waitFor({ timeout: 30000 });
    fake.script(textReply('Still here after the restart.'));
    await c2.getByLabel('message').fill('Are you there?');
    await c2.getByLabel('message').press('Enter');
    await expect.poll(() => c2.locator('.msg.assistant', { hasText: 'Still here after the restart.' }).count(), { timeout: 30000 }).toBe(1);
    expect(await c2.locator('.msg.user').count()).toBe(users + 1);
    expect(await c2.locator('.msg.assistant').count()).toBe(replies + 1);
    expect(fake.requests.at(-1)!.authorization).toBe('Bearer sk-from-secret-storage');
    await shot('after-daemon-restart');

    // 7. dsh: New Session starts an empty transcript; dsh: Switch Session brings the first one back.
    await cs.runCommand('dsh: New Session');
    await expect.poll(() => c2.locator('.msg').count(), { timeout: 15000 }).toBe(0);
    fake.script(textReply('A fresh session.'));
    await c2.getByLabel('message').fill('Hello again');
    await c2.getByLabel('message').press('Enter');
    await expect.poll(() => c2.locator('.msg.assistant', { hasText: 'A fresh session.' }).count(), { timeout: 30000 }).toBe(1);
    await cs.runCommand('dsh: Switch Session');
    await page.locator('.quick-input-list .monaco-list-row', { hasText: 'Say hello' }).first().waitFor({ timeout: 15000 });
    expect(await page.locator('.quick-input-list .monaco-list-row', { hasText: 'Hello again' }).count()).toBe(1);
    await shot('switch-session');
    await page.locator('.quick-input-list .monaco-list-row', { hasText: 'Say hello' }).first().click();
    await expect.poll(() => c2.locator('.msg.user').count(), { timeout: 15000 }).toBe(users + 1);
    expect(await c2.locator('.msg.assistant', { hasText: 'Still here after the restart.' }).count()).toBe(1);

    // 8. The Switch Session picker deletes (after a modal confirmation) and renames; it comes back after each.
    const row = (text: string) => page.locator('.quick-input-list .monaco-list-row', { hasText: text }).first();
    /** Filters the picker down to one session (its row is then focused and shows its buttons). */
    const only = async (text: string) => {
      await row(text).waitFor({ timeout: 15000 });
      await page.locator('.quick-input-widget input').fill(text);
      await expect.poll(() => page.locator('.quick-input-list .monaco-list-row').count()).toBe(1);
      return row(text);
    };
    await cs.runCommand('dsh: Switch Session');
    await (await only('Hello again')).getByRole('button', { name: 'Delete' }).click();
    await page.locator('.monaco-dialog-box').getByRole('button', { name: 'Delete' }).click();
    await row('Say hello').waitFor({ timeout: 15000 });
    expect(await page.locator('.quick-input-list .monaco-list-row', { hasText: 'Hello again' }).count()).toBe(0);
    await (await only('Say hello')).getByRole('button', { name: 'Rename' }).click();
    await page.locator('.quick-input-widget', { hasText: 'Rename the dsh session' }).waitFor({ timeout: 15000 });
    const titleInput = page.locator('.quick-input-widget input');
    expect(await titleInput.inputValue()).toBe('Say hello');
    await titleInput.fill('Renamed from the picker');
    await page.keyboard.press('Enter');
    await row('Renamed from the picker').waitFor({ timeout: 15000 });
    expect(await row('Renamed from the picker').textContent()).toContain('current');
    await shot('session-renamed');
    await page.keyboard.press('Escape');
    expect(await c2.locator('.msg.assistant', { hasText: 'Still here after the restart.' }).count()).toBe(1);

    // 9. A changed dsh.provider setting reaches the running daemon without a restart (the key stays).
    //    Edited as a person would, in the settings.json editor (code-server does not notice the file
    //    changing under it).
    const settings = cs.settings();
    settings['dsh.provider'] = { ...(settings['dsh.provider'] as object), model: 'model-from-settings' };
    await cs.writeSettings(settings);
    expect((cs.settings()['dsh.provider'] as any).model).toBe('model-from-settings');
    const daemonRequests = fake.requests.length;
    for (let attempt = 0; fake.requests.at(-1)?.body.model !== 'model-from-settings'; attempt++) {
      // Allow the change a moment to reach the daemon before each prompt.
      expect(attempt).toBeLessThan(5);
      await new Promise((r) => setTimeout(r, 500));
      fake.script(textReply(`Reply ${attempt} after the settings change.`));
      await c2.getByLabel('message').fill(`After the settings change, ${attempt}`);
      await c2.getByLabel('message').press('Enter');
      await expect.poll(() => c2.locator('.msg.assistant', { hasText: `Reply ${attempt} after the settings change.` }).count(), { timeout: 30000 }).toBe(1);
    }
    await shot('settings-applied-without-restart');
    expect(fake.requests.length).toBeGreaterThan(daemonRequests);
    expect(fake.requests.at(-1)!.authorization).toBe('Bearer sk-from-secret-storage');
    expect(await page.locator('.notifications-toasts', { hasText: 'after a restart' }).count()).toBe(0);
}
