// Review findings in the Problems panel (protocol.md §19) against the REAL daemon: a review of a git
// work tree's uncommitted changes, the scripted provider reporting findings with `report_finding`,
// the diagnostics they become, their code actions, and what dismisses them.
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import * as vscode from 'vscode';
import { typedText } from '../src/protocol/reducer';
import type { UserMessage } from '../src/protocol/types';
import { askText, REVIEW_SOURCE, ReviewFindings } from '../src/reviewFindings';
import { PatchMismatch, patchReplacements } from '../src/reviewPatch';
import { FakeProvider, textReply, toolReply } from './fakeProvider';
import { removeTempStates, startDaemon, type TestDaemon } from './daemon';
import { appliedEdits, applyEditAnswer, codeActionProviders, diagnosticCollections, FakeDocument, workspace as mockWorkspace } from './vscode.mock';

describe('a suggested patch as line replacements', () => {
  const text = 'a\nb\nc\nd\ne\n';
  it('replaces each hunk\'s old lines with its new ones, in file order', () => {
    const patch = '--- a/f\n+++ b/f\n@@ -2,2 +2,2 @@\n b\n-c\n+C\n@@ -5 +5,2 @@\n e\n+f\n';
    expect(patchReplacements(text, patch)).toEqual([{ start: 1, end: 3, lines: ['b', 'C'] }, { start: 4, end: 5, lines: ['e', 'f'] }]);
  });
  it('inserts after the line a `-N,0` hunk names', () => {
    expect(patchReplacements(text, '@@ -1,0 +2 @@\n+new\n')).toEqual([{ start: 1, end: 1, lines: ['new'] }]);
  });
  it('refuses a patch whose old lines the file no longer has, or that holds no hunk', () => {
    expect(() => patchReplacements(text, '@@ -2,1 +2,1 @@\n-x\n+y\n')).toThrow(PatchMismatch);
    expect(() => patchReplacements(text, '--- a/f\n+++ b/f\n')).toThrow(PatchMismatch);
  });
});

let fake: FakeProvider;
let d: TestDaemon;

const APP = 'def total(xs):\n    s = 0\n    for x in xs: s += x\n    return s\n\n\ndef mean(xs):\n    return total(xs) / len(xs)\n';

/** A git work tree at the daemon's root with app.py committed, then changed (uncommitted). */
function repo(d: TestDaemon): string {
  const git = (...args: string[]) => execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', ...args], { cwd: d.root, stdio: 'pipe', env: { ...process.env, HOME: join(d.state, 'home'), GIT_CONFIG_NOSYSTEM: '1' } });
  git('init', '-q');
  writeFileSync(join(d.root, 'app.py'), 'def total(xs):\n    return sum(xs)\n');
  git('add', 'app.py');
  git('commit', '-q', '-m', 'first');
  writeFileSync(join(d.root, 'app.py'), APP);
  return d.root;
}

function reviewHost() {
  const asked: string[] = [];
  const review = new ReviewFindings({ ask: async (text) => { asked.push(text); }, log: () => {} });
  return { review, asked };
}

const problems = () => diagnosticCollections.get(REVIEW_SOURCE)!.entries();

