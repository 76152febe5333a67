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

const FIXTURES = join(__dirname, '..', '..', '..', 'tests', 'fixtures', 'events');

interface Fixture {
  scenario: string;
  sessionId: string;
  attachedAt: number | null;
  events: { type: string; data: unknown; seq?: number }[];
  expected: Expected;
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
      transcript.push({ type: 'user', text: it.message.content.filter((b) => b.type === 'text').map((b) => (b as { text: string }).text).join('') });
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

  it('a reducer that disagrees with a recording is caught', () => {
    const f = load('simple-turn.json');
    const last = f.expected.transcript[f.expected.transcript.length - 1];
    last.text = String(last.text) + ' (not what was streamed)';
    expect(shownState(replay(emptyModel(f.sessionId), actionsOf(f)))).not.toEqual(f.expected);
  });
});
