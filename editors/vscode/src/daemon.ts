// Finds and spawns dsh-daemon over stdio with vscode-languageclient (document sync, workspace/applyEdit
// with create and $/progress come from the client library) and exposes a DshClient over it.
//
// A person sees what went wrong in the chat panel, once, with what to do about it (the state below);
// the full story, the daemon's stderr included, is in the "dsh" output channel (dsh: Show Daemon Log).
// The client library's own error notifications are turned off for that reason.
import * as vscode from 'vscode';
import { LanguageClient, LanguageClientOptions, ServerOptions, State } from 'vscode-languageclient/node';
import { editorHandlers, OFFERED, Rechecks } from './editorAbilities';
import { DAEMON_NAME, installPlans, locateDaemon, runInstall, type Located, venvBin } from './locate';
import { DaemonUnavailable, type DaemonState } from './daemonState';
import { daemonSettings } from './daemonSettings';
import { daemonLine, SaveReason } from './outputLog';
import { DshClient, Rpc } from './protocol/client';
import type { InitializeDshCapabilities } from './protocol/types';

export const SECRET_KEY = 'dsh.apiKey';
const INSTALLED_KEY = 'dsh.installedDaemon';

export { DaemonUnavailable, type DaemonState } from './daemonState';

/** The client library's errors go to the log only: the panel says what went wrong. */
class QuietClient extends LanguageClient {
  override error(message: string, data?: unknown): void {
    super.error(message, data, false);
  }
}

export class Daemon implements vscode.Disposable {
  private lc: LanguageClient | undefined;
  client: DshClient | undefined;
  private readonly _onReady = new vscode.EventEmitter<DshClient>();
  /** Fires each time a (re)started daemon is ready: the panel (re)attaches its session. */
  readonly onReady = this._onReady.event;
  private readonly _onState = new vscode.EventEmitter<DaemonState>();
  readonly onState = this._onState.event;
  state: DaemonState = { state: 'starting' };
  private starting: Promise<DshClient> | undefined;
  private stderrTail: string[] = [];
  /** When language servers re-checked a document (`settleMs`): one watch for every daemon this
   *  extension starts, disposed with it. */
  private readonly rechecks = new Rechecks();
  /** Why the daemon asks the editor to save: the panel marks a checkpoint restore or an undo. */
  readonly saves = new SaveReason();

  constructor(private readonly ctx: vscode.ExtensionContext, readonly output: vscode.LogOutputChannel) {}

  private setState(s: DaemonState): void {
    this.state = s;
    this._onState.fire(s);
  }

  /** Whether the daemon will have a key: stored in SecretStorage, or given by the environment / config. */
  async hasKey(): Promise<boolean> {
    if (await this.ctx.secrets.get(SECRET_KEY)) return true;
    const cfg = vscode.workspace.getConfiguration('dsh');
    return !!(cfg.get<Record<string, string>>('env', {}).DEEPSEEK_API_KEY || process.env.DEEPSEEK_API_KEY
      || cfg.get<Record<string, unknown>>('provider', {}).apiKey);
  }

  /** No key and an endpoint that needs one (DeepSeek's; other endpoints are asked without a key). */
  async needsKey(): Promise<boolean> {
    if (await this.hasKey()) return false;
    const cfg = vscode.workspace.getConfiguration('dsh');
    const env = cfg.get<Record<string, string>>('env', {});
    const base = String(cfg.get<Record<string, unknown>>('provider', {}).baseUrl ?? env.DEEPSEEK_BASE_URL ?? env.DSH_BASE_URL
      ?? process.env.DEEPSEEK_BASE_URL ?? process.env.DSH_BASE_URL ?? 'https://api.deepseek.com');
    return /(^|\.|\/\/)deepseek\.com(\/|:|$)/i.test(base);
  }

  ensureStarted(): Promise<DshClient> {
    if (this.client && this.lc?.state === State.Running) return Promise.resolve(this.client);
    if (!this.starting) {
      this.starting = this.start().finally(() => { this.starting = undefined; });
    }
    return this.starting;
  }

  /** Where the daemon is (dsh.serverCommand, PATH, the workspace's .venv, or what this extension installed). */
  locate(): Located | DaemonState {
    const cfg = vscode.workspace.getConfiguration('dsh');
    const extraEnv = cfg.get<Record<string, string>>('env', {});
    const found = locateDaemon({
      serverCommand: cfg.get<string>('serverCommand', '') ?? '',
      serverArgs: cfg.get<string[]>('serverArgs', []) ?? [],
      pathEnv: extraEnv.PATH ?? process.env.PATH,
      workspaceFolders: (vscode.workspace.workspaceFolders ?? []).map((f) => f.uri.fsPath),
      installed: [venvBin(vscode.Uri.joinPath(this.ctx.globalStorageUri, 'venv').fsPath, DAEMON_NAME), ...this.installedPaths()],
    });
    if ('command' in found) return found;
    return found.configured
      ? { state: 'error', kind: 'startFailed', message: 'The daemon command in your settings was not found.', detail: `dsh.serverCommand is "${found.missing}", which is not an executable file.` }
      : { state: 'error', kind: 'notFound', message: 'dsh-daemon is not installed.', detail: 'It was looked for on PATH and in the workspace\'s .venv.' };
  }

