// Sessions in their own git worktree (protocol.md §20): the list rows' `worktree`, and the
// `dsh/worktree/*` methods, over the client's Rpc seam (daemons with the `worktrees` flag).
import type { DshClient } from './client';
import type { SessionInfo } from './types';

/** `worktree` of a `dsh/session/list` row: figures only while the folder exists. */
export interface SessionWorktree {
  path: string; branch: string; base: string; repo: string; exists: boolean;
  /** Files that differ from the base: commits and uncommitted work together. */
  changedFiles?: number;
  /** Commits on the branch that the base does not have. */
  ahead?: number;
}

export type ListedSession = SessionInfo & { worktree?: SessionWorktree };

/** A `dsh/worktree/list` row; `sessionId: null` once its session was deleted. */
export interface WorktreeRow extends SessionWorktree {
  baseCommit: string;
  sessionId: string | null;
}

/** A file of a worktree's diff against its base. */
export interface WorktreeFile { path: string; status: 'added' | 'modified' | 'deleted' | string; added: number; removed: number; binary?: boolean }

export interface WorktreeDiff {
  path: string; branch: string; base: string; baseCommit: string;
  files: WorktreeFile[];
  patch: string;
  truncated: boolean;
}

export type ApplyResult =
  | { applied: true; files: WorktreeFile[] }
  | { applied: false; conflicts: Array<{ path: string; reason: string }> };

/** Which worktree a method acts on: a session's, or (its session gone) one named by its folder. */
export type WorktreeRef = { sessionId: string } | { path: string };

export function newWorktreeSession(client: DshClient, cwd: string | undefined, worktree: { branch?: string; base?: string }): Promise<{ sessionId: string }> {
  return client.rpc.request('dsh/session/new', cwd ? { cwd, worktree } : { worktree });
}

export function listWorkspaceSessions(client: DshClient, cwd: string | undefined, limit = 200): Promise<{ sessions: ListedSession[] }> {
  return client.rpc.request('dsh/session/list', cwd ? { cwd, limit } : { limit });
}

export function listWorktrees(client: DshClient, repo?: string): Promise<{ worktrees: WorktreeRow[] }> {
  return client.rpc.request('dsh/worktree/list', repo ? { repo } : {});
}

export function worktreeDiff(client: DshClient, ref: WorktreeRef): Promise<WorktreeDiff> {
  return client.rpc.request('dsh/worktree/diff', ref);
}

export function worktreeApply(client: DshClient, ref: WorktreeRef): Promise<ApplyResult> {
  return client.rpc.request('dsh/worktree/apply', ref);
}

export function worktreeKeep(client: DshClient, ref: WorktreeRef): Promise<{ branch: string; commit: string }> {
  return client.rpc.request('dsh/worktree/keep', ref);
}

export function worktreeDiscard(client: DshClient, ref: WorktreeRef): Promise<{ branch: string }> {
  return client.rpc.request('dsh/worktree/discard', ref);
}

/** `removeWorktree`: the session's worktree (folder and branch) goes too; else it is listed without a session. */
export function deleteSession(client: DshClient, sessionId: string, removeWorktree: boolean): Promise<Record<string, never>> {
  return client.rpc.request('dsh/session/delete', removeWorktree ? { sessionId, removeWorktree } : { sessionId });
}
