// The person's unsaved changes in the document an agent edit changes (issue 37, protocol.md §8, §9),
// host side (mocked `vscode`) with the REAL daemon: apart from the edit, the file gets the saved text
// plus the edit only and the document keeps the draft (still dirty); overlapping it, the answer the
// person chose reaches the daemon and does what it says.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import * as vscode from 'vscode';
import { editorHandlers, OFFERED, Rechecks } from '../src/editorAbilities';
import { Permissions } from '../src/permissions';
import type { PermissionRequest, UnsavedChoice } from '../src/protocol/types';
import { FakeProvider, textReply, toolReply } from './fakeProvider';
import { removeTempStates, startDaemon, type TestDaemon } from './daemon';
import { FakeDocument, fileSystems, workspace } from './vscode.mock';

const SAVED = 'a = 1\nb = 2\nc = 3\n';
let fake: FakeProvider;
let d: TestDaemon;
let doc: FakeDocument;
let watch: Rechecks;

/** The daemon's edits land in the open document (dirty, its change sent on) as VS Code's would. */
async function start(draft: string): Promise<string> {
  fake = new FakeProvider();
  await fake.start();
  watch = new Rechecks();
  const save = editorHandlers(() => undefined, watch)['dsh/document/save'];
  let version = 1;
  d = await startDaemon(fake.baseUrl, undefined, { editor: { offered: OFFERED, handlers: {
    'dsh/document/save': save,
    'workspace/applyEdit': (p: any) => {
      for (const [uri, edits] of Object.entries(p.edit.changes ?? {})) {
        doc.type((edits as any[])[0].newText);
        void d.conn.sendNotification('textDocument/didChange', { textDocument: { uri, version: ++version }, contentChanges: [{ text: doc.getText() }] });
      }
      return { applied: true };
    },
  } } });
  const file = join(d.root, 'app.py');
  writeFileSync(file, SAVED);
  fileSystems.set('file', { writeFile: (u: vscode.Uri, data: Uint8Array) => writeFileSync(u.fsPath, data) });
  doc = new FakeDocument(vscode.Uri.file(file) as any, SAVED, 'python');
  workspace.textDocuments.push(doc);
  doc.type(draft); // the person's unsaved change
  await d.conn.sendNotification('textDocument/didOpen', { textDocument: { uri: pathToFileURL(file).href, languageId: 'python', version: 1, text: draft } });
  return file;
}

async function run(old: string, updated: string, answer: (p: Permissions, req: PermissionRequest) => void): Promise<{ seen: PermissionRequest[]; result: any }> {
  fake.script(toolReply([{ id: 'call_ed', name: 'edit_file', args: { path: 'app.py', old_string: old, new_string: updated } }]), textReply('done'));
  const seen: PermissionRequest[] = [];
  const permissions: Permissions = new Permissions((req) => { seen.push(req); answer(permissions, req); }, () => undefined);
  d.client.setPermissionHandler(permissions.handle);
  const { sessionId } = await d.client.newSession({ cwd: d.root });
  await d.client.followup(sessionId, 'edit it');
  await d.waitFor(() => d.of(sessionId, 'turn/end').length === 1, 'turn end');
  permissions.dispose();
  const result = d.of(sessionId, 'tool/result').at(-1)?.data as any;
  return { seen, result };
}

const told = (result: any): string => JSON.stringify(result.message.content);

afterEach(async () => {
  await d.stop();
  await fake.stop();
  watch.dispose();
  workspace.textDocuments.splice(0);
  fileSystems.delete('file');
  removeTempStates();
});

describe('an agent edit of a document with unsaved changes', () => {
  it('apart from the draft: the file gets the saved text plus the edit, the document keeps the draft, still dirty', async () => {
    const file = await start('a = (\nb = 2\nc = 3\n');
    const { seen, result } = await run('c = 3', 'c = 4', (p, req) => p.answer(req.callId, 'allow-once'));
    expect(seen[0].preview?.unsaved).toBe('apart');
    expect(readFileSync(file, 'utf8')).toBe('a = 1\nb = 2\nc = 4\n');
    expect(doc.getText()).toBe('a = (\nb = 2\nc = 4\n');
    expect(doc.isDirty).toBe(true);
    expect(doc.saves).toBe(1); // written by the editor (documentSaveText): it knows the file's new state
    expect(result.meta.unsaved).toBe('apart');
    expect(told(result)).toContain('the file on disk got your edit only');
  });

  for (const [choice, disk, dirty, said] of [
    ['both', 'a = 11\nb = 2\nc = 3\n', false, 'chose to save both'],
    ['buffer-only', SAVED, true, "keep it in the editor's buffer only"],
  ] as Array<[UnsavedChoice, string, boolean, string]>) {
    it(`overlapping the draft: "${choice}" is sent with the allowing answer and does what it says`, async () => {
      const file = await start('a = 10\nb = 2\nc = 3\n');
      const { seen, result } = await run('a = 10', 'a = 11', (p, req) => p.answer(req.callId, 'allow-once', false, choice));
      expect(seen[0].preview?.unsaved).toBe('overlaps');
      expect(readFileSync(file, 'utf8')).toBe(disk);
      expect(doc.getText()).toBe('a = 11\nb = 2\nc = 3\n');
      expect(doc.isDirty).toBe(dirty);
      expect(result.meta.unsaved).toBe(choice);
      expect(told(result)).toContain(said);
    });
  }
});
