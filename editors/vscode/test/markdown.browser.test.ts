// Markdown in the chat webview (the shipped bundle, in headless Chromium): GFM, highlighting,
// sanitising, and incremental rendering of a streaming reply.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { emptyModel, reduceAll } from '../src/protocol/reducer';
import { ev, haveBrowser, S, turnActions, WebviewPage } from './browserPage';

const w = new WebviewPage();
const page = () => w.page;

const GFM = `# Title

A paragraph with ~~strikethrough~~, **bold**, _em_, \`code\`, a [link](https://example.com/x) and https://example.org/auto.

| name | count | note |
|:-----|------:|:----:|
| a    | 1     | x    |
| b    | 22    | y    |

- [x] done
- [ ] to do
- nested:
  1. one
  2. two

> a quote
> over two lines

<script>alert(1)</script><img src="https://evil.test/x.png" onerror="alert(2)">
[bad](javascript:alert(3)) ![a picture](https://example.com/p.png)

\`\`\`ts
const x: number = 42; // answer
\`\`\`
`;

describe.skipIf(!haveBrowser)('markdown in the chat webview', () => {
  beforeAll(async () => { await w.open({ width: 420, height: 900 }); });
  afterAll(async () => { await w.close(); });

  it('renders GFM: tables, task lists, nested lists, strikethrough, quotes, links; code highlighted in theme colours', async () => {
    await w.snapshot(reduceAll(emptyModel(S), turnActions(1, 0, GFM)));
    const md = page().locator('.msg.assistant .md');
    await expect.poll(() => md.locator('table').count()).toBe(1);
    expect(await md.locator('h3').textContent()).toBe('Title'); // one level smaller than the panel
    expect(await md.locator('s').textContent()).toBe('strikethrough');
    expect(await md.locator('th').allTextContents()).toEqual(['name', 'count', 'note']);
    expect(await md.locator('td.align-right').allTextContents()).toEqual(['1', '22']);
    expect(await md.locator('td.align-center').allTextContents()).toEqual(['x', 'y']);
    expect(await md.locator('li.task input').evaluateAll((els) => els.map((e) => [(e as HTMLInputElement).checked, (e as HTMLInputElement).disabled]))).toEqual([[true, true], [false, true]]);
    expect(await md.locator('li.task').first().textContent()).toBe('done');
    expect(await md.locator('ul ol li').allTextContents()).toEqual(['one', 'two']);
    expect(await md.locator('blockquote').textContent()).toContain('a quote');
    expect(await md.locator('a[href="https://example.com/x"]').textContent()).toBe('link');
    expect(await md.locator('a[href="https://example.org/auto"]').count()).toBe(1); // autolinked
    const code = md.locator('.codeblock code');
    expect(await code.textContent()).toBe('const x: number = 42; // answer');
    expect(await code.locator('.hljs-keyword').first().textContent()).toBe('const');
    expect(await code.locator('.hljs-comment').textContent()).toBe('// answer');
    // The theme's colours: highlight classes take VS Code's variables.
    await page().evaluate(() => document.documentElement.style.setProperty('--vscode-symbolIcon-keywordForeground', 'rgb(1, 2, 3)'));
    expect(await code.locator('.hljs-keyword').first().evaluate((e) => getComputedStyle(e).color)).toBe('rgb(1, 2, 3)');
    await w.shot('30-gfm');
  });

  it('sanitises: raw HTML is text, only http(s) links are live, images are links (no remote content), nothing runs', async () => {
    const md = page().locator('.msg.assistant .md');
    expect(await md.locator('script, img, iframe, [onerror]').count()).toBe(0);
    expect(await md.textContent()).toContain('<script>alert(1)</script>');
    // (the URL inside the raw <img> text is autolinked: a link, never an image)
    expect(await md.locator('a').evaluateAll((as) => as.map((a) => (a as HTMLAnchorElement).getAttribute('href')))).toEqual([
      'https://example.com/x', 'https://example.org/auto', 'https://evil.test/x.png', 'https://example.com/p.png',
    ]);
    expect(await md.textContent()).toContain('[bad](javascript:alert(3))'); // not a link at all
    expect(await md.locator('a.image-link').textContent()).toBe('🖼 a picture');
    expect(await page().evaluate(() => (window as any).__alerted)).toBeUndefined();
    expect(w.errors).toEqual([]);
    // The page's CSP is strict: no inline script, no remote images or styles.
    const csp = await page().locator('meta[http-equiv="Content-Security-Policy"]').getAttribute('content');
    expect(csp).toMatch(/^default-src 'none'; style-src https:\/\/webview\.test; script-src 'nonce-[A-Za-z0-9]{32}'; img-src https:\/\/webview\.test data:; font-src https:\/\/webview\.test$/);
  });

  it('a code block names its file: Apply goes to that file', async () => {
    await w.snapshot(reduceAll(emptyModel(S), turnActions(1, 0, '```python src/app.py\nprint(2)\n```\n\n```js:lib/x.js\nlet y\n```')));
    await expect.poll(() => page().locator('.codebar .lang').allTextContents()).toEqual(['python · src/app.py', 'js · lib/x.js']);
    await w.clearPosted();
    await page().locator('.codeblock').nth(0).getByRole('button', { name: /Apply/ }).click();
    await page().locator('.codeblock').nth(1).getByRole('button', { name: /Apply/ }).click();
    expect(await w.posted()).toEqual([
      { type: 'apply', text: 'print(2)', lang: 'python', path: 'src/app.py' },
      { type: 'apply', text: 'let y', lang: 'js', path: 'lib/x.js' },
    ]);
  });

  it('a streaming reply is rendered incrementally: finished blocks are never built again, and the result equals a one-shot render', async () => {
    await w.snapshot(reduceAll(emptyModel(S), [ev('turn/start', { turn: 1 }, 0)]));
    const pieces: string[] = [];
    for (let i = 0; i < 12; i++) {
      pieces.push(`Paragraph ${i} has **some** words`, ' and more words.\n\n');
      if (i % 3 === 1) pieces.push('```python\n', `def f${i}():\n`, `    return ${i}\n`, '```\n\n');
      if (i % 4 === 2) pieces.push('- a\n', '- b\n\n');
    }
    pieces.push('The end.');
    let offset = 0;
    const marked: string[] = [];
    for (const [i, text] of pieces.entries()) {
      await w.actions([ev('assistant/delta', { turn: 1, step: 1, offset, delta: { type: 'text', text } })]);
      offset += text.length;
      await w.frame();
      if (i === 24) {
        // Mark the blocks that are done so far: they must be the very same nodes at the end.
        marked.push(...await page().evaluate(() => [...document.querySelectorAll('.msg.assistant .md .md-chunk > *')].map((e, k) => { (e as any).__mark = k; return e.textContent ?? ''; })));
      }
    }
    const kept = await page().evaluate(() => [...document.querySelectorAll('.msg.assistant .md .md-chunk > *')].filter((e) => (e as any).__mark !== undefined).map((e) => e.textContent ?? ''));
    expect(marked.length).toBeGreaterThan(2);
    expect(kept).toEqual(marked);
    // An open code fence streams as it comes, without re-rendering the block each time.
    await w.actions([ev('assistant/delta', { turn: 1, step: 1, offset, delta: { type: 'text', text: '\n\n```python\nx = 1\n' } })]);
    offset += '\n\n```python\nx = 1\n'.length;
    await w.frame();
    await page().evaluate(() => { (document.querySelector('.msg.assistant .md > .codeblock:last-child code') as any).__open = true; });
    await w.actions([ev('assistant/delta', { turn: 1, step: 1, offset, delta: { type: 'text', text: 'y = 2\n' } })]);
    offset += 'y = 2\n'.length;
    await w.frame();
    expect(await page().evaluate(() => { const c = document.querySelector('.msg.assistant .md > .codeblock:last-child code') as any; return [c.__open, c.textContent]; })).toEqual([true, 'x = 1\ny = 2\n']);
    await w.actions([ev('assistant/delta', { turn: 1, step: 1, offset, delta: { type: 'text', text: '```\n\nDone.' } }), ev('turn/end', { turn: 1, reason: { kind: 'completed' } }, 1)]);
    await w.frame();
    const streamed = await page().locator('.msg.assistant .md').innerHTML();
    const full = pieces.join('') + '\n\n```python\nx = 1\ny = 2\n```\n\nDone.';
    await w.snapshot(reduceAll(emptyModel('other'), turnActions(1, 0, full).map((a) => ({ ...a, event: { ...(a as any).event, sessionId: 'other' } }) as any)));
    await expect.poll(() => page().locator('.msg.assistant .md').innerHTML()).toBe(streamed);
  });
});
