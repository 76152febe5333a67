// The header's pickers: the session's mode and its model (with the reasoning effort where the model
// has one). One VS Code-styled dropdown for both: a compact button (codicon, label, chevron) in the
// theme's dropdown colours that opens a list in the theme's menu colours; keyboard: Enter / Space / ↓
// open it, ↑ / ↓ move, Enter picks, Esc or a click elsewhere closes it. At 300 px the label shortens
// with an ellipsis; the list stays inside the panel.
import type { ModelInfo } from '../src/protocol/types';
import { codicon } from './codicons';
import { el } from './dom';

export interface DropdownOption { value: string; label: string; short?: string; detail?: string; icon?: string }

let nextId = 0;

export class Dropdown {
  readonly el = el('span', 'dropdown');
  readonly button = el('button', 'dropdown-button');
  private readonly iconBox = el('span', 'dropdown-icon');
  private readonly labelEl = el('span', 'dropdown-label');
  private readonly list = el('div', 'dropdown-list');
  private options: DropdownOption[] = [];
  private active = 0;
  value = '';

  constructor(private readonly name: string, private readonly onPick: (value: string) => void, className: string) {
    this.el.classList.add(className);
    const id = `dropdown-${++nextId}`;
    this.button.type = 'button';
    this.button.setAttribute('aria-haspopup', 'listbox');
    this.button.setAttribute('aria-expanded', 'false');
    this.button.setAttribute('aria-controls', id);
    this.button.setAttribute('aria-label', name); // until a value is shown: a button always says what it is
    this.button.append(this.iconBox, this.labelEl, codicon('chevron-down', 'dropdown-chevron'));
    this.list.id = id;
    this.list.setAttribute('role', 'listbox');
    this.list.setAttribute('aria-label', name);
    this.list.hidden = true;
    this.el.append(this.button, this.list);
    this.button.addEventListener('click', (ev) => { ev.stopPropagation(); this.toggle(); });
    this.button.addEventListener('keydown', (ev) => this.key(ev));
    this.list.addEventListener('keydown', (ev) => this.key(ev));
    document.addEventListener('mousedown', (ev) => { if (this.isOpen && !this.el.contains(ev.target as Node)) this.close(false); });
  }

  get isOpen(): boolean { return !this.list.hidden; }

  setOptions(options: DropdownOption[]): void {
    this.options = options;
    this.show(this.value);
  }

  /** Shows `value` as the current one (nothing is posted). */
  show(value: string): void {
    this.value = value;
    this.button.dataset.value = value;
    const o = this.options.find((x) => x.value === value);
    this.iconBox.replaceChildren(...(o?.icon ? [codicon(o.icon)] : []));
    this.labelEl.textContent = o ? (o.short ?? o.label) : value;
    this.button.title = `${this.name}: ${o?.label ?? value}${o?.detail ? ` — ${o.detail}` : ''}`;
    this.button.setAttribute('aria-label', `${this.name}: ${o?.label ?? value}`);
    if (this.isOpen) this.renderList();
  }

  toggle(open = !this.isOpen): void {
    if (!open) { this.close(true); return; }
    if (!this.options.length) return;
    this.active = Math.max(0, this.options.findIndex((o) => o.value === this.value));
    this.list.hidden = false;
    this.button.setAttribute('aria-expanded', 'true');
    this.el.classList.add('open');
    this.renderList();
    // Right-aligned under the button, moved right where that would leave the panel (a narrow view).
    this.list.style.right = '0';
    const left = this.list.getBoundingClientRect().left;
    if (left < 4) this.list.style.right = `${left - 4}px`;
    this.list.tabIndex = -1;
    this.list.focus();
  }

  close(refocus: boolean): void {
    if (!this.isOpen) return;
    this.list.hidden = true;
    this.button.setAttribute('aria-expanded', 'false');
    this.el.classList.remove('open');
    if (refocus) this.button.focus();
  }

  private key(ev: KeyboardEvent): void {
    if (!this.isOpen) {
      if (ev.key === 'Enter' || ev.key === ' ' || ev.key === 'ArrowDown') { ev.preventDefault(); this.toggle(true); }
      return;
    }
    if (ev.key === 'ArrowDown' || ev.key === 'ArrowUp') {
      ev.preventDefault();
      const n = this.options.length;
      this.active = (this.active + (ev.key === 'ArrowDown' ? 1 : n - 1)) % n;
      this.renderList();
    } else if (ev.key === 'Enter' || ev.key === ' ' || ev.key === 'Tab') {
      ev.preventDefault();
      this.pick(this.options[this.active]);
    } else if (ev.key === 'Escape') {
      // Closing the list is all Esc does here (it does not stop the turn).
      ev.preventDefault();
      ev.stopPropagation();
      this.close(true);
    }
  }

