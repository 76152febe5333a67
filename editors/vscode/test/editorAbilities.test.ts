// The editor's abilities the daemon asks for (protocol.md §9: diagnostics, language features, saving
// an agent's edit), answered by the extension's handlers (src/editorAbilities.ts) over a REAL daemon:
// the agent's tools reach them and the model gets what "VS Code" knows. VS Code's language API is the
// mock here (the e2e in code-server runs the save for real).
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import * as vscode from 'vscode';
import { editorHandlers, OFFERED, Rechecks } from '../src/editorAbilities';
import { FakeProvider, textReply, toolReply } from './fakeProvider';
import { removeTempStates, startDaemon, type TestDaemon } from './daemon';
import { diagnosticsChanged, documentChanged, FakeDocument, languageState, tabs } from './vscode.mock';

let fake: FakeProvider;
let d: TestDaemon;
let watch: Rechecks;
const logged: string[] = [];

beforeEach(async () => {
  fake = new FakeProvider();
  await fake.start();
  watch = new Rechecks();
  d = await startDaemon(fake.baseUrl, undefined, { editor: { offered: OFFERED, handlers: editorHandlers((l) => logged.push(l), watch) } });
});
afterEach(async () => {
  watch.dispose();
  await d.stop();
  await fake.stop();
  removeTempStates();
  languageState.diagnostics.clear();
  languageState.commands.clear();
});

const R = (l1: number, c1: number, l2: number, c2: number) => new vscode.Range(new vscode.Position(l1, c1), new vscode.Position(l2, c2));

/** Runs one tool call through the daemon and returns the text of its result. */
async function toolResult(name: string, args: object): Promise<string> {
  const { sessionId } = await d.client.newSession({ cwd: d.root });
  fake.script(toolReply([{ id: 'call_x', name, args }]), textReply('done'));
  await d.client.followup(sessionId, `use ${name}`);
  await d.waitFor(() => d.of(sessionId, 'turn/end').length === 1, 'the turn');
  const result = d.of(sessionId, 'tool/result')[0] as any;
  return JSON.stringify(result.data.message.content);
}

describe('the editor answers the daemon (diagnostics, language features)', () => {
  it('diagnostics: the problems VS Code knows reach the model as path:line:col, severity and source', async () => {
    const file = join(d.root, 'app.py');
    writeFileSync(file, 'import os\nprint(undefined_name)\n');
    const diag = new vscode.Diagnostic(R(1, 6, 1, 20), '"undefined_name" is not defined', vscode.DiagnosticSeverity.Error);
    diag.source = 'Pyright';
    diag.code = { value: 'reportUndefinedVariable', target: vscode.Uri.parse('https://example.invalid') };
    languageState.diagnostics.set(pathToFileURL(file).href, [diag]);
    const text = await toolResult('diagnostics', { path: 'app.py' });
    expect(text).toContain('app.py:2:7');
    expect(text).toContain('\\"undefined_name\\" is not defined');
    expect(text).toContain('Pyright');
  });

  it('definition and symbols: answered from the language servers, as workspace locations', async () => {
    const app = join(d.root, 'app.py');
    const lib = join(d.root, 'lib.py');
    writeFileSync(app, 'from lib import helper\nhelper()\n');
    writeFileSync(lib, 'import os\n\ndef helper():\n    return 1\n');
    languageState.commands.set('vscode.executeDefinitionProvider', (uri, pos: any) => {
      expect(String(uri)).toBe(pathToFileURL(app).href);
      expect([pos.line, pos.character]).toEqual([1, 0]); // line 2, the symbol's first character
      return [{ targetUri: vscode.Uri.file(lib), targetRange: R(2, 0, 3, 12), targetSelectionRange: R(2, 4, 2, 10) }];
    });
    expect(await toolResult('definition', { path: 'app.py', line: 2, symbol: 'helper' })).toContain('lib.py:3:5');
    languageState.commands.set('vscode.executeDocumentSymbolProvider', () => [
      { name: 'Widget', kind: 4, range: R(0, 0, 3, 0), selectionRange: R(0, 6, 0, 12), children: [{ name: 'draw', kind: 5, range: R(1, 4, 2, 0), selectionRange: R(1, 8, 1, 12), children: [] }] },
    ]);
    const symbols = await toolResult('symbols', { path: 'lib.py' });
    expect(symbols).toContain('Widget');
    expect(symbols).toContain('Widget.draw');
  });
});

