// A reducer from daemon events (and a few local actions) to the model a chat panel renders. Shared by
// the extension host, the webview and the tests. The model is plain JSON.
//
// Cost does not grow with the session: an action changes items in place (an updated item is a new
// object with a new rev, put at its old position; a new one is pushed), so a streamed delta costs the
// same with 20 items or 20,000. The model a reduce returns is a new shell, but it shares `items`,
// `index`, `via` and `turnUsage` with the version it came from: only the newest version may be read
// (every caller replaces its model with the result). Items are in turn order (every item has the
// turn it belongs to), so the oldest turns can be dropped from the front (`trim`).
import type {
  AnyEvent, AttachResult, ForkOrigin, HooksUntrusted, Inbox, InboxItem, PermissionRequest, Plan, ProcessInfo, SandboxStatus, StreamDelta, ToolError, ToolResultMeta,
  TranscriptPage, TranscriptTurn, TurnDiffSummary, TurnEndReason, Usage, UserMessage,
} from './types';
import { textOf } from './types';
import { handoverRequested, LEASE_NOTICE, leaseChanged, leaseNoticed, leaseSettled, takeOverAsked, turnEnded, type LeaseState } from './lease';
import { callStatus, subagentEvent, subagentFinished, subagentFromCall, subagentFromTranscript, subagentStarted, type SubagentState } from './subagents';

export type Via = 'followup' | 'steer' | 'inject' | 'context';

/** How a prompt reached the turn, when it did not simply start it: sent as a steer (or injected) into a
 *  running turn, or queued behind one (or parked) before it ran; `rewound`: a restored checkpoint took
 *  its turn out of what the model sees (`conversation/cut`). */
export type PromptTag = 'steer' | 'inject' | 'queued' | 'rewound';
export interface UserItem { id: string; kind: 'user'; rev: number; turn: number; message: UserMessage; tags?: PromptTag[] }
export interface AssistantItem {
  id: string; kind: 'assistant'; rev: number; turn: number; step: number;
  /** Text/reasoning confirmed by durable chunks (or the final message). */
  text: string; reasoning: string;
  /** Streamed live deltas not yet covered by a durable chunk. */
  liveText: string; liveReasoning: string;
  /** Where the live tail starts within its block (UTF-16 code units), when the daemon sends delta
   *  offsets; normally the durable length (a larger value: deltas after a gap a chunk will fill). */
  liveTextAt?: number; liveReasoningAt?: number;
  done: boolean; interrupted: boolean;
  /** Model requests of this step that failed and were retried (the step's text restarts with each). */
  retry?: RetryState;
}
/** The latest `llm/retry` of a step: `waiting` until the step streams again (`recovered`) or the turn
 *  ends in an error (`failed`, told by the turn's error block). */
export interface RetryState { retry: number; delayMs: number; code: string; message: string; status?: number; state: 'waiting' | 'recovered' | 'failed' }
/** A step's retries before any of its text arrived: one line, updated in place. */
export interface RetryItem { id: string; kind: 'retry'; rev: number; turn: number; step: number; retry: RetryState }
export type ToolStatus = 'pending' | 'awaiting-permission' | 'running' | 'ok' | 'error';
export interface ToolItem {
  id: string; kind: 'tool'; rev: number; turn: number; step: number; callId: string; name: string;
  args: unknown; status: ToolStatus; output: string; result: string; error?: ToolError; meta?: ToolResultMeta;
  synthetic?: boolean;
  /** A `run_subagent` call: its child as the nested card shows it (from the subagent events). */
  subagent?: SubagentState;
}
export interface TurnEndItem {
  id: string; kind: 'turnEnd'; rev: number; turn: number; reason: TurnEndReason; usage?: Usage;
  /** How many times the failing step was retried before the turn gave up. */
  retries?: number;
}
export interface NoticeItem {
  id: string; kind: 'notice'; rev: number; turn: number; level: 'info' | 'warning' | 'error'; text: string; code?: string;
  /** What the notice is about, when it is one of the daemon's words about the session (`session/notice`'s
   *  kind: `sandbox`, `mcp`) or a hook that failed (`hook`). */
  topic?: string;
  /** Told again by the turn's own error block: not shown on its own. */
  folded?: boolean;
  /** A fork's line: the session it was made from (Open original). */
  forkOf?: ForkOrigin;
}
export type Item = UserItem | AssistantItem | ToolItem | TurnEndItem | NoticeItem | RetryItem;

export interface SessionModel {
  sessionId: string | null;
  /** Highest durable seq applied; -1 before any. */
  lastSeq: number;
  status: 'idle' | 'running';
  readOnly: boolean;
  /** The session's title: from the attach reply (newer daemons) and `session/title` events; absent
   *  (nothing shown) while the session has none or the daemon does not say. */
  title?: string;
  items: Item[];
  /** id -> position in items. Append-only and shared between versions of one session's model (a
   *  version ignores positions past its own items), so an update never copies it. */
  index: Record<string, number>;
  inbox: Inbox;
  via: Record<string, Via>;
  permissions: PermissionRequest[];
  /** Per-turn usage, written once per turn; shared between versions like `index`. */
  turnUsage: Record<number, Usage>;
  currentTurn: number;
  lastTurnEnd?: TurnEndReason;
  /** When the items start at a transcript page and older turns remain on the daemon: the `beforeTurn`
   *  of the next older page; null when the items hold the whole session. */
  olderBefore: number | null;
  /** The session's mode (daemons with `modes`): from the attach reply and `session/mode` events. */
  mode?: 'ask' | 'accept-edits' | 'plan';
  /** The session's own model and effort (`session/settings`; absent fields: the daemon's configuration). */
  modelChoice?: { model?: string; reasoningEffort?: string };
  /** The last step's input tokens and the model's context window (`context/usage`). */
  context?: { used: number; window: number | null };
  /** Pending items as they were when a turn claimed them (removed when their user/message comes),
   *  and ids queued while a turn ran: what tags a prompt in the transcript. Shared like `index`. */
  claims: Record<string, { verb?: string; target: string; queued: boolean }>;
  queuedIds: Record<string, true>;
  /** Where the session's commands run: the last `sandbox/status` (live, or the attach reply's). */
  sandbox?: SandboxStatus;
  /** The agent's current plan (absent: none, or cleared). */
  plan?: Plan;
  /** The plans seen, oldest first (at most PLAN_LOG): a `conversation/cut` puts back the one that
   *  stood when the cut's turn began. */
  planLog: Plan[];
  /** The session's background processes (daemons with `processes`), oldest first: every running one
   *  and the newest PROCESSES_EXITED that ended. Replaced (never changed in place) when one changes. */
  processes: ProcessInfo[];
  /** The project's hooks, while they wait for the person's trust (`hooks/untrusted`). */
  hooksUntrusted?: HooksUntrusted;
  /** The files the last turn changed, in counts (daemons with `turnDiff`): live `turn/diff` events, or
   *  `dsh/turn/diff` on attach (a `turnDiff` action); absent while the running turn changed none. */
  turnDiff?: TurnDiffSummary;
  /** The session this one was forked from (its fork line, from a page or the log); kept when trimmed. */
  forkOf?: ForkOrigin;
  /** A take-over asked by this window or of it, and the driver-change lines told (lease.ts). */
  lease?: LeaseState;
  rev: number;
}

