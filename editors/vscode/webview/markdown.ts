// Markdown for the chat: markdown-it (GFM tables, strikethrough, autolinks; task lists below) parsed
// to tokens, and the tokens built into DOM nodes here: only the tags below are ever made, raw HTML in a
// reply is text (`html: false`), links are live only for http(s) and mailto, images become links (no
// remote content in the webview). Code blocks are highlighted with highlight.js (its class names are
// coloured from the theme in style.css) and carry Copy / Insert / Apply / New file buttons.
//
// A streaming reply is rendered incrementally (MarkdownView): the text is cut at block boundaries
// that the rest of the text cannot change (a blank line before an unindented line, around a fence at
// column 0); pieces before the last boundary are rendered once, only the last block is rendered again
// as text arrives, and an open code fence at the end only gets its new text appended.
import MarkdownIt from 'markdown-it';
import type { Token } from 'markdown-it';
import hljs from 'highlight.js/lib/common';
import { el } from './dom';

const md = new MarkdownIt({ html: false, linkify: true, breaks: true, typographer: false });
md.core.ruler.after('inline', 'task-lists', (state) => {
  const t = state.tokens;
  for (let i = 2; i < t.length; i++) {
    if (t[i].type !== 'inline' || t[i - 1].type !== 'paragraph_open' || t[i - 2].type !== 'list_item_open') continue;
    const m = /^\[([ xX])\][ \t]/.exec(t[i].content);
    const first = t[i].children?.[0];
    if (!m || first?.type !== 'text' || !first.content.startsWith(m[0])) continue;
    t[i - 2].meta = { ...(t[i - 2].meta ?? {}), task: m[1] !== ' ' };
    first.content = first.content.slice(m[0].length);
  }
});

/** What a code block's buttons act on (looked up from the block's element). */
export interface CodeInfo { code: string; lang: string; path?: string }
export const codeInfo = new WeakMap<HTMLElement, CodeInfo>();

