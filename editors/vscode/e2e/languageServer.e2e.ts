// The editor as the agent's eyes and hands (issue 26), end to end in a real VS Code with a real
// language server: code-server's own TypeScript extension (run on the TypeScript of this package's
// node_modules, as code-server ships no tsserver) answers `definition`, `references`, `hover` and
// `symbols`; its diagnostics reach the model after an edit that breaks a type; a command after the
// allowed edit sees it; the person's unsaved change in another file is neither written nor hidden.
// The model is the fake provider; what it got is read from its next request.
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { textReply, toolReply } from '../test/fakeProvider';
import { CodeServer, EXT } from './harness';

// The most an edit waits for the language server to re-check the file. Far beyond the waits below:
// the edit's result comes when TypeScript's diagnostics changed (VS Code answers `settleMs` then), or,
// for an edit that leaves them as they were (no diagnostics event comes), when TypeScript's own answer
// for the new text is what the editor shows; never by running out this cap.
const SETTLE_CAP_S = 60;

const cs = new CodeServer({
  name: 'ls', daemon: 'setting',
  settings: {
    'js/ts.tsdk.path': join(EXT, 'node_modules/typescript/lib'),
    'typescript.tsdk': join(EXT, 'node_modules/typescript/lib'),
  },
  prepare: ({ ws, state }) => {
    writeFileSync(join(ws, 'tsconfig.json'), JSON.stringify({ compilerOptions: { strict: true, target: 'ES2020', module: 'commonjs', noEmit: true } }));
    writeFileSync(join(ws, 'lib.ts'), [
      '/** Greets someone by name. */',
      'export function greet(name: string): string {',
      '  return `hello ${name}`;',
      '}',
      '',
      'export const COUNT: number = 1;',
      '',
    ].join('\n'));
    writeFileSync(join(ws, 'app.ts'), "import { greet, COUNT } from './lib';\n\nexport const message: string = greet('ann');\nexport const total: number = COUNT + 1;\n");
    writeFileSync(join(ws, 'other.ts'), 'export const SAVED = true;\n');
    // Open in no tab, ever: an agent edit to it is checked all the same (its old error is not new).
    writeFileSync(join(ws, 'util.ts'), 'export const LIMIT: number = 10;\nexport const OLD: boolean = 0;\n');
    writeFileSync(join(ws, 'notes.txt'), 'alpha\nbeta\n');
    // full-access: the command asks, as this test expects (the sandbox has its own tests).
    writeFileSync(join(state, 'config.json'), JSON.stringify({ tools: { sandbox: 'full-access', limits: { diagnostics_settle_s: SETTLE_CAP_S } } }));
  },
});

const shot = (name: string) => cs.shot(name);

describe('the editor as the agent\'s eyes and hands, with TypeScript in code-server (issue 26)', () => {
  beforeAll(async () => { await cs.start(); }, 300000);
  afterAll(async () => { await cs.stop(); });

  it('definition, references, hover and symbols from TypeScript; a new type error reaches the model; a command sees the edit; the unsaved file stays unsaved', async () => {
    try {
      await scenario();
    } catch (err) {
      await cs.shot('FAILED').catch(() => undefined);
      throw new Error(`${(err as Error).message}\n--- logs\n${cs.logs()}`, { cause: err });
    }
  });
});

/** What the model got for tool call `id`: the tool message in the first request that carries it. */
function modelGot(id: string): string {
  for (const r of cs.fake.requests) {
    const m = (r.body.messages as any[]).find((x) => x.role === 'tool' && x.tool_call_id === id);
    if (m) return String(m.content);
  }
  throw new Error(`no request carries the result of ${id}`);
}

/** The dsh output channel (the daemon's log), as VS Code wrote it. */
function dshLog(): string {
  try {
    return execFileSync('bash', ['-c', `find '${join(cs.root, 'user/logs')}' -type f -name '*dsh*' -print0 | xargs -0 cat`], { encoding: 'utf8' });
  } catch {
    return '';
  }
}