const PLAN_LOG = 32;
/** A mode change as a line of the transcript (`session/mode`, live or from a page). */
function modeLine(seq: number, turn: number, d: { mode: string; planCallId?: string }): NoticeItem {
  const approved = d.planCallId ? ' (plan approved)' : '';
  return { id: `md:${seq}`, kind: 'notice', rev: 0, turn, level: 'info', text: `Mode: ${MODE_LABELS[d.mode] ?? d.mode}${approved}` };
}

type ModelChoice = { model?: string; reasoningEffort?: string };
/** The model and effort a `session/settings` names (null fields: the daemon's configuration). */
function modelChoiceOf(d: { model?: string | null; reasoningEffort?: string | null }): ModelChoice {
  return { model: d.model ?? undefined, reasoningEffort: d.reasoningEffort ?? undefined };
}
/** A model change as a line of the transcript (`session/settings`, live or from a page); none when
 *  the session went back to the configuration's model (nothing to name). */
function modelLine(seq: number, turn: number, choice: ModelChoice): NoticeItem | undefined {
  const what = [choice.model, choice.reasoningEffort && `${choice.reasoningEffort} effort`].filter(Boolean).join(', ');
  return what ? { id: `ms:${seq}`, kind: 'notice', rev: 0, turn, level: 'info', text: `Model: ${what}` } : undefined;
}

/** The modes as the panel names them (protocol.md §3). */
export const MODE_LABELS: Record<string, string> = { ask: 'Ask', 'accept-edits': 'Accept edits', plan: 'Plan' };
/** Ended background processes kept in the model (the running ones are all kept). */
export const PROCESSES_EXITED = 5;

export type Action =
  | { kind: 'reset'; sessionId: string | null }
  | { kind: 'event'; event: AnyEvent }
  | { kind: 'attached'; result: AttachResult }
  /** A `dsh/session/transcript` page: the first one of a fresh model (`older: false`), or an older
   *  page put in front of the items. */
  | { kind: 'transcript'; page: TranscriptPage; older: boolean }
  | { kind: 'sent'; messageId: string; via: Via }
  /** The pending items as `dsh/inbox/list` gave them (a read-only view, or one that just became writable). */
  | { kind: 'inbox'; inbox: Inbox }
  | { kind: 'permission'; request: PermissionRequest }
  | { kind: 'permissionDone'; callId: string }
  /** Drops the items of turns before `beforeTurn` (the model keeps a bounded number of turns; older
   *  ones are read again with `dsh/session/transcript` when a person scrolls back to them). */
  | { kind: 'trim'; beforeTurn: number }
  /** The session's background processes as `dsh/process/list` gave them (on attach). */
  | { kind: 'processes'; processes: ProcessInfo[] }
  /** The person trusted the project's hooks at `root` (`dsh/project/trust` answered). */
  | { kind: 'hooksTrusted'; root: string }
  /** The last turn's changed files as `dsh/turn/diff` gave them (on attach; null: none). */
  | { kind: 'turnDiff'; diff: TurnDiffSummary | null }
  /** The stored transcript of the child of `run_subagent` call `callId` (read when its parent's turn
   *  came from a transcript page, which carries no subagent events). */
  | { kind: 'subagentTranscript'; callId: string; page: TranscriptPage }
  /** The person asked to take the session over (`force`: Take over now). */
  | { kind: 'takeOver'; force: boolean };

export function emptyModel(sessionId: string | null = null): SessionModel {
  return {
    sessionId, lastSeq: -1, status: 'idle', readOnly: false, items: [], index: {},
    inbox: { nextTurn: [], nextStep: [] }, via: {}, permissions: [], turnUsage: {}, currentTurn: 0, olderBefore: null,
    claims: {}, queuedIds: {}, planLog: [], processes: [], rev: 0,
  };
}

const OUTPUT_TAIL = 4000;

