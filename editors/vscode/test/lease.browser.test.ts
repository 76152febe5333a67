// Who drives the session, in the chat webview (headless Chromium, the shipped bundle): the asking
// window's wait and Take over now, the driving window's Hand over now, the lines in the transcript.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { emptyModel, reduceAll, type Action } from '../src/protocol/reducer';
import { ev, haveBrowser, S, turnActions, user, WebviewPage } from './browserPage';

const w = new WebviewPage();
const page = () => w.page;
const ready = { state: 'ready', hasKey: true, takeOver: true, handOver: true };

/** Each visible element's text and how many lines it takes, and the rightmost edge. */
async function layout(selector: string): Promise<{ lines: Array<[string | null, number]>; right: number }> {
  return page().evaluate((sel) => {
    const els = [...document.querySelectorAll<HTMLElement>(sel)].filter((b) => b.offsetParent !== null);
    return {
      lines: els.map((b) => {
        const r = document.createRange();
        r.selectNodeContents(b);
        return [b.textContent, new Set([...r.getClientRects()].map((x) => Math.round(x.top))).size] as [string | null, number];
      }),
      right: Math.max(0, ...els.map((b) => b.getBoundingClientRect().right)),
    };
  }, selector);
}

describe.skipIf(!haveBrowser)('take-over bars in Chromium', () => {
  beforeAll(async () => { await w.open({ width: 300, height: 600 }); });
  afterAll(async () => { await w.close(); });

  it('asking window: Take over, then "Waiting for the other window\'s turn to finish…" with Take over now; the driver changing is a line', async () => {
    const ro = reduceAll(emptyModel(S), [
      { kind: 'attached', result: { sessionId: S, status: 'running', lastSeq: 0, inbox: { nextTurn: [], nextStep: [] }, readOnly: true, holder: { pid: 4242, host: 'box' }, title: 'Their session' } } as Action,
      ev('turn/start', { turn: 1 }, 1), ev('user/message', user('u1', 'their prompt'), 2),
    ]);
    await w.snapshot(ro, ready);
    await expect.poll(() => page().getByRole('button', { name: 'Take over', exact: true }).isVisible()).toBe(true);
    await w.clearPosted();
    await page().getByRole('button', { name: 'Take over', exact: true }).click();
    expect(await w.posted()).toEqual([{ type: 'takeOver' }]);
    // The host answers with the model's action once the daemon took the request.
    await w.actions([{ kind: 'takeOver', force: false }]);
    await expect.poll(() => page().locator('.readonly-text').textContent()).toBe("Waiting for the other window's turn to finish…");
    expect((await layout('.readonly-bar button, .readonly-text')).lines).toEqual([["Waiting for the other window's turn to finish…", 1], ['Take over now', 1]]);
    expect((await layout('.readonly-bar button, .readonly-text')).right).toBeLessThanOrEqual(300);
    await w.shot('lease-01-waiting');
    await w.clearPosted();
    await page().getByRole('button', { name: 'Take over now' }).click();
    expect(await w.posted()).toEqual([{ type: 'takeOver', force: true }]);
    await w.actions([{ kind: 'takeOver', force: true }]);
    await expect.poll(() => page().locator('.readonly-text').textContent()).toBe("Ending the other window's turn to take over…");
    expect(await page().getByRole('button', { name: 'Take over now' }).count()).toBe(0);
    await w.actions([ev('turn/end', { turn: 1, reason: { kind: 'aborted', cause: 'handover' } }, 3), ev('session/lease', { holder: null, readOnly: false }),
      ev('session/notice', { kind: 'lease', level: 'info', message: 'dsh-daemon process 4243 on box took this chat over; it drives it from here on.' }, 4)]);
    await expect.poll(() => page().getByLabel('message').isVisible()).toBe(true);
    expect(await page().locator('.readonly-bar').isVisible()).toBe(false);
    expect(await page().locator('.notice.topic-lease').allTextContents()).toEqual(['windowThis window took the session over: it drives it from here on.']);
    expect(await page().locator('.footer').last().textContent()).toContain('stopped (handed over to another window)');
    expect(await page().evaluate(() => document.body.innerText)).not.toMatch(/4242|4243|pid|box/);
    await w.shot('lease-02-taken-over');
    expect(w.errors).toEqual([]);
  });

  it('driving window: "Another window asked to take over this session" with Hand over now; forced, no button; then a line', async () => {
    const driving = reduceAll(emptyModel(S), [...turnActions(1, 0, 'Done before.'), ev('turn/start', { turn: 2 }, 5), ev('user/message', user('u2', 'a long one'), 6)]);
    await w.snapshot(driving, ready);
    await expect.poll(() => page().getByLabel('message').isVisible()).toBe(true);
    expect(await page().locator('.handover-bar').isVisible()).toBe(false);
    await w.actions([ev('session/handover', { requester: { pid: 4243, host: 'box' }, force: false })]);
    await expect.poll(() => page().locator('.handover-bar').isVisible()).toBe(true);
    // The sentence may wrap in a 300 px sidebar; the button's label never breaks.
    expect((await layout('.handover-text')).lines.map(([t]) => t)).toEqual(['Another window asked to take over this session.']);
    expect((await layout('.handover-bar button')).lines).toEqual([['Hand over now', 1]]);
    expect((await layout('.handover-bar button, .handover-text')).right).toBeLessThanOrEqual(300);
    await w.shot('lease-03-handover-asked');
    await w.clearPosted();
    await page().getByRole('button', { name: 'Hand over now' }).click();
    expect(await w.posted()).toEqual([{ type: 'handOver' }]);
    // Asked with force instead: said, nothing to press.
    await w.actions([ev('session/handover', { requester: { pid: 4244, host: 'box' }, force: true })]);
    await expect.poll(() => page().locator('.handover-text').textContent()).toBe('Another window is taking this session over: this turn is ending.');
    expect(await page().getByRole('button', { name: 'Hand over now' }).isVisible()).toBe(false);
    await w.actions([ev('turn/end', { turn: 2, reason: { kind: 'aborted', cause: 'handover' } }, 7),
      ev('session/notice', { kind: 'lease', level: 'info', message: 'dsh-daemon process 4244 on box took this chat over; it drives it from here on.' }, 8),
      ev('session/lease', { holder: { pid: 4244, host: 'box' }, readOnly: true })]);
    await expect.poll(() => page().locator('.readonly-bar').isVisible()).toBe(true);
    expect(await page().locator('.handover-bar').isVisible()).toBe(false);
    expect(await page().locator('.notice.topic-lease').allTextContents()).toEqual(['windowAnother window took this session over: this window follows it from here on.']);
    expect(await page().evaluate(() => document.body.innerText)).not.toMatch(/4243|4244|pid|box/);
    await w.shot('lease-04-handed-over');
    expect(w.errors).toEqual([]);
  });
});