async function scenario(): Promise<void> {
  const { page, fake, ws } = cs;
  await cs.openWorkbench();
  await cs.openChat();
  const c = cs.chat();

  // The person's own change in other.ts, not saved.
  await cs.openFile('other.ts');
  await page.locator('.monaco-editor .view-lines', { hasText: 'SAVED' }).first().click();
  await page.keyboard.press('Control+End');
  await page.keyboard.type('export const UNSAVED = 1;');
  await page.locator('.tabs-container .tab.dirty', { hasText: 'other.ts' }).waitFor({ timeout: 15000 });
  // lib.ts open as well (clean, and so never reported on: TypeScript announces no empty list).
  await cs.openFile('lib.ts');
  await page.locator('.monaco-editor .view-lines', { hasText: 'Greets someone' }).first().waitFor();
  // app.ts open: TypeScript starts (its language status item names it once the project is loaded).
  await cs.openFile('app.ts');
  await page.locator('.monaco-editor .view-lines', { hasText: 'COUNT + 1' }).first().waitFor();
  await shot('typescript-open');

  fake.script(
    toolReply([{ id: 'c1', name: 'definition', args: { path: 'app.ts', line: 3, symbol: 'greet' } }]),
    toolReply([{ id: 'c2', name: 'references', args: { path: 'lib.ts', line: 2, symbol: 'greet' } }]),
    toolReply([{ id: 'c3', name: 'hover', args: { path: 'app.ts', line: 3, symbol: 'greet' } }]),
    toolReply([{ id: 'c4', name: 'symbols', args: { path: 'lib.ts' } }]),
    toolReply([{ id: 'c5', name: 'definition', args: { path: 'notes.txt', line: 1, symbol: 'alpha' } }]),
    toolReply([{ id: 'c6', name: 'edit_file', args: { path: 'app.ts', old_string: 'export const total: number', new_string: 'export const total: string' } }]),
    toolReply([{ id: 'c7', name: 'run_command', args: { command: 'cat app.ts other.ts' } }]),
    // Two edits that leave lib.ts clean: the second brings no diagnostics event at all.
    toolReply([{ id: 'c8', name: 'edit_file', args: { path: 'lib.ts', old_string: 'hello ${name}', new_string: 'hi ${name}' } }]),
    toolReply([{ id: 'c9', name: 'edit_file', args: { path: 'lib.ts', old_string: 'hi ${name}', new_string: 'hey ${name}' } }]),
    // A file open in no tab: VS Code syncs it to TypeScript only while it is among its documents.
    toolReply([{ id: 'c10', name: 'edit_file', args: { path: 'util.ts', old_string: 'LIMIT: number = 10', new_string: 'LIMIT: number = "10"' } }]),
    textReply('Done: total is a string now, which TypeScript rejects.'),
  );
  await c.getByLabel('message').fill('Where is greet defined and used, what is it, what is in lib.ts; then make total a string and show the files');
  await c.getByLabel('message').press('Enter');

  // The edit asks first: the card, then Allow once (as a person would).
  await c.locator('.permission').waitFor({ timeout: 120000 });
  expect(await c.locator('.permission .diff').textContent()).toContain('+export const total: string');
  await shot('edit-permission');
  await c.getByRole('button', { name: 'Allow once' }).click();
  await c.locator('.permission pre.command').waitFor({ timeout: 120000 });
  expect(await c.locator('.permission pre.command').textContent()).toContain('$ cat app.ts other.ts');
  await c.getByRole('button', { name: 'Allow once' }).click();
  for (const line of ['+  return `hi ${name}`;', '+  return `hey ${name}`;', '+export const LIMIT: number = "10";']) {
    await c.locator('.permission .diff', { hasText: line }).waitFor({ timeout: 120000 });
    await c.getByRole('button', { name: 'Allow once' }).click();
  }
  await expect.poll(() => c.locator('.msg.assistant', { hasText: 'which TypeScript rejects' }).count(), { timeout: 240000 }).toBe(1);
  await shot('turn-done');
  if (process.env.DSH_E2E_SHOW) { // what the person sees on the tool cards, and what the model got
    console.log('--- tool cards:\n' + (await c.locator('.tool').allTextContents()).join('\n'));
    for (const id of ['c1', 'c2', 'c3', 'c4', 'c5', 'c6', 'c7', 'c8', 'c9', 'c10']) console.log(`--- model got (${id}):\n${modelGot(id)}`);
  }

  // (b) definition: the symbol is defined in another file, found by TypeScript.
  expect(modelGot('c1')).toBe('lib.ts:2:17: export function greet(name: string): string {');
  // (c) references: the declaration and every use, each with its line.
  const refs = modelGot('c2');
  for (const line of ['lib.ts:2:17: export function greet(name: string): string {', "app.ts:1:10: import { greet, COUNT } from './lib';", "app.ts:3:32: export const message: string = greet('ann');"]) {
    expect(refs).toContain(line);
  }
  // hover: the signature and the doc comment.
  expect(modelGot('c3')).toContain('greet(name: string): string');
  expect(modelGot('c3')).toContain('Greets someone by name.');
  // symbols: lib.ts's outline.
  expect(modelGot('c4')).toMatch(/^function greet lib\.ts:2:\d+: export function greet\(name: string\): string \{$/m);
  expect(modelGot('c4')).toMatch(/ COUNT lib\.ts:6:14: export const COUNT: number = 1;/);
  // A plain-text file: no language server, said in words (not "No definition found").
  expect(modelGot('c5')).toContain('No language server for this file');
  // (a) The edit's new type error reached the next request, from TypeScript.
  const edited = modelGot('c6');
  expect(edited).toContain('1 new error in app.ts after this edit');
  expect(edited).toContain("app.ts:4:14: error: Type 'number' is not assignable to type 'string'.");
  // ... answered when TypeScript's diagnostics changed, not when the cap ran out; and the edits that
  // left lib.ts clean (no diagnostics event) when TypeScript's answer for the new text agreed.
  const log = dshLog().split('\n');
  const settles = log.filter((l) => l.includes('diagnostics after an edit:')); // the daemon's
  const how = log.filter((l) => l.includes('diagnostics after an edit (')); // the extension's
  console.log(`--- how each edit's diagnostics settled (cap ${SETTLE_CAP_S} s):\n${[...how, ...settles].join('\n')}`);
  expect(settles).toHaveLength(4);
  for (const line of settles) expect(line).toContain("diagnostics after an edit: re-checked by the editor's language servers");
  expect(modelGot('c9')).not.toContain('new error');
  // The file open in no tab: opened for TypeScript (not shown), its new error reached the model too.
  const unopened = modelGot('c10');
  console.log(`--- model got (c10, util.ts open in no tab):\n${unopened}`);
  expect(unopened).toContain('1 new error in util.ts after this edit');
  expect(unopened).toContain("util.ts:1:14: error: Type 'string' is not assignable to type 'number'.");
  expect(unopened).not.toContain('OLD'); // there before the edit: not told as new
  expect(unopened).not.toContain("Type 'number' is not assignable to type 'boolean'");
  expect(how.find((l) => l.includes('util.ts'))).toContain('util.ts: asked TypeScript');
  // (d) The command after the allowed edit saw it; (e) the unsaved other.ts was named, not written.
  const ran = modelGot('c7');
  expect(ran).toContain('export const total: string = COUNT + 1;');
  expect(ran).not.toContain('total: number');
  expect(ran).toContain('other.ts has unsaved changes in the editor');
  expect(ran).not.toContain('UNSAVED');
  expect(readFileSync(join(ws, 'other.ts'), 'utf8')).toBe('export const SAVED = true;\n');
  expect(readFileSync(join(ws, 'app.ts'), 'utf8')).toContain('export const total: string = COUNT + 1;');
  expect(await page.locator('.tabs-container .tab.dirty', { hasText: 'other.ts' }).count()).toBe(1);
  expect(await page.locator('.tabs-container .tab.dirty', { hasText: 'app.ts' }).count()).toBe(0);
  // What the person sees: the type error in the editor too, and the tool cards in the chat.
  await page.locator('.tabs-container .tab', { hasText: 'app.ts' }).first().click();
  await page.locator('.monaco-editor .squiggly-error').first().waitFor({ timeout: 60000 });
  await shot('type-error-in-editor');
  expect(await c.locator('.tool .tool-name').allTextContents()).toEqual(['definition', 'references', 'hover', 'symbols', 'definition', 'edit_file', 'run_command', 'edit_file', 'edit_file', 'edit_file']);
  // No tab the person did not open: util.ts was opened for TypeScript only.
  expect(await page.locator('.tabs-container .tab', { hasText: 'util.ts' }).count()).toBe(0);
  // The cards' notes come from the results' meta (the daemon's data, not the model's words).
  expect(await c.locator('.tool').evaluateAll((cards) => cards.map((t) => t.querySelector('.tool-note')?.textContent ?? ''))).toEqual(['', '', '', '', 'no language server', '⚠ 1 new error', '', '', '', '⚠ 1 new error']);
  expect(await c.locator('.tool .tool-note.warn').first().getAttribute('title')).toBe("app.ts:4:14: Type 'number' is not assignable to type 'string'. [ts]");
}
