// The "git diff" row of the @ picker (no vscode import: tested in plain Node against real git): a
// work tree's uncommitted changes, read when the prompt is sent (the daemon's `gitDiff` context,
// protocol.md §6) so the chip always carries the changes as they are then.
import { execFile } from 'node:child_process';

const MAX_DIFF_BYTES = 8 * 1024 * 1024;

function git(root: string, args: string[], timeoutMs: number): Promise<string | undefined> {
  return new Promise((resolve) => {
    execFile('git', ['-c', 'core.quotepath=off', ...args], { cwd: root, timeout: timeoutMs, maxBuffer: MAX_DIFF_BYTES, encoding: 'utf8' },
      (err, stdout) => resolve(err ? undefined : stdout));
  });
}

/** "2 files changed, 3 insertions(+), 1 deletion(-)" for the work tree at `root` against HEAD
 *  (staged and unstaged); '' when nothing changed; undefined when `root` is no git work tree with a
 *  commit (or git is not there). */
export async function gitDiffStat(root: string, timeoutMs = 5000): Promise<string | undefined> {
  const out = await git(root, ['diff', 'HEAD', '--shortstat', '--no-ext-diff'], timeoutMs);
  return out?.trim();
}

/** The text of `git diff HEAD` at `root` (undefined as for gitDiffStat). */
export function gitDiffText(root: string, timeoutMs = 10000): Promise<string | undefined> {
  return git(root, ['diff', 'HEAD', '--no-color', '--no-ext-diff'], timeoutMs);
}

/** git's --shortstat in few characters, for a 300 px row: "2 files, +3 −1". */
export function shortStat(stat: string): string {
  const n = (re: RegExp) => Number(re.exec(stat)?.[1] ?? 0);
  const files = n(/(\d+) files? changed/);
  return `${files} file${files === 1 ? '' : 's'}, +${n(/(\d+) insertions?/)} −${n(/(\d+) deletions?/)}`;
}
