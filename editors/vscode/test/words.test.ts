// Words, not codes, against the REAL daemon: a call refused in Plan mode, a fork's row in the session
// lists, a failed turn's "(after N retries)" after a reload and its one line in the output log.
import { describe, expect, it } from 'vitest';
import { emptyModel, reduce, type TurnEndItem } from '../src/protocol/reducer';
import type { AnyEvent } from '../src/protocol/types';
import { TurnFailureLog } from '../src/outputLog';
import { sessionPickRow } from '../src/sessionRows';
import { nodeLook, sessionTree } from '../src/sessionsTree';
import { toolOutcomeLook } from '../webview/toolWords';
import { errorReply, textReply, toolReply } from './fakeProvider';
import { realDaemons, type TestDaemon } from './daemon';

const real = realDaemons();
const daemon = (dirs?: { state: string; root: string }): Promise<TestDaemon> => real.daemon(dirs);

const idleAfter = (d: TestDaemon, s: string, turns: number) => () =>
  d.of(s, 'turn/end').length >= turns && (d.of(s, 'agent/status').at(-1)?.data as any)?.status === 'idle';

describe('words against the real daemon', () => {
  it('a write refused in Plan mode is "not allowed in Plan mode", quiet, live and from a reloaded transcript', async () => {
    const d = await daemon();
    real.fake.script(toolReply([{ id: 'call_w', name: 'write_file', args: { path: `${d.root}/a.txt`, content: 'x' } }]), textReply('planning'));
    const { sessionId } = await d.client.newSession({ cwd: d.root });
    await d.client.setMode(sessionId, 'plan');
    let live = emptyModel(sessionId);
    d.client.onEvent((e) => { live = reduce(live, { kind: 'event', event: e }); });
    await d.client.followup(sessionId, 'write it');
    await d.waitFor(idleAfter(d, sessionId, 1), 'turn end');
    const page = await d.client.transcript(sessionId, {});
    const reloaded = reduce(emptyModel(sessionId), { kind: 'transcript', page, older: false });
    for (const m of [live, reloaded]) {
      const tool = m.items.find((i) => i.kind === 'tool');
      expect(tool?.kind === 'tool' && toolOutcomeLook(tool)).toEqual({ cls: 'denied', badge: 'not allowed', summary: 'what the agent was told', why: 'Not allowed in Plan mode' });
    }
  });

  it('a fork says what it was forked from in the quick pick and the Sessions view', async () => {
    const d = await daemon();
    real.fake.script(textReply('one'));
    const { sessionId } = await d.client.newSession({ cwd: d.root, title: 'Work' });
    await d.client.followup(sessionId, 'first');
    await d.waitFor(idleAfter(d, sessionId, 1), 'turn end');
    const { sessionId: forkId } = await d.client.fork(sessionId, 1);
    const { sessions } = await d.client.listSessions({});
    const fork = sessions.find((s) => s.sessionId === forkId)!;
    const original = sessions.find((s) => s.sessionId === sessionId)!;
    expect(sessionPickRow(fork, sessionId).label).toBe('$(repo-forked) Work (fork)');
    expect(sessionPickRow(fork, sessionId).description).toMatch(/^fork of «Work» · idle · /);
    expect(sessionPickRow(original, sessionId).label).toBe('Work');
    const rows = sessionTree(sessions).map((n) => nodeLook(n).description);
    expect(rows.sort()).toEqual(['', 'fork of «Work»']);
  });

  it('a failed turn: "(after 2 retries)" also after a reload, and one log line with its code, retries and the provider\'s words', async () => {
    const d = await daemon();
    real.fake.script(errorReply(503, 'upstream busy'), errorReply(503, 'upstream busy'), errorReply(400, 'bad request: key sk-live-abcdef123456 rejected'));
    const { sessionId } = await d.client.newSession({ cwd: d.root });
    const log = new TurnFailureLog();
    const lines: string[] = [];
    const seen: AnyEvent[] = [];
    d.client.onEvent((e) => { seen.push(e); lines.push(...log.lines(e)); });
    await d.client.followup(sessionId, 'go');
    await d.waitFor(idleAfter(d, sessionId, 1), 'turn end', 30000);
    // A reattach replays the same events: the failure is still logged once.
    for (const e of seen.filter((x) => x.sessionId === sessionId)) lines.push(...log.lines(e));
    expect(lines).toHaveLength(2); // the line, then the provider's body (its own entry)
    expect(lines[0]).toMatch(/^turn 1 of session \w{8} failed: INVALID_REQUEST: HTTP 400: bad request: key sk-…\(redacted\) rejected/);
    expect(lines[0]).toMatch(/retries: #1 after \d\.\d s \(SERVER 503\), #2 after \d(\.\d)? s \(SERVER 503\)/);
    expect(lines[0]).toContain('the provider said: "HTTP 503: upstream busy" | "HTTP 400: bad request: key sk-…(redacted) rejected"');
    expect(lines[0]).not.toContain('abcdef123456');
    expect(lines[1]).toMatch(/^provider body:\n {4}\{"error":\{"message":"bad request: key sk-…\(redacted\) rejected"/);
    expect(lines[1]).not.toContain('abcdef123456');
    const page = await d.client.transcript(sessionId, {});
    const reloaded = reduce(emptyModel(sessionId), { kind: 'transcript', page, older: false });
    const end = reloaded.items.find((i) => i.kind === 'turnEnd') as TurnEndItem;
    expect(end.reason.kind).toBe('error');
    expect(end.retries).toBe(2);
  });
});
