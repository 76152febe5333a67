// The agent from the editor (issue 36 items 3, 4, 6), end to end in code-server with its own
// TypeScript server (on the TypeScript of this package's node_modules) and the real daemon, the
// model being the fake provider (what the daemon sent is read from its requests):
// - "Fix with dsh" on a real TypeScript diagnostic sends the diagnostic and the code around it;
// - inline chat (Ctrl+I): a prompt box at the cursor, the reply as an inline diff in the file's editor
//   (decorations checked in the DOM), Accept (Ctrl+Enter) keeps it, Discard (Escape) restores the
//   old text exactly while the person's edit elsewhere stays; its second button asks in a side
//   session (the request without the chat's conversation; listed by Switch Session);
// - Apply of a code block that names no file replaces the method it declares, not the whole file;
// - the @ picker skips a git-ignored file and finds a class by its workspace symbol.
// Screenshots of the sidebar at its default ~300 px, dark then light.
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gate, textReply } from '../test/fakeProvider';
import { CodeServer, EXT } from './harness';

const CALC = [
  'export function total(xs: number[]): number {',
  "  const label: number = 'sum';",
  '  return xs.length;',
  '}',
  '',
  'export class Rectangle {',
  '  constructor(private w: number, private h: number) {}',
  '',
  '  area(): number {',
  '    return 0;',
  '  }',
  '',
  '  name(): string {',
  "    return 'rectangle';",
  '  }',
  '}',
  '',
].join('\n');

const cs = new CodeServer({
  name: 'editor-actions', daemon: 'setting',
  settings: {
    'workbench.colorTheme': 'Default Dark Modern',
    'js/ts.tsdk.path': join(EXT, 'node_modules/typescript/lib'),
    'typescript.tsdk': join(EXT, 'node_modules/typescript/lib'),
  },
  prepare: ({ ws }) => {
    writeFileSync(join(ws, 'tsconfig.json'), JSON.stringify({ compilerOptions: { strict: true, target: 'ES2020', module: 'commonjs', noEmit: true } }));
    writeFileSync(join(ws, 'calc.ts'), CALC);
    writeFileSync(join(ws, 'secretKept.ts'), 'export const KEPT = 1;\n');
    writeFileSync(join(ws, 'secretIgnored.ts'), 'export const IGNORED = 1;\n');
    writeFileSync(join(ws, '.gitignore'), 'secretIgnored.ts\n');
    execFileSync('git', ['init', '-q'], { cwd: ws });
  },
});

describe('the agent from the editor: code actions, inline chat, Apply by symbol, the @ picker (issue 36)', () => {
  beforeAll(async () => { await cs.start(); }, 300000);
  afterAll(async () => { await cs.stop(); });

  it('Fix with dsh sends the diagnostic; inline chat accepts and discards; Apply finds the method; @ skips ignored files and finds symbols', async () => {
    try {
      await scenario();
    } catch (err) {
      await cs.shot('FAILED').catch(() => undefined);
      throw new Error(`${(err as Error).message}\n--- logs\n${cs.logs()}`, { cause: err });
    }
  });
});

async function sidebarShot(name: string): Promise<void> {
  await cs.page.mouse.move(900, 500);
  const file = join(cs.shots, `editor-actions-${name}-sidebar-300px.png`);
  await cs.page.locator('.part.sidebar').screenshot({ path: file });
  console.log(`screenshot: ${file}`);
}

/** The text of every message of the newest request the fake provider got. */
function lastRequest(): string {
  return JSON.stringify(cs.fake.requests.at(-1)!.body.messages);
}

/** Puts the cursor on the line that holds `text`, `col` characters after its first non-blank one. */
async function cursorAt(text: string, col = 0): Promise<void> {
  const { page } = cs;
  await page.locator('.monaco-editor .view-line', { hasText: text }).first().click();
  await page.keyboard.press('End');
  await page.keyboard.press('Home');
  for (let i = 0; i < col; i++) await page.keyboard.press('ArrowRight');
}

