// The message box and what goes with it: chips (context for the next prompt), the @ picker, ↑/↓
// through earlier prompts, files dropped on the panel, and a send that failed coming back.
import type { Chip, MentionItem, PanelAction, WebviewToHost } from '../src/protocol/panelMessages';
import type { CustomCommandInfo } from '../src/protocol/types';
import { codicon } from './codicons';
import { button, el } from './dom';
import { BUILTIN_COMMANDS, parseBuiltin, type SlashContext } from './slashCommands';
import type { SessionModel } from '../src/protocol/reducer';

export { BUILTIN_COMMANDS };

const HISTORY_MAX = 100;
const STEER_TIP = 'Redirect the running turn at its next step (Ctrl+Enter)';
const STEER_TIP_IDLE = 'Nothing to steer: no turn is running (Ctrl+Enter sends a normal prompt)';

const ACTION_LABEL: Record<PanelAction, string> = {
  openSettings: 'Open settings', showLog: 'Show log', setApiKey: 'Set API key', installDaemon: 'Install dsh-daemon', restartDaemon: 'Try again',
};

/** Buttons for what a person can do about an error (the first one is the likely one). */
export function actionButtons(actions: PanelAction[], post: (m: WebviewToHost) => void): HTMLElement[] {
  return actions.map((a, i) => button(ACTION_LABEL[a], () => post({ type: a }), i === 0 ? 'primary small' : 'ghost small'));
}

export interface ComposerHost {
  post(m: WebviewToHost): void;
  /** Whether this window may send (not while another window drives the session). */
  canSend(): boolean;
  /** A prompt went: the transcript shows its newest message. */
  sent(): void;
  save(state: { draft: string; history: string[] }): void;
  /** The session as the panel shows it (for /cost, /context and /undo). */
  model(): SessionModel;
  /** Opens the header's mode picker (`/mode` alone). */
  openModePicker(): void;
}

/** A past prompt being edited: sending rewinds to before its turn and sends the text (edit-and-resend). */
interface Editing { turn: number; draft: string; chips: Chip[] }

export class Composer {
  readonly el = el('div', 'composer');
  readonly input = el('textarea');
  private readonly chipsEl = el('div', 'chips');
  private readonly errorEl = el('div', 'composer-error');
  private readonly noteEl = el('div', 'composer-note');
  private readonly editBar = el('div', 'edit-bar');
  private editing: Editing | undefined;
  private readonly sendBtn: HTMLButtonElement;
  private readonly steerBtn: HTMLButtonElement;
  /** The error shown is "the daemon is not running": it goes when the daemon runs again. */
  private errorIsDaemonDown = false;
  private chips: Chip[] = [];
  private readonly history: string[];
  private recall: { at: number; draft: string } | undefined;
  private sendSeq = 0;
  private running = false;
  private readonly inflight = new Map<number, { text: string; chips: Chip[]; editing?: Editing & { text: string } }>();
  private readonly mentions: Mentions;
  private readonly slash: SlashMenu;

