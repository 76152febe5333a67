// One event semantics for every client (issue 19.4): the event sequences recorded from the real daemon
// in tests/fixtures/events (see its README) replayed through the reducer the extension host and the
// webview both run must end where the daemon ended: the same transcript, turn ends, queue, status and
// token counts. The webview's own path is replayed too: a snapshot of the host model at every point
// (cloned, as postMessage clones it) followed by the rest as action batches.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { emptyModel, reduce, assistantText, type Action, type SessionModel } from '../src/protocol/reducer';
import type { AnyEvent } from '../src/protocol/types';
import { resultNote } from '../webview/items';
import { ReviewFindings } from '../src/reviewFindings';
import type { DshClient } from '../src/protocol/client';

const FIXTURES = join(__dirname, '..', '..', '..', 'tests', 'fixtures', 'events');

interface Fixture {
  scenario: string;
  sessionId: string;
  attachedAt: number | null;
  events: { type: string; data: unknown; seq?: number }[];
  expected: Expected;
  expectedPlan?: { steps: { title: string; status: string }[]; note?: string } | null;
  expectedProcesses?: Record<string, unknown>[];
  expectedHooks?: { failed: { hook: string; event: string }[]; untrusted: Record<string, unknown> | null };
  expectedFindings?: { findingId: string }[];
  expectedTurnDiff?: Record<string, unknown>;
  expectedSubagents?: Record<string, unknown>[];
}
interface Expected {
  status: 'idle' | 'running';
  queue: { nextTurn: string[]; nextStep: string[] };
  transcript: Record<string, unknown>[];
  turnEnds: string[];
  usage: { inputTokens: number; outputTokens: number };
}

function load(name: string): Fixture {
  return JSON.parse(readFileSync(join(FIXTURES, name), 'utf8')) as Fixture;
}

/** The fixture's events as the panel dispatches them: each `dsh/event` notification becomes one action. */
function actionsOf(f: Fixture): Action[] {
  return f.events.map((e) => ({ kind: 'event', event: { sessionId: f.sessionId, ...e } as AnyEvent }));
}

/** What the model shows, in the fixture's terms (README: `expected`). */
function shownState(m: SessionModel): Expected {
  const transcript: Record<string, unknown>[] = [];
  const turnEnds: string[] = [];
  for (const it of m.items) {
    if (it.kind === 'user') {
      if (it.message.source.kind !== 'user') continue; // editor context and notices are not listed
      // A review's prompt (the panel words it "Review uncommitted changes"): listed as its command (README).
      const review = (it.message.source as { review?: { target?: { kind?: string; ref?: string }; instructions?: string } }).review;
      transcript.push({ type: 'user', text: review ? typedReview(review) : it.message.content.filter((b) => b.type === 'text').map((b) => (b as { text: string }).text).join('') });
    } else if (it.kind === 'assistant') {
      const { text, reasoning } = assistantText(it);
      if (!text && !reasoning && !it.interrupted) continue; // an empty anchor shows nothing
      transcript.push({ type: 'assistant', text, ...(reasoning ? { reasoning } : {}), ...(it.interrupted ? { interrupted: true } : {}) });
    } else if (it.kind === 'tool') {
      const result = it.status === 'ok' ? 'ok' : it.status === 'error' ? 'error' : null;
      // What the card says the language server told the agent (the webview's note, without its mark).
      const note = it.status === 'ok' ? resultNote(it.meta)?.text.replace(/^⚠ /, '') : undefined;
      transcript.push({ type: 'tool', callId: it.callId, name: it.name, result, ...(note ? { note } : {}) });
    } else if (it.kind === 'turnEnd') {
      turnEnds.push(it.reason.kind);
    }
  }
  let inputTokens = 0;
  let outputTokens = 0;
  for (const u of Object.values(m.turnUsage)) { inputTokens += u.inputTokens ?? 0; outputTokens += u.outputTokens ?? 0; }
  return {
    status: m.status,
    queue: { nextTurn: m.inbox.nextTurn.map((x) => x.id), nextStep: m.inbox.nextStep.map((x) => x.id) },
    transcript, turnEnds, usage: { inputTokens, outputTokens },
  };
}

/** A review's prompt as the command that started it (dsh_daemon/model/review.py `typed_review`). */
function typedReview(r: { target?: { kind?: string; ref?: string }; instructions?: string }): string {
  const parts = ['/review'];
  const t = r.target;
  if ((t?.kind === 'base' || t?.kind === 'commit') && t.ref) parts.push(t.kind, t.kind === 'commit' ? t.ref.slice(0, 12) : t.ref);
  if (r.instructions) parts.push(r.instructions);
  return parts.join(' ');
}

/** The session's background processes as the panel's strip shows them (README: `expectedProcesses`). */
function shownProcesses(m: SessionModel): Record<string, unknown>[] {
  return m.processes.map((p) => {
    const row: Record<string, unknown> = { processId: p.processId, name: p.name, command: p.command, confined: p.confined, running: p.running };
    for (const key of ['exitCode', 'signal', 'stoppedBy'] as const) if (p[key] !== undefined && p[key] !== null) row[key] = p[key];
    return row;
  });
}

/** What the panel shows of the session's hooks: a line per failed hook, the bar asking for trust. */
function shownHooks(m: SessionModel): Fixture['expectedHooks'] {
  const failed = m.items.filter((it) => it.kind === 'notice' && it.topic === 'hook')
    .map((it) => { const [, event, hook] = it.id.split(':'); return { hook, event }; });
  const u = m.hooksUntrusted;
  return { failed, untrusted: u ? { root: u.root, path: u.path, events: u.events, hooks: u.hooks } : null };
}

