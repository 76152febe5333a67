// A fork's badge in the Switch Session quick pick and the Sessions view (the daemon's `forkOf`).
import { describe, expect, it } from 'vitest';
import type { ListedSession } from '../src/protocol/worktrees';
import { forkBadge, sessionPickRow } from '../src/sessionRows';
import { nodeLook, sessionTree } from '../src/sessionsTree';

function session(id: string, more: Partial<ListedSession> = {}): ListedSession {
  return { sessionId: id, title: `S ${id}`, cwd: '/p/app', createdAt: 1, updatedAt: 2, status: 'idle', pending: 0, ...more };
}

const FORK = session('f', { title: 'Work (fork)', forkOf: { sessionId: 'orig-0123456789', atTurn: 3, title: 'Work' }, pending: 2 });

describe('fork badge', () => {
  it('names the original in the quick pick, with the fork codicon, and nothing for a session that is no fork', () => {
    const row = sessionPickRow(FORK, 'f');
    expect(row.label).toBe('$(repo-forked) Work (fork)');
    expect(row.description.startsWith('current · fork of «Work» · idle, 2 queued · ')).toBe(true);
    const plain = sessionPickRow(session('a'), 'f');
    expect(plain.label).toBe('S a');
    expect(plain.description).not.toContain('fork');
    expect(forkBadge(session('a'))).toBeUndefined();
  });

  it('says it in the Sessions view row and its tooltip', () => {
    const [node] = sessionTree([FORK]);
    const look = nodeLook(node!);
    expect(look.description).toBe('fork of «Work» · 2 queued');
    expect(look.tooltip).toContain('forked from «Work» after turn 3 (session orig-012)');
    expect(nodeLook(sessionTree([session('a')])[0]!).description).toBe('');
  });

  it('words an untitled original', () => {
    expect(forkBadge({ forkOf: { sessionId: 'x', atTurn: 1, title: '' } })).toBe('fork of «(untitled)»');
  });
});
