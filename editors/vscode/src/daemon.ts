// Spawns dsh-daemon over stdio with vscode-languageclient (document sync, workspace/applyEdit with
// create and $/progress come from the client library) and exposes a DshClient over it.
import * as vscode from 'vscode';
import { LanguageClient, LanguageClientOptions, ServerOptions, State } from 'vscode-languageclient/node';
import { DshClient, Rpc } from './protocol/client';
import type { InitializeDshCapabilities } from './protocol/types';

export const SECRET_KEY = 'dsh.apiKey';

export class Daemon implements vscode.Disposable {
  private lc: LanguageClient | undefined;
  client: DshClient | undefined;
  private readonly _onReady = new vscode.EventEmitter<DshClient>();
  /** Fires each time a (re)started daemon is ready: the panel (re)attaches its session. */
  readonly onReady = this._onReady.event;
  private readonly _onState = new vscode.EventEmitter<{ state: 'starting' | 'ready' | 'stopped' | 'error'; message?: string }>();
  readonly onState = this._onState.event;
  private starting: Promise<DshClient> | undefined;

  constructor(private readonly ctx: vscode.ExtensionContext, readonly output: vscode.LogOutputChannel) {}

  /** Whether the daemon will have a key: stored in SecretStorage, or given by the environment / config. */
  async hasKey(): Promise<boolean> {
    if (await this.ctx.secrets.get(SECRET_KEY)) return true;
    const cfg = vscode.workspace.getConfiguration('dsh');
    return !!(cfg.get<Record<string, string>>('env', {}).DEEPSEEK_API_KEY || process.env.DEEPSEEK_API_KEY
      || cfg.get<Record<string, unknown>>('provider', {}).apiKey);
  }

  ensureStarted(): Promise<DshClient> {
    if (this.client && this.lc?.state === State.Running) return Promise.resolve(this.client);
    if (!this.starting) {
      this.starting = this.start().finally(() => { this.starting = undefined; });
    }
    return this.starting;
  }

  private async start(): Promise<DshClient> {
    this._onState.fire({ state: 'starting' });
    const cfg = vscode.workspace.getConfiguration('dsh');
    const command = cfg.get<string>('serverCommand', 'dsh-daemon');
    const args = cfg.get<string[]>('serverArgs', []);
    const extraEnv = cfg.get<Record<string, string>>('env', {});
    const provider = cfg.get<Record<string, unknown>>('provider', {});
    const apiKey = await this.ctx.secrets.get(SECRET_KEY);
    const cwd = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
    const serverOptions: ServerOptions = {
      command, args, // no `transport`: TransportKind.stdio would append --stdio, which dsh-daemon refuses
      options: { cwd, env: { ...process.env, ...extraEnv } },
    };
    const initializationOptions: Record<string, unknown> = { ...provider };
    if (apiKey) initializationOptions.apiKey = apiKey;
    const clientOptions: LanguageClientOptions = {
      documentSelector: [{ scheme: 'file' }, { scheme: 'untitled' }],
      initializationOptions,
      outputChannel: this.output,
      // The daemon is not a language server for any language: no diagnostics UI to reveal.
      revealOutputChannelOn: 4,
    };
    const lc = new LanguageClient('dsh', 'dsh daemon', serverOptions, clientOptions);
    this.lc = lc;
    const rpc: Rpc = {
      request: (method, params) => lc.sendRequest(method, params),
      notify: (method, params) => lc.sendNotification(method, params),
      onNotification: (method, handler) => lc.onNotification(method, handler),
      onRequest: (method, handler) => lc.onRequest(method, handler),
    };
    const client = new DshClient(rpc);
    // What this daemon supports (capabilities.experimental.dsh); read again after each (re)start.
    const readFeatures = () => { client.features = (lc.initializeResult?.capabilities as { experimental?: { dsh?: InitializeDshCapabilities } } | undefined)?.experimental?.dsh; };
    let wasRunning = false;
    lc.onDidChangeState((e) => {
      if (e.newState === State.Running) {
        readFeatures();
        if (wasRunning) this._onReady.fire(client); // the library restarted a crashed daemon
        wasRunning = true;
        this._onState.fire({ state: 'ready' });
      } else if (e.newState === State.Stopped) {
        this._onState.fire({ state: 'stopped' });
      }
    });
    try {
      await lc.start();
    } catch (err) {
      const message = `dsh: could not start the daemon (${command} ${args.join(' ')}): ${(err as Error).message ?? err}`;
      this._onState.fire({ state: 'error', message });
      this.lc = undefined;
      throw new Error(message);
    }
    readFeatures();
    this.client = client;
    this._onState.fire({ state: 'ready' });
    this._onReady.fire(client);
    return client;
  }

  /** Settings changed: provider settings go to a running daemon that takes them live; a changed
   *  command, arguments or environment (or an older daemon) needs a restart, which is offered. */
  onConfigurationChanged(e: vscode.ConfigurationChangeEvent): void {
    const spawn = ['dsh.serverCommand', 'dsh.serverArgs', 'dsh.env'].some((k) => e.affectsConfiguration(k));
    const provider = e.affectsConfiguration('dsh.provider');
    if (provider || spawn) this.output.info(`settings changed: ${[provider && 'dsh.provider', spawn && 'the daemon command or environment'].filter(Boolean).join(', ')}`);
    if (!this.client || this.lc?.state !== State.Running) return;
    if (provider && !spawn && this.client.features?.configurationChange) {
      // Flat, as initializationOptions were sent: the daemon merges key by key over them (a nested
      // `provider` object would shadow the flat keys given at start, the API key among them).
      this.client.changeConfiguration({ ...vscode.workspace.getConfiguration('dsh').get<Record<string, unknown>>('provider', {}) });
      return;
    }
    if (provider || spawn) {
      void vscode.window.showInformationMessage('dsh: the daemon uses the new settings after a restart.', 'Restart Daemon').then((c) => {
        if (c) void this.restart();
      });
    }
  }

  async restart(): Promise<DshClient> {
    await this.stop();
    return this.ensureStarted();
  }

  async stop(): Promise<void> {
    const lc = this.lc;
    this.lc = undefined;
    this.client?.dispose();
    this.client = undefined;
    if (lc) {
      try { await lc.stop(5000); } catch { /* already gone */ }
    }
  }

  dispose(): void {
    void this.stop();
    this._onReady.dispose();
    this._onState.dispose();
  }
}