  constructor(private readonly host: ComposerHost, saved: { draft?: unknown; history?: unknown }) {
    const input = this.input;
    input.rows = 3;
    input.placeholder = 'Message dsh — @ to attach, Enter sends, Shift+Enter new line, Ctrl+Enter steers';
    input.setAttribute('aria-label', 'message');
    input.value = typeof saved.draft === 'string' ? saved.draft : '';
    this.history = Array.isArray(saved.history) ? saved.history.filter((x): x is string => typeof x === 'string').slice(-HISTORY_MAX) : [];
    this.chipsEl.setAttribute('aria-label', 'attached context');
    this.errorEl.setAttribute('role', 'alert');
    this.errorEl.hidden = true;
    this.noteEl.setAttribute('role', 'status');
    this.noteEl.hidden = true;
    this.editBar.hidden = true;
    this.mentions = new Mentions(this, host);
    this.slash = new SlashMenu(this, host);
    const row = el('div', 'row');
    this.sendBtn = button('Send', () => this.send('followup'), 'primary', 'Send (queued while a turn runs)');
    // Disabled by aria-disabled, not `disabled`: it stays in the Tab order, so a keyboard or screen
    // reader user hears why (its description) rather than finding no button.
    const steerBtn = this.steerBtn = button('Steer', () => { if (this.running && !this.editing) this.send('steer'); }, 'steer', STEER_TIP_IDLE);
    steerBtn.setAttribute('aria-disabled', 'true'); // nothing runs until the panel says so
    steerBtn.setAttribute('aria-description', STEER_TIP_IDLE);
    const addSel = button('+ Selection', () => host.post({ type: 'addSelection' }), 'ghost', 'Attach the editor selection to the next prompt');
    addSel.setAttribute('aria-label', 'Add selection');
    const addFile = button('+ File', () => host.post({ type: 'addFile' }), 'ghost', 'Attach a file to the next prompt (or drop files here from the Explorer, holding Shift)');
    addFile.setAttribute('aria-label', 'Add file');
    row.append(addSel, addFile, el('span', 'spacer'), steerBtn, this.sendBtn);
    this.el.append(this.mentions.el, this.slash.el, this.editBar, this.chipsEl, input, this.errorEl, this.noteEl, row);

    input.addEventListener('keydown', (ev) => {
      if (this.mentions.open && this.mentions.key(ev)) return;
      if (this.slash.open && this.slash.key(ev)) return;
      if (ev.key === 'Escape' && this.editing) {
        ev.preventDefault();
        ev.stopPropagation();
        this.cancelEdit();
        return;
      }
      if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
        ev.preventDefault();
        // Ctrl+Enter steers a running turn; with none running there is nothing to steer: a prompt.
        this.send((ev.ctrlKey || ev.metaKey) && this.running ? 'steer' : 'followup');
        return;
      }
      if ((ev.key === 'ArrowUp' || ev.key === 'ArrowDown') && !ev.shiftKey && !ev.altKey && !ev.ctrlKey && !ev.metaKey) {
        if (this.recallHistory(ev.key === 'ArrowUp' ? -1 : 1)) ev.preventDefault();
      }
    });
    input.addEventListener('input', () => {
      if (this.recall && input.value !== this.history[this.recall.at]) this.recall = undefined;
      this.save();
      this.mentions.onInput();
      this.slash.onInput();
    });
    this.renderChips();
  }

  /** Send reads "Queue" while a turn runs ("Resend" while a past prompt is edited). */
  setRunning(running: boolean): void {
    this.running = running;
    const label = this.editing ? 'Resend' : running ? 'Queue' : 'Send';
    if (this.sendBtn.textContent !== label) this.sendBtn.textContent = label;
    // A steer joins the running turn; while idle there is none (the tooltip says so, Ctrl+Enter sends).
    const steerable = running && !this.editing;
    if ((this.steerBtn.getAttribute('aria-disabled') === 'true') === steerable) {
      const tip = steerable ? STEER_TIP : this.editing ? 'An edited prompt is resent, not steered' : STEER_TIP_IDLE;
      this.steerBtn.setAttribute('aria-disabled', String(!steerable));
      this.steerBtn.title = tip;
      this.steerBtn.setAttribute('aria-description', tip);
    }
  }

  get pickerOpen(): boolean { return this.mentions.open || this.slash.open; }
  closePicker(): void { this.mentions.close(); this.slash.close(); }
  mentionResults(id: number, items: MentionItem[]): void { this.mentions.results(id, items); }
  commandResults(id: number, commands: CustomCommandInfo[]): void { this.slash.results(id, commands); }
  focus(): void { this.input.focus(); }

  addChips(list: Chip[]): void {
    const same = (a: Chip, b: Chip) => a.uri === b.uri && a.kind === b.kind && JSON.stringify(a.range) === JSON.stringify(b.range);
    for (const c of list) if (!this.chips.some((x) => same(x, c))) this.chips.push(c);
    this.renderChips();
  }

  /** A word about what a `/` command did (closed by its ✕ or the next send). */
  showNote(text: string): void {
    this.noteEl.replaceChildren(el('span', 'composer-note-text', text), button('✕', () => { this.noteEl.hidden = true; this.input.focus(); }, 'icon', 'Close'));
    this.noteEl.hidden = false;
  }

  /** Edit on a past prompt: its text comes into the box (what was typed waits), with what sending it
   *  takes back (asked of the host: `editPreview`); Esc or Cancel puts the box back as it was. */
  startEdit(turn: number, text: string): void {
    if (!this.editing) this.editing = { turn, draft: this.input.value, chips: this.chips };
    else this.editing.turn = turn;
    this.chips = [];
    this.renderChips();
    this.input.value = text;
    this.editBar.replaceChildren(el('div', 'edit-title', `Editing your prompt of turn ${turn}`), el('div', 'edit-preview', 'Looking at what it takes back…'));
    this.editBar.hidden = false;
    this.el.classList.add('editing');
    this.setRunning(this.running);
    this.host.post({ type: 'editPreview', turn });
    this.input.focus();
    this.input.setSelectionRange(text.length, text.length);
  }

  /** What sending the edited prompt of `turn` takes back. */
  editPreview(turn: number, files: string[], laterPrompts: number, canRewind: boolean): void {
    if (!this.editing || this.editing.turn !== turn) return;
    const title = el('div', 'edit-title');
    title.append(codicon('edit'), el('span', undefined, `Editing your prompt of turn ${turn}`), el('span', 'spacer'),
      button('Cancel', () => this.cancelEdit(), 'ghost small', 'Stop editing (Esc): the box goes back to what it held'));
    const lines = el('ul', 'edit-preview');
    if (!canRewind) {
      lines.append(el('li', 'warn', 'This daemon cannot rewind: the edited prompt cannot be resent.'));
    } else {
      const later = laterPrompts ? ` and the ${laterPrompts} prompt${laterPrompts === 1 ? '' : 's'} after it` : '';
      lines.append(el('li', undefined, `Resend rewinds first: the conversation goes back to before this prompt${later}.`));
      if (files.length) {
        const li = el('li', undefined, `Files restored (${files.length}): `);
        li.append(el('span', 'edit-files', files.join(', ')));
        li.title = files.join('\n');
        lines.append(li);
      } else {
        lines.append(el('li', undefined, 'No file changed by the agent since then: files stay as they are.'));
      }
    }
    this.editBar.replaceChildren(title, lines);
  }

  cancelEdit(): void {
    const e = this.editing;
    if (!e) return;
    this.editing = undefined;
    this.editBar.hidden = true;
    this.editBar.replaceChildren();
    this.el.classList.remove('editing');
    this.input.value = e.draft;
    this.chips = e.chips;
    this.renderChips();
    this.setRunning(this.running);
    this.save();
    this.input.focus();
  }

  showError(error: string, actions: PanelAction[], daemonDown = false): void {
    this.errorIsDaemonDown = daemonDown;
    this.errorEl.replaceChildren(el('span', 'composer-error-text', error), ...actionButtons(actions, this.host.post));
    this.errorEl.hidden = false;
  }

  /** The outcome of send `id`: a failed one gives its text and chips back, with what to do. */
  sendResult(id: number, ok: boolean, error: string | undefined, actions: PanelAction[], daemonDown = false): void {
    const failed = this.inflight.get(id);
    this.inflight.delete(id);
    if (ok) return;
    if (failed?.editing) {
      // The edited prompt was not sent: edit mode comes back with its text (the rewind did not happen
      // or the send failed after it; the error says which).
      const { text, turn } = failed.editing;
      if (!this.editing) this.editing = { turn, draft: this.input.value, chips: this.chips };
      this.input.value = text;
      this.chips = failed.chips;
      this.renderChips();
      this.editBar.hidden = false;
      this.el.classList.add('editing');
      this.setRunning(this.running);
      this.host.post({ type: 'editPreview', turn });
    } else if (failed) {
      const input = this.input;
      input.value = input.value.trim() ? `${failed.text}\n${input.value}` : failed.text;
      this.chips = [...failed.chips, ...this.chips];
      this.renderChips();
      this.save();
    }
    this.showError(error ?? 'The message was not sent.', actions, daemonDown);
  }

  /** The daemon runs (again): a "the daemon is not running" error is no longer true. */
  daemonRunning(): void {
    if (this.errorIsDaemonDown) { this.errorEl.hidden = true; this.errorIsDaemonDown = false; }
  }

  private send(mode: 'followup' | 'steer'): void {
    const text = this.input.value;
    if (!text.trim() && !this.chips.length) return;
    if (!this.host.canSend()) return;
    // The panel's own commands come first (protocol.md §18): they act here and send nothing.
    const own = this.editing ? undefined : parseBuiltin(text);
    if (own) {
      this.input.value = '';
      this.errorEl.hidden = true;
      this.noteEl.hidden = true;
      this.save();
      own.command.run(own.arg, this.slashContext());
      return;
    }
    if (this.editing) {
      // Edit-and-resend: the host rewinds to before the turn, then sends the text (never a steer).
      const id = ++this.sendSeq;
      const e = this.editing;
      this.inflight.set(id, { text, chips: [...this.chips], editing: { ...e, text } });
      this.host.post({ type: 'editResend', id, turn: e.turn, text, chips: this.chips });
      this.editing = undefined;
      this.editBar.hidden = true;
      this.el.classList.remove('editing');
      this.input.value = e.draft;
      this.chips = e.chips;
      this.errorEl.hidden = true;
      this.noteEl.hidden = true;
      this.setRunning(this.running);
      this.save();
      this.renderChips();
      this.host.sent();
      return;
    }
    // Any other `/name …` goes as typed: the daemon expands the session's custom commands.
    const id = ++this.sendSeq;
    this.inflight.set(id, { text, chips: [...this.chips] });
    this.host.post({ type: 'send', id, text, chips: this.chips, mode });
    const h = this.history;
    if (text.trim() && h[h.length - 1] !== text) { h.push(text); if (h.length > HISTORY_MAX) h.shift(); }
    this.recall = undefined;
    this.input.value = '';
    this.chips = [];
    this.errorEl.hidden = true;
    this.noteEl.hidden = true;
    this.save();
    this.renderChips();
    this.host.sent();
  }

  private slashContext(): SlashContext {
    return { post: this.host.post, note: (t) => this.showNote(t), model: () => this.host.model(), openModePicker: () => this.host.openModePicker() };
  }

  save(): void {
    this.host.save({ draft: this.input.value, history: this.history });
  }

  /** ↑ / ↓ go through earlier prompts when the caret is at the start (↑) of the text, or while a
   *  recalled prompt is shown unchanged; ↓ past the newest brings back what was being typed. */
  private recallHistory(dir: -1 | 1): boolean {
    const input = this.input;
    const h = this.history;
    if (!h.length) return false;
    const browsing = this.recall !== undefined && input.value === h[this.recall.at];
    const atStart = input.selectionStart === 0 && input.selectionEnd === 0;
    // Not browsing yet: only ↑ at the very start (or in an empty box) starts it.
    if (!browsing && (dir > 0 || !(atStart || !input.value))) return false;
    const from = this.recall?.at ?? h.length;
    const draft = this.recall?.draft ?? input.value;
    const at = from + dir;
    if (at < 0) return true;
    if (at >= h.length) {
      this.recall = undefined;
      input.value = draft;
    } else {
      this.recall = { at, draft };
      input.value = h[at];
    }
    input.setSelectionRange(dir < 0 ? 0 : input.value.length, dir < 0 ? 0 : input.value.length);
    this.save();
    return true;
  }

  private renderChips(): void {
    this.chipsEl.replaceChildren(...this.chips.map((c, i) => {
      const s = el('span', 'chip');
      s.append(button(c.label, () => this.host.post({ type: 'openFile', uri: c.uri, range: c.range }), 'chip-label', `Open ${c.label}`),
        button('✕', () => { this.chips.splice(i, 1); this.renderChips(); this.input.focus(); }, 'icon', `Remove ${c.label}`));
      return s;
    }));
  }

  /** Files dragged onto `root` (from the Explorer or an editor tab, Shift held) become chips. */
  acceptDrops(root: HTMLElement): void {
    const types = ['application/vnd.code.uri-list', 'text/uri-list', 'resourceurls', 'codefiles'];
    root.addEventListener('dragover', (ev) => {
      if (![...(ev.dataTransfer?.types ?? [])].some((t) => types.includes(t.toLowerCase()))) return;
      ev.preventDefault();
      if (ev.dataTransfer) ev.dataTransfer.dropEffect = 'copy';
      this.el.classList.add('drop-target');
    });
    root.addEventListener('dragleave', (ev) => { if (ev.target === root || !root.contains(ev.relatedTarget as Node)) this.el.classList.remove('drop-target'); });
    root.addEventListener('drop', (ev) => {
      this.el.classList.remove('drop-target');
      const uris = ev.dataTransfer ? droppedUris(ev.dataTransfer) : [];
      if (!uris.length) return;
      ev.preventDefault();
      this.host.post({ type: 'dropUris', uris });
    });
  }

  /** Used by the @ picker: removes `from`..caret from the text. */
  cut(from: number): void {
    const input = this.input;
    const caret = input.selectionStart ?? input.value.length;
    input.value = input.value.slice(0, from) + input.value.slice(caret).replace(/^\s/, '');
    input.setSelectionRange(from, from);
    this.save();
  }
}

