// What the panel says of a whole session, against the REAL daemon (issue 36's leftovers): a model
// change's "Model: …" line after a reload (a `session/settings` item of the transcript page), /cost
// as the daemon's sum over every turn (`dsh/session/usage`, also those the panel does not hold), and
// a failed turn's log block with the provider's answer body (`error.providerBody`, its key redacted).
import { describe, expect, it } from 'vitest';
import { ComposerActions, type ComposerPanel } from '../src/composerActions';
import { costWords, heldUsage } from '../src/costWords';
import { TurnFailureLog } from '../src/outputLog';
import type { HostToWebview } from '../src/protocol/panelMessages';
import { emptyModel, reduce, type SessionModel } from '../src/protocol/reducer';
import type { AnyEvent } from '../src/protocol/types';
import { textReply } from './fakeProvider';
import { realDaemons, type TestDaemon } from './daemon';

const real = realDaemons();
const daemon = (dirs?: { state: string; root: string }): Promise<TestDaemon> => real.daemon(dirs);

const idleAfter = (d: TestDaemon, s: string, turns: number) => () =>
  d.of(s, 'turn/end').length >= turns && (d.of(s, 'agent/status').at(-1)?.data as any)?.status === 'idle';

async function runTurn(d: TestDaemon, s: string, text: string): Promise<void> {
  const done = d.of(s, 'turn/end').length;
  await d.client.followup(s, text);
  await d.waitFor(idleAfter(d, s, done + 1), 'turn end');
}

const modelLines = (m: SessionModel) => m.items.flatMap((i) => (i.kind === 'notice' && i.text.startsWith('Model: ') ? [i.text] : []));

