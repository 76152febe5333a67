// A small markdown renderer that builds DOM nodes (never innerHTML): fenced code blocks (with copy /
// insert buttons), headings, lists, block quotes, paragraphs, inline code, bold, italic, links.

export interface CodeActions { copy(text: string): void; insert(text: string): void }

export function renderMarkdown(src: string, actions: CodeActions): DocumentFragment {
  const frag = document.createDocumentFragment();
  const lines = src.split('\n');
  let i = 0;
  let para: string[] = [];
  const flush = () => {
    if (para.length) { const p = el('p'); inline(p, para.join('\n')); frag.append(p); para = []; }
  };
  while (i < lines.length) {
    const line = lines[i];
    const fence = /^\s*(```|~~~)\s*([\w+#.-]*)/.exec(line);
    if (fence) {
      flush();
      const body: string[] = [];
      i++;
      while (i < lines.length && !lines[i].trimStart().startsWith(fence[1])) body.push(lines[i++]);
      i++; // the closing fence (or the end of a still-streaming block)
      frag.append(codeBlock(body.join('\n'), fence[2], actions));
      continue;
    }
    const h = /^(#{1,6})\s+(.*)$/.exec(line);
    if (h) { flush(); const e = el(`h${Math.min(h[1].length + 2, 6)}`); inline(e, h[2]); frag.append(e); i++; continue; }
    if (/^\s*([-*+]|\d+[.)])\s+/.test(line)) {
      flush();
      const ordered = /^\s*\d/.test(line);
      const list = el(ordered ? 'ol' : 'ul');
      while (i < lines.length && /^\s*([-*+]|\d+[.)])\s+/.test(lines[i])) {
        const li = el('li');
        inline(li, lines[i].replace(/^\s*([-*+]|\d+[.)])\s+/, ''));
        list.append(li);
        i++;
      }
      frag.append(list);
      continue;
    }
    if (/^>\s?/.test(line)) {
      flush();
      const q: string[] = [];
      while (i < lines.length && /^>\s?/.test(lines[i])) q.push(lines[i++].replace(/^>\s?/, ''));
      const bq = el('blockquote');
      bq.append(renderMarkdown(q.join('\n'), actions));
      frag.append(bq);
      continue;
    }
    if (!line.trim()) { flush(); i++; continue; }
    para.push(line);
    i++;
  }
  flush();
  return frag;
}

function codeBlock(code: string, lang: string, actions: CodeActions): HTMLElement {
  const wrap = el('div', 'codeblock');
  const bar = el('div', 'codebar');
  const l = el('span', 'lang'); l.textContent = lang || 'code';
  const copy = button('Copy', () => actions.copy(code), 'copy');
  const insert = button('Insert', () => actions.insert(code), 'insert');
  bar.append(l, copy, insert);
  const pre = el('pre');
  const c = el('code');
  c.textContent = code;
  pre.append(c);
  wrap.append(bar, pre);
  return wrap;
}

const INLINE = /(`+)([\s\S]*?)\1|\*\*([\s\S]+?)\*\*|__([\s\S]+?)__|\*([^*\s][^*]*?)\*|_([^_\s][^_]*?)_|\[([^\]]+)\]\(([^)\s]+)\)/g;

export function inline(parent: HTMLElement, text: string): void {
  let last = 0;
  for (const m of text.matchAll(INLINE)) {
    const at = m.index ?? 0;
    if (at > last) parent.append(text.slice(last, at));
    if (m[1]) { const c = el('code'); c.textContent = m[2]; parent.append(c); }
    else if (m[3] || m[4]) { const b = el('strong'); inline(b, m[3] ?? m[4]); parent.append(b); }
    else if (m[5] || m[6]) { const e = el('em'); inline(e, m[5] ?? m[6]); parent.append(e); }
    else if (m[7]) {
      const a = el('a') as HTMLAnchorElement;
      a.textContent = m[7];
      if (/^https?:\/\//.test(m[8])) a.href = m[8];
      a.title = m[8];
      parent.append(a);
    }
    last = at + m[0].length;
  }
  if (last < text.length) parent.append(text.slice(last));
}

export function el(tag: string, cls?: string): HTMLElement {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  return e;
}

export function button(label: string, onClick: () => void, cls?: string, title?: string): HTMLButtonElement {
  const b = el('button', cls) as HTMLButtonElement;
  b.type = 'button';
  b.textContent = label;
  if (title) b.title = title;
  b.addEventListener('click', (ev) => { ev.stopPropagation(); onClick(); });
  return b;
}