/** The URIs in what was dropped (VS Code's uri list, a plain uri list, its resource and file lists). */
function droppedUris(dt: DataTransfer): string[] {
  const out = new Set<string>();
  const lines = (s: string) => s.split(/\r?\n/).map((l) => l.trim()).filter((l) => l && !l.startsWith('#'));
  for (const u of lines(dt.getData('application/vnd.code.uri-list'))) out.add(u);
  for (const u of lines(dt.getData('text/uri-list'))) out.add(u);
  for (const [type, file] of [['resourceurls', false], ['codefiles', true]] as const) {
    try {
      const list = JSON.parse(dt.getData(type) || '[]');
      if (Array.isArray(list)) for (const x of list) if (typeof x === 'string') out.add(file ? `file://${encodeURI(x)}` : x);
    } catch { /* not a list */ }
  }
  return [...out].filter((u) => /^[a-z][a-z0-9+.-]*:/i.test(u));
}

/** The @ picker: workspace files, the selection, problems, open editors (the host finds them); a pick
 *  becomes a chip, the same as + Selection / + File, and the typed @query goes. While it is open,
 *  Enter picks (it never sends) and Esc closes it (and nothing else). */
class Mentions {
  readonly el = el('div', 'mentions');
  open = false;
  private items: MentionItem[] = [];
  private active = 0;
  private query = '';
  private start = 0;
  private seq = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;

