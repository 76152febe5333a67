// The pieces of the editor's own entry points to the agent: the reply of one prompt followed through
// the session's events (src/replyTracker.ts), the code a reply proposes, what a diagnostic is sent
// with (src/editorActions.ts), and what the @ picker searches (src/repoFiles.ts, with a real git).
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import * as vscode from 'vscode';
import { DiagnosticActions, diagnosticChips, diagnosticPrompt, inlinePrompt } from '../src/editorActions';
import type { AnyEvent } from '../src/protocol/types';
import { excludeGlob, excludePatterns, gitFiles, queryGlob } from '../src/repoFiles';
import { codeBlockOf, ReplyTracker } from '../src/replyTracker';

const ev = (sessionId: string, seq: number, type: string, data: unknown): AnyEvent => ({ sessionId, seq, type, data } as AnyEvent);
const said = (turn: number, text: string) => ({ turn, step: 1, message: { id: `a${turn}`, role: 'assistant', content: [{ type: 'reasoning', text: 'hm' }, { type: 'text', text }], source: { kind: 'model' } } });

describe('the reply to one prompt', () => {
  it('is the last text of the turn that claimed the prompt, even when its events came before the send\'s reply', async () => {
    const t = new ReplyTracker();
    // A turn already running (another prompt), then the turn that claims ours; another session meanwhile.
    t.take(ev('s', 1, 'turn/start', { turn: 1 }));
    t.take(ev('s', 2, 'user/message', { id: 'other', role: 'user', content: [] }));
    t.take(ev('s', 3, 'assistant/message', said(1, 'not this')));
    t.take(ev('s', 4, 'turn/end', { turn: 1 }));
    t.take(ev('s', 5, 'turn/start', { turn: 2 }));
    t.take(ev('s', 6, 'user/message', { id: 'm1', role: 'user', content: [] }));
    t.take(ev('x', 1, 'turn/start', { turn: 7 }));
    t.expect('s', 'm1');
    t.take(ev('s', 7, 'assistant/message', said(2, 'first step')));
    t.take(ev('x', 2, 'turn/end', { turn: 7 }));
    let done = false;
    void t.reply.then(() => { done = true; });
    await Promise.resolve();
    expect(done).toBe(false);
    t.take(ev('s', 8, 'assistant/message', { ...said(2, 'the answer'), step: 2 }));
    t.take(ev('s', 9, 'turn/end', { turn: 2 }));
    expect(await t.reply).toBe('the answer');
  });

  it('is claimed (and its turn running) from the claim, before its user/message is entered', async () => {
    const t = new ReplyTracker();
    t.expect('s', 'm1');
    t.take(ev('s', 1, 'turn/start', { turn: 3 }));
    t.take(ev('s', 2, 'agent/inbox/claimed', { message: { id: 'other' }, turn: 3 }));
    expect(t.claimed).toBe(false);
    t.take(ev('x', 1, 'agent/inbox/claimed', { message: { id: 'm1' }, turn: 3 }));
    expect(t.claimed).toBe(false);
    t.take(ev('s', 3, 'agent/inbox/claimed', { message: { id: 'm1' }, turn: 4 }));
    expect([t.claimed, t.running]).toEqual([true, true]);
    t.take(ev('s', 4, 'assistant/message', said(4, 'the answer')));
    t.take(ev('s', 5, 'turn/end', { turn: 4 }));
    expect(await t.reply).toBe('the answer');
    expect(t.running).toBe(false);
  });

  it('takes the first fenced code block of a reply, without its fences', () => {
    expect(codeBlockOf('Here:\n\n```ts\nconst a = 1;\n\nconst b = 2;\n```\n\nand ```x``` more')).toBe('const a = 1;\n\nconst b = 2;');
    expect(codeBlockOf('1. step\n   ```py\n   x = 1\n   ```\n')).toBe('x = 1');
    expect(codeBlockOf('~~~\nfoo\n~~~')).toBe('foo');
    expect(codeBlockOf('no code at all')).toBeUndefined();
  });
});

