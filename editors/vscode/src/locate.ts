// Finding the daemon, and installing it when it is nowhere (no vscode import: tested in plain Node).
//
// With `dsh.serverCommand` set, that command is used (a bare name is looked up on PATH). Unset, the
// first of: `dsh-daemon` on PATH; in a workspace folder's `.venv`; the copy this extension installed
// (its global storage, or where pipx / uv put it). Installing: pip into a venv in the extension's
// global storage (uv makes the venv when it is there), or `pipx install` / `uv tool install`.
import { spawn } from 'node:child_process';
import { accessSync, constants, statSync } from 'node:fs';
import * as path from 'node:path';

export const DAEMON_NAME = 'dsh-daemon';

export interface Located {
  command: string; args: string[];
  /** Where it was found, for the log. */
  how: 'setting' | 'PATH' | 'workspace .venv' | 'installed';
}

/** Not found: what was looked for (for a person), and whether it was a configured command. */
export interface Missing { missing: string; configured: boolean }

export interface LocateOptions {
  serverCommand: string; serverArgs: string[];
  pathEnv: string | undefined;
  workspaceFolders: string[];
  /** Executables this extension installed (a venv in its storage, or what pipx / uv reported). */
  installed: string[];
  platform?: NodeJS.Platform;
}

export function isExecutable(file: string, platform: NodeJS.Platform = process.platform): boolean {
  try {
    if (!statSync(file).isFile()) return false;
    if (platform !== 'win32') accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** `name` on PATH (with the Windows extensions), else undefined. */
export function which(name: string, pathEnv: string | undefined, platform: NodeJS.Platform = process.platform): string | undefined {
  const exts = platform === 'win32' ? ['.exe', '.cmd', '.bat', ''] : [''];
  for (const dir of (pathEnv ?? '').split(platform === 'win32' ? ';' : ':')) {
    if (!dir) continue;
    for (const ext of exts) {
      const file = path.join(dir, name + ext);
      if (isExecutable(file, platform)) return file;
    }
  }
  return undefined;
}

export function venvBin(venv: string, name: string, platform: NodeJS.Platform = process.platform): string {
  return platform === 'win32' ? path.join(venv, 'Scripts', `${name}.exe`) : path.join(venv, 'bin', name);
}

export function locateDaemon(o: LocateOptions): Located | Missing {
  const platform = o.platform ?? process.platform;
  const setting = o.serverCommand.trim();
  if (setting) {
    const hasDir = setting.includes('/') || (platform === 'win32' && setting.includes('\\'));
    const found = hasDir ? (isExecutable(setting, platform) ? setting : undefined) : which(setting, o.pathEnv, platform);
    return found ? { command: found, args: o.serverArgs, how: 'setting' } : { missing: setting, configured: true };
  }
  const onPath = which(DAEMON_NAME, o.pathEnv, platform);
  if (onPath) return { command: onPath, args: o.serverArgs, how: 'PATH' };
  for (const folder of o.workspaceFolders) {
    const file = venvBin(path.join(folder, '.venv'), DAEMON_NAME, platform);
    if (isExecutable(file, platform)) return { command: file, args: o.serverArgs, how: 'workspace .venv' };
  }
  for (const file of o.installed) if (isExecutable(file, platform)) return { command: file, args: o.serverArgs, how: 'installed' };
  return { missing: `${DAEMON_NAME} (on PATH, in the workspace's .venv, or installed by this extension)`, configured: false };
}

// ---- installing -------------------------------------------------------------------------------------

export interface Step { command: string; args: string[] }
export interface InstallPlan {
  tool: 'pip' | 'pipx' | 'uv';
  label: string; detail: string;
  steps: Step[];
  /** Where the executable is after the steps (a command that prints a directory, for pipx / uv). */
  bin: string | { ask: Step; name: string };
}

/** The ways to install `source` (a package name, a path, a wheel or a URL) that this machine has. */
export function installPlans(o: { pathEnv: string | undefined; storage: string; source: string; platform?: NodeJS.Platform }): InstallPlan[] {
  const platform = o.platform ?? process.platform;
  const venv = path.join(o.storage, 'venv');
  const plans: InstallPlan[] = [];
  const uv = which('uv', o.pathEnv, platform);
  const python = which(platform === 'win32' ? 'python' : 'python3', o.pathEnv, platform) ?? which('python', o.pathEnv, platform);
  const venvPython = platform === 'win32' ? path.join(venv, 'Scripts', 'python.exe') : path.join(venv, 'bin', 'python');
  if (uv) {
    plans.push({
      tool: 'pip', label: 'Install into VS Code\'s storage for dsh (uv)', detail: venv,
      steps: [{ command: uv, args: ['venv', '--allow-existing', venv] }, { command: uv, args: ['pip', 'install', '--python', venvPython, '--upgrade', o.source] }],
      bin: venvBin(venv, DAEMON_NAME, platform),
    });
  } else if (python) {
    plans.push({
      tool: 'pip', label: 'Install into VS Code\'s storage for dsh (pip)', detail: venv,
      steps: [{ command: python, args: ['-m', 'venv', venv] }, { command: venvPython, args: ['-m', 'pip', 'install', '--upgrade', o.source] }],
      bin: venvBin(venv, DAEMON_NAME, platform),
    });
  }
  const pipx = which('pipx', o.pathEnv, platform);
  if (pipx) {
    plans.push({
      tool: 'pipx', label: 'Install with pipx', detail: 'pipx install dsh-daemon (also on your PATH in a terminal)',
      steps: [{ command: pipx, args: ['install', '--force', o.source] }],
      bin: { ask: { command: pipx, args: ['environment', '--value', 'PIPX_BIN_DIR'] }, name: DAEMON_NAME },
    });
  }
  if (uv) {
    plans.push({
      tool: 'uv', label: 'Install with uv tool', detail: 'uv tool install dsh-daemon (also on your PATH in a terminal)',
      steps: [{ command: uv, args: ['tool', 'install', '--force', o.source] }],
      bin: { ask: { command: uv, args: ['tool', 'dir', '--bin'] }, name: DAEMON_NAME },
    });
  }
  return plans;
}

/** Runs a plan, each output line to `log`; the installed executable's path, or an Error saying why. */
export async function runInstall(plan: InstallPlan, log: (line: string) => void, env: NodeJS.ProcessEnv = process.env): Promise<string> {
  for (const step of plan.steps) {
    const r = await run(step, log, env);
    if (r.code !== 0) throw new Error(`${path.basename(step.command)} ${step.args.join(' ')} failed (exit ${r.code}): ${r.tail.trim().split('\n').slice(-3).join(' ')}`);
  }
  let bin: string;
  if (typeof plan.bin === 'string') bin = plan.bin;
  else {
    const r = await run(plan.bin.ask, log, env);
    const dir = r.out.trim().split('\n').pop() ?? '';
    bin = path.join(dir, process.platform === 'win32' ? `${plan.bin.name}.exe` : plan.bin.name);
  }
  if (!isExecutable(bin)) throw new Error(`the install finished, but ${bin} is not there`);
  return bin;
}

function run(step: Step, log: (line: string) => void, env: NodeJS.ProcessEnv): Promise<{ code: number; out: string; tail: string }> {
  return new Promise((resolve) => {
    log(`$ ${step.command} ${step.args.join(' ')}`);
    let out = '';
    let tail = '';
    const p = spawn(step.command, step.args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    const take = (b: Buffer, isOut: boolean) => {
      const s = b.toString();
      if (isOut) out += s;
      tail = (tail + s).slice(-4000);
      for (const line of s.split('\n')) if (line.trim()) log(line);
    };
    p.stdout.on('data', (b: Buffer) => take(b, true));
    p.stderr.on('data', (b: Buffer) => take(b, false));
    p.on('error', (err) => resolve({ code: -1, out, tail: tail + String(err) }));
    p.on('close', (code) => resolve({ code: code ?? -1, out, tail }));
  });
}