  constructor(private readonly composer: Composer, private readonly host: ComposerHost) {
    this.el.setAttribute('role', 'listbox');
    this.el.id = 'mentions';
    this.el.hidden = true;
    composer.input.setAttribute('aria-autocomplete', 'list');
    composer.input.setAttribute('aria-expanded', 'false');
  }

  onInput(): void {
    const input = this.composer.input;
    const caret = input.selectionStart ?? input.value.length;
    const m = /(^|\s)@([^\s@]*)$/.exec(input.value.slice(0, caret));
    if (!m) { this.close(); return; }
    this.query = m[2];
    this.start = caret - m[2].length - 1;
    if (!this.open) { this.open = true; this.items = []; this.active = 0; this.render(true); }
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => this.host.post({ type: 'mentions', id: ++this.seq, query: this.query }), 60);
  }

  results(id: number, items: MentionItem[]): void {
    if (!this.open || id !== this.seq) return;
    this.items = items;
    this.active = 0;
    this.render(false);
  }

  key(ev: KeyboardEvent): boolean {
    if (ev.key === 'ArrowDown' || ev.key === 'ArrowUp') {
      ev.preventDefault();
      if (this.items.length) this.active = (this.active + (ev.key === 'ArrowDown' ? 1 : this.items.length - 1)) % this.items.length;
      this.render(false);
      return true;
    }
    if ((ev.key === 'Enter' || ev.key === 'Tab') && !ev.shiftKey) {
      ev.preventDefault();
      if (this.items[this.active]) this.pick(this.items[this.active]);
      else this.close();
      return true;
    }
    if (ev.key === 'Escape') {
      ev.preventDefault();
      ev.stopPropagation();
      this.close();
      return true;
    }
    return false;
  }

  private pick(item: MentionItem): void {
    this.composer.cut(this.start);
    this.composer.addChips(item.chips);
    this.close();
    this.composer.input.focus();
  }

  close(): void {
    if (!this.open) return;
    this.open = false;
    if (this.timer) clearTimeout(this.timer);
    this.seq++;
    this.el.hidden = true;
    this.el.replaceChildren();
    const input = this.composer.input;
    input.removeAttribute('aria-activedescendant');
    input.setAttribute('aria-expanded', 'false');
  }

  private render(loading: boolean): void {
    const input = this.composer.input;
    this.el.hidden = false;
    input.setAttribute('aria-expanded', 'true');
    input.setAttribute('aria-controls', 'mentions');
    if (loading || !this.items.length) {
      this.el.replaceChildren(el('div', 'mention-empty', loading ? 'Looking…' : `Nothing matches @${this.query}`));
      input.removeAttribute('aria-activedescendant');
      return;
    }
    this.el.replaceChildren(...this.items.map((it, i) => {
      const o = el('div', `mention${i === this.active ? ' active' : ''}`);
      o.id = `mention-${i}`;
      o.setAttribute('role', 'option');
      o.setAttribute('aria-selected', String(i === this.active));
      o.append(el('span', `mention-kind ${it.kind}`, it.kind), el('span', 'mention-label', it.label));
      if (it.detail) o.append(el('span', 'mention-detail', it.detail));
      o.title = it.detail ? `${it.label}\n${it.detail}` : it.label; // the whole row, where the sidebar cuts it
      o.addEventListener('mousedown', (ev) => { ev.preventDefault(); this.pick(it); });
      return o;
    }));
    input.setAttribute('aria-activedescendant', `mention-${this.active}`);
  }
}

