// How a session is named in a list (the Switch Session quick pick, the Sessions view): its fork badge
// from the daemon's `forkOf` (protocol.md §3), so a fork is told from its original at a glance.
import type { SessionInfo } from './protocol/types';

/** "fork of «Work»" for a fork (the original's title when it was forked); undefined otherwise. */
export function forkBadge(s: Pick<SessionInfo, 'forkOf'>): string | undefined {
  const f = s.forkOf;
  if (!f) return undefined;
  return `fork of «${f.title || '(untitled)'}»`;
}

/** The tooltip line of a fork: where it was cut and which session it came from. */
export function forkLine(s: Pick<SessionInfo, 'forkOf'>): string | undefined {
  const f = s.forkOf;
  return f ? `forked from «${f.title || '(untitled)'}» after turn ${f.atTurn} (session ${f.sessionId.slice(0, 8)})` : undefined;
}

export interface SessionPickRow { label: string; description: string; detail: string }

/** A Switch Session row: a fork's label carries the fork codicon and its description says of what. */
export function sessionPickRow(s: SessionInfo, currentId: string | null | undefined): SessionPickRow {
  const badge = forkBadge(s);
  const parts = [
    s.sessionId === currentId ? 'current' : '',
    badge ?? '',
    `${s.status}${s.pending ? `, ${s.pending} queued` : ''}`,
    new Date(s.updatedAt).toLocaleString(),
  ].filter(Boolean);
  return {
    label: `${badge ? '$(repo-forked) ' : ''}${s.title || '(untitled)'}`,
    description: parts.join(' · '),
    detail: s.lastPrompt ? `${s.lastPrompt} — ${s.cwd}` : s.cwd,
  };
}
