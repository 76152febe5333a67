// Inline chat's session choice and its cancel (issue 36.4), against the REAL daemon and the fake
// provider: the folder's side session (made once with its title and cwd, listed, reused, attached
// again by a new daemon), and Escape on a prompt still queued behind another turn (taken out of the
// queue), also when a turn claims it in between (that turn is stopped).
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { inlineSessionChoice, otherChoice, SideSessions, sideSessionTitle } from '../src/inlineSession';
import { cancelPrompt, ReplyTracker } from '../src/replyTracker';
import { gate, textReply } from './fakeProvider';
import { realDaemons, tempState, type TestDaemon } from './daemon';

const real = realDaemons();
const daemon = (dirs?: { state: string; root: string }): Promise<TestDaemon> => real.daemon(dirs);

/** The workspace's state, as a plain map. */
function memoryStore() {
  const data = new Map<string, any>();
  return { data, get: (k: string) => data.get(k), update: async (k: string, v: any) => { data.set(k, v); } };
}

const texts = (body: any) => JSON.stringify(body.messages);
const turnEnds = (d: TestDaemon, s: string) => d.of(s, 'turn/end').map((e) => (e.data as any).reason?.kind);

describe('where inline chat asks', () => {
  it('the setting: "side" is the side session, anything else the chat\'s; the box offers the other', () => {
    expect(inlineSessionChoice('side')).toBe('side');
    for (const v of ['current', undefined, 'Side', 3]) expect(inlineSessionChoice(v)).toBe('current');
    expect(otherChoice('current')).toBe('side');
    expect(otherChoice('side')).toBe('current');
    expect(sideSessionTitle('calc')).toBe('Inline chat — calc');
  });

  it('a side session per folder: made once in the folder with its title, listed, reused, its prompt without the main conversation', async () => {
    const d = await daemon();
    const app = join(d.root, 'app');
    mkdirSync(app);
    const store = memoryStore();
    const sides = new SideSessions(store);
    real.fake.script(textReply('main answer'), textReply('```ts\nx\n```'));
    const { sessionId: main } = await d.client.newSession({ cwd: d.root });
    await d.client.followup(main, 'the main conversation');
    await d.waitFor(() => turnEnds(d, main).length === 1, 'main turn');

    // Two inline chats asking at once get one session.
    const [side, again] = await Promise.all([sides.sessionFor(d.client, { cwd: app, name: 'app' }), sides.sessionFor(d.client, { cwd: app, name: 'app' })]);
    expect(again).toBe(side);
    expect(side).not.toBe(main);
    expect(await sides.sessionFor(d.client, { cwd: app, name: 'app' })).toBe(side);
    const other = await sides.sessionFor(d.client, { cwd: d.root, name: 'work' });
    expect(other).not.toBe(side);
    const { sessions } = await d.client.listSessions({});
    expect(sessions.find((s) => s.sessionId === side)).toMatchObject({ title: 'Inline chat — app', cwd: app });
    expect(sessions.find((s) => s.sessionId === other)?.title).toBe('Inline chat — work');

    // The chat showed it and detached it on leaving: the next use attaches it again (its events flow).
    await d.client.detach(side);
    expect(await sides.sessionFor(d.client, { cwd: app, name: 'app' })).toBe(side);
    await d.client.followup(side, 'inline prompt');
    await d.waitFor(() => turnEnds(d, side).length === 1, 'side turn');
    const request = texts(real.fake.requests.at(-1)!.body);
    expect(request).toContain('inline prompt');
    expect(request).not.toContain('the main conversation');
    expect(request).not.toContain('main answer');
    // The first prompt does not retitle it.
    expect((await d.client.listSessions({})).sessions.find((s) => s.sessionId === side)?.title).toBe('Inline chat — app');
  });

  it('a new daemon (a reloaded window) attaches the kept side session; a gone one is replaced', async () => {
    const dirs = tempState();
    const store = memoryStore();
    const first = await daemon(dirs);
    const side = await new SideSessions(store).sessionFor(first.client, { cwd: first.root, name: 'work' });
    await first.stop();
    const second = await daemon(dirs);
    const sides = new SideSessions(store);
    expect(await sides.sessionFor(second.client, { cwd: second.root, name: 'work' })).toBe(side);
    // It drives the session again: a prompt runs there.
    await second.client.followup(side, 'after the reload');
    await second.waitFor(() => turnEnds(second, side).length === 1, 'turn after reload');

    await sides.forget(side);
    const fresh = await sides.sessionFor(second.client, { cwd: second.root, name: 'work' });
    expect(fresh).not.toBe(side);
    store.data.set('dsh.inlineChat.sideSessions', { [second.root]: 'no-such-session' });
    const replaced = await new SideSessions(store).sessionFor(second.client, { cwd: second.root, name: 'work' });
    expect(replaced).not.toBe('no-such-session');
    expect(store.data.get('dsh.inlineChat.sideSessions')).toEqual({ [second.root]: replaced });
  });
});

describe('cancelling an inline prompt', () => {
  /** A turn held open by the provider, and the inline prompt queued behind it, followed by a tracker. */
  async function queuedBehind(d: TestDaemon, held: Promise<void>) {
    real.fake.script(textReply('first', { gate: held }), textReply('```ts\ninline\n```', { gate: new Promise(() => {}) }));
    const { sessionId } = await d.client.newSession({ cwd: d.root });
    await d.client.followup(sessionId, 'the running turn');
    await real.fake.waitRequests(1);
    const tracker = new ReplyTracker();
    d.client.onEvent(tracker.take);
    const { messageId } = await d.client.followup(sessionId, 'inline prompt');
    tracker.expect(sessionId, messageId);
    return { sessionId, messageId, tracker };
  }

  it('a prompt still queued is taken out of the queue; the running turn goes on', async () => {
    const d = await daemon();
    const held = gate();
    const { sessionId, messageId, tracker } = await queuedBehind(d, held.promise);
    const stopped: string[] = [];
    const how = await cancelPrompt({ sessionId, messageId }, tracker, {
      unqueue: async (s, m) => (await d.client.inboxRemove(s, m)).removed,
      stop: async (s) => { stopped.push(s); },
      log: () => undefined,
    });
    expect(how).toBe('unqueued');
    expect(stopped).toEqual([]);
    expect(await d.client.inboxList(sessionId)).toMatchObject({ nextTurn: [], nextStep: [] });
    held.open();
    await d.waitFor(() => turnEnds(d, sessionId).length === 1, 'the running turn');
    expect(turnEnds(d, sessionId)).toEqual(['completed']);
    // The prompt never ran: one model request only.
    expect(real.fake.requests.length).toBe(1);
  });

  it('a prompt a turn claims in between: the removal finds nothing and that turn is stopped', async () => {
    const d = await daemon();
    const held = gate();
    const { sessionId, messageId, tracker } = await queuedBehind(d, held.promise);
    let removed: boolean | undefined;
    const how = await cancelPrompt({ sessionId, messageId }, tracker, {
      // The running turn ends and the next one claims the prompt before the removal arrives.
      unqueue: async (s, m) => {
        held.open();
        await real.fake.waitRequests(2);
        removed = (await d.client.inboxRemove(s, m)).removed;
        return removed;
      },
      stop: async (s) => { await d.client.cancel(s, true, 'user'); },
      log: () => undefined,
    });
    expect(removed).toBe(false);
    expect(how).toBe('stopped');
    await d.waitFor(() => turnEnds(d, sessionId).length === 2, 'the prompt\'s turn stopped');
    expect(turnEnds(d, sessionId)).toEqual(['completed', 'aborted']);
  });
});