interface SlashItem { name: string; description: string; hint?: string; source: string }

/** Completion of slash commands: `/` at the start of the message lists the panel's own commands and the
 *  session's custom ones (`dsh/commands/list`, asked again each time it opens: a file added since is
 *  listed), with their description and argument hint. A pick puts `/name ` in the box; what is sent is
 *  the line as typed. Enter and Tab pick while it is open (they never send), Esc closes it. */
class SlashMenu {
  readonly el = el('div', 'mentions slash-menu');
  open = false;
  private custom: CustomCommandInfo[] = [];
  private items: SlashItem[] = [];
  private active = 0;
  private query = '';
  private seq = 0;

  constructor(private readonly composer: Composer, private readonly host: ComposerHost) {
    this.el.setAttribute('role', 'listbox');
    this.el.setAttribute('aria-label', 'commands');
    this.el.id = 'slash-commands';
    this.el.hidden = true;
  }

  onInput(): void {
    const input = this.composer.input;
    const caret = input.selectionStart ?? input.value.length;
    const m = /^\s*\/([\w.-]*)$/.exec(input.value.slice(0, caret));
    if (!m) { this.close(); return; }
    this.query = m[1];
    if (!this.open) {
      this.open = true;
      this.active = 0;
      this.host.post({ type: 'commands', id: ++this.seq });
    }
    this.filter();
  }