/** A line of the file's editor (not of the inline chat box's input) holding `text`. */
function codeLine(text: string) {
  return cs.page.locator('.editor-instance .monaco-editor .view-line', { hasText: text }).first();
}

/** Ctrl+I (a lost key press is pressed again): the box opens with its input focused. */
async function openInlineBox(): Promise<void> {
  const { page } = cs;
  for (let attempt = 0; ; attempt++) {
    await page.keyboard.press('Control+I');
    try { await page.locator('.review-widget .monaco-editor.focused').waitFor({ timeout: 10000 }); return; } catch (err) { if (attempt >= 3) throw err; }
  }
}

/** Enter in the box asks; the box's Ask dsh button if the key press was lost. */
async function submitInline(): Promise<void> {
  const { page } = cs;
  await page.keyboard.press('Enter');
  const button = page.locator('.review-widget .monaco-button', { hasText: 'Ask dsh' });
  try { await button.waitFor({ state: 'hidden', timeout: 15000 }); } catch { await button.click(); }
}

/** `key` in the file's editor; the CodeLens (or box action) if the key press was lost (it goes once it acted). */
async function keyOrLens(key: string, lens: ReturnType<Page['locator']>): Promise<void> {
  await cs.page.keyboard.press(key);
  try { await lens.waitFor({ state: 'detached', timeout: 15000 }); } catch { console.log(`${key} was lost: clicked instead`); await lens.click(); }
}

/** What is drawn on the line holding `text` in the file's editor: the whole-line backgrounds there,
 *  and the text injected after it (a decoration's `after` content) with its background and whether
 *  it is struck through. Read in one go: monaco redraws lines as it likes. */
async function decorationsOf(text: string): Promise<{ backgrounds: string[]; ghosts: { text: string; background: string; line: boolean }[] }> {
  return cs.page.evaluate((text) => {
    const plain = (s: string | null) => (s ?? '').replace(/\u00a0/g, ' ');
    for (const editor of document.querySelectorAll('.editor-instance .monaco-editor')) {
      const content = ':scope > .overflow-guard > .monaco-scrollable-element > .lines-content';
      const el = [...editor.querySelectorAll(`${content} > .view-lines > .view-line`)].find((l) => plain(l.textContent).includes(text)) as HTMLElement | undefined;
      if (!el) continue;
      const row = [...editor.querySelectorAll(`${content} > .view-overlays > div`)].find((d) => (d as HTMLElement).style.top === el.style.top);
      const backgrounds = row ? [...row.children].map((c) => getComputedStyle(c).backgroundColor).filter((c) => c !== 'rgba(0, 0, 0, 0)') : [];
      const ghosts = [...el.querySelectorAll('span')].map((s) => getComputedStyle(s, '::after'))
        .filter((a) => a.content && a.content !== 'none' && a.content !== 'normal')
        .map((a) => ({ text: plain(JSON.parse(a.content) as string), background: a.backgroundColor, line: a.textDecorationLine.includes('line-through') }));
      return { backgrounds, ghosts };
    }
    return { backgrounds: [], ghosts: [] };
  }, text);
}

const rgba = (c: string) => (/rgba?\(([^)]*)\)/.exec(c)?.[1] ?? '0,0,0,0').split(',').map(Number);
const isGreen = (c: string) => { const [r, g, , a = 1] = rgba(c); return a > 0 && g > r; };
const isRed = (c: string) => { const [r, g, , a = 1] = rgba(c); return a > 0 && r > g; };
/** Whether the line is drawn as added, and its ghosts that are struck through on red (others as such). */
const drawn = (d: Awaited<ReturnType<typeof decorationsOf>>) => ({
  added: d.backgrounds.some(isGreen),
  ghosts: d.ghosts.map((g) => (g.line && isRed(g.background) ? g.text : `not struck through on red: ${JSON.stringify(g)}`)),
});

