// What the editor offers the daemon (protocol.md §9): saving the documents an agent edit changed
// (`dsh/document/save`), the problems VS Code knows (`dsh/editor/diagnostics`), and its language
// features (`dsh/editor/definition|references|symbols|hover`) answered by whatever language
// extensions the person has installed. Advertised in `initialize` params
// `capabilities.experimental.dsh`; each answer converts VS Code's types to LSP's.
import * as vscode from 'vscode';

export const OFFERED = {
  documentSave: true,
  diagnostics: true,
  languageFeatures: ['definition', 'references', 'symbols', 'hover'],
};

interface LspPosition { line: number; character: number }
interface LspRange { start: LspPosition; end: LspPosition }
interface LspLocation { uri: string; range: LspRange }

const pos = (p: vscode.Position): LspPosition => ({ line: p.line, character: p.character });
const range = (r: vscode.Range): LspRange => ({ start: pos(r.start), end: pos(r.end) });
const position = (p: LspPosition) => new vscode.Position(p.line, p.character);

/** A VS Code diagnostic as an LSP one (VS Code's severities count from 0, LSP's from 1). */
export function lspDiagnostic(d: vscode.Diagnostic): Record<string, unknown> {
  const code = typeof d.code === 'object' && d.code !== null ? d.code.value : d.code;
  return {
    range: range(d.range), message: d.message, severity: d.severity + 1,
    ...(d.source ? { source: d.source } : {}), ...(code !== undefined ? { code } : {}),
  };
}

function location(l: vscode.Location | vscode.LocationLink): LspLocation {
  if ('targetUri' in l) return { uri: l.targetUri.toString(), range: range(l.targetSelectionRange ?? l.targetRange) };
  return { uri: l.uri.toString(), range: range(l.range) };
}

function hoverText(h: vscode.Hover): string {
  return h.contents.map((c) => typeof c === 'string' ? c : 'language' in c ? `\`\`\`${c.language}\n${c.value}\n\`\`\`` : c.value).join('\n\n');
}

/** Flattens document symbols (a tree) into LSP `SymbolInformation`-like rows, with their container. */
function symbolRows(uri: vscode.Uri, list: Array<vscode.DocumentSymbol | vscode.SymbolInformation>, container?: string): Record<string, unknown>[] {
  const rows: Record<string, unknown>[] = [];
  for (const s of list) {
    if ('location' in s) {
      rows.push({ name: s.name, kind: s.kind + 1, location: location(s.location), ...(s.containerName ? { containerName: s.containerName } : {}) });
      continue;
    }
    rows.push({ name: s.name, kind: s.kind + 1, location: { uri: uri.toString(), range: range(s.selectionRange) }, ...(container ? { containerName: container } : {}) });
    rows.push(...symbolRows(uri, s.children ?? [], s.name));
  }
  return rows;
}

type Handler = (params: any) => Promise<unknown>;

/** The request handlers, by method. `log` says what was done (the daemon log the person can open). */
export function editorHandlers(log: (line: string) => void): Record<string, Handler> {
  const run = <T>(command: string, ...args: unknown[]) => vscode.commands.executeCommand<T>(command, ...args);
  return {
    // Exactly the documents named (those an agent edit just changed), never another: the person's
    // unsaved changes elsewhere stay unsaved.
    'dsh/document/save': async (p: { uris: string[] }) => {
      const saved: string[] = [];
      const failed: Array<{ uri: string; message: string }> = [];
      for (const uri of p.uris ?? []) {
        const doc = vscode.workspace.textDocuments.find((d) => d.uri.toString() === vscode.Uri.parse(uri).toString());
        if (!doc) { failed.push({ uri, message: 'the document is not open in the editor' }); continue; }
        try {
          if (!doc.isDirty || await doc.save()) saved.push(uri);
          else failed.push({ uri, message: 'the editor did not save it' });
        } catch (err) {
          failed.push({ uri, message: String((err as Error)?.message ?? err) });
        }
      }
      log(`saved after an agent edit: ${saved.map((u) => vscode.workspace.asRelativePath(vscode.Uri.parse(u))).join(', ') || 'nothing'}`);
      return failed.length ? { saved, failed } : { saved };
    },
    'dsh/editor/diagnostics': async (p: { uris: string[] | null }) => {
      const pairs: Array<[vscode.Uri, readonly vscode.Diagnostic[]]> = p.uris
        ? p.uris.map((u) => { const uri = vscode.Uri.parse(u); return [uri, vscode.languages.getDiagnostics(uri)]; })
        : vscode.languages.getDiagnostics().filter(([, ds]) => ds.length > 0);
      return { items: pairs.map(([uri, ds]) => ({ uri: uri.toString(), diagnostics: ds.map(lspDiagnostic) })) };
    },
    'dsh/editor/definition': async (p: { uri: string; position: LspPosition }) => {
      const found = await run<Array<vscode.Location | vscode.LocationLink>>('vscode.executeDefinitionProvider', vscode.Uri.parse(p.uri), position(p.position));
      return { locations: (found ?? []).map(location) };
    },
    'dsh/editor/references': async (p: { uri: string; position: LspPosition; includeDeclaration?: boolean }) => {
      const found = await run<vscode.Location[]>('vscode.executeReferenceProvider', vscode.Uri.parse(p.uri), position(p.position));
      let locations = (found ?? []).map(location);
      if (p.includeDeclaration === false) {
        const decl = await run<Array<vscode.Location | vscode.LocationLink>>('vscode.executeDefinitionProvider', vscode.Uri.parse(p.uri), position(p.position));
        const key = (l: LspLocation) => `${l.uri}:${l.range.start.line}:${l.range.start.character}`;
        const skip = new Set((decl ?? []).map(location).map(key));
        locations = locations.filter((l) => !skip.has(key(l)));
      }
      return { locations };
    },
    'dsh/editor/symbols': async (p: { uri?: string; query?: string }) => {
      if (p.uri !== undefined) {
        const uri = vscode.Uri.parse(p.uri);
        const found = await run<Array<vscode.DocumentSymbol | vscode.SymbolInformation>>('vscode.executeDocumentSymbolProvider', uri);
        return { symbols: symbolRows(uri, found ?? []) };
      }
      const found = await run<vscode.SymbolInformation[]>('vscode.executeWorkspaceSymbolProvider', p.query ?? '');
      return { symbols: symbolRows(vscode.Uri.parse('file:///'), found ?? []) };
    },
    'dsh/editor/hover': async (p: { uri: string; position: LspPosition }) => {
      const found = await run<vscode.Hover[]>('vscode.executeHoverProvider', vscode.Uri.parse(p.uri), position(p.position));
      return { contents: (found ?? []).map(hoverText).filter((t) => t.trim()).join('\n\n---\n\n') };
    },
  };
}
