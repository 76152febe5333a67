// What the "dsh" output channel says, apart from VS Code: a failed turn once, with its code, message,
// the retries before it and what the provider said (secrets redacted), then the provider's answer body
// as it came (`error.providerBody`, protocol.md §7) as an entry of its own; the daemon's stderr lines
// with one timestamp (the channel's own), at the level the daemon gave them.
import type { AnyEvent } from './protocol/types';

export type LogLevel = 'error' | 'warn' | 'info' | 'debug';

// The daemon's stderr format (host/stdio.py): "2026-12-05 09:16:00,123 LEVEL logger: message".
const DAEMON_LINE = /^\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[,.]\d+)? (DEBUG|INFO|WARNING|ERROR|CRITICAL) (.*)$/s;
const LEVELS: Record<string, LogLevel> = { DEBUG: 'debug', INFO: 'info', WARNING: 'warn', ERROR: 'error', CRITICAL: 'error' };

/** A daemon stderr line as the channel logs it: without the daemon's own timestamp (the channel
 *  stamps each line), at the daemon's level; a line in another form (a traceback's) as it is. */
export function daemonLine(line: string): { level: LogLevel; text: string } {
  const m = DAEMON_LINE.exec(line);
  if (m) return { level: LEVELS[m[1]] ?? 'info', text: `daemon ${m[2]}` };
  if (/\b(ERROR|CRITICAL|Traceback)\b/.test(line)) return { level: 'error', text: line };
  if (/\bWARNING\b/.test(line)) return { level: 'warn', text: line };
  return { level: 'info', text: line };
}

// Keys and tokens a provider's error text may echo back: an API key (sk-…), a bearer token, a
// `key=`/`api_key:` value. The daemon redacts its configured keys; this catches any other.
const SECRETS: Array<[RegExp, string]> = [
  [/\bsk-[A-Za-z0-9_-]{6,}/g, 'sk-…(redacted)'],
  [/\b(Bearer\s+)[A-Za-z0-9._~+/=-]{8,}/gi, '$1…(redacted)'],
  [/\b((?:api[_-]?)?key["']?\s*[:=]\s*["']?)[A-Za-z0-9._-]{8,}/gi, '$1…(redacted)'],
];

export function redactSecrets(text: string): string {
  return SECRETS.reduce((t, [re, by]) => t.replace(re, by), text);
}

/** Fields of a turn's error said apart from the bracketed `key=value` list. */
const LINE_APART = new Set(['code', 'message', 'providerBody']);

/** The provider's answer body as one log entry under the failed turn's line, each of its lines
 *  indented (the daemon redacted its keys and cut it to 2,000 characters; key-like text goes too). */
export function bodyBlock(body: string): string {
  return ['provider body:', ...redactSecrets(body).split(/\r?\n/).map((l) => `    ${l}`)].join('\n');
}

interface Retry { retry: number; delayMs: number; code: string; status?: number; message: string }

function delay(ms: number): string {
  return ms < 1000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms / 100) / 10} s`;
}

/** Folds a session's events; `lines(e)` says what to log for one: a failed turn's line, once per
 *  turn however often its events are replayed (a reattach, a reload). */
export class TurnFailureLog {
  private readonly retries = new Map<string, Retry[]>();
  private readonly logged = new Set<string>();

  lines(e: AnyEvent): string[] {
    const d = e.data as Record<string, any>;
    const key = `${e.sessionId}:${d?.turn}`;
    if (e.type === 'turn/start') {
      if (!this.logged.has(key)) this.retries.delete(key);
      return [];
    }
    if (e.type === 'llm/retry') {
      const list = this.retries.get(key) ?? [];
      // A replayed retry is the same retry (its number in the turn's step), not another one.
      if (!list.some((r) => r.retry === d.retry && r.message === d.error?.message)) {
        list.push({ retry: d.retry, delayMs: d.delayMs, code: d.error?.code ?? '?', status: d.error?.status, message: String(d.error?.message ?? '') });
      }
      this.retries.set(key, list);
      return [];
    }
    if (e.type !== 'turn/end' || d?.reason?.kind !== 'error' || this.logged.has(key)) return [];
    this.logged.add(key);
    const err = d.reason.error ?? {};
    const retries = this.retries.get(key) ?? [];
    this.retries.delete(key);
    const schedule = retries.length
      ? retries.map((r) => `#${r.retry} after ${delay(r.delayMs)} (${r.code}${r.status ? ` ${r.status}` : ''})`).join(', ')
      : 'none';
    const said = [...new Set([...retries.map((r) => r.message), String(err.message ?? '')].filter(Boolean))];
    const extra = Object.entries(err).filter(([k]) => !LINE_APART.has(k)).map(([k, v]) => `${k}=${JSON.stringify(v)}`);
    const line = redactSecrets(
      `turn ${d.turn} of session ${e.sessionId.slice(0, 8)} failed: ${err.code ?? 'UNKNOWN'}: ${err.message ?? ''}`
      + `${extra.length ? ` [${extra.join(' ')}]` : ''}; retries: ${schedule}; the provider said: ${said.map((s) => JSON.stringify(s)).join(' | ') || 'nothing'}`,
    );
    return typeof err.providerBody === 'string' && err.providerBody ? [line, bodyBlock(err.providerBody)] : [line];
  }
}

/** Why the daemon asked the editor to save documents: after an agent's edit, or while a checkpoint
 *  restore the person started writes files back (the daemon's request does not say). */
export class SaveReason {
  private restoring = 0;

  /** Runs `work` (a `dsh/session/rewind`) as a restore. */
  async during<T>(work: () => Promise<T>): Promise<T> {
    this.restoring++;
    try {
      return await work();
    } finally {
      this.restoring--;
    }
  }

  /** The log line of a save of `names`. */
  savedLine(names: string[]): string {
    return `saved after ${this.restoring ? 'a checkpoint restore' : 'an agent edit'}: ${names.join(', ') || 'nothing'}`;
  }
}
