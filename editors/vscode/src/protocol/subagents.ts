// A subagent as its parent's `run_subagent` card shows it (protocol.md §12 "Subagents"): folded from
// the parent's durable `subagent/started` / `subagent/finished` and the live `subagent/event` (the
// child's own events), or, for a call replayed from a transcript page (which carries none of them),
// from the call's arguments and result. Plain JSON values; no DOM, no vscode.
import type { ToolError, TranscriptPage } from './types';
import { textOf } from './types';

/** `stopped`: known only from a transcript page's result, cut short (its step cap, an error or the
 *  daemon stopping: the page does not say which). */
export type SubagentStatus = 'running' | 'completed' | 'budget' | 'error' | 'cancelled' | 'interrupted' | 'stopped';
export type SubagentCallStatus = 'running' | 'awaiting-permission' | 'ok' | 'error';

/** One tool call of the child. */
export interface SubagentCall { callId: string; name: string; summary: string; status: SubagentCallStatus; error?: string }

export interface SubagentState {
  description: string; status: SubagentStatus;
  childId?: string; agent?: string; tools?: string; maxSteps?: number;
  /** Model requests the child started so far (its `step/start`s seen live). */
  steps: number;
  /** The child's newest tool calls (at most SUBAGENT_CALLS), oldest first; `earlier`: those dropped. */
  calls: SubagentCall[]; earlier: number;
  /** The child's latest words (its last `assistant/message`), cut to SUBAGENT_TEXT. */
  text?: string;
  /** What the parent's model got: the child's summary (set when it ended). */
  summary?: string;
}

export const SUBAGENT_CALLS = 40;
const SUBAGENT_TEXT = 600;

export function subagentStarted(prev: SubagentState | undefined, d: { childId: string; description: string; tools?: string; maxSteps?: number; agent?: string }): SubagentState {
  return {
    ...(prev ?? { steps: 0, calls: [], earlier: 0 }), status: prev && prev.status !== 'running' ? prev.status : 'running',
    description: d.description, childId: d.childId, tools: d.tools, maxSteps: d.maxSteps, agent: d.agent,
  };
}

export function subagentFinished(prev: SubagentState | undefined, d: { childId: string; status: string; summary: string }, description: string): SubagentState {
  const base = prev ?? { description, steps: 0, calls: [], earlier: 0, status: 'running' as const };
  // A call still open when the child ended did not finish.
  const calls = base.calls.map((c) => c.status === 'running' || c.status === 'awaiting-permission' ? { ...c, status: 'error' as const } : c);
  return { ...base, childId: d.childId, status: isStatus(d.status) ? d.status : 'error', summary: d.summary, calls };
}

/** One event of the child (`subagent/event`'s `event`): its steps, tool calls and words; the rest
 *  (streamed deltas, usage, its inbox) leaves the state as it is (the same object). */
export function subagentEvent(prev: SubagentState | undefined, ev: { type?: unknown; data?: unknown }, description: string): SubagentState {
  const s = prev ?? { description, steps: 0, calls: [], earlier: 0, status: 'running' as const };
  const d = (ev.data ?? {}) as Record<string, unknown>;
  switch (ev.type) {
    case 'step/start':
      return typeof d.step === 'number' && d.step > s.steps ? { ...s, steps: d.step } : s;
    case 'tool/call': {
      const callId = String(d.callId ?? '');
      const call: SubagentCall = { callId, name: String(d.name ?? 'tool'), summary: argsSummary(d.arguments), status: d.synthetic ? 'error' : 'running' };
      const at = s.calls.findIndex((c) => c.callId === callId);
      if (at >= 0) return { ...s, calls: s.calls.map((c, i) => i === at ? { ...call, status: c.status === 'awaiting-permission' ? c.status : call.status } : c) };
      const calls = [...s.calls, call];
      const drop = Math.max(0, calls.length - SUBAGENT_CALLS);
      return { ...s, calls: calls.slice(drop), earlier: s.earlier + drop };
    }
    case 'tool/result': {
      const callId = String(d.callId ?? '');
      const error = d.error as ToolError | undefined;
      const block = ((d.message as { content?: unknown[] } | undefined)?.content ?? []).find((b) => (b as { type?: string }).type === 'tool-result') as { isError?: boolean } | undefined;
      const failed = !!error || !!block?.isError;
      return callStatus(s, callId, failed ? 'error' : 'ok', error?.code);
    }
    case 'assistant/message': {
      const text = textOf(((d.message as { content?: [] } | undefined)?.content) ?? []).trim();
      return text ? { ...s, text: cut(text) } : s;
    }
    default:
      return s;
  }
}

