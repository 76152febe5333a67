// Spawns the real Python daemon over stdio with vscode-jsonrpc framing, for integration tests.
import { spawn, ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { createMessageConnection, MessageConnection, StreamMessageReader, StreamMessageWriter } from 'vscode-jsonrpc/node';
import { DshClient } from '../src/protocol/client';
import { rpcFromConnection } from '../src/protocol/connection';
import type { AnyEvent } from '../src/protocol/types';
import { afterEach, beforeEach } from 'vitest';
import { FakeProvider } from './fakeProvider';

export const REPO = resolve(__dirname, '../../..');
export const PYTHON = process.env.DSH_PYTHON ?? join(REPO, '.venv/bin/python');

export interface TestDaemon {
  proc: ChildProcess; conn: MessageConnection; client: DshClient; events: AnyEvent[]; stderr: string[];
  applied: any[]; state: string; root: string;
  waitFor(pred: () => boolean, what?: string, timeoutMs?: number): Promise<void>;
  of(sessionId: string, ...types: string[]): AnyEvent[];
  /** The daemon's id of the session's latest call the provider named `providerId` (the fake
   *  provider's scripts name calls by its ids; the wire names them by the daemon's). */
  callId(sessionId: string, providerId: string): string;
  stop(): Promise<void>;
}

const created: string[] = [];

/** Removes the state dirs tempState() made (after the daemons using them stopped). */
export function removeTempStates(): void {
  if (process.env.DSH_TEST_KEEP) return;
  for (const dir of created.splice(0)) rmSync(dir, { recursive: true, force: true });
}

export function tempState(): { state: string; root: string } {
  const state = mkdtempSync(join(tmpdir(), 'dsh-vscode-test-'));
  created.push(state);
  const root = join(state, 'work');
  mkdirSync(root, { recursive: true });
  mkdirSync(join(state, 'home'), { recursive: true });
  // Commands run full-access and ask, as before the sandbox (issue 41): these tests are about the
  // client's side of a question; the sandbox has its own tests in tests/sandbox and tests/server.
  writeFileSync(join(state, 'config.json'), '{"tools": {"sandbox": "full-access"}}\n');
  return { state, root };
}

/** `legacy`: leave `client.features` unset, as a client of a daemon without the experimental.dsh flags
 *  would (the panel falls back to its older requests). */
/** `editor`: what the client offers (`capabilities.experimental.dsh`) and the handlers of the requests it brings. */
export async function startDaemon(baseUrl: string, dirs = tempState(), opts: { applyEdit?: boolean; legacy?: boolean; editor?: { offered: object; handlers: Record<string, (p: any) => unknown> } } = {}): Promise<TestDaemon> {
  const { state, root } = dirs;
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith('DEEPSEEK_') && !k.startsWith('DSH_')) env[k] = v;
  Object.assign(env, { DSH_HOME: state, HOME: join(state, 'home'), PYTHONPATH: process.env.DSH_DAEMON_SRC ?? REPO });
  const proc = spawn(PYTHON, ['-m', 'dsh_daemon'], { cwd: root, env, stdio: ['pipe', 'pipe', 'pipe'] });
  const stderr: string[] = [];
  proc.stderr!.on('data', (b: Buffer) => stderr.push(b.toString()));
  const conn = createMessageConnection(new StreamMessageReader(proc.stdout!), new StreamMessageWriter(proc.stdin!));
  const events: AnyEvent[] = [];
  const applied: any[] = [];
  conn.onRequest('workspace/applyEdit', (p: any) => { applied.push(p); return { applied: true }; });
  for (const [method, handler] of Object.entries(opts.editor?.handlers ?? {})) conn.onRequest(method, handler);
  const client = new DshClient(rpcFromConnection(conn));
  client.onEvent((e) => events.push(e));
  conn.listen();
  const init: any = await conn.sendRequest('initialize', {
    processId: process.pid, rootUri: pathToFileURL(root).href,
    capabilities: { workspace: { applyEdit: opts.applyEdit ?? true, workspaceEdit: { resourceOperations: ['create'] } }, ...(opts.editor ? { experimental: { dsh: opts.editor.offered } } : {}) },
    initializationOptions: { baseUrl, apiKey: 'sk-test-0000', thinking: false },
  });
  if (!opts.legacy) client.features = init?.capabilities?.experimental?.dsh;
  await conn.sendNotification('initialized', {});
  let stopped = false;
  const d: TestDaemon = {
    proc, conn, client, events, stderr, applied, state, root,
    async waitFor(pred, what = 'condition', timeoutMs = 15000) {
      const deadline = Date.now() + timeoutMs;
      while (!pred()) {
        if (Date.now() > deadline) {
          throw new Error(`timed out waiting for ${what}; last events: ${JSON.stringify(events.slice(-8)).slice(0, 3000)}\nstderr: ${stderr.join('').slice(-2000)}`);
        }
        await new Promise((r) => setTimeout(r, 10));
      }
    },
    of(sessionId, ...types) {
      return events.filter((e) => e.sessionId === sessionId && (!types.length || types.includes(e.type)));
    },
    callId(sessionId, providerId) {
      const ids = d.of(sessionId, 'assistant/message')
        .flatMap((e) => (e.data as any).message.content as any[])
        .filter((b) => b.type === 'tool-call' && (b.providerId ?? b.id) === providerId)
        .map((b) => b.id as string);
      if (!ids.length) throw new Error(`no call the provider named ${providerId}`);
      return ids[ids.length - 1];
    },
    async stop() {
      if (stopped) return; // a test may stop one early; the file's afterEach stops it again
      stopped = true;
      if (proc.exitCode === null) {
        try {
          await Promise.race([conn.sendRequest('shutdown'), new Promise((r) => setTimeout(r, 5000))]);
          await conn.sendNotification('exit');
        } catch { /* already gone */ }
        await Promise.race([new Promise((r) => proc.once('exit', r)), new Promise((r) => setTimeout(r, 5000))]);
        if (proc.exitCode === null) proc.kill('SIGKILL');
      }
      conn.dispose();
    },
  };
  return d;
}

/** A test file against the real daemon: before each test a fake provider starts (`real.fake`), and
 *  `real.daemon()` starts daemons against it; after each test they stop, then the provider, and their
 *  state folders are removed. Call it once at the file's top level. */
export function realDaemons(): { readonly fake: FakeProvider; daemon(dirs?: { state: string; root: string }): Promise<TestDaemon> } {
  const daemons: TestDaemon[] = [];
  let fake: FakeProvider | undefined;
  beforeEach(async () => {
    fake = new FakeProvider();
    await fake.start();
  });
  afterEach(async () => {
    for (const d of daemons.splice(0)) await d.stop();
    await fake?.stop();
    removeTempStates();
  });
  return {
    get fake(): FakeProvider {
      if (!fake) throw new Error('realDaemons: the fake provider starts before each test');
      return fake;
    },
    async daemon(dirs = tempState()): Promise<TestDaemon> {
      const d = await startDaemon(this.fake.baseUrl, dirs);
      daemons.push(d);
      return d;
    },
  };
}
