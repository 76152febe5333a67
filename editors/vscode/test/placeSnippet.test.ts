// Placing a code block that names no file (src/placeSnippet.ts): the symbols come from the real
// TypeScript compiler's navigation tree (what tsserver reports to VS Code as document symbols).
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { declaredNames, placeSnippet, type Symbol } from '../src/placeSnippet';

function symbolsOf(text: string): Symbol[] {
  const file = ts.createSourceFile('a.ts', text, ts.ScriptTarget.ES2020, true);
  const walk = (n: ts.NavigationTree): Symbol[] => (n.childItems ?? []).map((c) => ({
    name: c.text, start: c.spans[0].start, end: c.spans[0].start + c.spans[0].length, children: walk(c),
  }));
  const host: ts.LanguageServiceHost = {
    getScriptFileNames: () => ['a.ts'], getScriptVersion: () => '1',
    getScriptSnapshot: (f) => (f === 'a.ts' ? ts.ScriptSnapshot.fromString(file.text) : undefined),
    getCurrentDirectory: () => '/', getCompilationSettings: () => ({}), getDefaultLibFileName: () => 'lib.d.ts',
    fileExists: (f) => f === 'a.ts', readFile: () => undefined,
  };
  return walk(ts.createLanguageService(host).getNavigationTree('a.ts'));
}

const apply = (text: string, p: { start: number; end: number; text: string }) => text.slice(0, p.start) + p.text + text.slice(p.end);

const FILE = [
  "import { x } from './x';",
  '',
  'export function add(a: number, b: number): number {',
  '  return a - b;',
  '}',
  '',
  'export class Shape {',
  '  area(): number {',
  '    return 0;',
  '  }',
  '',
  '  name(): string {',
  "    return 'shape';",
  '  }',
  '}',
  '',
].join('\n');

describe('placing an unnamed code block by the symbol it declares', () => {
  it('names what a snippet declares, at its outer indentation only', () => {
    expect(declaredNames('function add(a, b) {\n  const inner = 1;\n  return a + b;\n}')).toEqual(['add']);
    expect(declaredNames('  area(): number {\n    return 1;\n  }')).toEqual(['area']);
    expect(declaredNames('def area(self):\n    return 1\n')).toEqual(['area']);
    expect(declaredNames('if (x) {\n  y();\n}')).toEqual([]);
  });

  it('replaces the function the snippet declares and keeps its export', () => {
    const snippet = 'function add(a: number, b: number): number {\n  return a + b;\n}';
    const p = placeSnippet(FILE, symbolsOf(FILE), snippet)!;
    expect(p.symbol).toBe('add');
    const out = apply(FILE, p);
    expect(out).toContain('export function add(a: number, b: number): number {\n  return a + b;\n}\n\nexport class Shape');
    expect(out).not.toContain('a - b');
    expect(out.startsWith("import { x } from './x';\n\n")).toBe(true);
  });

  it('replaces a method inside its class, re-indented to the method', () => {
    const snippet = 'area(): number {\n  return 3 * 4;\n}\n';
    const p = placeSnippet(FILE, symbolsOf(FILE), snippet)!;
    expect(p.symbol).toBe('area');
    const out = apply(FILE, p);
    expect(out).toContain('  area(): number {\n    return 3 * 4;\n  }\n\n  name(): string {');
    expect(out).not.toContain('return 0;');
  });

  it('finds no place for a snippet that declares nothing the file has', () => {
    expect(placeSnippet(FILE, symbolsOf(FILE), 'function other() {}')).toBeUndefined();
    expect(placeSnippet(FILE, symbolsOf(FILE), 'console.log(1);')).toBeUndefined();
  });
});
