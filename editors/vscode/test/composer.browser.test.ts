// The header's pickers and the composer's own `/` commands and edit-and-resend in the chat webview
// (headless Chromium at 300 px, the shipped bundle): what each posts to the host, what it shows, the
// keyboard, and the mode change marked in the transcript.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { emptyModel, reduceAll } from '../src/protocol/reducer';
import { costWords, heldUsage } from '../src/costWords';
import { contextText, parseBuiltin } from '../webview/slashCommands';
import { ev, haveBrowser, S, turnActions, WebviewPage } from './browserPage';

const w = new WebviewPage();
const page = () => w.page;
const connection = { state: 'ready', hasKey: true, modes: true, rewind: true };
const MODELS = [
  { id: 'deepseek-v4-flash', name: 'DeepSeek V4 Flash', contextWindow: 1000000, reasoningEfforts: ['high', 'max'] },
  { id: 'deepseek-v4-pro', name: 'DeepSeek V4 Pro', contextWindow: 1000000, reasoningEfforts: ['high', 'max'] },
  { id: 'local-coder', name: 'local-coder' },
];

describe('the panel\'s own / commands (no browser)', () => {
  it('parses a built-in with its argument; any other line (or a built-in with words it does not take) is sent as typed', () => {
    expect(parseBuiltin('/mode plan')?.arg).toBe('plan');
    expect(parseBuiltin(' /cost ')?.command.name).toBe('cost');
    expect(parseBuiltin('/cost me a fortune')).toBeUndefined();
    expect(parseBuiltin('/review app.py')).toBeUndefined();
    expect(parseBuiltin('what does /cost say')).toBeUndefined();
  });

  it('/cost says the daemon\'s sum (or the held turns\'); /context says how full the window is', () => {
    const m = reduceAll(emptyModel(S), [...turnActions(1, 0, 'a'), ...turnActions(2, 5, 'b'),
      ev('context/usage', { turn: 2, step: 1, used: 820000, window: 1000000 }, 10)]);
    expect(costWords(heldUsage(m))).toBe('Cost: $0.00020 · 20 input tokens (0 cached), 10 output, over 2 turns.');
    expect(contextText(m)).toBe('Context: 820,000 of 1,000,000 tokens (82%) — /compact frees some.');
    expect(costWords(heldUsage(emptyModel(S)))).toBe('Cost: nothing yet (no turn has reported its usage).');
    expect(costWords({ turns: 40, usage: { inputTokens: 123456, outputTokens: 789, cacheReadTokens: 100000 }, costUsd: 1.5, unpricedTurns: 2 }))
      .toBe('Cost: $1.50 (some turns without prices) · 123,456 input tokens (100,000 cached), 789 output, over 40 turns.');
    expect(costWords({ turns: 1, usage: { inputTokens: 5, outputTokens: 1 }, costUsd: null, unpricedTurns: 1 }))
      .toBe('Cost: no prices configured for the model · 5 input tokens (0 cached), 1 output, over 1 turn.');
  });

  it('a mode change is a line in the transcript where it happened', () => {
    const m = reduceAll(emptyModel(S), [...turnActions(1, 0, 'a'), ev('session/mode', { mode: 'accept-edits' }, 5), ev('session/mode', { mode: 'ask', planCallId: 'c1' }, 6)]);
    const lines = m.items.filter((i) => i.kind === 'notice').map((i) => i.kind === 'notice' ? i.text : '');
    expect(lines).toEqual(['Mode: Accept edits', 'Mode: Ask (plan approved)']);
    expect(m.mode).toBe('ask');
  });

  it('a mode change from a transcript page is the same line (a reload keeps it), after the footer when logged between turns', () => {
    const page = { lastSeq: 6, hasMore: false, turns: [{
      turn: 1, startSeq: 1, startedAt: 0, endSeq: 4, end: { kind: 'completed' as const },
      items: [
        { type: 'message' as const, seq: 2, step: 1, id: 'u1', source: { kind: 'user' as const }, text: 'plan it' },
        { type: 'assistant' as const, seq: 3, step: 1, text: 'Planned.' },
        { type: 'event' as const, seq: 5, step: null, event: 'session/mode', data: { mode: 'accept-edits', planCallId: 'c1' } },
      ],
    }] };
    const m = reduceAll(emptyModel(S), [{ kind: 'transcript', page, older: false }]);
    expect(m.items.map((i) => i.kind === 'notice' ? `notice:${i.text}` : i.kind)).toEqual(['user', 'assistant', 'turnEnd', 'notice:Mode: Accept edits (plan approved)']);
    // The live event of the same seq (a replay overlapping the page) is the same item.
    expect(reduceAll(m, [ev('session/mode', { mode: 'accept-edits', planCallId: 'c1' }, 5)]).items.length).toBe(m.items.length);
  });

  it('a model change from a transcript page is the same line as live, and the page\'s choice keeps a later sandbox change quiet', () => {
    const settings = (seq: number, model: string, effort: string) => ({ type: 'event' as const, seq, step: null, event: 'session/settings', data: { model, reasoningEffort: effort, sandbox: null } });
    const page = { lastSeq: 7, hasMore: false, turns: [{
      turn: 1, startSeq: 1, startedAt: 0, endSeq: 5, end: { kind: 'completed' as const },
      items: [
        settings(0, 'deepseek-v4-pro', 'max'),
        { type: 'message' as const, seq: 3, step: 1, id: 'u1', source: { kind: 'user' as const }, text: 'go' },
        { type: 'assistant' as const, seq: 4, step: 1, text: 'Done.' },
        settings(6, 'deepseek-v4-pro', 'high'),
      ],
    }] };
    const m = reduceAll(emptyModel(S), [{ kind: 'transcript', page, older: false }]);
    expect(m.items.map((i) => i.kind === 'notice' ? `notice:${i.text}` : i.kind)).toEqual(
      ['notice:Model: deepseek-v4-pro, max effort', 'user', 'assistant', 'turnEnd', 'notice:Model: deepseek-v4-pro, high effort']);
    expect(m.modelChoice).toEqual({ model: 'deepseek-v4-pro', reasoningEffort: 'high' });
    // The live event of the same seq is the same item; a sandbox change after the reload adds none.
    const after = reduceAll(m, [ev('session/settings', { model: 'deepseek-v4-pro', reasoningEffort: 'high' }, 6),
      ev('session/settings', { model: 'deepseek-v4-pro', reasoningEffort: 'high', sandbox: 'read-only' }, 8)]);
    expect(after.items.length).toBe(m.items.length);
  });

  it('a model change is a line; the same choice again (a sandbox change carries it too) is not', () => {
    const m = reduceAll(emptyModel(S), [ev('session/settings', { model: 'deepseek-v4-pro', reasoningEffort: 'max' }, 1),
      ev('session/settings', { model: 'deepseek-v4-pro', reasoningEffort: 'max', sandbox: 'read-only' }, 2),
      ev('session/settings', { model: null, reasoningEffort: null, sandbox: 'read-only' }, 3)]);
    expect(m.items.map((i) => i.kind === 'notice' ? i.text : '')).toEqual(['Model: deepseek-v4-pro, max effort']);
    expect(m.modelChoice).toEqual({ model: undefined, reasoningEffort: undefined });
  });
});