describe('session figures against the real daemon', () => {
  it('a model change is the same "Model: …" line live and after a reload', async () => {
    const d = await daemon();
    real.fake.script(textReply('one'), textReply('two'));
    const { sessionId } = await d.client.newSession({ cwd: d.root });
    let live = emptyModel(sessionId);
    d.client.onEvent((e) => { live = reduce(live, { kind: 'event', event: e }); });
    await d.client.setModel(sessionId, { model: 'deepseek-v4-pro', reasoningEffort: 'max' });
    await runTurn(d, sessionId, 'first');
    await d.client.setModel(sessionId, { reasoningEffort: 'high' });
    await runTurn(d, sessionId, 'second');
    const page = await d.client.transcript(sessionId, {});
    const reloaded = reduce(emptyModel(sessionId), { kind: 'transcript', page, older: false });
    const lines = ['Model: deepseek-v4-pro, max effort', 'Model: deepseek-v4-pro, high effort'];
    expect(modelLines(live)).toEqual(lines);
    expect(modelLines(reloaded)).toEqual(lines);
    // Where they stand: the first before turn 1's prompt, the second after turn 1's end.
    const kinds = reloaded.items.map((i) => (i.kind === 'notice' && i.text.startsWith('Model: ') ? 'model' : i.kind));
    expect(kinds.indexOf('model')).toBeLessThan(kinds.indexOf('user'));
    expect(kinds.indexOf('model', kinds.indexOf('model') + 1)).toBe(kinds.indexOf('turnEnd') + 1);
    // The live events after the page are the same items (by seq), and the page said the session's choice.
    const replayed = d.of(sessionId, 'session/settings').reduce((m, e) => reduce(m, { kind: 'event', event: e }), reloaded);
    expect(modelLines(replayed)).toEqual(lines);
    expect(reloaded.modelChoice).toEqual({ model: 'deepseek-v4-pro', reasoningEffort: 'high' });
  });

  it('/cost is the daemon\'s sum over every turn, also those the panel does not hold', async () => {
    const d = await daemon();
    real.fake.script(textReply('one'), textReply('two'), textReply('three'));
    const { sessionId } = await d.client.newSession({ cwd: d.root });
    for (const text of ['a', 'b', 'c']) await runTurn(d, sessionId, text);
    // A reloaded panel holding only the newest turn (a page of one).
    const page = await d.client.transcript(sessionId, { limit: 1 });
    const model = reduce(emptyModel(sessionId), { kind: 'transcript', page, older: false });
    expect(heldUsage(model).turns).toBe(1);
    const posted: HostToWebview[] = [];
    const panel = { model, daemonClient: d.client, post: (m: HostToWebview) => posted.push(m) } as unknown as ComposerPanel;
    await new ComposerActions(panel).cost();
    const usages = d.of(sessionId, 'turn/usage').map((e) => (e.data as any).usage);
    expect(usages).toHaveLength(3);
    const sum = (k: string) => usages.reduce((n, u) => n + (u[k] ?? 0), 0);
    const answer = await d.client.sessionUsage(sessionId);
    expect(answer.turns).toBe(3);
    expect(answer.usage.inputTokens).toBe(sum('inputTokens'));
    expect(answer.usage.outputTokens).toBe(sum('outputTokens'));
    expect(answer.costUsd).toBeCloseTo(sum('costUsd'), 12);
    expect(posted).toEqual([{ type: 'note', text: costWords(answer) }]);
    expect(costWords(answer)).toMatch(/^Cost: \$\S+ · 36 input tokens \(0 cached\), 9 output, over 3 turns\.$/);
    // A daemon without the method: the turns the panel holds, said as such.
    const older = { ...d.client, features: { ...d.client.features, sessionUsage: undefined } };
    await new ComposerActions({ ...panel, daemonClient: older } as unknown as ComposerPanel).cost();
    expect(posted.at(-1)).toEqual({ type: 'note', text: costWords(heldUsage(model)) });
  });

  it('/cost says the subagents\' part apart, also before the session\'s own first turn', () => {
    const sub = { sessions: 2, turns: 3, usage: { inputTokens: 1200, outputTokens: 80 }, costUsd: 0.00042, unpricedTurns: 0 };
    const own = { turns: 1, usage: { inputTokens: 30, outputTokens: 5 }, costUsd: 0.000011, unpricedTurns: 0 };
    expect(costWords({ ...own, subagents: sub })).toBe(
      'Cost: $0.000011 · 30 input tokens (0 cached), 5 output, over 1 turn. Subagents: $0.00042 · 1,200 input, 80 output, over 3 turns in 2 sessions.');
    expect(costWords({ ...own, turns: 0, subagents: { ...sub, sessions: 1, turns: 1, costUsd: null } })).toBe(
      'Cost: nothing yet (no turn has reported its usage). Subagents: cost not known · 1,200 input, 80 output, over 1 turn in 1 session.');
    expect(costWords(own)).not.toContain('Subagents');
  });

  it('a failed turn\'s log block has the provider\'s body, without the key the daemon sent', async () => {
    const d = await daemon();
    const body = { error: { message: 'Authentication Fails, your api key sk-test-0000 is invalid', type: 'authentication_error', param: null, code: 'invalid_request_error' } };
    real.fake.script({ chunks: [], status: 401, errorBody: body });
    const { sessionId } = await d.client.newSession({ cwd: d.root });
    const log = new TurnFailureLog();
    const lines: string[] = [];
    d.client.onEvent((e: AnyEvent) => { lines.push(...log.lines(e)); });
    await runTurn(d, sessionId, 'go');
    const end = d.of(sessionId, 'turn/end')[0].data as any;
    // On the wire: the body as sent, the key replaced by the daemon (not the panel's own redaction).
    expect(end.reason.error.providerBody).toBe(JSON.stringify(body).replace('sk-test-0000', '[redacted]'));
    expect(JSON.stringify(d.events)).not.toContain('sk-test-0000');
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(/^turn 1 of session \w{8} failed: AUTH: HTTP 401: Authentication Fails, your api key \[redacted\] is invalid \[status=401\]; retries: none;/);
    expect(lines[1]).toBe(`provider body:\n    ${JSON.stringify(body).replace('sk-test-0000', '[redacted]')}`);
  });
});