  results(id: number, commands: CustomCommandInfo[]): void {
    if (id !== this.seq) return;
    this.custom = commands;
    if (this.open) this.filter();
  }

  private filter(): void {
    const q = this.query.toLowerCase();
    const own = new Set(BUILTIN_COMMANDS.map((c) => c.name));
    const all: SlashItem[] = [
      ...BUILTIN_COMMANDS.map((c) => ({ name: c.name, description: c.description, hint: c.hint, source: 'panel' })),
      ...this.custom.filter((c) => !own.has(c.name)).map((c) => ({ name: c.name, description: c.description, hint: c.argumentHint, source: c.source })),
    ];
    const rank = (it: SlashItem) => it.name.toLowerCase().startsWith(q) ? 0 : 1;
    this.items = all.filter((it) => !q || it.name.toLowerCase().includes(q)).sort((a, b) => rank(a) - rank(b));
    if (this.active >= this.items.length) this.active = 0;
    this.render();
  }

  key(ev: KeyboardEvent): boolean {
    if (ev.key === 'ArrowDown' || ev.key === 'ArrowUp') {
      ev.preventDefault();
      if (this.items.length) this.active = (this.active + (ev.key === 'ArrowDown' ? 1 : this.items.length - 1)) % this.items.length;
      this.render();
      return true;
    }
    if ((ev.key === 'Enter' || ev.key === 'Tab') && !ev.shiftKey && this.items[this.active]) {
      ev.preventDefault();
      this.pick(this.items[this.active]);
      return true;
    }
    if (ev.key === 'Escape') {
      ev.preventDefault();
      ev.stopPropagation();
      this.close();
      return true;
    }
    return false;
  }