  private installedPaths(): string[] {
    const p = this.ctx.globalState.get<string>(INSTALLED_KEY);
    return p ? [p] : [];
  }

  private async start(): Promise<DshClient> {
    this.setState({ state: 'starting' });
    const cfg = vscode.workspace.getConfiguration('dsh');
    const where = this.locate();
    if (!('command' in where)) {
      this.output.error(`${where.message} ${where.detail ?? ''}`);
      this.setState(where);
      throw new DaemonUnavailable(where);
    }
    const { command, args } = where;
    this.output.info(`starting ${command} ${args.join(' ')} (found: ${where.how})`);
    const extraEnv = cfg.get<Record<string, string>>('env', {});
    const apiKey = await this.ctx.secrets.get(SECRET_KEY);
    const cwd = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
    // The daemon logs what it does at INFO to stderr, which is this channel (unless set otherwise).
    const env = { ...process.env, DSH_LOG_LEVEL: process.env.DSH_LOG_LEVEL ?? 'INFO', ...extraEnv };
    const serverOptions: ServerOptions = {
      command, args, // no `transport`: TransportKind.stdio would append --stdio, which is not needed
      options: { cwd, env },
    };
    const initializationOptions: Record<string, unknown> = settingsOf(cfg);
    if (apiKey) initializationOptions.apiKey = apiKey;
    this.stderrTail = [];
    const clientOptions: LanguageClientOptions = {
      documentSelector: [{ scheme: 'file' }, { scheme: 'untitled' }],
      initializationOptions,
      outputChannel: this.output,
      // The daemon is not a language server for any language: no diagnostics UI to reveal.
      revealOutputChannelOn: 4,
      // The daemon's stderr: into the log, and its last lines kept to say why a start failed.
      stdioOptions: {
        stdout: () => undefined,
        stderr: (input) => {
          let buf = '';
          input.on('data', (b: Buffer) => {
            buf += b.toString();
            const lines = buf.split('\n');
            buf = lines.pop() ?? '';
            for (const line of lines) {
              if (!line.trim()) continue;
              this.stderrTail = [...this.stderrTail.slice(-19), line];
              const { level, text } = daemonLine(line);
              this.output[level](text);
            }
          });
        },
      },
      initializationFailedHandler: (err) => {
        this.output.error(`initialize failed: ${(err as Error)?.message ?? err}`);
        return false;
      },
    };
    const lc = new QuietClient('dsh', 'dsh daemon', serverOptions, clientOptions);
    this.lc = lc;
    // What this editor offers the daemon (protocol.md §9): saving an agent's edit, problems, language features.
    // No work-done progress (registered after the library's features, this overrides its `true`): the
    // panel and the dsh status bar item already show a running turn, and the library's window
    // progress would be a second status bar item, re-laid out at every report and spinning for the
    // whole turn (renderer frames the workbench pays for while a reply streams).
    lc.registerFeature({
      fillClientCapabilities: (caps) => {
        caps.experimental = { ...(caps.experimental as object | undefined), dsh: OFFERED };
        caps.window = { ...caps.window, workDoneProgress: false };
      },
      initialize: () => undefined,
      getState: () => ({ kind: 'static' }),
      clear: () => undefined,
    });
    for (const [method, handler] of Object.entries(editorHandlers((line) => this.output.info(line), this.rechecks, this.saves))) lc.onRequest(method, handler);
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
        if (wasRunning) {
          this.output.info('the daemon was restarted after it stopped');
          this._onReady.fire(client); // the library restarted a crashed daemon
        }
        wasRunning = true;
        this.setState({ state: 'ready' });
      } else if (e.newState === State.Stopped && this.lc === lc && wasRunning) {
        this.output.warn('the daemon stopped');
        this.setState({ state: 'stopped', message: 'The daemon stopped.', detail: this.lastStderr() });
      }
    });
    try {
      await lc.start();
    } catch (err) {
      const why = this.lastStderr() || String((err as Error)?.message ?? err);
      this.output.error(`could not start ${command} ${args.join(' ')}: ${(err as Error)?.message ?? err}`);
      const state: DaemonState = { state: 'error', kind: 'startFailed', message: 'The daemon exited while starting.', detail: why };
      this.lc = undefined;
      this.setState(state);
      throw new DaemonUnavailable(state);
    }
    readFeatures();
    this.client = client;
    this.output.info(`daemon ready${client.features?.version ? ` (dsh-daemon ${client.features.version})` : ''}`);
    this.setState({ state: 'ready' });
    this._onReady.fire(client);
    return client;
  }

  /** The daemon's last stderr lines that say something (a traceback's last line first of all). */
  private lastStderr(): string {
    const lines = this.stderrTail.filter((l) => !/^\s+(File |\^|~)/.test(l));
    return lines.slice(-2).join('\n');
  }

  /** Settings changed: provider settings go to a running daemon that takes them live; a changed
   *  command, arguments or environment (or an older daemon) needs a restart, which is offered. */
  onConfigurationChanged(e: vscode.ConfigurationChangeEvent): void {
    const spawn = ['dsh.serverCommand', 'dsh.serverArgs', 'dsh.env'].some((k) => e.affectsConfiguration(k));
    const sandbox = e.affectsConfiguration('dsh.sandbox');
    const provider = e.affectsConfiguration('dsh.provider') || sandbox;
    if (provider || spawn) this.output.info(`settings changed: ${[e.affectsConfiguration('dsh.provider') && 'dsh.provider', sandbox && 'dsh.sandbox.mode', spawn && 'the daemon command or environment'].filter(Boolean).join(', ')}`);
    if (spawn && this.state.state === 'error') { void this.restart().catch(() => undefined); return; } // a fixed command: try it now
    if (!this.client || this.lc?.state !== State.Running) return;
    if (provider && !spawn && this.client.features?.configurationChange) {
      this.applySettings();
      return;
    }
    // Offered in the panel until answered (a notification's toast hides after a while): Restart, or
    // Not now. A restart, for whatever reason, answers it.
    if (provider || spawn) this.setState({ ...this.state, restartOffer: true });
  }

  /** Sends every setting the daemon takes live (a running daemon with `configurationChange`): flat
   *  provider keys, as initializationOptions were sent (the daemon merges key by key over them; a
   *  nested `provider` object would shadow the flat keys given at start, the API key among them), and
   *  the sandbox mode. The daemon answers a sandbox change with a new `sandbox/status`. */
  /** The person said Not now to the restart the settings need. */
  declineRestart(): void {
    if (this.state.restartOffer) this.setState({ ...this.state, restartOffer: false });
  }

  applySettings(): boolean {
    if (!this.client?.features?.configurationChange || this.lc?.state !== State.Running) return false;
    this.client.changeConfiguration(settingsOf(vscode.workspace.getConfiguration('dsh')));
    return true;
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

  /** Installs dsh-daemon (`dsh.installSource`) the way the person picks, then starts it. */
  async install(): Promise<boolean> {
    const cfg = vscode.workspace.getConfiguration('dsh');
    const source = cfg.get<string>('installSource', DAEMON_NAME) || DAEMON_NAME;
    const storage = this.ctx.globalStorageUri.fsPath;
    const plans = installPlans({ pathEnv: process.env.PATH, storage, source });
    if (!plans.length) {
      void vscode.window.showErrorMessage('dsh: installing dsh-daemon needs Python 3.11+ (python3), pipx or uv on PATH.', 'Open Settings').then((c) => {
        if (c) void vscode.commands.executeCommand('workbench.action.openSettings', 'dsh.serverCommand');
      });
      return false;
    }
    const plan = plans.length === 1 ? plans[0] : (await vscode.window.showQuickPick(plans.map((p) => ({ label: p.label, detail: p.detail, plan: p })), {
      placeHolder: `Install ${source}`,
    }))?.plan;
    if (!plan) return false;
    this.output.show(true);
    try {
      const bin = await vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title: `dsh: installing ${source}…` },
        () => runInstall(plan, (line) => this.output.info(line)));
      await this.ctx.globalState.update(INSTALLED_KEY, bin);
      this.output.info(`installed ${bin}`);
      await this.restart();
      void vscode.window.showInformationMessage(`dsh: dsh-daemon installed (${plan.tool}).`);
      return true;
    } catch (err) {
      this.output.error(`install failed: ${(err as Error).message}`);
      void vscode.window.showErrorMessage('dsh: the install failed; the log says why.', 'Show Log').then((c) => { if (c) this.output.show(); });
      return false;
    }
  }

  dispose(): void {
    void this.stop();
    this.rechecks.dispose();
    this._onReady.dispose();
    this._onState.dispose();
  }
}

/** The settings the daemon is given, from the `dsh` configuration section. */
function settingsOf(cfg: vscode.WorkspaceConfiguration): Record<string, unknown> {
  return daemonSettings(cfg.get<Record<string, unknown>>('provider', {}), cfg.get<string>('sandbox.mode', ''));
}