describe('no language server, and the wait for a re-check after an edit', () => {
  it('an empty answer for a file no installed extension serves says there is no language server', async () => {
    writeFileSync(join(d.root, 'notes.txt'), 'helper is mentioned here\n');
    languageState.commands.set('vscode.executeDefinitionProvider', () => []);
    languageState.commands.set('vscode.executeHoverProvider', () => []);
    // The mock's workspace has no open documents: the file's language is asked of openTextDocument.
    (vscode.workspace as any).openTextDocument = async (uri: vscode.Uri) => ({ uri, languageId: 'plaintext' });
    try {
      expect(await toolResult('definition', { path: 'notes.txt', line: 1, symbol: 'helper' })).toContain('No language server for this file');
      // An extension that activates on the language: its server found nothing, which is said as such.
      (vscode.extensions.all as any[]).push({ id: 'x.plain', packageJSON: { main: './x.js', activationEvents: ['onLanguage:plaintext'] } });
      expect(await toolResult('hover', { path: 'notes.txt', line: 1, symbol: 'helper' })).toContain('nothing to say');
    } finally {
      (vscode.extensions.all as any[]).length = 0;
      delete (vscode.workspace as any).openTextDocument;
    }
  });

  it('settleMs: answered at once, settled, for a document nothing re-checks', async () => {
    expect(OFFERED.diagnosticsSettle).toBe(true);
    const handlers = editorHandlers(() => undefined, watch);
    const uri = pathToFileURL(join(d.root, 'closed.py')).href;
    const answer = await handlers['dsh/editor/diagnostics']({ uris: [uri], settleMs: 60000 }) as any;
    expect(answer.items).toEqual([{ uri: vscode.Uri.parse(uri).toString(), diagnostics: [], settled: true }]);
  });

  it('settleMs, TypeScript: settled as soon as tsserver\'s answer for the current text is what the editor shows, not after the cap', async () => {
    const uri = vscode.Uri.parse(pathToFileURL(join(d.root, 'clean.ts')).href);
    const doc = { uri, languageId: 'typescript', version: 3, isClosed: false };
    (vscode.workspace.textDocuments as any[]).push(doc);
    const tab = { label: 'clean.ts', input: { uri } }; // open in an editor: the extension reports on it
    tabs.push(tab);
    (vscode.extensions.all as any[]).push({ id: 'vscode.typescript-language-features', packageJSON: { main: './x.js', activationEvents: ['onLanguage:typescript'] } });
    const asked: unknown[] = [];
    let tsserver: Record<string, unknown[]> = { syntacticDiagnosticsSync: [], semanticDiagnosticsSync: [] };
    languageState.commands.set('typescript.tsserverRequest', (command, args: any) => {
      asked.push([command, String(args.file)]);
      return { type: 'response', success: true, body: tsserver[command as string] };
    });
    const handlers = editorHandlers(() => undefined, watch);
    try {
      // An edit that left the file clean: no diagnostics event will come; TypeScript agrees it is clean.
      const clean = await handlers['dsh/editor/diagnostics']({ uris: [uri.toString()], settleMs: 4000 }) as any;
      expect(clean.items).toEqual([{ uri: uri.toString(), diagnostics: [], settled: true }]);
      expect(asked).toContainEqual(['semanticDiagnosticsSync', uri.toString()]);
      // TypeScript knows an error the editor does not show yet: not settled by that (the extension's
      // report is still to come); here it never comes, so the cap answers, unsettled.
      tsserver = { syntacticDiagnosticsSync: [], semanticDiagnosticsSync: [{ start: { line: 1, offset: 14 }, end: { line: 1, offset: 19 }, text: "Type 'number' is not assignable to type 'string'.", code: 2322, category: 'error' }] };
      const stale = await handlers['dsh/editor/diagnostics']({ uris: [uri.toString()], settleMs: 1500 }) as any;
      expect(stale.items[0].settled).toBe(false);
      // The editor shows it: they agree.
      const shown = new vscode.Diagnostic(R(0, 13, 0, 18), "Type 'number' is not assignable to type 'string'.", vscode.DiagnosticSeverity.Error);
      shown.source = 'ts';
      shown.code = 2322;
      languageState.diagnostics.set(uri.toString(), [shown]);
      const agreed = await handlers['dsh/editor/diagnostics']({ uris: [uri.toString()], settleMs: 4000 }) as any;
      expect(agreed.items[0].settled).toBe(true);
      expect(agreed.items[0].diagnostics).toHaveLength(1);
    } finally {
      (vscode.extensions.all as any[]).length = 0;
      const open = vscode.workspace.textDocuments as any[];
      open.splice(open.indexOf(doc), 1);
      tabs.splice(tabs.indexOf(tab), 1);
    }
  });

  it('settleMs, a document open in no editor: opened for its language server (no tab), and its new error asked of tsserver', async () => {
    const uri = vscode.Uri.parse(pathToFileURL(join(d.root, 'util.ts')).href);
    const notes = vscode.Uri.parse(pathToFileURL(join(d.root, 'notes.txt')).href);
    (vscode.extensions.all as any[]).push({ id: 'vscode.typescript-language-features', packageJSON: { main: './x.js', activationEvents: ['onLanguage:typescript'] } });
    const opened: string[] = [];
    const error = { message: "Type 'string' is not assignable to type 'number'." };
    // VS Code dropped the documents once the edit was saved; opening one again (no tab), the
    // "TypeScript extension" syncs it, but reports diagnostics only for files open in tabs: none come.
    (vscode.workspace as any).openTextDocument = async (u: vscode.Uri) => {
      opened.push(u.toString());
      const doc = new FakeDocument(u, '', u.toString().endsWith('.ts') ? 'typescript' : 'plaintext');
      (vscode.workspace.textDocuments as any[]).push(doc);
      return doc;
    };
    // tsserver knows the error (its "ts" report would say the same; an eslint one stays as shown).
    const lint = new vscode.Diagnostic(R(0, 0, 0, 6), 'Prefer const.', vscode.DiagnosticSeverity.Warning);
    lint.source = 'eslint';
    languageState.diagnostics.set(uri.toString(), [lint]);
    languageState.commands.set('typescript.tsserverRequest', (command) => ({
      type: 'response', success: true,
      body: command === 'semanticDiagnosticsSync'
        ? [{ start: { line: 1, offset: 14 }, end: { line: 1, offset: 19 }, text: error.message, code: 2322, category: 'error' }, { start: { line: 1, offset: 1 }, end: { line: 1, offset: 2 }, text: 'unused', code: 6133, category: 'suggestion' }]
        : [],
    }));
    logged.length = 0;
    const handlers = editorHandlers((l) => logged.push(l), watch);
    try {
      // Before the edit (no settleMs): what tsserver says too, so an old error is not told as new.
      const before = await handlers['dsh/editor/diagnostics']({ uris: [uri.toString()] }) as any;
      expect(opened).toEqual([uri.toString()]);
      expect(before.items[0].diagnostics.map((x: any) => x.message)).toEqual(['Prefer const.', error.message]);
      (vscode.workspace.textDocuments as any[]).length = 0; // dropped again once the edit is saved
      const answer = await handlers['dsh/editor/diagnostics']({ uris: [uri.toString()], settleMs: 20000 }) as any;
      expect(opened).toEqual([uri.toString(), uri.toString()]);
      expect(answer.items).toEqual([{ uri: uri.toString(), settled: true, diagnostics: [
        { range: { start: { line: 0, character: 0 }, end: { line: 0, character: 6 } }, message: 'Prefer const.', severity: 2, source: 'eslint' },
        { range: { start: { line: 0, character: 13 }, end: { line: 0, character: 18 } }, message: error.message, severity: 1, source: 'ts', code: 2322 },
      ] }]);
      expect(logged.join('\n')).toMatch(/util\.ts: asked TypeScript/);
      // A language nothing serves: opened to learn its language, then settled at once (the cap is
      // far beyond this test's timeout), "no language server".
      const plain = await handlers['dsh/editor/diagnostics']({ uris: [notes.toString()], settleMs: 60000 }) as any;
      expect(plain.items).toEqual([{ uri: notes.toString(), diagnostics: [], settled: true }]);
      expect(logged.join('\n')).toMatch(/notes\.txt: no language server/);
    } finally {
      (vscode.extensions.all as any[]).length = 0;
      (vscode.workspace.textDocuments as any[]).length = 0;
      delete (vscode.workspace as any).openTextDocument;
    }
  });

  it('settleMs, TypeScript: tsserver is asked once per settle (its syntactic and its semantic diagnostics), for a file in a tab and for one in none', async () => {
    const uri = vscode.Uri.parse(pathToFileURL(join(d.root, 'once.ts')).href);
    (vscode.extensions.all as any[]).push({ id: 'vscode.typescript-language-features', packageJSON: { main: './x.js', activationEvents: ['onLanguage:typescript'] } });
    const doc = new FakeDocument(uri, 'export const A: number = 1;\n', 'typescript');
    (vscode.workspace.textDocuments as any[]).push(doc);
    const asked: string[] = [];
    languageState.commands.set('typescript.tsserverRequest', (command) => {
      asked.push(String(command));
      return { type: 'response', success: true, body: [] };
    });
    const handlers = editorHandlers(() => undefined, watch);
    const tab = { label: 'once.ts', input: { uri } };
    try {
      // In no tab: tsserver's answer is the file's diagnostics (and also what is compared with the editor's).
      const untabbed = await handlers['dsh/editor/diagnostics']({ uris: [uri.toString()], settleMs: 20000 }) as any;
      expect(untabbed.items[0].settled).toBe(true);
      expect(asked.sort()).toEqual(['semanticDiagnosticsSync', 'syntacticDiagnosticsSync']);
      asked.length = 0;
      // In a tab: the same one answer, compared with what the editor shows (nothing, as tsserver says).
      tabs.push(tab);
      const tabbed = await handlers['dsh/editor/diagnostics']({ uris: [uri.toString()], settleMs: 20000 }) as any;
      expect(tabbed.items[0].settled).toBe(true);
      expect(asked.sort()).toEqual(['semanticDiagnosticsSync', 'syntacticDiagnosticsSync']);
    } finally {
      (vscode.extensions.all as any[]).length = 0;
      (vscode.workspace.textDocuments as any[]).length = 0;
      if (tabs.includes(tab)) tabs.splice(tabs.indexOf(tab), 1);
    }
  });

  it('the re-check watch: a change of the text after a report means not settled until the next report', () => {
    const uri = vscode.Uri.parse(pathToFileURL(join(d.root, 'typed.ts')).href);
    (vscode.extensions.all as any[]).push({ id: 'vscode.typescript-language-features', packageJSON: { main: './x.js', activationEvents: ['onLanguage:typescript'] } });
    const doc = new FakeDocument(uri, 'export const A = 1;\n', 'typescript');
    (vscode.workspace.textDocuments as any[]).push(doc);
    const now = Date.now();
    const at = (ms: number) => { (Date as any).now = () => now + ms; };
    const realNow = Date.now;
    try {
      at(0);
      diagnosticsChanged.fire({ uris: [uri] });
      at(200);
      expect(watch.settled(uri)).toBe('reported');
      doc.type('export const A: string = 1;\n'); // carries its contentChanges, as VS Code's event does
      at(400);
      expect(watch.settled(uri)).toBeUndefined();
      diagnosticsChanged.fire({ uris: [uri] });
      at(600);
      expect(watch.settled(uri)).toBe('reported');
    } finally {
      Date.now = realNow;
      (vscode.extensions.all as any[]).length = 0;
      (vscode.workspace.textDocuments as any[]).length = 0;
    }
  });

  it('the re-check watch: one set of listeners however often the daemon restarts, none once the extension is disposed', () => {
    const before = [diagnosticsChanged.listening, documentChanged.listening];
    const extension = new Rechecks(); // the Daemon's, made once with the extension
    const once = [diagnosticsChanged.listening, documentChanged.listening];
    expect(once).toEqual([before[0] + 1, before[1] + 1]);
    for (let start = 0; start < 3; start++) editorHandlers(() => undefined, extension); // each daemon (re)start
    expect([diagnosticsChanged.listening, documentChanged.listening]).toEqual(once);
    extension.dispose();
    expect([diagnosticsChanged.listening, documentChanged.listening]).toEqual(before);
  });
});
