// What the @ picker searches (no vscode import: tested in plain Node): the files git does not ignore,
// and a query as a case-insensitive glob for vscode.workspace.findFiles.
import { execFile } from 'node:child_process';

/** The files of the git work tree at `root` that are tracked or untracked but not ignored
 *  (`.gitignore`, `.git/info/exclude`, the global excludes), relative to `root` with `/`;
 *  undefined when `root` is not in a git work tree or git is not there. */
export function gitFiles(root: string, timeoutMs = 10000): Promise<Set<string> | undefined> {
  return new Promise((resolve) => {
    execFile('git', ['-c', 'core.quotepath=off', 'ls-files', '-z', '--cached', '--others', '--exclude-standard'],
      { cwd: root, timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024, encoding: 'utf8' },
      (err, stdout) => resolve(err ? undefined : new Set(stdout.split('\0').filter(Boolean))));
  });
}

/** The glob a query matches as a substring of a path, letters in either case (findFiles' globs are
 *  case-sensitive); glob characters in the query are matched literally. */
export function queryGlob(query: string): string {
  const q = query.trim();
  if (!q) return '**/*';
  let out = '';
  for (const ch of q) {
    if (/[a-z]/i.test(ch)) out += `[${ch.toLowerCase()}${ch.toUpperCase()}]`;
    else if (/[*?[\]{}!,]/.test(ch)) out += `[${ch}]`;
    else out += ch;
  }
  // The query may span folders (`src/pan`): the match is on the path relative to the folder.
  return `{**/*${out}*,**/*${out}*/**}`;
}

/** The patterns of a `files.exclude` / `search.exclude` setting that are on (`true`; a `when`
 *  clause counts as on: its sibling test cannot be made here). */
export function excludePatterns(...settings: Array<Record<string, unknown> | undefined>): string[] {
  const out: string[] = [];
  for (const s of settings) for (const [glob, on] of Object.entries(s ?? {})) if (on === true || (typeof on === 'object' && on !== null)) out.push(glob);
  return [...new Set(out)];
}

/** One exclude glob for findFiles (undefined: none). */
export function excludeGlob(patterns: string[]): string | undefined {
  return patterns.length ? `{${patterns.join(',')}}` : undefined;
}