export function reduce(model: SessionModel, action: Action): SessionModel {
  switch (action.kind) {
    case 'reset':
      return { ...emptyModel(action.sessionId), rev: model.rev + 1 };
    case 'attached': {
      const r = action.result;
      // What waits while a turn runs was queued behind it.
      if (r.status === 'running') for (const it of [...r.inbox.nextTurn, ...r.inbox.nextStep]) model.queuedIds[it.id] = true;
      return {
        ...leaseSettled(model), sessionId: r.sessionId, status: r.status, readOnly: !!r.readOnly,
        title: typeof r.title === 'string' ? r.title || undefined : model.title,
        mode: (r as { mode?: SessionModel['mode'] }).mode ?? model.mode,
        lastSeq: Math.max(model.lastSeq, r.lastSeq), inbox: r.inbox, rev: model.rev + 1,
        sandbox: r.sandbox ?? model.sandbox,
        // Carried while the project's hooks wait: absent, they do not (or no longer) wait.
        hooksUntrusted: r.hooksUntrusted,
        // The plan that stands now, whatever was replayed (absent: none).
        ...(r.plan ? planState(samePlan(model.planLog.at(-1), r.plan) ? model.planLog : [...model.planLog, r.plan])
          : { plan: undefined, planLog: model.planLog }),
      };
    }
    case 'transcript':
      return applyTranscript(model, action.page, action.older);
    case 'inbox':
      return { ...model, inbox: action.inbox, rev: model.rev + 1 };
    case 'sent':
      model.via[action.messageId] = action.via;
      return { ...model, rev: model.rev + 1 };
    case 'trim':
      return trim(model, action.beforeTurn);
    case 'permission': {
      if (model.sessionId !== null && action.request.sessionId !== model.sessionId) return model; // another session's
      const m = { ...model, permissions: [...model.permissions.filter((p) => p.callId !== action.request.callId), action.request], rev: model.rev + 1 };
      const sub = action.request.subagent;
      if (sub) return updateSubagent(m, sub.callId, (s) => s && callStatus(s, action.request.callId, 'awaiting-permission'));
      return updateItem(m, 't:' + action.request.callId, (it) => it.kind === 'tool' && (it.status === 'pending' || it.status === 'running') ? { ...it, status: 'awaiting-permission' } : it);
    }
    case 'permissionDone': {
      const m = { ...model, permissions: model.permissions.filter((p) => p.callId !== action.callId), rev: model.rev + 1 };
      return updateItem(m, 't:' + action.callId, (it) => it.kind === 'tool' && it.status === 'awaiting-permission' ? { ...it, status: 'running' } : it);
    }
    case 'event':
      return applyEvent(model, action.event);
    case 'processes':
      return { ...model, processes: keptProcesses(action.processes), rev: model.rev + 1 };
    case 'hooksTrusted':
      return model.hooksUntrusted?.root === action.root || !model.hooksUntrusted ? { ...model, hooksUntrusted: undefined, rev: model.rev + 1 } : model;
    case 'turnDiff':
      return { ...model, turnDiff: action.diff ?? undefined, rev: model.rev + 1 };
    case 'takeOver':
      return takeOverAsked(model, action.force);
    case 'subagentTranscript':
      return updateItem({ ...model, rev: model.rev + 1 }, 't:' + action.callId, (it) => it.kind === 'tool' ? {
        ...it, subagent: subagentFromTranscript(it.subagent ?? subagentFromCall(it.args, it.status, it.result, it.error, it.meta), action.page),
      } : it);
  }
}

/** Every running process and the newest PROCESSES_EXITED ended ones, in their order. */
function keptProcesses(list: ProcessInfo[]): ProcessInfo[] {
  let ended = list.filter((p) => !p.running).length;
  if (ended <= PROCESSES_EXITED) return list;
  return list.filter((p) => p.running || ended-- <= PROCESSES_EXITED);
}

export function reduceAll(model: SessionModel, actions: Iterable<Action>): SessionModel {
  let m = model;
  for (const a of actions) m = reduce(m, a);
  return m;
}

