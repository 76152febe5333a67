// Deleting a session, as the Sessions view and the Switch Session picker ask it: a session in its own
// worktree asks whether the worktree goes too (kept, it is listed without a session, never removed
// silently).
import * as vscode from 'vscode';
import type { ListedSession } from './protocol/worktrees';

export const DELETE_WITH_WORKTREE = 'Delete and Remove Worktree';
export const DELETE_KEEP_WORKTREE = 'Delete, Keep Worktree';

/** The person's answer: undefined when they cancelled. */
export async function confirmDeleteSession(s: ListedSession): Promise<{ removeWorktree: boolean } | undefined> {
  const title = s.title || '(untitled)';
  const w = s.worktree;
  if (w?.exists) {
    const files = w.changedFiles ? `, ${w.changedFiles} changed file${w.changedFiles === 1 ? '' : 's'}` : '';
    const choice = await vscode.window.showWarningMessage(`Delete the dsh session "${title}"?`, {
      modal: true,
      detail: `Its transcript and queued prompts are removed for good. Its worktree ${w.path} (branch ${w.branch}${files}) can go with it (folder and branch, uncommitted work included), or stay listed under "Worktrees without a session" until you keep or discard it.`,
    }, DELETE_WITH_WORKTREE, DELETE_KEEP_WORKTREE);
    return choice === undefined ? undefined : { removeWorktree: choice === DELETE_WITH_WORKTREE };
  }
  const yes = await vscode.window.showWarningMessage(`Delete the dsh session "${title}"?`,
    { modal: true, detail: 'Its transcript and queued prompts are removed for good.' }, 'Delete');
  return yes === 'Delete' ? { removeWorktree: false } : undefined;
}