const BLOCK_TAGS = new Set(['p', 'ul', 'ol', 'li', 'blockquote', 'table', 'thead', 'tbody', 'tr', 'th', 'td', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6']);
const INLINE_TAGS = new Set(['strong', 'em', 's']);
const HIGHLIGHT_MAX = 60_000; // larger code is shown plain (highlighting it would block the view)

/** The markdown `src` as DOM nodes; `highlight` colours closed code blocks. */
export function renderMarkdown(src: string, highlight = true): DocumentFragment {
  const frag = document.createDocumentFragment();
  if (!src) return frag;
  build(md.parse(src, {}), frag, highlight);
  return frag;
}

function build(tokens: Token[], root: Node, highlight: boolean): void {
  const stack: Node[] = [root];
  for (const t of tokens) {
    const parent = stack[stack.length - 1];
    if (t.type === 'inline') { inline(t.children ?? [], parent); continue; }
    if (t.type === 'fence' || t.type === 'code_block') { parent.appendChild(codeBlock(t.content.replace(/\n$/, ''), t.info ?? '', highlight)); continue; }
    if (t.type === 'hr') { parent.appendChild(el('hr')); continue; }
    if (t.type === 'html_block') { parent.appendChild(el('p', undefined, t.content)); continue; }
    if (t.nesting === 1) {
      if (t.hidden || !BLOCK_TAGS.has(t.tag)) { stack.push(parent); continue; } // a tight list's paragraphs
      const e = openTag(t);
      parent.appendChild(e);
      stack.push(e);
    } else if (t.nesting === -1) {
      stack.pop();
    }
  }
}

const attr = (t: Token, name: string): string => String(t.attrGet(name) ?? '');

function openTag(t: Token): HTMLElement {
  // Headings one level smaller: a reply's "# Title" is not the panel's title.
  const tag = /^h[1-6]$/.test(t.tag) ? `h${Math.min(Number(t.tag[1]) + 2, 6)}` : t.tag;
  const e = document.createElement(tag);
  if (t.tag === 'ol') { const start = Number(attr(t, 'start')); if (start > 1) (e as HTMLOListElement).start = start; }
  if (t.tag === 'th' || t.tag === 'td') {
    const align = /text-align:(left|right|center)/.exec(attr(t, 'style'))?.[1];
    if (align) e.className = `align-${align}`;
  }
  if (t.tag === 'li' && t.meta && typeof t.meta.task === 'boolean') {
    e.className = 'task';
    const box = el('input');
    box.type = 'checkbox';
    box.checked = t.meta.task;
    box.disabled = true;
    box.setAttribute('aria-label', t.meta.task ? 'done' : 'not done');
    e.appendChild(box);
  }
  return e;
}

function inline(tokens: Token[], root: Node): void {
  const stack: Node[] = [root];
  for (const t of tokens) {
    const parent = stack[stack.length - 1];
    switch (t.type) {
      case 'text': case 'html_inline': parent.appendChild(document.createTextNode(t.content)); break;
      case 'code_inline': parent.appendChild(el('code', undefined, t.content)); break;
      case 'softbreak': case 'hardbreak': parent.appendChild(el('br')); break;
      case 'image': {
        const src = attr(t, 'src');
        const alt = t.content || 'image';
        if (safeHref(src)) { const a = el('a', 'image-link', `🖼 ${alt}`); a.href = src; a.title = src; parent.appendChild(a); }
        else parent.appendChild(document.createTextNode(`🖼 ${alt}`));
        break;
      }
      case 'link_open': {
        const href = attr(t, 'href');
        const e = safeHref(href) ? el('a') : el('span', 'link');
        if (e instanceof HTMLAnchorElement) e.href = href;
        e.title = href;
        parent.appendChild(e);
        stack.push(e);
        break;
      }
      default:
        if (t.nesting === 1) {
          const e = document.createElement(INLINE_TAGS.has(t.tag) ? t.tag : 'span');
          parent.appendChild(e);
          stack.push(e);
        } else if (t.nesting === -1) {
          stack.pop();
        }
    }
  }
}

function safeHref(href: string): boolean {
  return /^(https?:\/\/|mailto:)/i.test(href.trim());
}

/** `python`, `python:src/app.py`, `python title="src/app.py"`, `src/app.py`. */
export function parseInfo(info: string): { lang: string; path?: string } {
  const s = info.trim();
  if (!s) return { lang: '' };
  const title = /\b(?:title|file|path|filename)=["']?([^"'\s]+)/.exec(s)?.[1];
  const [first, ...rest] = s.split(/\s+/);
  const colon = /^([\w+#.-]+):(\S+)$/.exec(first);
  if (colon) return { lang: colon[1], path: title ?? colon[2] };
  const looksLikePath = (x: string) => /[/\\]/.test(x) || /^[\w.-]+\.[A-Za-z0-9]{1,8}$/.test(x);
  if (looksLikePath(first) && !hljs.getLanguage(first)) return { lang: first.split('.').pop() ?? '', path: first };
  const second = rest.find((x) => !x.includes('=') && looksLikePath(x));
  return { lang: first, path: title ?? second };
}

/** A code block with its bar of actions; with `highlight`, coloured by highlight.js. */
export function codeBlock(code: string, info: string, highlight: boolean): HTMLElement {
  const { lang, path } = parseInfo(info);
  const wrap = el('div', 'codeblock');
  const bar = el('div', 'codebar');
  bar.append(el('span', 'lang', path ? `${lang || 'code'} · ${path}` : lang || 'code'));
  const act = (name: string, text: string, label: string) => {
    const b = el('button', `code-action ${name}`, text);
    b.type = 'button';
    b.dataset.act = name;
    b.setAttribute('aria-label', label);
    b.title = label;
    return b;
  };
  bar.append(
    act('copy', 'Copy', 'Copy the code'),
    act('insert', 'Insert', 'Insert the code at the cursor'),
    act('apply', 'Apply', path ? `Apply to ${path} (shows the diff first)` : 'Apply to a file (shows the diff first)'),
    act('newfile', 'New file', 'Open the code in a new file'),
  );
  const pre = el('pre');
  const c = el('code');
  fillCode(c, code, lang, highlight);
  pre.append(c);
  wrap.append(bar, pre);
  codeInfo.set(wrap, { code, lang, path });
  return wrap;
}

function fillCode(c: HTMLElement, code: string, lang: string, highlight: boolean): void {
  const language = highlight && code.length <= HIGHLIGHT_MAX && lang ? hljs.getLanguage(lang) : undefined;
  if (!language) { c.textContent = code; return; }
  c.classList.add('hljs');
  appendHighlighted(c, hljs.highlight(code, { language: lang, ignoreIllegals: true }).value);
}

const ENTITIES: Record<string, string> = { '&amp;': '&', '&lt;': '<', '&gt;': '>', '&quot;': '"', '&#x27;': "'", '&#39;': "'" };

/** highlight.js output (escaped text in `<span class="…">`s, nothing else) as DOM nodes. */
function appendHighlighted(root: HTMLElement, html: string): void {
  const stack: HTMLElement[] = [root];
  for (const m of html.matchAll(/<span class="([\w\s-]*)">|<\/span>|([^<]+)/g)) {
    const top = stack[stack.length - 1];
    if (m[2] !== undefined) top.appendChild(document.createTextNode(m[2].replace(/&(?:amp|lt|gt|quot|#x27|#39);/g, (e) => ENTITIES[e])));
    else if (m[1] !== undefined) { const s = el('span', m[1]); top.appendChild(s); stack.push(s); }
    else if (stack.length > 1) stack.pop();
  }
}

// ---- incremental rendering ----------------------------------------------------------------------

const FENCE = /^(`{3,}|~{3,})/;
const TAIL_MAX = 16_000; // a last block longer than this (no blank line in sight) is cut at a line end
const CHUNK_CHARS = 4_000; // finished blocks are grouped in chunks of about this much text

/** A markdown element that follows a growing text: `update(text)` with the whole text so far.
 *
 *  The text is cut at every boundary found (each piece is parsed on its own, so the result does not
 *  depend on how the text arrived); finished pieces go into chunks of about CHUNK_CHARS, each of
 *  which the browser skips while it is out of view (`content-visibility` in style.css). */
export class MarkdownView {
  readonly el = el('div', 'md');
  private src = '';
  private stableEnd = 0; // text before this offset is rendered for good
  private boundaries: number[] = []; // every boundary found after stableEnd, ascending
  private scanAt = 0; // the next line to scan
  private fence: { ch: string; len: number; col0: boolean; at: number } | null = null;
  private blankBefore = false;
  private chunk: HTMLElement | undefined;
  private chunkStart = 0;
  private tail: Node[] = [];
  private open: { code: HTMLElement; text: Text; from: number; shown: number; wrap: HTMLElement } | null = null;
  private finalized = false;

  update(src: string, final: boolean): void {
    if (src === this.src && (this.finalized || !final)) return;
    if (!src.startsWith(this.src)) this.reset();
    this.src = src;
    this.finalized = final;
    this.scan();
    const last = () => this.boundaries.length ? this.boundaries[this.boundaries.length - 1] : this.stableEnd;
    if (!final && !this.fence && src.length - last() > TAIL_MAX) {
      const nl = src.lastIndexOf('\n', src.length - 2);
      if (nl + 1 > last()) this.boundaries.push(nl + 1);
    }
    if (this.boundaries.length) {
      this.clearTail();
      for (const b of this.boundaries) this.stabilize(b);
      this.boundaries = [];
    }
    const tail = src.slice(this.stableEnd);
    if (!final && this.fence?.col0 && this.fence.at === this.stableEnd) {
      this.streamFence(tail);
      return;
    }
    this.clearTail();
    const frag = renderMarkdown(tail, final);
    this.tail = [...frag.childNodes];
    this.el.appendChild(frag);
  }

  /** Renders the piece up to boundary `b` for good, in the current chunk (a new one past CHUNK_CHARS). */
  private stabilize(b: number): void {
    if (b <= this.stableEnd) return;
    if (!this.chunk || this.stableEnd - this.chunkStart >= CHUNK_CHARS) {
      this.chunk = el('div', 'md-chunk');
      this.chunkStart = this.stableEnd;
      this.el.appendChild(this.chunk);
    }
    this.chunk.appendChild(renderMarkdown(this.src.slice(this.stableEnd, b)));
    this.stableEnd = b;
  }

  private reset(): void {
    this.el.replaceChildren();
    this.src = '';
    this.stableEnd = this.scanAt = this.chunkStart = 0;
    this.boundaries = [];
    this.chunk = undefined;
    this.fence = null;
    this.blankBefore = false;
    this.tail = [];
    this.open = null;
    this.finalized = false;
  }

  private clearTail(): void {
    for (const n of this.tail) n.parentNode?.removeChild(n);
    this.tail = [];
    this.open = null;
  }

  /** An open fence at the start of the tail: its block is made once, then only new text is appended. */
  private streamFence(tail: string): void {
    const nl = tail.indexOf('\n');
    const body = nl < 0 ? '' : tail.slice(nl + 1);
    if (!this.open || this.open.from !== this.stableEnd) {
      this.clearTail();
      const wrap = codeBlock('', nl < 0 ? '' : tail.slice(this.fence!.len, nl), false);
      const code = wrap.querySelector('code')!;
      const text = document.createTextNode('');
      code.appendChild(text);
      this.open = { code, text, from: this.stableEnd, shown: 0, wrap };
      this.tail = [wrap];
      this.el.appendChild(wrap);
    }
    if (body.length > this.open.shown) {
      this.open.text.appendData(body.slice(this.open.shown));
      this.open.shown = body.length;
      const info = codeInfo.get(this.open.wrap);
      if (info) info.code = body;
    }
  }

  private boundary(at: number): void {
    if (at > this.stableEnd && (!this.boundaries.length || at > this.boundaries[this.boundaries.length - 1])) this.boundaries.push(at);
  }

  /** Finds block boundaries in the complete lines not scanned yet. */
  private scan(): void {
    const src = this.src;
    for (;;) {
      const nl = src.indexOf('\n', this.scanAt);
      if (nl < 0) return;
      const start = this.scanAt;
      const line = src.slice(start, nl);
      this.scanAt = nl + 1;
      if (this.fence) {
        const m = FENCE.exec(line.trimStart());
        if (m && m[1][0] === this.fence.ch && m[1].length >= this.fence.len && !line.trimStart().slice(m[1].length).trim()) {
          if (this.fence.col0) this.boundary(nl + 1); // a closed fence is a block of its own
          this.fence = null;
        }
        this.blankBefore = false;
        continue;
      }
      const indent = /^[ \t]*/.exec(line)![0].length;
      const m = indent < 4 ? FENCE.exec(line.slice(indent)) : null;
      if (m && !(m[1][0] === '`' && line.slice(indent + m[1].length).includes('`'))) {
        // A fence at column 0 starts a block (it interrupts a paragraph); an indented one may belong
        // to a list item, so only what is inside it is kept from being cut.
        if (indent === 0) this.boundary(start);
        this.fence = { ch: m[1][0], len: m[1].length, col0: indent === 0, at: start };
        this.blankBefore = false;
        continue;
      }
      if (!line.trim()) { this.blankBefore = true; continue; }
      if (this.blankBefore && indent === 0) this.boundary(start);
      this.blankBefore = false;
    }
  }
}