describe('review findings in Problems', () => {
  beforeEach(async () => {
    fake = new FakeProvider();
    await fake.start();
    d = await startDaemon(fake.baseUrl);
  });
  afterEach(async () => {
    await d.stop();
    await fake.stop();
    removeTempStates();
    mockWorkspace.textDocuments.length = 0;
    appliedEdits.length = 0;
  });

  it('a review of the uncommitted changes: its findings as diagnostics, its message shown as the request', async () => {
    const root = repo(d);
    const { sessionId } = await d.client.newSession({ cwd: root });
    const { review } = reviewHost();
    await review.show(d.client, sessionId, root);
    const patch = '--- a/app.py\n+++ b/app.py\n@@ -8 +8 @@\n-    return total(xs) / len(xs)\n+    return total(xs) / len(xs) if xs else 0.0\n';
    fake.script(
      toolReply([
        { id: 'f1', name: 'report_finding', args: { path: 'app.py', startLine: 7, endLine: 8, severity: 'error', title: 'mean of [] divides by zero', body: 'len(xs) is 0 for an empty list.', suggestedPatch: patch } },
        { id: 'f2', name: 'report_finding', args: { path: 'app.py', startLine: 3, endLine: 3, severity: 'info', title: 'a loop where sum() does', body: 'sum(xs) says it.' } },
      ]),
      textReply('Two findings.'),
    );
    const started = await d.client.reviewStart(sessionId);
    expect(started.files).toEqual(['app.py']);
    await d.waitFor(() => d.of(sessionId, 'review/completed').length === 1, 'review/completed');
    await d.waitFor(() => problems().length === 1 && problems()[0][1].length === 2, 'two diagnostics');

    const [uri, diags] = problems()[0];
    expect(uri.fsPath).toBe(join(root, 'app.py'));
    // 1-based inclusive lines 7..8 are 0-based 6..7: the range runs to the start of line 8.
    expect(diags.map((x) => [x.source, x.severity, x.range.start.line, x.range.end.line, x.message.split('\n')[0]])).toEqual([
      [REVIEW_SOURCE, vscode.DiagnosticSeverity.Error, 6, 8, 'mean of [] divides by zero'],
      [REVIEW_SOURCE, vscode.DiagnosticSeverity.Information, 2, 3, 'a loop where sum() does'],
    ]);
    const ids = review.findings().map((f) => f.findingId);
    expect(diags.map((x) => x.code)).toEqual(ids);

    // The transcript shows the request, not the review prompt with the whole diff.
    const msg = d.of(sessionId, 'user/message').map((e) => e.data as UserMessage).find((m) => (m.source as { review?: unknown }).review);
    expect(msg).toBeDefined();
    expect(JSON.stringify(msg!.content)).toContain('return total(xs) / len(xs)');
    expect(typedText(msg!)).toBe('Review uncommitted changes');

    // The code actions: a fix only where the finding suggests one.
    const provider = codeActionProviders.find((p) => p.provider === review)!.provider as ReviewFindings;
    const titles = (i: number) => provider.provideCodeActions({} as any, diags[i].range as any, { diagnostics: [diags[i]] } as any).map((a) => [a.title, a.command?.command]);
    expect(titles(0)).toEqual([['Apply suggested fix', 'dsh.review.applyFix'], ['Ask dsh to fix', 'dsh.review.askFix'], ['Dismiss', 'dsh.review.dismiss']]);
    expect(titles(1).map((t) => t[0])).toEqual(['Ask dsh to fix', 'Dismiss']);

    // A daemon started fresh over the same store lists the same findings (folded from the log).
    await d.stop();
    d = await startDaemon(fake.baseUrl, { state: d.state, root: d.root });
    const again = reviewHost();
    await again.review.show(d.client, sessionId, root);
    expect(again.review.findings().map((f) => f.findingId)).toEqual(ids);
    again.review.dispose();
    review.dispose();
  });

  it('Apply suggested fix: the patch as a WorkspaceEdit the person confirms; Ask dsh to fix sends the finding', async () => {
    const root = repo(d);
    const { sessionId } = await d.client.newSession({ cwd: root });
    const { review, asked } = reviewHost();
    await review.show(d.client, sessionId, root);
    const patch = '--- a/app.py\n+++ b/app.py\n@@ -7,2 +7,4 @@\n def mean(xs):\n+    if not xs:\n+        return 0.0\n     return total(xs) / len(xs)\n';
    fake.script(toolReply([{ id: 'f1', name: 'report_finding', args: { path: 'app.py', startLine: 8, endLine: 8, severity: 'warning', title: 'empty list', body: 'ZeroDivisionError', suggestedPatch: patch } }]), textReply('One.'));
    await d.client.reviewStart(sessionId);
    await d.waitFor(() => review.findings().length === 1, 'the finding');
    const id = review.findings()[0].findingId;

    expect(await review.applyFix(id)).toBe(true);
    const edit = appliedEdits[0] as unknown as InstanceType<typeof vscode.WorkspaceEdit> & { replacements: Array<{ uri: vscode.Uri; range: vscode.Range; text: string; meta?: { needsConfirmation: boolean } }> };
    expect(edit.replacements.map((r) => [r.uri.fsPath, r.range.start.line, r.range.end.line, r.range.end.character, r.text, r.meta?.needsConfirmation])).toEqual([
      [join(root, 'app.py'), 6, 8, 0, 'def mean(xs):\n    if not xs:\n        return 0.0\n    return total(xs) / len(xs)\n', true],
    ]);
    // Refused in the preview: nothing changed, the finding stays.
    applyEditAnswer.applied = false;
    try { expect(await review.applyFix(id)).toBe(false); } finally { applyEditAnswer.applied = true; }
    expect(review.findings()).toHaveLength(1);

    // A file that moved on under the patch: the fix is refused, not applied somewhere else.
    writeFileSync(join(root, 'app.py'), APP.replace('def mean', 'def average'));
    await expect(review.applyFix(id)).rejects.toThrow(/no longer has the lines/);

    await review.askFix(id);
    expect(asked).toEqual([askText(review.findings()[0])]);
    expect(asked[0]).toContain('app.py (line 8, warning): empty list');
    expect(asked[0]).toContain('+    if not xs:');
    review.dispose();
  });

  it('a change over a finding\'s lines dismisses it (durably); one above moves it; Dismiss dismisses', async () => {
    const root = repo(d);
    const { sessionId } = await d.client.newSession({ cwd: root });
    const { review } = reviewHost();
    await review.show(d.client, sessionId, root);
    fake.script(
      toolReply([
        { id: 'f1', name: 'report_finding', args: { path: 'app.py', startLine: 3, endLine: 3, severity: 'info', title: 'loop', body: 'b' } },
        { id: 'f2', name: 'report_finding', args: { path: 'app.py', startLine: 8, endLine: 8, severity: 'error', title: 'zero', body: 'b' } },
        { id: 'f3', name: 'report_finding', args: { path: 'app.py', startLine: 1, endLine: 1, severity: 'warning', title: 'name', body: 'b' } },
      ]),
      textReply('Three.'),
    );
    await d.client.reviewStart(sessionId);
    await d.waitFor(() => d.of(sessionId, 'review/completed').length === 1, 'review/completed');
    await d.waitFor(() => review.findings().length === 3, 'three findings');
    const [loop, zero, name] = review.findings().map((f) => f.findingId);
    const doc = new FakeDocument(vscode.Uri.file(join(root, 'app.py')), APP);
    mockWorkspace.textDocuments.push(doc);

    // Two lines inserted at the start of line 5 (0-based 4): below `loop`, above `zero`.
    doc.edit(new vscode.Range(4, 0, 4, 0), '# a\n# b\n');
    const lines = () => Object.fromEntries(problems()[0][1].map((x) => [x.code as string, x.range.start.line]));
    expect(lines()).toEqual({ [loop]: 2, [zero]: 9, [name]: 0 });

    // The line above `zero` deleted whole, then a line inserted before it: it moves, it stays.
    doc.edit(new vscode.Range(8, 0, 9, 0), '');
    expect(lines()).toEqual({ [loop]: 2, [zero]: 8, [name]: 0 });
    doc.edit(new vscode.Range(8, 0, 8, 0), '\n');
    expect(lines()).toEqual({ [loop]: 2, [zero]: 9, [name]: 0 });

    // Typing on the moved finding's line dismisses it, on the daemon too.
    doc.edit(new vscode.Range(9, 4, 9, 10), 'return');
    expect(Object.keys(lines()).sort()).toEqual([loop, name].sort());
    await d.waitFor(() => d.of(sessionId, 'review/dismissed').some((e) => (e.data as { findingId: string }).findingId === zero), 'review/dismissed');

    await review.dismiss(name);
    expect(Object.keys(lines())).toEqual([loop]);
    const listed = await d.client.reviewList(sessionId);
    expect(listed.findings.map((f) => f.findingId)).toEqual([loop]);

    // Another session shown: its (no) findings, none of this one's.
    const other = await d.client.newSession({ cwd: root });
    await review.show(d.client, other.sessionId, root);
    expect(problems()).toEqual([]);
    review.dispose();
  });
});