/** The child's call `callId` now has `status` (nothing when the card does not list it). */
export function callStatus(s: SubagentState, callId: string, status: SubagentCallStatus, error?: string): SubagentState {
  const at = s.calls.findIndex((c) => c.callId === callId);
  if (at < 0) return s;
  return { ...s, calls: s.calls.map((c, i) => i === at ? { ...c, status, ...(error ? { error } : {}) } : c) };
}

/** A `run_subagent` call known only from a transcript page: its description (the call's arguments),
 *  its summary (the call's result) and how it ended (the result's error code). */
export function subagentFromCall(args: unknown, status: 'pending' | 'awaiting-permission' | 'running' | 'ok' | 'error', result: string, error?: ToolError, meta?: Record<string, unknown>): SubagentState {
  const a = (args ?? {}) as { description?: unknown; agent?: unknown; tools?: unknown };
  // The result's meta names the child and how it ended (newer daemons); else the error code says it.
  const told = typeof meta?.status === 'string' && isStatus(meta.status) && status !== 'running' && status !== 'pending' ? meta.status : undefined;
  const ended: SubagentStatus = told ?? (status === 'ok' ? 'completed'
    : status === 'error' ? (error?.code === 'CANCELLED' ? 'cancelled' : error?.code === 'SUBAGENT_STOPPED' ? 'stopped' : 'error')
      : 'running');
  return {
    description: typeof a.description === 'string' ? a.description : '', status: ended, steps: 0, calls: [], earlier: 0,
    ...(typeof meta?.childId === 'string' ? { childId: meta.childId } : {}),
    ...(typeof a.agent === 'string' ? { agent: a.agent } : {}), ...(typeof a.tools === 'string' ? { tools: a.tools } : {}),
    ...(ended !== 'running' && result ? { summary: result } : {}),
  };
}

/** The child's own stored transcript (`dsh/session/transcript` of `childId`), read when the parent's
 *  turn was replayed from a page: its tool calls, steps and last words. Calls seen live win. */
export function subagentFromTranscript(s: SubagentState, page: TranscriptPage): SubagentState {
  if (s.calls.length) return s;
  const turns = [...page.turns].sort((a, b) => a.turn - b.turn);
  const calls: SubagentCall[] = [];
  let steps = 0;
  let text: string | undefined;
  for (const t of turns) {
    for (const it of t.items) {
      if (it.type === 'event') continue; // a process or notice line: no step of the child's
      steps = Math.max(steps, it.step);
      if (it.type === 'tool') {
        const failed = !!it.result && (!!it.result.isError || !!it.result.error);
        calls.push({ callId: it.callId, name: it.name, summary: argsSummary(it.arguments), status: it.synthetic || failed ? 'error' : it.result ? 'ok' : 'running',
          ...(it.result?.error?.code ? { error: it.result.error.code } : {}) });
      } else if (it.type === 'assistant' && it.text.trim()) {
        text = it.text.trim();
      }
    }
  }
  const drop = Math.max(0, calls.length - SUBAGENT_CALLS);
  return { ...s, steps: Math.max(s.steps, steps), calls: calls.slice(drop), earlier: drop, ...(text && !s.text ? { text: cut(text) } : {}) };
}

function cut(text: string): string {
  return text.length > SUBAGENT_TEXT ? text.slice(0, SUBAGENT_TEXT - 1) + '…' : text;
}

/** How the child stands, in words. */
export function subagentStatusText(s: SubagentState): string {
  switch (s.status) {
    case 'running': return 'running';
    case 'completed': return 'done';
    case 'budget': return 'stopped at its step cap';
    case 'cancelled': return 'cancelled';
    case 'interrupted': return 'interrupted (the daemon stopped)';
    case 'error': return 'failed';
    case 'stopped': return 'cut short';
  }
}

function isStatus(s: string): s is SubagentStatus {
  return s === 'completed' || s === 'budget' || s === 'error' || s === 'cancelled' || s === 'interrupted' || s === 'running';
}

/** A tool call's arguments in a few words: the path, command, pattern or query it is about. */
function argsSummary(raw: unknown): string {
  let a: unknown = raw;
  if (typeof raw === 'string') { try { a = JSON.parse(raw); } catch { return raw.slice(0, 120); } }
  if (!a || typeof a !== 'object') return '';
  const o = a as Record<string, unknown>;
  return String(o.command ?? o.path ?? o.pattern ?? o.glob ?? o.query ?? o.symbol ?? '').slice(0, 120);
}