  private pick(o: DropdownOption | undefined): void {
    this.close(true);
    if (!o || o.value === this.value) return;
    this.show(o.value);
    this.onPick(o.value);
  }

  private renderList(): void {
    this.list.replaceChildren(...this.options.map((o, i) => {
      const row = el('div', `dropdown-option${i === this.active ? ' active' : ''}${o.value === this.value ? ' selected' : ''}`);
      row.id = `${this.list.id}-${i}`;
      row.setAttribute('role', 'option');
      row.setAttribute('aria-selected', String(o.value === this.value));
      const icon = o.icon ?? (o.value === this.value ? 'check' : undefined);
      row.append(icon ? codicon(icon) : el('span', 'codicon-space'), el('span', 'dropdown-option-label', o.label));
      if (o.detail) row.append(el('span', 'dropdown-option-detail', o.detail));
      row.addEventListener('mousedown', (ev) => { ev.preventDefault(); this.pick(o); });
      row.addEventListener('mousemove', () => { if (this.active !== i) { this.active = i; this.renderList(); } });
      return row;
    }));
    this.list.setAttribute('aria-activedescendant', `${this.list.id}-${this.active}`);
  }
}

export type ModeValue = 'ask' | 'accept-edits' | 'plan';

export const MODE_OPTIONS: DropdownOption[] = [
  { value: 'ask', label: 'Ask', detail: 'Edits and commands ask first', icon: 'comment-discussion' },
  { value: 'accept-edits', label: 'Accept edits', detail: 'Edits run without asking; commands still ask', icon: 'edit' },
  { value: 'plan', label: 'Plan', detail: 'Read-only tools only: no edit, no command', icon: 'checklist' },
];

/** The mode picker (daemons with `modes`). */
export function modePicker(onPick: (mode: ModeValue) => void): Dropdown {
  const d = new Dropdown('Mode', (v) => onPick(v as ModeValue), 'mode-picker');
  d.setOptions(MODE_OPTIONS);
  d.show('ask');
  return d;
}

/** One option per model and effort: `model` or `model@effort`. */
export function modelOptions(models: ModelInfo[]): DropdownOption[] {
  const out: DropdownOption[] = [];
  for (const m of models) {
    const name = m.name ?? m.id;
    const short = shortName(name);
    const window = m.contextWindow ? `${Math.round(m.contextWindow / 1000).toLocaleString('en-US')}k context` : undefined;
    if (m.reasoningEfforts?.length) {
      for (const e of m.reasoningEfforts) out.push({ value: `${m.id}@${e}`, label: `${name} · ${e}`, short: `${short} · ${e}`, detail: [`${e} reasoning effort`, window].filter(Boolean).join(', ') });
    } else {
      out.push({ value: m.id, label: name, short, detail: window });
    }
  }
  return out;
}

/** "DeepSeek V4 Pro" → "V4 Pro": the family is the same for every row, the header is narrow. */
function shortName(name: string): string {
  return name.replace(/^DeepSeek\s+/i, '');
}

/** The value of `model` at `effort` among `models` (the effort only where the model takes one). */
export function modelValue(models: ModelInfo[], model: string, effort: string | undefined): string {
  const m = models.find((x) => x.id === model);
  return m?.reasoningEfforts?.length ? `${model}@${effort && m.reasoningEfforts.includes(effort) ? effort : m.reasoningEfforts[0]}` : model;
}

export function parseModelValue(value: string): { model: string; reasoningEffort?: string } {
  const at = value.lastIndexOf('@');
  return at > 0 ? { model: value.slice(0, at), reasoningEffort: value.slice(at + 1) } : { model: value };
}

/** The model picker: the daemon's models; a choice is the session's own model from its next request. */
export function modelPicker(onPick: (choice: { model: string; reasoningEffort?: string }) => void): Dropdown {
  const d = new Dropdown('Model', (v) => onPick(parseModelValue(v)), 'model-picker');
  d.button.prepend(codicon('sparkle', 'model-icon'));
  return d;
}
