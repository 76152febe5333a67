// How a tool card says the way its call ended, in words: a call the person rejected, or one refused
// before it ran (the daemon's `DENIED` with `meta.denied`, protocol.md §7 `tool/result`), is no
// failure of the tool: it is drawn quiet (grey), not as a red error, and says who stopped it.
import type { ToolItem } from '../src/protocol/reducer';

export interface ToolOutcomeLook {
  /** The card's class: its left border and badge colour. */
  cls: 'pending' | 'awaiting-permission' | 'running' | 'ok' | 'error' | 'rejected' | 'denied';
  badge: string;
  /** The words on the folded result line (undefined: "result" for a success). */
  summary?: string;
  /** A line of its own under the card's head: why a refused call did not run. */
  why?: string;
}

const DENIED_BY: Record<string, string> = {
  'plan-mode': 'not allowed in Plan mode',
  policy: 'turned off in your settings',
  hook: 'blocked by one of your hooks',
  toolset: "not in this subagent's tools",
  review: 'not allowed in a review',
  command: 'not allowed by this command',
  'no-client': 'needed your permission and no window could ask',
};

const TOOL_ERRORS: Record<string, string> = {
  REJECTED: 'rejected', DENIED: 'not allowed',
  EDIT_CONFLICT: 'the file changed: not applied', OUTSIDE_WORKSPACE: 'outside the workspace',
  NOT_FOUND_IN_FILE: 'text not found in the file', TOOL_NOT_STARTED: 'not started', TOOL_OUTCOME_UNKNOWN: 'outcome unknown',
  ABORTED_BEFORE_DISPATCH: 'stopped before it ran', CANCELLED: 'cancelled', TIMEOUT: 'timed out', UNKNOWN_TOOL: 'no such tool',
  SANDBOX_DENIED: 'blocked by the sandbox', EDITOR_UNAVAILABLE: 'the editor could not apply it',
};

/** Why a refused call was refused, for a person ("not allowed in Plan mode"). */
export function deniedWords(meta: Record<string, unknown> | undefined): string {
  const by = meta?.denied;
  return (typeof by === 'string' && DENIED_BY[by]) || 'not allowed';
}

/** A tool error code in words; an unknown code as lower-case words. */
export function toolErrorWords(code: string): string {
  return TOOL_ERRORS[code] ?? code.toLowerCase().replace(/_/g, ' ');
}

export function toolOutcomeLook(it: Pick<ToolItem, 'status' | 'error' | 'meta'>): ToolOutcomeLook {
  if (it.status !== 'error') {
    const badge = { pending: 'pending', 'awaiting-permission': 'awaiting permission', running: 'running', ok: 'ok' }[it.status];
    return { cls: it.status, badge };
  }
  const code = it.error?.code;
  if (code === 'REJECTED') return { cls: 'rejected', badge: 'rejected', summary: 'what the agent was told' };
  if (code === 'DENIED') {
    const words = deniedWords(it.meta);
    return { cls: 'denied', badge: 'not allowed', summary: 'what the agent was told', why: words[0].toUpperCase() + words.slice(1) };
  }
  return { cls: 'error', badge: 'error', summary: code ? toolErrorWords(code) : undefined };
}