function applyEvent(model: SessionModel, e: AnyEvent): SessionModel {
  if (model.sessionId !== null && e.sessionId !== model.sessionId) return model;
  if (typeof e.seq === 'number') {
    if (e.seq <= model.lastSeq) return model; // already applied (a replay overlapping what we have)
    model = { ...model, lastSeq: e.seq };
  }
  model = { ...model, rev: model.rev + 1 };
  const ev = e as { type: string; data: any };
  switch (ev.type) {
    case 'agent/status':
      return { ...model, status: ev.data.status };
    case 'turn/start':
      // The bar shows the last turn's files: a new turn starts with none until it changes one.
      return { ...leaseSettled(model), status: 'running', currentTurn: ev.data.turn, lastTurnEnd: undefined, turnDiff: undefined };
    case 'turn/diff':
      return ev.data.turn >= (model.turnDiff?.turn ?? 0) ? { ...model, turnDiff: ev.data as TurnDiffSummary } : model;
    case 'subagent/started': {
      const d = ev.data as { callId: string; childId: string; description: string; tools?: string; maxSteps?: number; agent?: string };
      return updateSubagent(model, d.callId, (s) => subagentStarted(s, d));
    }
    case 'subagent/event': {
      const d = ev.data as { callId: string; event: { type?: unknown; data?: unknown } };
      return updateSubagent(model, d.callId, (s, description) => subagentEvent(s, d.event ?? {}, description));
    }
    case 'subagent/finished': {
      const d = ev.data as { callId: string; childId: string; status: string; summary: string };
      return updateSubagent(model, d.callId, (s, description) => subagentFinished(s, d, description));
    }
    case 'context/usage':
      return { ...model, context: { used: ev.data.used, window: ev.data.window ?? null } };
    case 'session/lease': {
      const [m, line] = leaseChanged(model, ev.data);
      return line ? upsert(m, line) : m;
    }
    case 'session/handover':
      return handoverRequested(model, ev.data);
    case 'session/mode':
      // The change is marked where it happened: what follows runs in that mode.
      return upsert({ ...model, mode: ev.data.mode }, modeLine(e.seq ?? model.rev, model.currentTurn, ev.data));
    case 'session/settings': {
      const choice = modelChoiceOf(ev.data);
      const m = { ...model, modelChoice: choice };
      // The event also carries the sandbox choice: a line only when the model or the effort changed.
      const same = choice.model === model.modelChoice?.model && choice.reasoningEffort === model.modelChoice?.reasoningEffort;
      const line = same ? undefined : modelLine(e.seq ?? model.rev, model.currentTurn, choice);
      return line ? upsert(m, line) : m;
    }
    case 'session/title':
      return { ...model, title: typeof ev.data.title === 'string' && ev.data.title ? ev.data.title : undefined };
    case 'agent/inbox/spliced': {
      const d = ev.data as { target: string; start: number; inserted: InboxItem[]; removedCount?: number; outcome?: string };
      const key = d.target === 'next-step' ? 'nextStep' : 'nextTurn';
      const list = [...model.inbox[key]];
      const removed = list.splice(d.start, d.removedCount ?? 0, ...d.inserted);
      if (!d.outcome) {
        // Claimed by a turn: remember how each was sent, to tag it when it enters the transcript.
        for (const it of removed) {
          model.claims[it.id] = { verb: typeof it.verb === 'string' ? it.verb : undefined, target: d.target, queued: !!model.queuedIds[it.id] || it.wakeup === false };
          delete model.queuedIds[it.id];
        }
      } else if (d.outcome !== 'moved' && d.outcome !== 'replaced') {
        for (const it of removed) delete model.queuedIds[it.id];
      }
      // A prompt inserted while a turn runs waits for it: "queued" once it runs.
      if (model.status === 'running') {
        for (const it of d.inserted) model.queuedIds[it.id] = true;
      }
      return { ...model, inbox: { ...model.inbox, [key]: list } };
    }
    case 'user/message': {
      const msg = ev.data as UserMessage;
      const claim = model.claims[msg.id];
      delete model.claims[msg.id];
      const tags = promptTags(msg, claim);
      return upsert(model, { id: 'u:' + msg.id, kind: 'user', rev: 0, turn: model.currentTurn, message: msg, ...(tags.length ? { tags } : {}) });
    }
    case 'llm/request': {
      // A retried request streams its step from the start again: the failed attempt's text goes.
      if (!(ev.data.attempt > 1)) return model;
      return updateItem(model, `a:${ev.data.turn}:${ev.data.step}`, (it) => it.kind === 'assistant' && !it.done
        ? { ...it, text: '', reasoning: '', liveText: '', liveReasoning: '', liveTextAt: undefined, liveReasoningAt: undefined } : it);
    }
    case 'assistant/delta':
      return applyDelta(model, ev.data.turn, ev.data.step, ev.data.delta as StreamDelta, true,
        typeof ev.data.offset === 'number' ? ev.data.offset : undefined);
    case 'assistant/chunk': {
      let m = model;
      for (const d of ev.data.deltas as StreamDelta[]) m = applyDelta(m, ev.data.turn, ev.data.step, d, false);
      return m;
    }
    case 'assistant/message': {
      const msg = ev.data.message as UserMessage;
      const id = `a:${ev.data.turn}:${ev.data.step}`;
      const text = textOf(msg.content, 'text');
      const reasoning = textOf(msg.content, 'reasoning');
      const at = indexOf(model, id);
      const prev = at === undefined ? undefined : model.items[at];
      const m = recovered(model, `r:${ev.data.turn}:${ev.data.step}`);
      if (at === undefined && !text && !reasoning) return m; // a pure tool-call message: the cards show it
      const retry = prev?.kind === 'assistant' && prev.retry ? { ...prev.retry, state: prev.retry.state === 'waiting' ? 'recovered' as const : prev.retry.state } : undefined;
      return upsert(m, {
        id, kind: 'assistant', rev: 0, turn: ev.data.turn, step: ev.data.step, text, reasoning,
        liveText: '', liveReasoning: '', done: true, interrupted: !!ev.data.interrupted, ...(retry ? { retry } : {}),
      });
    }
    case 'tool/call': {
      const d = ev.data;
      return upsert(model, {
        id: 't:' + d.callId, kind: 'tool', rev: 0, turn: d.turn, step: d.step, callId: d.callId, name: d.name,
        args: parseArgs(d.arguments), status: d.synthetic ? 'error' : 'running', output: '', result: '',
        synthetic: !!d.synthetic,
      });
    }
    case 'tool/output':
      return updateItem(model, 't:' + ev.data.callId, (it) => it.kind === 'tool'
        ? { ...it, output: (it.output + ev.data.text).slice(-OUTPUT_TAIL) } : it);
    case 'tool/result': {
      const msg = ev.data.message as UserMessage;
      const block = msg.content.find((b) => b.type === 'tool-result') as { toolCallId?: string; content?: any[]; isError?: boolean } | undefined;
      const callId: string | undefined = ev.data.callId ?? block?.toolCallId ?? (msg.source as { callId?: string }).callId;
      if (!callId) return model;
      const name: string | undefined = typeof ev.data.name === 'string' ? ev.data.name : undefined;
      const result = textOf(block?.content ?? []);
      const failed = !!ev.data.error || !!block?.isError;
      const m = { ...model, permissions: model.permissions.filter((p) => p.callId !== callId) };
      if (indexOf(m, 't:' + callId) === undefined) {
        return upsert(m, {
          id: 't:' + callId, kind: 'tool', rev: 0, turn: ev.data.turn, step: ev.data.step, callId, name: name ?? '?', args: {},
          status: failed ? 'error' : 'ok', output: '', result, error: ev.data.error, meta: ev.data.meta,
        });
      }
      return updateItem(m, 't:' + callId, (it) => it.kind === 'tool'
        ? { ...it, name: name ?? it.name, status: failed ? 'error' : 'ok', result, error: ev.data.error, meta: ev.data.meta } : it);
    }
    case 'turn/usage':
      model.turnUsage[ev.data.turn] = ev.data.usage;
      return model;
    case 'turn/end': {
      const turn = ev.data.turn as number;
      const reason = ev.data.reason as TurnEndReason;
      // Streams still open at the end of a turn are closed (their text stays as it is).
      let m: SessionModel = turnEnded({ ...model, status: 'idle', lastTurnEnd: reason, permissions: [] });
      const retries = closeOpen(m, turn, reason.kind === 'error');
      // One error block per failure: the turn's own `agent/error` notice is told by the footer.
      if (reason.kind === 'error') m = updateItem(m, 'x:' + turn, (it) => it.kind === 'notice' ? { ...it, folded: true } : it);
      return upsert(m, { id: 'e:' + turn, kind: 'turnEnd', rev: 0, turn, reason, usage: m.turnUsage[turn], ...(retries ? { retries } : {}) });
    }
    case 'llm/retry': {
      const d = ev.data;
      if (d.purpose) return model; // a compaction's summary request: not a step of the transcript
      const retry: RetryState = { retry: d.retry, delayMs: d.delayMs, code: d.error?.code ?? 'UNKNOWN', message: d.error?.message ?? '', status: d.error?.status, state: 'waiting' };
      const aid = `a:${d.turn}:${d.step}`;
      // Where the retry happens: on the step's answer when some of it had streamed, else one line
      // (the answer then streams below it).
      if (indexOf(model, aid) !== undefined) return updateItem(model, aid, (it) => it.kind === 'assistant' ? { ...it, retry } : it);
      return upsert(model, { id: `r:${d.turn}:${d.step}`, kind: 'retry', rev: 0, turn: d.turn, step: d.step, retry });
    }
    case 'sandbox/status':
      return { ...model, sandbox: ev.data as SandboxStatus };
    case 'process/started': {
      const d = ev.data as Omit<ProcessInfo, 'running'>;
      const info: ProcessInfo = { ...d, running: true };
      const at = model.processes.findIndex((p) => p.processId === d.processId);
      const processes = at < 0 ? [...model.processes, info] : model.processes.map((p, i) => i === at ? info : p);
      return { ...model, processes: keptProcesses(processes) };
    }
    case 'process/exited': {
      const d = ev.data as { processId: string; exitCode?: number; signal?: number; stoppedBy?: string };
      const ended = { running: false, exitCode: d.exitCode ?? null, signal: d.signal ?? null, stoppedBy: d.stoppedBy ?? null };
      const at = model.processes.findIndex((p) => p.processId === d.processId);
      // One started before the events this model holds (a transcript page): known by its id only
      // until dsh/process/list names it.
      const processes = at < 0
        ? [...model.processes, { processId: d.processId, name: d.processId, command: '', pid: 0, confined: false, ...ended }]
        : model.processes.map((p, i) => i === at ? { ...p, ...ended } : p);
      return { ...model, processes: keptProcesses(processes) };
    }
    case 'hooks/untrusted':
      return { ...model, hooksUntrusted: ev.data as HooksUntrusted };
    case 'hook/failed': {
      // Live, once per hook per session: one line, kept under the same id if told again.
      const d = ev.data as { hook: string; event: string; reason: string; origin?: string };
      return upsert(model, { id: `hf:${d.event}:${d.hook}`, kind: 'notice', rev: 0, turn: model.currentTurn, level: 'warning', topic: 'hook',
        text: `The ${d.event} hook ${d.hook}${d.origin === 'project' ? " (the project's)" : ''} failed and was ignored: ${d.reason}` });
    }
    case 'session/notice': {
      let notice = sessionNotice(e.seq ?? model.rev, model.currentTurn, ev.data);
      if (notice && ev.data.kind === 'lease') [model, notice] = leaseNoticed(model, notice);
      if (notice?.forkOf) model = { ...model, forkOf: notice.forkOf };
      return notice ? upsert(model, notice) : model;
    }
    case 'plan/updated':
      return { ...model, ...planState([...model.planLog, ev.data as Plan]) };
    case 'sandbox/widened': {
      const d = ev.data as { callId: string; writable?: string[]; network?: string[]; unconfined?: boolean; scope?: string };
      return upsert(model, { id: `sw:${d.callId}`, kind: 'notice', rev: 0, turn: model.currentTurn, level: 'info',
        text: `Sandbox widened ${d.scope === 'session' ? 'for this session' : 'for this command'}: ${wideningText(d)}.` });
    }
    case 'conversation/cut': {
      // The turns from `beforeTurn` on stay on screen, marked: the model no longer sees them.
      const before = ev.data.beforeTurn as number;
      // The plan goes back to the one that stood when turn `before` began.
      model = { ...model, ...planState(model.planLog.filter((p) => p.turn < before)) };
      for (const it of model.items) {
        if (it.kind === 'user' && it.turn >= before && it.message.source.kind === 'user' && !it.tags?.includes('rewound')) {
          updateItem(model, it.id, (u) => u.kind === 'user' ? { ...u, tags: [...(u.tags ?? []), 'rewound'] } : u);
        }
      }
      return upsert(model, { id: `cut:${e.seq ?? model.rev}`, kind: 'notice', rev: 0, turn: model.currentTurn, level: 'info',
        text: `↶ Checkpoint restored: the conversation went back to before turn ${before}; the turns marked "rewound" are no longer seen by the model.` });
    }
    case 'rewind/files': {
      const d = ev.data as { rewindId: string; phase: string; restored?: string[]; deleted?: string[]; failed?: { path?: string; reason: string }[]; untouched?: string[] };
      if (d.phase === 'started') return model;
      const name = (p: string) => p.split('/').pop() ?? p;
      const parts: string[] = [];
      if (d.restored?.length) parts.push(`restored ${d.restored.map(name).join(', ')}`);
      if (d.deleted?.length) parts.push(`deleted ${d.deleted.map(name).join(', ')}`);
      if (d.failed?.length) parts.push(`could not write ${d.failed.map((f) => f.path ? name(f.path) : f.reason).join(', ')}`);
      if (d.phase === 'interrupted') {
        return upsert(model, { id: `rw:${d.rewindId}:i`, kind: 'notice', rev: 0, turn: model.currentTurn, level: 'warning',
          text: `A restore was interrupted (the daemon stopped)${parts.length ? `: ${parts.join('; ')}` : ''}${d.untouched?.length ? `; not restored yet: ${d.untouched.map(name).join(', ')}` : ''}. Restore the checkpoint again to finish it.` });
      }
      return upsert(model, { id: `rw:${d.rewindId}`, kind: 'notice', rev: 0, turn: model.currentTurn, level: d.failed?.length ? 'warning' : 'info',
        text: parts.length ? `Files: ${parts.join('; ')}.` : 'No file needed restoring.' });
    }
    case 'agent/error': {
      const turn = typeof ev.data.turn === 'number' ? ev.data.turn : model.currentTurn;
      return upsert(model, {
        id: 'x:' + turn, kind: 'notice', rev: 0, turn, level: 'error', code: ev.data.error.code,
        text: ev.data.error.message || ev.data.error.code,
      });
    }
    default:
      return model; // step/*, llm/request, request/header, live inbox events, unknown types
  }
}