describe('what a diagnostic is sent with', () => {
  it('each problem under the cursor has Fix and Explain with dsh (named when there are several); hints have none', () => {
    const uri = vscode.Uri.file('/ws/app.ts');
    const doc = { uri } as unknown as vscode.TextDocument;
    const err = new vscode.Diagnostic(new vscode.Range(1, 8, 1, 13), "Type 'string' is not assignable to type 'number'.");
    err.source = 'ts';
    err.code = 2322;
    const hint = new vscode.Diagnostic(new vscode.Range(1, 8, 1, 13), "'label' is declared but its value is never read.", vscode.DiagnosticSeverity.Hint);
    const provider = new DiagnosticActions();
    const one = provider.provideCodeActions(doc, err.range, { diagnostics: [err, hint] } as unknown as vscode.CodeActionContext);
    expect(one.map((a) => a.title)).toEqual(['Fix with dsh', 'Explain with dsh']);
    expect(one[0].command).toMatchObject({ command: 'dsh.fixDiagnostic', arguments: [uri, { message: err.message, severity: 1, source: 'ts', code: 2322, range: { start: { line: 1, character: 8 } } }] });
    expect(one[1].command!.command).toBe('dsh.explainDiagnostic');
    const warn = new vscode.Diagnostic(new vscode.Range(1, 0, 1, 5), 'Unreachable code.', vscode.DiagnosticSeverity.Warning);
    const two = provider.provideCodeActions(doc, err.range, { diagnostics: [err, warn] } as unknown as vscode.CodeActionContext);
    expect(two.map((a) => a.title)).toEqual([
      "Fix with dsh: Type 'string' is not assignable to type 'number'.", "Explain with dsh: Type 'string' is not assignable to type 'number'.",
      'Fix with dsh: Unreachable code.', 'Explain with dsh: Unreachable code.',
    ]);
    expect(provider.provideCodeActions({ uri: vscode.Uri.parse('untitled:x') } as unknown as vscode.TextDocument, err.range, { diagnostics: [err] } as unknown as vscode.CodeActionContext)).toEqual([]);
  });

  it('the diagnostic and the ten lines around it, clamped to the file', () => {
    const uri = vscode.Uri.file('/ws/src/app.ts');
    const d = { range: { start: { line: 3, character: 6 }, end: { line: 3, character: 9 } }, severity: 1, message: "Type 'string' is not assignable to type 'number'.", source: 'ts', code: 2322 };
    const chips = diagnosticChips(uri, d, 20);
    expect(chips[0]).toMatchObject({ kind: 'diagnostics', uri: uri.toString(), diagnostics: [d] });
    expect(chips[1]).toMatchObject({ kind: 'selection', range: { start: { line: 0, character: 0 }, end: { line: 14, character: 0 } }, label: 'app.ts:1-14' });
    expect(diagnosticChips(uri, { ...d, range: { start: { line: 18, character: 0 }, end: { line: 18, character: 1 } } }, 20)[1].range!.end.line).toBe(20);
    expect(diagnosticPrompt('fix', 'src/app.ts', d)).toBe("Fix this problem at src/app.ts:4: Type 'string' is not assignable to type 'number'.");
    expect(diagnosticPrompt('explain', 'src/app.ts', d)).toContain('do not change any file');
  });

  it('inline chat asks for one code block for the selected lines', () => {
    const text = inlinePrompt('  handle the empty list ', 'a.ts', new vscode.Range(4, 0, 9, 0), false);
    expect(text.startsWith('handle the empty list\n\nThis is about the selected lines a.ts:5-9')).toBe(true);
    expect(text).toContain('one fenced code block');
    expect(inlinePrompt('a parser', 'a.ts', new vscode.Range(2, 4, 2, 4), true)).toContain('insert at a.ts:3');
  });
});

describe('what the @ picker searches', () => {
  const root = mkdtempSync(join(tmpdir(), 'dsh-repo-'));
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it('lists tracked and untracked files but not what .gitignore ignores; nothing outside a work tree', async () => {
    const git = (...a: string[]) => execFileSync('git', ['-c', 'user.email=t@t', '-c', 'user.name=t', ...a], { cwd: root, stdio: 'pipe' });
    git('init', '-q');
    mkdirSync(join(root, 'src'));
    mkdirSync(join(root, 'build'));
    writeFileSync(join(root, '.gitignore'), 'build/\n*.log\n');
    writeFileSync(join(root, 'src', 'main.ts'), 'x');
    writeFileSync(join(root, 'src', 'new file.ts'), 'x');
    writeFileSync(join(root, 'build', 'main.js'), 'x');
    writeFileSync(join(root, 'debug.log'), 'x');
    git('add', 'src/main.ts', '.gitignore');
    git('commit', '-qm', 'one');
    const files = await gitFiles(root);
    expect([...files!].sort()).toEqual(['.gitignore', 'src/main.ts', 'src/new file.ts']);
    const outside = mkdtempSync(join(tmpdir(), 'dsh-nogit-'));
    try { expect(await gitFiles(outside)).toBeUndefined(); } finally { rmSync(outside, { recursive: true, force: true }); }
  });

  it('turns a query into a case-insensitive glob and the exclude settings into one glob', () => {
    expect(queryGlob('')).toBe('**/*');
    expect(queryGlob('Ab/1')).toBe('{**/*[aA][bB]/1*,**/*[aA][bB]/1*/**}');
    expect(queryGlob('a*{')).toBe('{**/*[aA][*][{]*,**/*[aA][*][{]*/**}');
    expect(excludePatterns({ '**/.git': true, '**/off': false }, { '**/node_modules': true, '**/*.js': { when: '$(basename).ts' } })).toEqual(['**/.git', '**/node_modules', '**/*.js']);
    expect(excludeGlob([])).toBeUndefined();
    expect(excludeGlob(['a', 'b'])).toBe('{a,b}');
  });
});