describe.skipIf(!haveBrowser)('header pickers and the composer in Chromium', () => {
  beforeAll(async () => { await w.open({ width: 300, height: 520 }); });
  afterAll(async () => { await w.close(); });

  it('the model picker lists each model at each effort, asks for the list, and posts the choice', async () => {
    await w.snapshot(reduceAll(emptyModel(S), [...turnActions(1, 0, 'Hi.'), ev('context/usage', { turn: 1, step: 1, used: 48000, window: 1000000 }, 5)]), connection);
    await expect.poll(async () => (await w.posted()).filter((m) => m.type === 'models').length).toBe(1);
    await w.host({ type: 'models', models: MODELS, current: 'deepseek-v4-flash', reasoningEffort: 'high', settable: true });
    const picker = page().locator('.model-picker .dropdown-button');
    await expect.poll(() => picker.isVisible()).toBe(true);
    expect(await picker.locator('.dropdown-label').textContent()).toBe('V4 Flash · high');
    expect(await picker.getAttribute('aria-label')).toBe('Model: DeepSeek V4 Flash · high');
    // Both pickers and the context meter stay inside 300 px.
    for (const sel of ['.model-picker', '.mode-picker', '.context']) {
      const box = (await page().locator(sel).boundingBox())!;
      expect(box.x + box.width, sel).toBeLessThanOrEqual(300);
    }
    await picker.click();
    const options = page().locator('.model-picker .dropdown-option');
    expect(await options.locator('.dropdown-option-label').allTextContents()).toEqual([
      'DeepSeek V4 Flash · high', 'DeepSeek V4 Flash · max', 'DeepSeek V4 Pro · high', 'DeepSeek V4 Pro · max', 'local-coder',
    ]);
    const list = (await page().locator('.model-picker .dropdown-list').boundingBox())!;
    expect(list.x).toBeGreaterThanOrEqual(0);
    expect(list.x + list.width).toBeLessThanOrEqual(300);
    await w.shot('composer-model-list');
    await w.clearPosted();
    // Keyboard: ↓ ↓ ↓ to "V4 Pro · max", Enter picks.
    await page().keyboard.press('ArrowDown');
    await page().keyboard.press('ArrowDown');
    await page().keyboard.press('ArrowDown');
    await page().keyboard.press('Enter');
    expect(await w.posted()).toEqual([{ type: 'setModel', model: 'deepseek-v4-pro', reasoningEffort: 'max' }]);
    expect(await page().locator('.model-picker .dropdown-list').isVisible()).toBe(false);
    // A model without efforts is posted without one; Esc closes without a choice.
    await picker.click();
    await w.clearPosted();
    await page().keyboard.press('Escape');
    expect(await w.posted()).toEqual([]);
    await picker.click();
    await options.filter({ hasText: 'local-coder' }).click();
    expect(await w.posted()).toEqual([{ type: 'setModel', model: 'local-coder' }]);
    // The session's own choice (another window's too) makes the panel ask for the list again.
    await w.clearPosted();
    await w.actions([ev('session/settings', { model: 'deepseek-v4-pro', reasoningEffort: 'max' }, 6)]);
    await expect.poll(async () => (await w.posted()).filter((m) => m.type === 'models').length).toBe(1);
    expect(await page().locator('.notice', { hasText: 'Model: deepseek-v4-pro, max effort' }).count()).toBe(1);
    expect(w.errors).toEqual([]);
  });

  it('the mode picker: keyboard and mouse, its icons; the change is a line in the transcript', async () => {
    await w.snapshot(reduceAll(emptyModel(S), turnActions(1, 0, 'Hi.')), connection);
    const button = page().locator('.mode-picker .dropdown-button');
    await expect.poll(() => button.isVisible()).toBe(true);
    expect(await button.getAttribute('data-value')).toBe('ask');
    expect(await button.locator('.codicon-comment-discussion').count()).toBe(1);
    await w.clearPosted();
    await button.focus();
    await page().keyboard.press('ArrowDown'); // opens
    expect(await page().locator('.mode-picker .dropdown-option .dropdown-option-label').allTextContents()).toEqual(['Ask', 'Accept edits', 'Plan']);
    await page().keyboard.press('ArrowDown');
    await page().keyboard.press('Enter');
    expect(await w.posted()).toEqual([{ type: 'setMode', mode: 'accept-edits' }]);
    await w.actions([ev('session/mode', { mode: 'accept-edits' }, 5)]);
    await expect.poll(() => button.getAttribute('data-value')).toBe('accept-edits');
    expect(await button.locator('.codicon-edit').count()).toBe(1);
    await expect.poll(() => page().locator('.notice', { hasText: 'Mode: Accept edits' }).count()).toBe(1);
    await button.click();
    await w.shot('composer-mode-list');
    await page().locator('.mode-picker .dropdown-option', { hasText: 'Plan' }).click();
    expect((await w.posted()).at(-1)).toEqual({ type: 'setMode', mode: 'plan' });
    expect(w.errors).toEqual([]);
  });

  it('/ lists the built-ins; each acts through its message or says its words, and nothing is sent', async () => {
    await w.snapshot(reduceAll(emptyModel(S), [...turnActions(1, 0, 'Hi.'), ev('context/usage', { turn: 1, step: 1, used: 1200, window: 1000000 }, 5)]), connection);
    const box = page().getByLabel('message');
    await box.fill('');
    await box.focus();
    await box.pressSequentially('/co');
    const menu = page().locator('.slash-menu');
    await expect.poll(() => menu.locator('.command-name').allTextContents()).toEqual(['/compact', '/cost', '/context']);
    await box.press('ArrowDown');
    await box.press('Tab');
    expect(await box.inputValue()).toBe('/cost ');
    await w.clearPosted();
    await box.press('Enter');
    // /cost is the daemon's figure: the webview asks the host, which answers with a note.
    await expect.poll(() => w.posted()).toEqual([{ type: 'cost' }]);
    expect(await box.inputValue()).toBe('');
    await w.host({ type: 'note', text: 'Cost: $0.00010 · 10 input tokens (0 cached), 5 output, over 1 turn.' });
    const note = page().locator('.composer-note');
    await expect.poll(() => note.textContent()).toBe('Cost: $0.00010 · 10 input tokens (0 cached), 5 output, over 1 turn.✕');
    await box.fill('/context');
    await box.press('Escape'); // closes the menu only
    await box.press('Enter');
    await expect.poll(() => note.locator('.composer-note-text').textContent()).toBe('Context: 1,200 of 1,000,000 tokens (0%).');
    for (const [line, msg] of [['/compact', { type: 'compact' }], ['/undo', { type: 'undo' }], ['/rewind', { type: 'rewindPick' }], ['/fork', { type: 'forkLast' }], ['/mode plan', { type: 'setMode', mode: 'plan' }], ['/mode accept edits', { type: 'setMode', mode: 'accept-edits' }]] as const) {
      await w.clearPosted();
      await box.fill(line);
      await box.press('Escape');
      await box.press('Enter');
      expect((await w.posted()).filter((m) => m.type !== 'commands'), line).toEqual([msg]);
    }
    // /mode alone opens the header's picker.
    await box.fill('/mode');
    await box.press('Escape');
    await box.press('Enter');
    await expect.poll(() => page().locator('.mode-picker .dropdown-list').isVisible()).toBe(true);
    await page().keyboard.press('Escape');
    expect(await page().locator('.mode-picker .dropdown-list').isVisible()).toBe(false);
    expect((await w.posted()).filter((m) => m.type === 'send')).toEqual([]);
    expect(w.errors).toEqual([]);
  });

  it('Steer is disabled while idle (its tooltip says why) and Ctrl+Enter then sends a prompt; while a turn runs both steer', async () => {
    await w.snapshot(reduceAll(emptyModel(S), turnActions(1, 0, 'Hi.')), connection);
    const steer = page().getByRole('button', { name: 'Steer' });
    expect(await steer.isDisabled()).toBe(true);
    expect(await steer.getAttribute('title')).toMatch(/^Nothing to steer: no turn is running/);
    expect(await steer.getAttribute('aria-description')).toMatch(/^Nothing to steer/); // said to a screen reader too
    const box = page().getByLabel('message');
    await box.fill('not a steer');
    await steer.click({ force: true });
    expect((await w.posted()).filter((m) => m.type === 'send')).toEqual([]); // a click sends nothing
    await w.clearPosted();
    await box.fill('just a prompt');
    await box.press('Control+Enter');
    expect((await w.posted()).filter((m) => m.type === 'send').map((m) => [m.text, m.mode])).toEqual([['just a prompt', 'followup']]);
    // A turn runs: the button steers, and so does Ctrl+Enter.
    await w.actions([ev('turn/start', { turn: 2 }, 5)]);
    await expect.poll(() => steer.isDisabled()).toBe(false);
    expect(await steer.getAttribute('title')).toMatch(/^Redirect the running turn/);
    await w.clearPosted();
    await box.fill('use v2');
    await box.press('Control+Enter');
    await box.fill('and v3');
    await steer.click();
    expect((await w.posted()).filter((m) => m.type === 'send').map((m) => [m.text, m.mode])).toEqual([['use v2', 'steer'], ['and v3', 'steer']]);
    // The turn ends: nothing to steer again.
    await w.actions([ev('turn/end', { turn: 2, reason: { kind: 'completed' } }, 6)]);
    await expect.poll(() => steer.isDisabled()).toBe(true);
    expect(w.errors).toEqual([]);
  });

  it('"Not sent: the daemon is not running" goes as soon as the daemon runs again; another error stays', async () => {
    await w.snapshot(reduceAll(emptyModel(S), turnActions(1, 0, 'Hi.')), connection);
    const box = page().getByLabel('message');
    const error = page().locator('.composer-error');
    const sendOne = async (text: string) => {
      await w.clearPosted();
      await box.fill(text);
      await box.press('Enter');
      return (await w.posted()).find((m) => m.type === 'send')!.id as number;
    };
    let id = await sendOne('while it is down');
    await w.host({ type: 'connection', connection: { ...connection, state: 'stopped' } });
    await w.host({ type: 'sendResult', id, ok: false, error: 'Not sent: the daemon is not running. The message stays here.', actions: [], daemonDown: true });
    await expect.poll(() => error.isVisible()).toBe(true);
    expect(await box.inputValue()).toBe('while it is down'); // given back
    await w.host({ type: 'connection', connection: { ...connection, state: 'starting' } });
    await w.frame();
    expect(await error.isVisible()).toBe(true); // still said while it starts
    await w.host({ type: 'connection', connection: { ...connection, state: 'ready' } });
    await expect.poll(() => error.isVisible()).toBe(false);
    expect(await box.inputValue()).toBe('while it is down'); // the text stays for the person to send
    // Any other reason is not undone by the daemon running.
    await box.fill('');
    id = await sendOne('refused');
    await w.host({ type: 'sendResult', id, ok: false, error: 'Not sent: the provider refused the request', actions: [] });
    await expect.poll(() => error.isVisible()).toBe(true);
    await w.host({ type: 'connection', connection: { ...connection, state: 'ready' } });
    await w.frame();
    expect(await error.isVisible()).toBe(true);
    expect(w.errors).toEqual([]);
  });

  it('Edit on a past prompt: its text in the box, what the rewind restores, Resend posts the rewind-and-send; Esc gives the draft back', async () => {
    await w.snapshot(reduceAll(emptyModel(S), [...turnActions(1, 0, 'One.', 'write the notes'), ...turnActions(2, 5, 'Two.', 'now the tests')]), connection);
    const box = page().getByLabel('message');
    await box.fill('half-typed draft');
    const prompt = page().locator('.prompt', { hasText: 'write the notes' });
    await prompt.hover();
    await w.clearPosted();
    await prompt.getByRole('button', { name: 'Edit' }).click();
    expect(await box.inputValue()).toBe('write the notes');
    expect(await w.posted()).toEqual([{ type: 'editPreview', turn: 1 }]);
    await w.host({ type: 'editPreview', turn: 1, files: ['notes.txt (deleted: the agent created it)', 'src/app.py'], laterPrompts: 1, canRewind: true });
    const bar = page().locator('.edit-bar');
    await expect.poll(() => bar.locator('.edit-preview').innerText()).toContain('Files restored (2): notes.txt (deleted: the agent created it), src/app.py');
    expect(await bar.locator('.edit-preview').innerText()).toContain('the conversation goes back to before this prompt and the 1 prompt after it');
    expect(await page().locator('.composer .row .primary').textContent()).toBe('Resend');
    await w.shot('composer-edit');
    // Esc: the draft comes back; nothing was posted.
    await w.clearPosted();
    await box.press('Escape');
    expect(await box.inputValue()).toBe('half-typed draft');
    expect(await bar.isVisible()).toBe(false);
    expect(await w.posted()).toEqual([]);
    // Again, edited, Enter: one editResend; the draft is back in the box.
    await prompt.hover();
    await prompt.getByRole('button', { name: 'Edit' }).click();
    await box.fill('write the notes, shorter');
    await w.clearPosted();
    await box.press('Enter');
    const posted = await w.posted();
    expect(posted).toEqual([{ type: 'editResend', id: expect.any(Number), turn: 1, text: 'write the notes, shorter', chips: [] }]);
    expect(await box.inputValue()).toBe('half-typed draft');
    // It failed (a file changed since): edit mode and the edited text come back, with the reason.
    await w.host({ type: 'sendResult', id: posted[0].id, ok: false, error: 'Not sent: files changed since the agent changed them (nothing was restored).' });
    await expect.poll(() => box.inputValue()).toBe('write the notes, shorter');
    expect(await bar.isVisible()).toBe(true);
    expect(await page().locator('.composer-error').textContent()).toContain('nothing was restored');
    expect(w.errors).toEqual([]);
  });
});
