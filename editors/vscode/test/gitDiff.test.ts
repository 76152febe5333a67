// The @ picker's "git diff" row against real git in a temp repository.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { gitDiffStat, gitDiffText, shortStat } from '../src/gitDiff';

const dirs: string[] = [];
afterEach(() => { for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true }); });

function repo(): string {
  const dir = mkdtempSync(join(tmpdir(), 'dsh-gitdiff-'));
  dirs.push(dir);
  const g = (...args: string[]) => execFileSync('git', args, { cwd: dir, env: { ...process.env, GIT_CONFIG_GLOBAL: '/dev/null', HOME: dir } });
  g('init', '-q');
  g('-c', 'user.email=t@t', '-c', 'user.name=t', 'commit', '-q', '--allow-empty', '-m', 'empty');
  writeFileSync(join(dir, 'a.py'), 'x = 1\n');
  g('add', 'a.py');
  g('-c', 'user.email=t@t', '-c', 'user.name=t', 'commit', '-q', '-m', 'a');
  return dir;
}

describe('git diff of the workspace', () => {
  it('says what changed, staged and not, and gives the diff text', async () => {
    const dir = repo();
    expect(await gitDiffStat(dir)).toBe('');
    expect(await gitDiffText(dir)).toBe('');
    writeFileSync(join(dir, 'a.py'), 'x = 2\n');
    writeFileSync(join(dir, 'b.py'), 'y = 1\n');
    execFileSync('git', ['add', 'b.py'], { cwd: dir });
    expect(await gitDiffStat(dir)).toBe('2 files changed, 2 insertions(+), 1 deletion(-)');
    const text = (await gitDiffText(dir))!;
    expect(text).toContain('-x = 1\n+x = 2\n');
    expect(text).toContain('+++ b/b.py');
    expect(shortStat((await gitDiffStat(dir))!)).toBe('2 files, +2 −1');
    expect(shortStat(' 1 file changed, 1 deletion(-)')).toBe('1 file, +0 −1');
  });

  it('is undefined outside a git work tree', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'dsh-nogit-'));
    dirs.push(dir);
    expect(await gitDiffStat(dir)).toBeUndefined();
    expect(await gitDiffText(dir)).toBeUndefined();
  });
});
