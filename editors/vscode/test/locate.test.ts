// Finding and installing the daemon (src/locate.ts), with real files, real executables and a real
// `python3 -m venv` + pip install of a small package that provides a `dsh-daemon` script.
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { installPlans, locateDaemon, runInstall, which } from '../src/locate';

const root = mkdtempSync(join(tmpdir(), 'dsh-locate-'));
afterAll(() => { if (!process.env.DSH_TEST_KEEP) rmSync(root, { recursive: true, force: true }); });

function exe(file: string, body = '#!/bin/sh\necho hi\n'): string {
  mkdirSync(join(file, '..'), { recursive: true });
  writeFileSync(file, body);
  chmodSync(file, 0o755);
  return file;
}

describe('locating dsh-daemon', () => {
  const bin = join(root, 'bin');
  const ws = join(root, 'ws');
  const venvDaemon = exe(join(ws, '.venv', 'bin', 'dsh-daemon'));
  const installed = exe(join(root, 'storage', 'venv', 'bin', 'dsh-daemon'));
  writeFileSync(join(root, 'not-executable'), 'x');

  it('a configured command: a path must be an executable file, a bare name is looked up on PATH', () => {
    const py = exe(join(bin, 'python9'));
    expect(locateDaemon({ serverCommand: py, serverArgs: ['-m', 'dsh_daemon'], pathEnv: '', workspaceFolders: [ws], installed: [] }))
      .toEqual({ command: py, args: ['-m', 'dsh_daemon'], how: 'setting' });
    expect(locateDaemon({ serverCommand: 'python9', serverArgs: [], pathEnv: `/nowhere:${bin}`, workspaceFolders: [], installed: [] }))
      .toEqual({ command: py, args: [], how: 'setting' });
    expect(locateDaemon({ serverCommand: '/nope/dsh-daemon', serverArgs: [], pathEnv: bin, workspaceFolders: [ws], installed: [installed] }))
      .toEqual({ missing: '/nope/dsh-daemon', configured: true });
    expect(locateDaemon({ serverCommand: join(root, 'not-executable'), serverArgs: [], pathEnv: '', workspaceFolders: [], installed: [] }))
      .toMatchObject({ configured: true });
  });

  it('unset: PATH first, then a workspace folder\'s .venv, then what this extension installed', () => {
    const o = { serverCommand: '', serverArgs: [], workspaceFolders: [join(root, 'other'), ws], installed: [installed] };
    expect(locateDaemon({ ...o, pathEnv: '/nowhere' })).toEqual({ command: venvDaemon, args: [], how: 'workspace .venv' });
    expect(locateDaemon({ ...o, pathEnv: '/nowhere', workspaceFolders: [] })).toEqual({ command: installed, args: [], how: 'installed' });
    const onPath = exe(join(root, 'pathbin', 'dsh-daemon'));
    expect(locateDaemon({ ...o, pathEnv: join(root, 'pathbin') })).toEqual({ command: onPath, args: [], how: 'PATH' });
    expect(locateDaemon({ ...o, pathEnv: '/nowhere', workspaceFolders: [], installed: [] })).toMatchObject({ configured: false });
    expect(which('dsh-daemon', `${join(root, 'not-there')}:${join(root, 'pathbin')}`)).toBe(onPath);
  });

  it('install plans: pip into the extension storage with python3; pipx and uv when they are on PATH', () => {
    const tools = join(root, 'tools');
    exe(join(tools, 'python3'));
    expect(installPlans({ pathEnv: tools, storage: '/st', source: 'dsh-daemon' }).map((p) => [p.tool, p.steps.map((s) => s.args.join(' '))])).toEqual([
      ['pip', ['-m venv /st/venv', '-m pip install --upgrade dsh-daemon']],
    ]);
    exe(join(tools, 'pipx'));
    exe(join(tools, 'uv'));
    expect(installPlans({ pathEnv: tools, storage: '/st', source: 'dsh-daemon' }).map((p) => [p.tool, p.steps.map((s) => s.args.join(' '))])).toEqual([
      ['pip', ['venv --allow-existing /st/venv', 'pip install --python /st/venv/bin/python --upgrade dsh-daemon']],
      ['pipx', ['install --force dsh-daemon']],
      ['uv', ['tool install --force dsh-daemon']],
    ]);
    expect(installPlans({ pathEnv: '/nowhere', storage: '/st', source: 'x' })).toEqual([]);
  });

  it('installs with pip into a venv in the storage (a real venv and a real package) and finds the executable', { timeout: 180000 }, async () => {
    const python = which('python3', process.env.PATH);
    if (!python) return; // a machine without Python cannot install this way either
    const pkg = join(root, 'pkg');
    mkdirSync(join(pkg, 'fakedsh'), { recursive: true });
    writeFileSync(join(pkg, 'pyproject.toml'), '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n\n[project]\nname = "fakedsh"\nversion = "0.0.1"\n\n[project.scripts]\ndsh-daemon = "fakedsh:main"\n\n[tool.setuptools]\npackages = ["fakedsh"]\n');
    writeFileSync(join(pkg, 'fakedsh', '__init__.py'), 'def main():\n    print("fake daemon")\n');
    const storage = join(root, 'install');
    const [plan] = installPlans({ pathEnv: process.env.PATH, storage, source: pkg });
    expect(plan.tool).toBe('pip');
    const lines: string[] = [];
    const exePath = await runInstall(plan, (l) => lines.push(l));
    expect(exePath).toBe(join(storage, 'venv', 'bin', 'dsh-daemon'));
    expect(lines[0]).toBe(`$ ${python} -m venv ${join(storage, 'venv')}`);
    expect(locateDaemon({ serverCommand: '', serverArgs: [], pathEnv: '/nowhere', workspaceFolders: [], installed: [exePath] })).toEqual({ command: exePath, args: [], how: 'installed' });
    // A source that does not exist: the error says which step failed.
    await expect(runInstall({ ...plan, steps: [plan.steps[1]].map((s) => ({ ...s, args: [...s.args.slice(0, -1), join(root, 'no-such-package')] })) }, () => undefined))
      .rejects.toThrow(/pip install .* failed \(exit 1\)/);
  });
});
