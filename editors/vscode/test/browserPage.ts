// The chat webview page (dist/webview.js, the bundle the extension ships) in headless Chromium with a
// stubbed acquireVsCodeApi: what the page posts is recorded, host messages are window 'message' events.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import type { HostToWebview } from '../src/protocol/panelMessages';
import type { Action, SessionModel } from '../src/protocol/reducer';
import { chatHtml } from '../src/webviewHtml';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const DIST = join(__dirname, '..', 'dist');
export const haveBrowser = existsSync(CHROMIUM) && existsSync(join(DIST, 'webview.js'));
if (!haveBrowser && process.env.CI) throw new Error(`chromium (${CHROMIUM}) or dist/webview.js missing`);

export const S = 'sess-1';
export const ev = (type: string, data: unknown, seq?: number, sessionId = S): Action => ({ kind: 'event', event: { sessionId, type, data, ...(seq === undefined ? {} : { seq }) } as any });
export const user = (id: string, text: string, source: any = { kind: 'user' }) => ({ id, role: 'user', content: [{ type: 'text', text }], source });

/** The durable events of one simple turn (5 seqs from `seq`). */
export function turnActions(turn: number, seq: number, text: string, prompt = `question ${turn}`): Action[] {
  return [
    ev('turn/start', { turn }, seq),
    ev('user/message', user(`u${turn}`, prompt), seq + 1),
    ev('assistant/message', { turn, step: 1, message: { id: `a${turn}`, role: 'assistant', content: [{ type: 'reasoning', text: 'thinking' }, { type: 'text', text }], source: { kind: 'model', provider: 'x', model: 'y' } } }, seq + 2),
    ev('turn/usage', { turn, usage: { inputTokens: 10, outputTokens: 5, costUsd: 0.0001 } }, seq + 3),
    ev('turn/end', { turn, reason: { kind: 'completed' } }, seq + 4),
  ];
}

export class WebviewPage {
  browser!: Browser;
  page!: Page;
  errors: string[] = [];

  async open(viewport = { width: 420, height: 800 }, state?: unknown): Promise<void> {
    this.browser = await chromium.launch({
      executablePath: CHROMIUM, headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic'],
    });
    this.page = await this.browser.newPage({ viewport });
    this.page.on('pageerror', (e) => this.errors.push(String(e)));
    this.page.on('console', (m) => { if (m.type() === 'error') this.errors.push(m.text()); });
    await this.page.addInitScript((st) => {
      (window as any).__posted = [];
      (window as any).__state = st;
      (window as any).acquireVsCodeApi = () => ({
        postMessage: (m: unknown) => (window as any).__posted.push(m),
        getState: () => (window as any).__state, setState: (s: unknown) => { (window as any).__state = s; },
      });
    }, state);
    const html = chatHtml({ cspSource: 'https://webview.test', scriptUri: 'https://webview.test/webview.js', styleUri: 'https://webview.test/webview.css' });
    await this.page.route('https://webview.test/**', (r) => {
      const url = r.request().url();
      if (url.endsWith('.js')) return r.fulfill({ contentType: 'text/javascript', body: readFileSync(join(DIST, 'webview.js')) });
      if (url.endsWith('.css')) return r.fulfill({ contentType: 'text/css', body: readFileSync(join(DIST, 'webview.css')) });
      return r.fulfill({ contentType: 'text/html', body: html });
    });
    await this.page.goto('https://webview.test/index.html');
  }

  async close(): Promise<void> { await this.browser?.close(); }

  async host(msg: HostToWebview): Promise<void> {
    await this.page.evaluate((m) => window.dispatchEvent(new MessageEvent('message', { data: m })), msg as any);
  }

  async snapshot(model: SessionModel, connection: any = { state: 'ready', hasKey: true }): Promise<void> {
    await this.host({ type: 'snapshot', model, connection });
    await this.frame();
  }

  async actions(list: Action[]): Promise<void> {
    await this.host({ type: 'actions', actions: list });
  }

  posted(): Promise<any[]> { return this.page.evaluate(() => (window as any).__posted as any[]); }
  clearPosted(): Promise<void> { return this.page.evaluate(() => { (window as any).__posted.length = 0; }); }
  /** Resolves after the next two animation frames (a render and the frame after it). */
  frame(): Promise<unknown> { return this.page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(() => r(null))))); }
  async shot(name: string): Promise<void> {
    if (process.env.DSH_WEBVIEW_SHOTS) await this.page.screenshot({ path: join(process.env.DSH_WEBVIEW_SHOTS, `${name}.png`) });
  }
}
