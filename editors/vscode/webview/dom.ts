// Small DOM helpers of the chat webview (never innerHTML: every node is built with createElement).

export function el<K extends keyof HTMLElementTagNameMap>(tag: K, cls?: string, text?: string): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

/** A button with a tooltip `tip`; when its text is only symbols (↑, ✕, →) the tip is also what a
 *  screen reader says, else the text is. */
export function button(text: string, onClick: (() => void) | undefined, cls?: string, tip?: string): HTMLButtonElement {
  const b = el('button', cls, text);
  b.type = 'button';
  if (tip) {
    b.title = tip;
    if (!/[A-Za-z0-9]/.test(text)) b.setAttribute('aria-label', tip);
  }
  if (onClick) b.addEventListener('click', (ev) => { ev.stopPropagation(); onClick(); });
  return b;
}

/** Text for a screen reader only. */
export function srOnly(text: string): HTMLSpanElement {
  return el('span', 'sr-only', text);
}