/** The line of a `session/notice` (live, or an `event` item of a transcript page); a take-over's is
 *  said without the process id and host it names. */
function sessionNotice(seq: number, turn: number, data: unknown): NoticeItem | undefined {
  const d = data as { kind?: string; level?: string; message?: string };
  if (typeof d.message !== 'string') return undefined;
  const forkOf = d.kind === 'fork' ? forkOrigin((d as { forkOf?: unknown }).forkOf) : undefined;
  return { id: `sn:${seq}`, kind: 'notice', rev: 0, turn, level: d.level === 'warning' ? 'warning' : 'info',
    topic: typeof d.kind === 'string' ? d.kind : undefined, text: d.kind === 'lease' ? LEASE_NOTICE : d.message, ...(forkOf ? { forkOf } : {}) };
}

/** A fork notice's `forkOf`, when it has the shape the daemon writes. */
function forkOrigin(x: unknown): ForkOrigin | undefined {
  const f = x as Partial<ForkOrigin> | undefined;
  return f && typeof f.sessionId === 'string' && typeof f.atTurn === 'number' && typeof f.title === 'string'
    ? { sessionId: f.sessionId, atTurn: f.atTurn, title: f.title } : undefined;
}

/** Items of transcript turns (oldest first), with the ids the event path gives the same things, so
 *  the live events after the page update them in place. */