  private pick(item: SlashItem): void {
    const input = this.composer.input;
    const caret = input.selectionStart ?? input.value.length;
    const rest = input.value.slice(caret).replace(/^\S*\s?/, '');
    input.value = `/${item.name} ${rest}`;
    const at = item.name.length + 2;
    input.setSelectionRange(at, at);
    this.close();
    this.composer.save();
    input.focus();
  }

  close(): void {
    if (!this.open) return;
    this.open = false;
    this.el.hidden = true;
    this.el.replaceChildren();
    const input = this.composer.input;
    input.removeAttribute('aria-activedescendant');
    input.setAttribute('aria-expanded', 'false');
  }

  private render(): void {
    const input = this.composer.input;
    this.el.hidden = false;
    input.setAttribute('aria-expanded', 'true');
    input.setAttribute('aria-controls', 'slash-commands');
    if (!this.items.length) {
      this.el.replaceChildren(el('div', 'mention-empty', `No command matches /${this.query}`));
      input.removeAttribute('aria-activedescendant');
      return;
    }
    this.el.replaceChildren(...this.items.map((it, i) => {
      const o = el('div', `mention command${i === this.active ? ' active' : ''}`);
      o.id = `slash-${i}`;
      o.setAttribute('role', 'option');
      o.setAttribute('aria-selected', String(i === this.active));
      const name = el('span', 'command-name', `/${it.name}`);
      o.append(name);
      if (it.hint) o.append(el('span', 'command-hint', it.hint));
      o.append(el('span', `mention-kind ${it.source}`, it.source));
      if (it.description) o.append(el('span', 'mention-detail command-description', it.description));
      o.title = `/${it.name}${it.hint ? ` ${it.hint}` : ''}${it.description ? ` — ${it.description}` : ''}`;
      o.addEventListener('mousedown', (ev) => { ev.preventDefault(); this.pick(it); });
      return o;
    }));
    input.setAttribute('aria-activedescendant', `slash-${this.active}`);
  }
}
