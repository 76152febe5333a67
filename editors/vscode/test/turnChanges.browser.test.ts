// The "Changed files" bar and a subagent's nested card in the chat webview, in headless Chromium at
// 300 px: what they show, what their buttons ask the host, and that they fit the narrow sidebar.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { emptyModel, reduceAll } from '../src/protocol/reducer';
import type { TranscriptPage } from '../src/protocol/types';
import { ev, haveBrowser, S, WebviewPage } from './browserPage';

const w = new WebviewPage();
const page = () => w.page;
const ready = { state: 'ready', hasKey: true, root: '/w' };
const file = (path: string, added: number, removed: number, hunks: number, pending: number, status = 'modified') => ({ path, status, by: 'edit', added, removed, hunks, pending });

describe.skipIf(!haveBrowser)('changed files and subagent cards in the chat webview', () => {
  beforeAll(async () => { await w.open({ width: 300, height: 700 }); });
  afterAll(async () => { await w.close(); });

  it('the bar: count and +/− lines, a row per file (relative to the workspace) that opens its diff, Keep / Undo once the turn ended, words after an undo', async () => {
    const m = reduceAll(emptyModel(S), [
      ev('turn/start', { turn: 1 }, 0),
      ev('turn/diff', { turn: 1, final: false, files: [file('/w/src/deeply/nested/module_with_a_long_name.py', 12, 3, 3, 3)] }),
    ]);
    await w.snapshot(m, ready);
    const bar = page().locator('details.changed-files');
    await expect.poll(() => bar.isVisible()).toBe(true);
    expect(await bar.locator('.changed-summary').textContent()).toBe('1 changed file so far+12−33 to review');
    // While the turn runs: no Keep / Undo (the daemon refuses them then).
    expect(await bar.getByRole('button', { name: 'Keep' }).count()).toBe(0);
    await w.actions([
      ev('turn/diff', { turn: 1, final: true, files: [file('/w/src/deeply/nested/module_with_a_long_name.py', 12, 3, 3, 3), file('/w/new.txt', 2, 0, 1, 1, 'created'), file('/elsewhere/x.py', 0, 4, 1, 0)] }),
      ev('turn/end', { turn: 1, reason: { kind: 'completed' } }, 1),
    ]);
    await expect.poll(() => bar.locator('.changed-summary').textContent()).toBe('3 changed files+14−74 to review');
    const rows = bar.locator('.changed-file');
    expect(await rows.locator('.changed-name').allTextContents()).toEqual(['module_with_a_long_name.py', 'new.txt', 'x.py']);
    expect(await rows.locator('.changed-dir').allTextContents()).toEqual(['src/deeply/nested', '', '/elsewhere']);
    expect(await rows.locator('.changed-mark').allTextContents()).toEqual(['M', 'A', 'M']);
    expect(await rows.locator('.changed-state').allTextContents()).toEqual(['3/3', '1/1', '✓']);
    // A reviewed file has nothing left to keep or undo.
    expect(await rows.nth(2).getByRole('button', { name: 'Undo' }).count()).toBe(0);
    // Inside 300 px, each row on one line, above the composer.
    const box = (await bar.boundingBox())!;
    expect(box.x + box.width).toBeLessThanOrEqual(300);
    expect(box.y + box.height).toBeLessThanOrEqual((await page().getByLabel('message').boundingBox())!.y);
    for (let i = 0; i < 3; i++) {
      const r = (await rows.nth(i).boundingBox())!;
      expect(r.x + r.width).toBeLessThanOrEqual(300);
      expect(r.height).toBeLessThan(30);
    }
    await w.shot('changed-files');
    await w.clearPosted();
    await rows.first().locator('.changed-open').click();
    await rows.first().getByRole('button', { name: 'Undo' }).click();
    await rows.nth(1).getByRole('button', { name: 'Keep' }).click();
    expect(await w.posted()).toEqual([
      { type: 'turnFile', path: '/w/src/deeply/nested/module_with_a_long_name.py', action: 'open' },
      { type: 'turnFile', path: '/w/src/deeply/nested/module_with_a_long_name.py', action: 'undo' },
      { type: 'turnFile', path: '/w/new.txt', action: 'keep' },
    ]);
    // What the undo did, in words; another session's words are not shown here.
    await w.host({ type: 'turnDiffNote', sessionId: 'another', text: 'not this one', warning: false });
    await w.host({ type: 'turnDiffNote', sessionId: S, text: 'Undid hunk 1 of module_with_a_long_name.py. Hunk 3 was not undone: its lines changed since the turn.', warning: true });
    const note = bar.locator('.changed-note');
    await expect.poll(() => note.textContent()).toBe('Undid hunk 1 of module_with_a_long_name.py. Hunk 3 was not undone: its lines changed since the turn.');
    expect(await note.evaluate((e) => e.classList.contains('warning'))).toBe(true);
    // Collapsible: the summary closes it.
    await bar.locator('.changed-summary').click();
    expect(await bar.evaluate((d) => (d as HTMLDetailsElement).open)).toBe(false);
    expect(await rows.first().isVisible()).toBe(false);
    await bar.locator('.changed-summary').click();
    // The next turn starts with none: the bar goes until it changes a file.
    await w.actions([ev('turn/start', { turn: 2 }, 2)]);
    await expect.poll(() => bar.isVisible()).toBe(false);
    expect(w.errors).toEqual([]);
  });

  it('a subagent: a nested card under run_subagent with its live tool calls and state, its summary at the end; a child\'s question names it', async () => {
    const call = ev('tool/call', { turn: 1, step: 1, callId: 'p1', name: 'run_subagent', arguments: JSON.stringify({ description: 'find the build tool', prompt: 'look' }) }, 1);
    const sub = (type: string, data: unknown) => ev('subagent/event', { callId: 'p1', childId: 'kid', event: { type, data } });
    await w.snapshot(reduceAll(emptyModel(S), [ev('turn/start', { turn: 1 }, 0), call,
      ev('subagent/started', { callId: 'p1', childId: 'kid', description: 'find the build tool', tools: 'explore', maxSteps: 30 }, 2)]), ready);
    const card = page().locator('.tool.has-subagent details.subagent');
    await expect.poll(() => card.count()).toBe(1);
    expect(await card.evaluate((d) => (d as HTMLDetailsElement).open)).toBe(true); // open while it runs
    expect(await card.locator('.subagent-desc').textContent()).toBe('find the build tool');
    expect(await card.locator('.subagent-state').textContent()).toBe('running');
    await w.actions([
      sub('step/start', { turn: 1, step: 1 }),
      sub('tool/call', { turn: 1, step: 1, callId: 'k1', name: 'read_file', arguments: '{"path": "notes.txt"}' }),
      sub('tool/call', { turn: 1, step: 1, callId: 'k2', name: 'run_command', arguments: '{"command": "make -n"}' }),
    ]);
    await expect.poll(() => card.locator('.subagent-call-name').allTextContents()).toEqual(['read_file', 'run_command']);
    expect(await card.locator('.subagent-facts').textContent()).toBe('explore · step 1/30 · 2 tool calls');
    // The child's permission question comes through the parent: its card names the child, and the
    // child's call on the nested card says it asks.
    await w.host({ type: 'actions', actions: [{ kind: 'permission', request: { sessionId: S, callId: 'k2', tool: 'run_command', title: 'Subagent “find the build tool”: Run make -n', arguments: { command: 'make -n' }, preview: { command: 'make -n', cwd: '/w' }, subagent: { childId: 'kid', callId: 'p1', description: 'find the build tool' } } }] });
    await expect.poll(() => page().locator('.permission .permission-subagent').textContent()).toBe('Asked by the subagent “find the build tool”');
    expect(await card.locator('.subagent-call.awaiting-permission .subagent-call-note').textContent()).toBe('waits for your answer');
    await w.shot('subagent-running');
    await w.actions([
      { kind: 'permissionDone', callId: 'k2' },
      sub('tool/result', { turn: 1, step: 1, callId: 'k1', message: { id: 'r1', role: 'tool', content: [{ type: 'tool-result', toolCallId: 'k1', content: [] }], source: { kind: 'tool' } } }),
      sub('tool/result', { turn: 1, step: 1, callId: 'k2', error: { code: 'REJECTED' }, message: { id: 'r2', role: 'tool', content: [], source: { kind: 'tool' } } }),
      ev('subagent/finished', { callId: 'p1', childId: 'kid', status: 'completed', summary: 'It builds with make.' }, 3),
      ev('tool/result', { turn: 1, step: 1, callId: 'p1', name: 'run_subagent', message: { id: 'r3', role: 'tool', content: [{ type: 'tool-result', toolCallId: 'p1', content: [{ type: 'text', text: 'It builds with make.' }] }], source: { kind: 'tool' } } }, 4),
    ]);
    await expect.poll(() => card.locator('.subagent-state').textContent()).toBe('done');
    expect(await card.locator('.subagent-call-mark').allTextContents()).toEqual(['✓', '✗']);
    expect(await card.locator('.subagent-call-note').textContent()).toBe('rejected');
    expect(await card.locator('.subagent-summary-text').textContent()).toBe('It builds with make.');
    // Whatever the person chose (open) stays across its updates.
    expect(await card.evaluate((d) => (d as HTMLDetailsElement).open)).toBe(true);
    const box = (await card.boundingBox())!;
    expect(box.x + box.width).toBeLessThanOrEqual(300);
    await w.shot('subagent-done');
    expect(w.errors).toEqual([]);
  });

  it('a subagent replayed from a transcript page: closed, from the call and its result; then its steps from the child\'s own transcript', async () => {
    const page1: TranscriptPage = { lastSeq: 9, hasMore: false, turns: [{ turn: 1, startSeq: 0, startedAt: 0, items: [
      { type: 'tool', seq: 2, step: 1, callId: 'q1', name: 'run_subagent', arguments: JSON.stringify({ description: 'count the tests' }),
        result: { seq: 8, output: '[The subagent stopped before finishing: its step cap.]\n12 so far', isError: true, error: { code: 'SUBAGENT_STOPPED' }, meta: { childId: 'kid2', status: 'budget' } } },
    ] }] };
    await w.snapshot(reduceAll(emptyModel(S), [{ kind: 'transcript', page: page1, older: false }]), ready);
    const card = page().locator('details.subagent[data-call-id="q1"]');
    await expect.poll(() => card.count()).toBe(1);
    expect(await card.evaluate((d) => (d as HTMLDetailsElement).open)).toBe(false);
    expect(await card.locator('.subagent-state').textContent()).toBe('stopped at its step cap');
    await card.locator('summary').click();
    expect(await card.locator('.subagent-quiet').textContent()).toBe('Its steps are in its own session.');
    const child: TranscriptPage = { lastSeq: 5, hasMore: false, turns: [{ turn: 1, startSeq: 0, startedAt: 0, items: [
      { type: 'tool', seq: 2, step: 1, callId: 'c1', name: 'find_files', arguments: '{"glob": "tests/**/*.py"}', result: { seq: 3, output: 'x' } },
    ] }] };
    await w.actions([{ kind: 'subagentTranscript', callId: 'q1', page: child }]);
    await expect.poll(() => card.locator('.subagent-call-args').allTextContents()).toEqual(['tests/**/*.py']);
    expect(await card.locator('.subagent-summary-label').textContent()).toBe('What it gave back');
    expect(w.errors).toEqual([]);
  });
});