export function transcriptItems(turns: TranscriptTurn[], rev: number): Item[] {
  const out: Item[] = [];
  const after: Item[] = [];
  for (const t of turns) {
    for (const it of t.items) {
      if (it.type === 'message') {
        const text = it.truncated ? `${it.text}\n… (${it.length ?? '?'} characters in all)` : it.text;
        // A person's prompt entered after the turn's first step came in as a steer (the page does not
        // say how the others were sent).
        // `queued`: it waited behind a running turn (daemons that say so).
        const tags: PromptTag[] = it.step > 1 && it.source?.kind === 'user' ? ['steer'] : it.queued ? ['queued'] : [];
        out.push({ id: 'u:' + it.id, kind: 'user', rev, turn: t.turn, message: { id: it.id, role: 'user', content: [{ type: 'text', text }], source: it.source }, ...(tags.length ? { tags } : {}) });
      } else if (it.type === 'assistant') {
        if (!it.text && !it.reasoning && !it.partial) continue; // a pure tool-call message: the cards show it
        out.push({
          id: `a:${t.turn}:${it.step}`, kind: 'assistant', rev, turn: t.turn, step: it.step, text: it.text, reasoning: it.reasoning ?? '',
          liveText: '', liveReasoning: '', done: !it.partial, interrupted: !!it.interrupted,
        });
      } else if (it.type === 'tool') {
        const r = it.result;
        const failed = !!r && (!!r.isError || !!r.error);
        const result = r ? (r.truncated ? `${r.output}\n… (${r.length ?? '?'} characters in all)` : r.output) : '';
        out.push({
          id: 't:' + it.callId, kind: 'tool', rev, turn: t.turn, step: it.step, callId: it.callId, name: it.name,
          args: parseArgs(it.arguments), status: it.synthetic || failed ? 'error' : r ? 'ok' : 'running', output: '', result,
          error: r?.error, meta: r?.meta, synthetic: !!it.synthetic,
        });
      } else if (it.type === 'event' && it.event === 'session/mode') {
        // The same line the live event makes (its id by seq); logged between turns: after the footer.
        const line = { ...modeLine(it.seq, t.turn, it.data as { mode: string; planCallId?: string }), rev };
        (t.endSeq !== undefined && it.seq > t.endSeq ? after : out).push(line);
      } else if (it.type === 'event' && it.event === 'session/settings') {
        // The daemon lists only a change of the model or the effort (not one of the sandbox alone).
        const line = modelLine(it.seq, t.turn, modelChoiceOf(it.data as { model?: string | null; reasoningEffort?: string | null }));
        if (line) (t.endSeq !== undefined && it.seq > t.endSeq ? after : out).push({ ...line, rev });
      } else if (it.type === 'event' && it.event === 'session/notice') {
        // The same item the live event makes (its id by seq), so a replay after the page finds it.
        const notice = sessionNotice(it.seq, t.turn, it.data);
        // Logged after the turn ended (between turns, e.g. a fork's line): after its footer, as live.
        if (notice) (t.endSeq !== undefined && it.seq > t.endSeq ? after : out).push({ ...notice, rev });
      }
    }
    if (t.end) out.push({ id: 'e:' + t.turn, kind: 'turnEnd', rev, turn: t.turn, reason: t.end, usage: t.usage, ...(t.retries ? { retries: t.retries } : {}) });
    out.push(...after.splice(0));
  }
  return out;
}

function applyTranscript(model: SessionModel, page: TranscriptPage, older: boolean): SessionModel {
  const turns = [...page.turns].sort((a, b) => a.turn - b.turn);
  const rev = model.rev + 1;
  const olderBefore = page.hasMore && turns.length ? turns[0].turn : null;
  const fresh = transcriptItems(turns, rev).filter((it) => indexOf(model, it.id) === undefined);
  const items = older ? [...fresh, ...model.items] : [...model.items, ...fresh];
  // Positions moved (or a new model starts): a new index, not shared with older versions.
  const index: Record<string, number> = {};
  items.forEach((it, i) => { index[it.id] = i; });
  const turnUsage = { ...model.turnUsage };
  for (const t of turns) if (t.usage) turnUsage[t.turn] = t.usage;
  const forked = fresh.find((it) => it.kind === 'notice' && it.forkOf);
  const forkOf = forked?.kind === 'notice' ? forked.forkOf : model.forkOf;
  const m: SessionModel = { ...model, items, index, turnUsage, olderBefore, rev, ...(forkOf ? { forkOf } : {}) };
  if (older) return m;
  const newest = turns.at(-1);
  // The newest model change on the page is the session's choice unless a live event said one (a
  // later sandbox-only change then adds no line).
  const settings = turns.flatMap((t) => t.items).filter((it) => it.type === 'event' && it.event === 'session/settings').at(-1);
  const modelChoice = model.modelChoice ?? (settings?.type === 'event' ? modelChoiceOf(settings.data as { model?: string | null; reasoningEffort?: string | null }) : undefined);
  return {
    ...m, lastSeq: Math.max(model.lastSeq, page.lastSeq), ...(modelChoice ? { modelChoice } : {}),
    currentTurn: Math.max(model.currentTurn, newest?.turn ?? 0),
    lastTurnEnd: newest?.end ?? model.lastTurnEnd,
  };
}

