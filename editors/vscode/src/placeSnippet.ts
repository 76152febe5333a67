// Where a code block that names no file belongs in a file (no vscode import: tested in plain Node).
//
// The snippet's declarations (a function, a class, a method, a const) are matched by name against
// the file's document symbols (what the language's own server reports); the innermost symbol of that
// name is what the snippet replaces. The snippet is re-indented to the symbol's indentation, and the
// symbol's leading modifiers that the snippet leaves out (`export `, `public `, …) are kept: a code
// block usually shows `function f()` for an `export function f()`.

/** A document symbol as offsets into the text (VS Code's DocumentSymbol, flattened to what this needs). */
export interface Symbol { name: string; start: number; end: number; children?: Symbol[] }

/** Where to put the snippet: replace [start, end) of the text with `text`. */
export interface Placement { start: number; end: number; text: string; symbol: string }

// A declaration's name at the start of a line, in the languages people mostly paste: TS/JS, Python,
// Rust, Go, Java/C#/Kotlin-like methods, Ruby, PHP.
const DECLARATIONS: RegExp[] = [
  /^\s*(?:export\s+)?(?:default\s+)?(?:declare\s+)?(?:abstract\s+)?(?:async\s+)?(?:function\*?|class|interface|enum|type|namespace|module)\s+([A-Za-z_$][\w$]*)/,
  /^\s*(?:export\s+)?(?:const|let|var)\s+([A-Za-z_$][\w$]*)\s*[:=]/,
  /^\s*(?:async\s+)?def\s+([A-Za-z_]\w*)\s*\(/,
  /^\s*class\s+([A-Za-z_]\w*)\s*[:(]/,
  /^\s*(?:pub(?:\([^)]*\))?\s+)?(?:async\s+)?(?:unsafe\s+)?(?:fn|struct|enum|trait|impl|mod)\s+([A-Za-z_]\w*)/,
  /^\s*func\s+(?:\([^)]*\)\s*)?([A-Za-z_]\w*)\s*\(/,
  /^\s*def\s+(?:self\.)?([A-Za-z_]\w*[?!]?)/,
  /^\s*(?:(?:public|private|protected|internal|static|override|readonly|async|final|virtual|abstract)\s+)*(?:get\s+|set\s+)?([A-Za-z_$][\w$]*)\s*(?:<[^>]*>)?\s*\([^)]*\)\s*(?::\s*[^{=]+)?\s*\{\s*$/,
  /^\s*(?:(?:public|private|protected|internal|static|override|readonly|final|virtual|abstract)\s+)+[\w<>[\],\s]+\s+([A-Za-z_]\w*)\s*\(/,
];

const KEYWORDS = new Set(['if', 'for', 'while', 'switch', 'catch', 'return', 'function', 'else', 'do', 'try', 'with']);

/** The names the snippet declares at its outermost indentation, in order. */
export function declaredNames(snippet: string): string[] {
  const lines = snippet.split(/\r?\n/).filter((l) => l.trim() && !/^\s*(?:\/\/|#|\/\*|\*|@)/.test(l));
  if (!lines.length) return [];
  const outer = Math.min(...lines.map(indentOf));
  const names: string[] = [];
  for (const line of lines) {
    if (indentOf(line) !== outer) continue;
    for (const re of DECLARATIONS) {
      const m = re.exec(line);
      if (m && !KEYWORDS.has(m[1])) { if (!names.includes(m[1])) names.push(m[1]); break; }
    }
  }
  return names;
}

/** The innermost symbol named `name` (a method before a same-named function around it). */
function findSymbol(symbols: Symbol[], name: string): Symbol | undefined {
  for (const s of symbols) {
    const inner = s.children ? findSymbol(s.children, name) : undefined;
    if (inner) return inner;
    if (bareName(s.name) === name) return s;
  }
  return undefined;
}

/** A symbol's name without what some servers add (`foo()` in Python's, `Foo.bar` in others). */
function bareName(name: string): string {
  return name.replace(/\(.*$/, '').split(/[.:]/).pop()!.trim();
}

/** Where `snippet` belongs in `text`: replacing the symbol it declares (the first declared name that
 *  the file has), or undefined when it declares none of the file's symbols. */
export function placeSnippet(text: string, symbols: Symbol[], snippet: string): Placement | undefined {
  for (const name of declaredNames(snippet)) {
    const sym = findSymbol(symbols, name);
    if (!sym) continue;
    let start = sym.start;
    const lineStart = text.lastIndexOf('\n', start - 1) + 1;
    const indent = /^[ \t]*/.exec(text.slice(lineStart))![0];
    const body = reindent(snippet.replace(/\s+$/, ''), indent);
    // The symbol's own first line from the snippet's first token on: what comes before it there
    // (`export `, `public static `) stays, unless the snippet says it too.
    const firstLine = body.split('\n').find((l) => l.trim())!.trim();
    const head = firstLine.slice(0, Math.min(firstLine.length, 40));
    const symFirst = text.slice(start, text.indexOf('\n', start) < 0 ? sym.end : Math.min(sym.end, text.indexOf('\n', start)));
    const tokenAt = symFirst.indexOf(firstTokens(head));
    if (tokenAt > 0 && /^[\w\s@]*$/.test(symFirst.slice(0, tokenAt))) start += tokenAt;
    // The replacement starts where the symbol starts on its line: its indentation is already there.
    const replaced = body.replace(/^[ \t]*/, '');
    return { start, end: sym.end, text: replaced, symbol: sym.name };
  }
  return undefined;
}

/** The snippet's first declaration words (`function add`, `def area`) to find in the symbol's line. */
function firstTokens(head: string): string {
  const m = /^(?:[\w$]+\s+)*?[\w$]+(?=\s*[(<:=\s{])/.exec(head);
  return m ? m[0] : head;
}

function indentOf(line: string): number {
  return /^[ \t]*/.exec(line)![0].replace(/\t/g, '    ').length;
}

/** `snippet` with its common indentation replaced by `indent`. */
export function reindent(snippet: string, indent: string): string {
  const lines = snippet.split(/\r?\n/);
  const used = lines.filter((l) => l.trim());
  const common = used.length ? Math.min(...used.map((l) => /^[ \t]*/.exec(l)![0].length)) : 0;
  return lines.map((l) => (l.trim() ? indent + l.slice(common) : '')).join('\n');
}