/** The fixture's events through the Problems panel's findings (src/reviewFindings.ts), as the session
 *  shown from its start: the daemon's list was empty then (the recording is the daemon). */
async function shownFindings(f: Fixture): Promise<string[]> {
  const listeners: ((e: AnyEvent) => void)[] = [];
  const client = {
    features: { review: true },
    onEvent: (cb: (e: AnyEvent) => void) => { listeners.push(cb); return { dispose: () => {} }; },
    reviewList: async () => ({ findings: [], reviews: [] }),
  } as unknown as DshClient;
  const review = new ReviewFindings({ ask: async () => {}, log: () => {} });
  try {
    await review.show(client, f.sessionId, '/state/work');
    for (const e of f.events) for (const cb of listeners) cb({ sessionId: f.sessionId, ...e } as AnyEvent);
    return review.findings().map((x) => x.findingId);
  } finally {
    review.dispose();
  }
}

function replay(model: SessionModel, actions: Action[]): SessionModel {
  let m = model;
  for (const a of actions) m = reduce(m, a);
  return m;
}

const files = readdirSync(FIXTURES).filter((n) => n.endsWith('.json')).sort();

describe('event fixtures (tests/fixtures/events) replayed through the VS Code reducer', () => {
  it('finds the recorded scenarios', () => {
    expect(files.length).toBeGreaterThanOrEqual(8);
  });

  for (const name of files) {
    it(`${name.replace(/\.json$/, '')}: the host model ends where the daemon ended`, () => {
      const f = load(name);
      const m = replay(emptyModel(f.sessionId), actionsOf(f));
      expect(shownState(m)).toEqual(f.expected);
    });

    const extras = load(name);
    if (extras.expectedPlan !== undefined) {
      it(`${name.replace(/\.json$/, '')}: the plan the panel shows is the daemon's`, () => {
        const f = load(name);
        const m = replay(emptyModel(f.sessionId), actionsOf(f));
        const plan = m.plan && m.plan.steps.length ? { steps: m.plan.steps.map((s) => ({ title: s.title, status: s.status })), ...(m.plan.note ? { note: m.plan.note } : {}) } : null;
        expect(plan).toEqual(f.expectedPlan);
      });
    }
    if (extras.expectedTurnDiff || extras.expectedSubagents) {
      it(`${name.replace(/\.json$/, '')}: its turn diff and subagent cards as the daemon says`, () => {
        const f = load(name);
        const m = replay(emptyModel(f.sessionId), actionsOf(f));
        if (f.expectedTurnDiff) expect(m.turnDiff).toEqual(f.expectedTurnDiff);
        if (f.expectedSubagents) {
          const cards = m.items.flatMap((it) => it.kind === 'tool' && it.subagent ? [{
            callId: it.callId, childId: it.subagent.childId, description: it.subagent.description,
            tools: it.subagent.calls.map((c) => ({ name: c.name, result: c.status === 'ok' ? 'ok' : c.status === 'error' ? 'error' : null })),
            status: it.subagent.status, summary: it.subagent.summary,
          }] : []);
          expect(cards).toEqual(f.expectedSubagents);
        }
      });
    }
    if (extras.expectedProcesses || extras.expectedHooks || extras.expectedFindings) {
      it(`${name.replace(/\.json$/, '')}: its processes, hooks and review findings as the daemon says`, async () => {
        const f = load(name);
        const m = replay(emptyModel(f.sessionId), actionsOf(f));
        if (f.expectedProcesses) expect(shownProcesses(m)).toEqual(f.expectedProcesses);
        if (f.expectedHooks) expect(shownHooks(m)).toEqual(f.expectedHooks);
        if (f.expectedFindings) expect(await shownFindings(f)).toEqual(f.expectedFindings.map((x) => x.findingId));
      });
    }

    it(`${name.replace(/\.json$/, '')}: the webview, from a snapshot at any point plus batches, agrees with the host`, () => {
      const f = load(name);
      const actions = actionsOf(f);
      const host = shownState(replay(emptyModel(f.sessionId), actions));
      for (let at = 0; at <= actions.length; at++) {
        // postMessage clones: the snapshot shares nothing with the host model, nor a batch with its actions.
        let web = structuredClone(replay(emptyModel(f.sessionId), actions.slice(0, at)));
        for (let i = at; i < actions.length; i += 3) web = replay(web, structuredClone(actions.slice(i, i + 3)));
        expect(shownState(web), `snapshot after ${at} events`).toEqual(host);
      }
    });
  }

  it('a fold that missed a dismissal or a process exit is caught', async () => {
    const review = load('review-findings-dismissed.json');
    const f = { ...review, events: review.events.filter((e) => e.type !== 'review/dismissed') };
    expect(await shownFindings(f)).not.toEqual(review.expectedFindings!.map((x) => x.findingId));
    const procs = load('background-processes.json');
    const m = replay(emptyModel(procs.sessionId), actionsOf({ ...procs, events: procs.events.filter((e) => e.type !== 'process/exited') }));
    expect(shownProcesses(m)).not.toEqual(procs.expectedProcesses);
  });

  it('a reducer that disagrees with a recording is caught', () => {
    const f = load('simple-turn.json');
    const last = f.expected.transcript[f.expected.transcript.length - 1];
    last.text = String(last.text) + ' (not what was streamed)';
    expect(shownState(replay(emptyModel(f.sessionId), actionsOf(f)))).not.toEqual(f.expected);
  });
});