function applyDelta(model: SessionModel, turn: number, step: number, d: StreamDelta, live: boolean, offset?: number): SessionModel {
  if (d.type !== 'text' && d.type !== 'reasoning') return model;
  const id = `a:${turn}:${step}`;
  let m = model;
  if (indexOf(m, id) === undefined) {
    m = recovered(m, `r:${turn}:${step}`);
    m = upsert(m, { id, kind: 'assistant', rev: 0, turn, step, text: '', reasoning: '', liveText: '', liveReasoning: '', done: false, interrupted: false });
  }
  return updateItem(m, id, (it) => {
    if (it.kind !== 'assistant' || it.done) return it;
    if (it.retry?.state === 'waiting') it = { ...it, retry: { ...it.retry, state: 'recovered' } };
    const isText = d.type === 'text';
    const durable = isText ? it.text : it.reasoning;
    const liveTail = isText ? it.liveText : it.liveReasoning;
    const at = isText ? it.liveTextAt : it.liveReasoningAt;
    const next = live ? liveDelta(durable, liveTail, at, d.text, offset) : durableChunk(durable, liveTail, at, d.text);
    if (!next) return it; // a duplicate delta: already on screen
    return isText
      ? { ...it, text: next.durable, liveText: next.live, liveTextAt: next.at }
      : { ...it, reasoning: next.durable, liveReasoning: next.live, liveReasoningAt: next.at };
  });
}

interface Block { durable: string; live: string; at: number | undefined }

/** A live delta. With its `offset`, one whose end is not past what is rendered is a duplicate (null:
 *  e.g. after a reattach), and only the part past the rendered end is appended. */
function liveDelta(durable: string, live: string, at: number | undefined, text: string, offset: number | undefined): Block | null {
  if (offset === undefined) return { durable, live: live + text, at: undefined }; // an older daemon: no offsets
  const from = live ? at ?? durable.length : durable.length;
  const rendered = Math.max(durable.length, from + live.length);
  const end = offset + text.length;
  if (end <= rendered) return null;
  if (!live) {
    // Normally offset <= durable.length; past it, the text between is in a chunk still to come.
    return offset <= durable.length
      ? { durable, live: text.slice(durable.length - offset), at: durable.length }
      : { durable, live: text, at: offset };
  }
  const liveEnd = from + live.length;
  return { durable, live: live + (offset <= liveEnd ? text.slice(liveEnd - offset) : text), at: from };
}

/** A durable chunk: it covers deltas that may already be on screen, which leave the live tail. */
function durableChunk(durable: string, live: string, at: number | undefined, text: string): Block {
  const nd = durable + text;
  if (at === undefined) return { durable: nd, live: dropOverlap(text, live), at: undefined };
  const covered = nd.length - at;
  if (covered >= live.length) return { durable: nd, live: '', at: undefined };
  if (covered > 0) return { durable: nd, live: live.slice(covered), at: nd.length };
  return { durable: nd, live, at };
}

/** The live tail after a chunk `chunk` became durable: the longest prefix of `live` that ends `chunk` is removed. */
function dropOverlap(chunk: string, live: string): string {
  if (live.startsWith(chunk)) return live.slice(chunk.length);
  for (let k = Math.min(chunk.length, live.length); k > 0; k--) {
    if (chunk.endsWith(live.slice(0, k))) return live.slice(k);
  }
  return live;
}

/** Closes what is still open in `turn` (in place; the turn's items are at the end). Returns how many
 *  times its last retried step was retried, when the turn `failed`. */
function closeOpen(model: SessionModel, turn: number, failed: boolean): number {
  let retries = 0;
  for (let i = model.items.length - 1; i >= 0; i--) {
    const it = model.items[i];
    if (it.turn < turn) break;
    if (it.turn !== turn) continue;
    let next: Item = it;
    if (it.kind === 'assistant' && !it.done) {
      next = { ...it, text: it.text + it.liveText, reasoning: it.reasoning + it.liveReasoning, liveText: '', liveReasoning: '', liveTextAt: undefined, liveReasoningAt: undefined, done: true };
    }
    if (it.kind === 'tool' && (it.status === 'running' || it.status === 'pending' || it.status === 'awaiting-permission')) {
      next = { ...it, status: 'error' };
    }
    const retry = (next.kind === 'assistant' || next.kind === 'retry') ? next.retry : undefined;
    if (retry?.state === 'waiting') {
      if (failed) retries ||= retry.retry;
      next = { ...next, retry: { ...retry, state: failed ? 'failed' : 'recovered' } } as Item;
    }
    if (next !== it) model.items[i] = { ...next, rev: model.rev };
  }
  return retries;
}

/** A step's retry line once the step streams again. */
function recovered(model: SessionModel, id: string): SessionModel {
  return updateItem(model, id, (it) => it.kind === 'retry' && it.retry.state === 'waiting' ? { ...it, retry: { ...it.retry, state: 'recovered' } } : it);
}

/** The tags of a prompt that entered the transcript, from how its pending item was sent. */
function promptTags(msg: UserMessage, claim: SessionModel['claims'][string] | undefined): PromptTag[] {
  if (!claim || msg.source?.kind !== 'user') return [];
  const tags: PromptTag[] = [];
  const verb = claim.verb ?? (claim.target === 'next-step' ? 'steer' : undefined);
  if (verb === 'steer') tags.push('steer');
  else if (verb === 'inject') tags.push('inject');
  else if (claim.queued) tags.push('queued');
  return tags;
}

function trim(model: SessionModel, beforeTurn: number): SessionModel {
  let k = 0;
  while (k < model.items.length && model.items[k].turn < beforeTurn) k++;
  if (k === 0) return model;
  const items = model.items.slice(k);
  const index: Record<string, number> = {};
  items.forEach((it, i) => { index[it.id] = i; });
  const turnUsage: Record<number, Usage> = {};
  for (const [t, u] of Object.entries(model.turnUsage)) if (Number(t) >= beforeTurn) turnUsage[Number(t)] = u;
  return { ...model, items, index, turnUsage, olderBefore: beforeTurn, rev: model.rev + 1 };
}

