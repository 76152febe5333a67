// A fork in the chat webview (headless Chromium, the shipped bundle): its line says where it came
// from with Open original, the header carries a fork badge (the original on hover).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { emptyModel, reduceAll, type Action } from '../src/protocol/reducer';
import { ev, haveBrowser, S, turnActions, WebviewPage } from './browserPage';

const w = new WebviewPage();
const page = () => w.page;

describe.skipIf(!haveBrowser)('a fork in Chromium', () => {
  beforeAll(async () => { await w.open({ width: 300, height: 500 }); });
  afterAll(async () => { await w.close(); });

  it('"Forked from «title» at turn N" with Open original; a fork badge beside the title, the original on hover', async () => {
    const forkOf = { sessionId: 'orig-7', atTurn: 1, title: 'Fix the flaky parser test' };
    const m = reduceAll(emptyModel(S), [
      ...turnActions(1, 0, 'Done.'),
      ev('session/notice', { kind: 'fork', level: 'info', message: 'Forked from «Fix the flaky parser test» at turn 1.', forkOf }, 5),
      { kind: 'attached', result: { sessionId: S, status: 'idle', lastSeq: 5, inbox: { nextTurn: [], nextStep: [] }, title: 'Fix the flaky parser test (fork)' } } as Action,
    ]);
    await w.snapshot(m);
    const badge = page().locator('.fork-badge');
    await expect.poll(() => page().evaluate(() => document.body.innerText), { timeout: 3000 }).toContain('Forked from');
    await expect.poll(() => badge.isVisible()).toBe(true);
    expect(await badge.textContent()).toBe('fork');
    expect(await badge.getAttribute('title')).toBe('Forked from «Fix the flaky parser test» at turn 1');
    const line = page().locator('.notice.topic-fork');
    expect(await line.locator('.notice-text').textContent()).toBe('Forked from «Fix the flaky parser test» at turn 1.');
    // The title stays on one line and the badge inside the view.
    expect((await badge.boundingBox())!.x + (await badge.boundingBox())!.width).toBeLessThanOrEqual(300);
    await w.shot('fork-01-line-and-badge');
    await w.clearPosted();
    await line.getByRole('button', { name: 'Open original' }).click();
    expect(await w.posted()).toEqual([{ type: 'openSession', sessionId: 'orig-7' }]);
    // Another session without a fork line: no badge.
    await w.snapshot(reduceAll(emptyModel('other'), [...turnActions(1, 0, 'Hi.').map((a) => a.kind === 'event' ? { ...a, event: { ...a.event, sessionId: 'other' } } : a)]));
    await expect.poll(() => badge.isVisible()).toBe(false);
    expect(w.errors).toEqual([]);
  });
});