async function scenario(): Promise<void> {
  const { page, fake } = cs;
  await cs.openWorkbench();
  await cs.openChat();
  const c = cs.chat();
  await expect.poll(() => c.locator('.status').textContent(), { timeout: 60000 }).toBe('idle');
  await cs.openFile('calc.ts');
  // TypeScript's own diagnostic for line 2.
  await page.locator('.monaco-editor .squiggly-error').first().waitFor({ timeout: 120000 });

  // ---- 1. Fix with dsh, from the quick fix menu on the diagnostic.
  fake.script(textReply('Use a string type for the label.'));
  const before = fake.requests.length;
  await cursorAt('const label', 8);
  const fix = page.locator('.action-widget .monaco-list-row', { hasText: 'Fix with dsh' }).first();
  // Under load the key press (or TypeScript's first code action answer) is sometimes lost: ask again.
  for (let attempt = 0; ; attempt++) {
    await page.keyboard.press('Control+.');
    try { await fix.waitFor({ timeout: 15000 }); break; } catch (err) { if (attempt >= 3) throw err; }
    await page.keyboard.press('Escape');
    await cursorAt('const label', 8);
  }
  // One diagnostic there (TypeScript's faded "never read" hint is not one of the problems): no suffix.
  expect(await page.locator('.action-widget .monaco-list-row', { hasText: 'Explain with dsh' }).count()).toBe(1);
  expect(await fix.textContent()).toBe('Fix with dsh');
  await cs.shot('quick-fix-menu');
  await fix.click();
  await fake.waitRequests(before + 1, 60000);
  const sent = lastRequest();
  expect(sent).toContain('Fix this problem at calc.ts:2: Type \'string\' is not assignable to type \'number\'.');
  // The diagnostic as editor context (the daemon's rendering of a `diagnostics` ref) and the code around it.
  expect(sent).toMatch(/Diagnostics in [^"]*calc\.ts:\\n- line 2: error \[ts\]: Type 'string' is not assignable to type 'number'\./);
  expect(sent).toMatch(/Selection in [^"]*calc\.ts, lines 1-1[0-3]:/);
  expect(sent).toContain('return xs.length;');
  await expect.poll(() => c.locator('.msg.assistant', { hasText: 'Use a string type for the label.' }).count(), { timeout: 60000 }).toBe(1);

  // ---- 2. Inline chat: Ctrl+I on a selection opens a prompt box at the cursor (below the selected
  //         line); while dsh works the box says so; the reply is an inline diff in the editor (the
  //         new line on the diff-inserted background, the old one as ghost text), unsaved; Accept
  //         (Ctrl+Enter) keeps it, and saves it since the file was saved before.
  // The box: dsh's comment thread in the file's editor, its header the thread's label.
  const inlineBox = page.locator('.monaco-editor .review-widget');
  const inlineTitle = inlineBox.locator('.review-title');
  const held = gate();
  fake.script(textReply('Here it is:\n\n```ts\nreturn xs.reduce((a, b) => a + b, 0);\n```\n', { gate: held.promise }));
  await cursorAt('return xs.length');
  await page.keyboard.press('Shift+End');
  await openInlineBox();
  const line = await codeLine('return xs.length').boundingBox();
  const boxAt = await inlineBox.boundingBox();
  // The box is right under the selected line, in the editor (not the window's top input).
  expect(boxAt!.y).toBeGreaterThanOrEqual(line!.y + line!.height - 2);
  expect(boxAt!.y).toBeLessThan(line!.y + line!.height + 40);
  expect(await page.locator('.quick-input-widget input').isVisible()).toBe(false);
  expect(await inlineTitle.textContent()).toContain('dsh: line 3');
  await page.keyboard.type('sum the numbers');
  await cs.shot('inline-chat-box');
  await submitInline();
  await expect.poll(() => inlineTitle.textContent(), { timeout: 30000 }).toContain('dsh is working on “sum the numbers”');
  await cs.shot('inline-chat-working');
  held.open();
  await codeLine('xs.reduce').waitFor({ timeout: 90000 });
  expect(lastRequest()).toContain('sum the numbers');
  expect(lastRequest()).toMatch(/Selection in [^"]*calc\.ts, lines 3-3:/);
  // No diff editor: the proposal is in the file's own editor, unsaved.
  expect(await page.locator('.monaco-diff-editor').count()).toBe(0);
  await page.locator('.tabs-container .tab.dirty', { hasText: 'calc.ts' }).waitFor({ timeout: 15000 });
  // The new line on a green (diff-inserted) background, the old one after it, struck through on red.
  await expect.poll(async () => drawn(await decorationsOf('xs.reduce')), { timeout: 15000 }).toEqual({ added: true, ghosts: ['− return xs.length;'] });
  const accept = page.locator('.codelens-decoration a', { hasText: 'Accept (Ctrl+Enter)' });
  const discard = page.locator('.codelens-decoration a', { hasText: 'Discard (Escape)' });
  await accept.waitFor({ timeout: 15000 });
  expect(await discard.count()).toBe(1);
  await expect.poll(() => inlineTitle.textContent(), { timeout: 15000 }).toContain('dsh proposes 1 line: Accept (Ctrl+Enter) or Discard (Escape)');
  await cs.shot('inline-chat-diff');
  await keyOrLens('Control+Enter', accept);
  const summed = CALC.replace('return xs.length;', 'return xs.reduce((a, b) => a + b, 0);');
  await expect.poll(() => readFileSync(join(cs.ws, 'calc.ts'), 'utf8'), { timeout: 15000 }).toBe(summed);
  await expect.poll(() => inlineBox.count(), { timeout: 15000 }).toBe(0);
  expect(await accept.count()).toBe(0);
  await expect.poll(async () => drawn(await decorationsOf('xs.reduce')), { timeout: 15000 }).toEqual({ added: false, ghosts: [] });
  await expect.poll(() => page.locator('.tabs-container .tab.dirty', { hasText: 'calc.ts' }).count(), { timeout: 15000 }).toBe(0);

  // ---- 3. Inline chat again; a second Ctrl+I while the proposal waits says so (no second box); the
  //         person edits above it; Discard (Escape) puts back exactly the old line and keeps their edit.
  fake.script(textReply('```ts\nreturn \'square\';\n```'));
  await cursorAt("return 'rectangle'");
  await page.keyboard.press('Shift+End');
  await openInlineBox();
  await page.keyboard.type('call it a square');
  await submitInline();
  await codeLine("return 'square'").waitFor({ timeout: 90000 });
  await accept.waitFor({ timeout: 15000 });
  await expect.poll(async () => drawn(await decorationsOf("return 'square'")), { timeout: 15000 }).toEqual({ added: true, ghosts: ["− return 'rectangle';"] });
  await cursorAt('export function total');
  await page.keyboard.press('Control+I');
  const waiting = page.locator('.notification-toast', { hasText: 'an inline chat proposal is waiting at calc.ts:14' });
  await waiting.waitFor({ timeout: 15000 });
  expect(await inlineBox.count()).toBe(1);
  // Its toast is cleared (an Escape for it could discard the proposal if the toast hid by itself).
  await cs.runCommand('Notifications: Clear All Notifications');
  await waiting.waitFor({ state: 'hidden', timeout: 15000 });
  await cursorAt('export function total');
  await page.keyboard.press('Home');
  await page.keyboard.type('// top\n');
  await codeLine('// top').waitFor({ timeout: 15000 });
  // The decorations follow the proposal down a line.
  await expect.poll(async () => drawn(await decorationsOf("return 'square'")), { timeout: 15000 }).toEqual({ added: true, ghosts: ["− return 'rectangle';"] });
  await keyOrLens('Escape', discard);
  await expect.poll(() => inlineBox.count(), { timeout: 15000 }).toBe(0);
  await codeLine("return 'rectangle'").waitFor({ timeout: 15000 });
  expect(await codeLine("return 'square'").count()).toBe(0);
  await expect.poll(async () => drawn(await decorationsOf("return 'rectangle'")), { timeout: 15000 }).toEqual({ added: false, ghosts: [] });
  await page.keyboard.press('Control+S');
  await expect.poll(() => readFileSync(join(cs.ws, 'calc.ts'), 'utf8'), { timeout: 15000 }).toBe(`// top\n${summed}`);
  const saved = readFileSync(join(cs.ws, 'calc.ts'), 'utf8');

  // ---- 3b. Nothing selected, the cursor at the end of a line: the code goes in below it, indented as
  //          that line; Discard on a file that was saved leaves it saved (not dirty), its text as before.
  fake.script(textReply('```ts\nperimeter(): number {\n  return 2 * (this.w + this.h);\n}\n```'));
  await cursorAt('constructor(private');
  await page.keyboard.press('End');
  await openInlineBox();
  expect(await inlineTitle.textContent()).toContain('dsh: code to insert at line 9');
  await page.keyboard.type('a perimeter method');
  await submitInline();
  await codeLine('perimeter(): number').waitFor({ timeout: 90000 });
  expect(lastRequest()).toContain('Write the code to insert at calc.ts:9');
  for (const text of ['perimeter(): number {', 'return 2 * (this.w + this.h);']) {
    await expect.poll(async () => drawn(await decorationsOf(text)), { timeout: 15000 }).toEqual({ added: true, ghosts: [] });
  }
  await discard.waitFor({ timeout: 15000 });
  await keyOrLens('Escape', discard);
  await expect.poll(() => codeLine('perimeter(): number').count(), { timeout: 15000 }).toBe(0);
  await expect.poll(() => page.locator('.tabs-container .tab.dirty', { hasText: 'calc.ts' }).count(), { timeout: 15000 }).toBe(0);
  expect(readFileSync(join(cs.ws, 'calc.ts'), 'utf8')).toBe(saved);

  // ---- 3c. Escape while dsh works cancels: the box goes, the prompt's turn is stopped (its model
  //          request is dropped), nothing is proposed.
  const slow = gate();
  fake.script(textReply('```ts\nreturn 1;\n```', { gate: slow.promise }));
  const asked = fake.requests.length;
  await cursorAt("return 'rectangle'");
  await page.keyboard.press('Shift+End');
  await openInlineBox();
  await page.keyboard.type('return one');
  await submitInline();
  await fake.waitRequests(asked + 1, 60000);
  await expect.poll(() => c.locator('.status').textContent(), { timeout: 30000 }).toBe('running');
  await expect.poll(() => inlineTitle.textContent(), { timeout: 15000 }).toContain('dsh is working on “return one”');
  await keyOrLens('Escape', inlineBox.locator('.action-label[aria-label^="Cancel Inline Chat"]'));
  await expect.poll(() => inlineBox.count(), { timeout: 15000 }).toBe(0);
  await expect.poll(() => fake.requests.at(-1)!.disconnected, { timeout: 30000 }).toBe(true);
  await expect.poll(() => c.locator('.status').textContent(), { timeout: 30000 }).toBe('idle');
  slow.open();
  expect(await codeLine('return 1;').count()).toBe(0);
  expect(await page.locator('.tabs-container .tab.dirty', { hasText: 'calc.ts' }).count()).toBe(0);

  // ---- 3d. The box's second button asks in the folder's side session: its request carries none of
  //          the chat's conversation; the chat stays as it was; Switch Session lists it by title.
  fake.script(textReply('```ts\nreturn \'side\';\n```'));
  const chatMessages = await c.locator('.msg').count();
  await cursorAt("return 'rectangle'");
  await page.keyboard.press('Shift+End');
  await openInlineBox();
  await page.keyboard.type('name it side');
  await inlineBox.locator('.monaco-button', { hasText: 'Ask in a Side Session' }).click();
  await codeLine("return 'side'").waitFor({ timeout: 90000 });
  expect(lastRequest()).toContain('name it side');
  for (const earlier of ['Fix this problem at calc.ts:2', 'sum the numbers', 'Use a string type for the label.']) expect(lastRequest()).not.toContain(earlier);
  expect(await c.locator('.msg').count()).toBe(chatMessages);
  await discard.waitFor({ timeout: 15000 });
  await keyOrLens('Escape', discard);
  await expect.poll(() => readFileSync(join(cs.ws, 'calc.ts'), 'utf8'), { timeout: 15000 }).toBe(saved);
  await cs.runCommand('dsh: Switch Session');
  await page.locator('.quick-input-list .monaco-list-row', { hasText: `Inline chat — ${basename(cs.ws)}` }).waitFor({ timeout: 30000 });
  await cs.shot('inline-chat-side-session-listed');
  await page.keyboard.press('Escape');

  // ---- 4. Apply a code block that names no file: it replaces the method it declares.
  fake.script(textReply('The area:\n\n```ts\narea(): number {\n  return this.w * this.h;\n}\n```\n'));
  await cursorAt('export class Rectangle'); // an empty selection elsewhere in the file
  const box = c.getByLabel('message');
  await box.fill('What should area return?');
  await box.press('Enter');
  const block = c.locator('.msg.assistant', { hasText: 'The area:' }).locator('.codeblock').first();
  await block.waitFor({ timeout: 90000 });
  await block.getByRole('button', { name: /Apply to a file/ }).click();
  const applyTab = page.locator('.tabs-container .tab', { hasText: 'code block from dsh: area' });
  await applyTab.waitFor({ timeout: 30000 });
  await cs.shot('apply-into-method');
  await page.waitForTimeout(700);
  await cs.runCommand('dsh: Accept Proposed Edit');
  await expect.poll(() => applyTab.count(), { timeout: 15000 }).toBe(0);
  await page.keyboard.press('Control+S');
  await expect.poll(() => readFileSync(join(cs.ws, 'calc.ts'), 'utf8'), { timeout: 15000 })
    .toBe(saved.replace('  area(): number {\n    return 0;\n  }', '  area(): number {\n    return this.w * this.h;\n  }'));

  // ---- 5. The @ picker: the ignored file is not offered, the tracked one is; a class by its symbol.
  await box.fill('@secret');
  const rows = c.locator('.mentions .mention');
  await expect.poll(() => rows.filter({ hasText: 'secretKept.ts' }).count(), { timeout: 30000 }).toBeGreaterThan(0);
  expect(await rows.filter({ hasText: 'secretIgnored.ts' }).count()).toBe(0);
  await box.fill('@Rectan');
  const symbol = rows.filter({ has: c.locator('.mention-kind.symbol') }).filter({ hasText: 'Rectangle' });
  await expect.poll(() => symbol.count(), { timeout: 30000 }).toBeGreaterThan(0);
  await sidebarShot('dark-mentions');
  await symbol.first().click();
  await expect.poll(() => c.locator('.chip', { hasText: 'Rectangle' }).count(), { timeout: 15000 }).toBe(1);
  // The light theme (typing settings.json is slow to save on a loaded machine; the theme picker
  // searches the marketplace as you type).
  await cs.runCommand('Preferences: Toggle between Light/Dark Themes');
  await page.locator('.monaco-workbench.vs:not(.vs-dark)').waitFor({ timeout: 30000 });
  await box.fill('@Rectan');
  await expect.poll(() => symbol.count(), { timeout: 30000 }).toBeGreaterThan(0);
  await sidebarShot('light-mentions');
}