export function indexOf(model: SessionModel, id: string): number | undefined {
  const at = model.index[id];
  return at !== undefined && at < model.items.length && model.items[at].id === id ? at : undefined;
}

/** Puts `item` at its position (a new one at the end), in place. */
function upsert(model: SessionModel, item: Item): SessionModel {
  const at = indexOf(model, item.id);
  if (at === undefined) {
    model.items.push({ ...item, rev: model.rev });
    model.index[item.id] = model.items.length - 1;
  } else {
    model.items[at] = { ...item, rev: model.rev };
  }
  return model;
}

/** Replaces item `id` with `f(item)` in place (nothing when `f` returns it unchanged). */
function updateItem(model: SessionModel, id: string, f: (it: Item) => Item): SessionModel {
  const at = indexOf(model, id);
  if (at === undefined) return model;
  const before = model.items[at];
  const after = f(before);
  if (after !== before) model.items[at] = { ...after, rev: model.rev };
  return model;
}

/** Replaces the subagent of `run_subagent` call `callId` with `f(it)` (nothing when that call is not
 *  among the items: a trimmed turn's). `description`: the call's own, for a child first seen here. */
function updateSubagent(model: SessionModel, callId: string, f: (s: SubagentState | undefined, description: string) => SubagentState | undefined): SessionModel {
  return updateItem(model, 't:' + callId, (it) => {
    if (it.kind !== 'tool') return it;
    const description = String((it.args as { description?: unknown } | null)?.description ?? '');
    const next = f(it.subagent, description);
    return next === it.subagent ? it : { ...it, subagent: next };
  });
}

/** The plan log (bounded) and the plan it leaves standing: its last entry, unless that cleared it. */
function planState(log: Plan[]): { plan: Plan | undefined; planLog: Plan[] } {
  const planLog = log.slice(-PLAN_LOG);
  const last = planLog.at(-1);
  return { plan: last && last.steps.length ? last : undefined, planLog };
}

function samePlan(a: Plan | undefined, b: Plan): boolean {
  return !!a && a.turn === b.turn && a.callId === b.callId && JSON.stringify(a.steps) === JSON.stringify(b.steps);
}

/** A sandbox widening in words: the paths made writable, the domains made reachable, or no sandbox. */
export function wideningText(w: { writable?: string[]; network?: string[]; unconfined?: boolean }): string {
  if (w.unconfined) return 'unconfined (no sandbox)';
  const parts: string[] = [];
  if (w.writable?.length) parts.push(`writable ${w.writable.join(', ')}`);
  if (w.network?.length) parts.push(`network ${w.network.join(', ')}`);
  return parts.join('; ') || 'nothing';
}

function parseArgs(a: unknown): unknown {
  if (typeof a !== 'string') return a;
  try { return JSON.parse(a); } catch { return a; }
}

// ---- derived views ---------------------------------------------------------------------------------

export interface QueueEntry {
  message: InboxItem; target: 'next-turn' | 'next-step';
  /** How it was sent: the daemon's `verb`; for an older daemon what this window sent, else a guess. */
  label: string; text: string;
  /** The editor messages attached to it (they enter just before it). */
  context: UserMessage[];
}

export function queueOf(model: SessionModel): QueueEntry[] {
  const label = (m: InboxItem, target: 'next-turn' | 'next-step'): string => {
    if (typeof m.verb === 'string' && m.verb) return m.verb;
    const via = model.via[m.id];
    if (via) return via;
    if (m.source.kind === 'editor') return 'context';
    return target === 'next-turn' ? 'followup' : 'steer';
  };
  const entry = (m: InboxItem, target: 'next-turn' | 'next-step'): QueueEntry => ({
    message: m, target, label: label(m, target), text: typedText(m), context: Array.isArray(m.context) ? m.context : [],
  });
  return [
    ...model.inbox.nextStep.map((m) => entry(m, 'next-step')),
    ...model.inbox.nextTurn.map((m) => entry(m, 'next-turn')),
  ];
}

/** A person's message as they typed it: `/name arguments` for one the daemon expanded from a custom
 *  command (`source.command`, protocol.md §18), else its text. */
export function typedText(msg: { content: UserMessage['content']; source?: UserMessage['source'] }): string {
  const review = (msg.source as { review?: { target?: { kind?: unknown; ref?: unknown }; instructions?: unknown } } | undefined)?.review;
  // A review's message holds the whole diff; the person asked for the review, so that is what shows.
  if (msg.source?.kind === 'user' && review && typeof review === 'object') return reviewLabel(review.target, review.instructions);
  const cmd = (msg.source as { command?: { name?: unknown; arguments?: unknown } } | undefined)?.command;
  if (msg.source?.kind === 'user' && cmd && typeof cmd.name === 'string') {
    const args = typeof cmd.arguments === 'string' ? cmd.arguments : '';
    return `/${cmd.name}${args ? ` ${args}` : ''}`;
  }
  return textOf(msg.content);
}

function reviewLabel(target: { kind?: unknown; ref?: unknown } | undefined, instructions: unknown): string {
  const ref = typeof target?.ref === 'string' ? target.ref : '';
  const what = target?.kind === 'base' ? `Review changes since ${ref}`
    : target?.kind === 'commit' ? `Review commit ${/^[0-9a-f]{40}$/.test(ref) ? ref.slice(0, 12) : ref}`
      : 'Review uncommitted changes';
  return typeof instructions === 'string' && instructions.trim() ? `${what}: ${instructions.trim()}` : what;
}

export function pendingCount(model: SessionModel): number {
  return model.inbox.nextTurn.length + model.inbox.nextStep.length;
}

export function statusLabel(model: SessionModel): string {
  if (model.permissions.length) return 'awaiting permission';
  if (model.status === 'running') return pendingCount(model) ? `running, queued ${pendingCount(model)}` : 'running';
  return pendingCount(model) ? `queued ${pendingCount(model)}` : 'idle';
}

/** The whole visible text of an assistant item. */
export function assistantText(it: AssistantItem): { text: string; reasoning: string } {
  return { text: it.text + it.liveText, reasoning: it.reasoning + it.liveReasoning };
}
