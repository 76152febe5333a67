// The chat webview: plain TypeScript + DOM. It runs the same reducer as the host over the batched
// actions the host posts, and renders incrementally (only items whose rev changed).
import type { Chip, ConnectionState, HostToWebview, WebviewToHost } from '../src/protocol/panelMessages';
import { assistantText, emptyModel, Item, pendingCount, queueOf, reduceAll, SessionModel, statusLabel } from '../src/protocol/reducer';
import type { PermissionRequest, Range, Target } from '../src/protocol/types';
import { textOf } from '../src/protocol/types';
import { button, el, renderMarkdown } from './markdown';

declare function acquireVsCodeApi(): { postMessage(m: unknown): void; getState(): any; setState(s: unknown): void };
const vscode = acquireVsCodeApi();
const post = (m: WebviewToHost) => vscode.postMessage(m);

let model: SessionModel = emptyModel();
let connection: ConnectionState = { state: 'starting' };
let chips: Chip[] = [];
let shown = 200; // how many transcript items are rendered (older ones on demand)
const PAGE = 200;
const nodes = new Map<string, { rev: number; node: HTMLElement }>();
let renderedSession: string | null | undefined;
let editing: string | undefined;
const codeActions = { copy: (text: string) => post({ type: 'copy', text }), insert: (text: string) => post({ type: 'insert', text }) };

// ---- skeleton -----------------------------------------------------------------------------------

const app = document.getElementById('app')!;
const header = el('div', 'header');
const titleEl = el('span', 'session-title');
titleEl.setAttribute('aria-label', 'session title');
titleEl.hidden = true;
const statusEl = el('span', 'status');
statusEl.setAttribute('role', 'status');
const headerButtons = el('span', 'header-buttons');
headerButtons.append(
  button('New', () => post({ type: 'newSession' }), 'ghost', 'New session'),
  button('Sessions', () => post({ type: 'switchSession' }), 'ghost', 'Switch session'),
);
const keyButton = button('Set API key', () => post({ type: 'setApiKey' }), 'ghost warn', 'Store the provider API key in SecretStorage');
headerButtons.append(keyButton);
header.append(titleEl, statusEl, headerButtons);

const transcript = el('div', 'transcript');
transcript.setAttribute('aria-label', 'transcript');
const older = button('Load older messages', () => loadOlder(), 'older');
const list = el('div', 'items');
const empty = el('div', 'empty');
empty.textContent = 'Ask dsh anything. Enter sends; while a turn runs, Enter queues and Steer redirects it.';
transcript.append(older, empty, list);
transcript.addEventListener('scroll', () => {
  if (transcript.scrollTop < 40 && (model.items.length > shown || model.olderBefore !== null)) loadOlder();
});

/** Shows older items: those the model already has, else asks the host for an older transcript page
 *  (its items appear when the batch arrives; the view keeps its place). */
let olderAsked: { before: number; at: number } | null = null;
function loadOlder(): void {
  if (model.items.length > shown) {
    const h = transcript.scrollHeight;
    shown += PAGE;
    renderTranscript(true);
    transcript.scrollTop += transcript.scrollHeight - h;
  } else if (model.olderBefore !== null && (olderAsked?.before !== model.olderBefore || Date.now() - olderAsked.at > 3000)) {
    olderAsked = { before: model.olderBefore, at: Date.now() }; // once per page (again if no page came)
    shown = model.items.length + PAGE;
    post({ type: 'loadOlder' });
  }
}

const permissionsEl = el('div', 'permissions');
const queueEl = el('div', 'queue');
const controls = el('div', 'controls');
const stopBtn = button('Stop', () => post({ type: 'cancel', keepInbox: true }), 'stop', 'Stop the turn; the queue stays');
const clearBtn = button('Stop and clear', () => post({ type: 'cancel', keepInbox: false }), 'ghost', 'Stop the turn and discard the queue');
const runQueueBtn = button('Run queue', () => post({ type: 'wake' }), 'primary', 'Run the queued items now');
const continueBtn = button('Continue', () => post({ type: 'continue' }), 'primary', 'The last turn was interrupted by a shutdown: continue it');
controls.append(stopBtn, clearBtn, runQueueBtn, continueBtn);

const composer = el('div', 'composer');
const chipsEl = el('div', 'chips');
const input = el('textarea') as HTMLTextAreaElement;
input.rows = 3;
input.placeholder = 'Message dsh (Enter to send, Shift+Enter for a new line, Ctrl+Enter to steer)';
input.setAttribute('aria-label', 'message');
input.value = (vscode.getState() as { draft?: string } | undefined)?.draft ?? '';
const row = el('div', 'row');
const sendBtn = button('Send', () => send('followup'), 'primary', 'Send (queued while a turn runs)');
const steerBtn = button('Steer', () => send('steer'), '', 'Redirect the running turn at its next step (Ctrl+Enter)');
const addSel = button('+ Selection', () => post({ type: 'addSelection' }), 'ghost', 'Attach the editor selection to the next prompt');
addSel.setAttribute('aria-label', 'Add selection');
const addFile = button('+ File', () => post({ type: 'addFile' }), 'ghost', 'Attach a file to the next prompt');
addFile.setAttribute('aria-label', 'Add file');
row.append(addSel, addFile,
  el('span', 'spacer'), steerBtn, sendBtn,
);
composer.append(chipsEl, input, row);
app.append(header, transcript, permissionsEl, queueEl, controls, composer);

input.addEventListener('keydown', (ev) => {
  if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
    ev.preventDefault();
    send(ev.ctrlKey || ev.metaKey ? 'steer' : 'followup');
  }
});
input.addEventListener('input', () => vscode.setState({ draft: input.value }));

function send(mode: 'followup' | 'steer'): void {
  const text = input.value;
  if (!text.trim() && !chips.length) return;
  post({ type: 'send', text, chips, mode });
  input.value = '';
  chips = [];
  vscode.setState({ draft: '' });
  renderChips();
}

// ---- messages from the host ---------------------------------------------------------------------

window.addEventListener('message', (ev: MessageEvent<HostToWebview>) => {
  const m = ev.data;
  switch (m.type) {
    case 'snapshot': model = m.model; connection = m.connection; olderAsked = null; break;
    case 'actions': model = reduceAll(model, m.actions); break;
    case 'connection': connection = m.connection; break;
    case 'chip': chips.push(m.chip); renderChips(); input.focus(); return;
    case 'focusComposer': input.focus(); return;
  }
  scheduleRender();
});

let frame = 0;
function scheduleRender(): void {
  if (!frame) frame = requestAnimationFrame(() => { frame = 0; render(); });
}

function render(): void {
  const atBottom = transcript.scrollHeight - transcript.scrollTop - transcript.clientHeight < 60;
  const firstBefore = list.firstElementChild as HTMLElement | null;
  const topBefore = firstBefore ? firstBefore.offsetTop : 0;
  renderStatus();
  renderTranscript(false);
  // Items put in front (an older page): keep what the person was looking at in place.
  if (!atBottom && firstBefore?.isConnected && firstBefore !== list.firstElementChild) transcript.scrollTop += firstBefore.offsetTop - topBefore;
  renderPermissions();
  renderQueue();
  renderControls();
  // Follow the stream when the person is at the bottom (the panels below may have changed size too).
  if (atBottom) transcript.scrollTop = transcript.scrollHeight;
}

function renderStatus(): void {
  // The session's title (none from an older daemon, or before the first prompt names the session).
  const title = model.title ?? '';
  if (titleEl.textContent !== title) { titleEl.textContent = title; titleEl.title = title; }
  titleEl.hidden = !title;
  const label = connection.state === 'error' ? `daemon failed: ${connection.message ?? ''}`
    : connection.state === 'starting' ? 'starting daemon…' : connection.state === 'stopped' ? 'daemon stopped' : statusLabel(model);
  statusEl.textContent = label;
  statusEl.className = `status ${model.status}${model.permissions.length ? ' awaiting' : ''}${connection.state === 'error' ? ' error' : ''}`;
  keyButton.hidden = connection.hasKey !== false;
  if (model.context && connection.state === 'ready') statusEl.textContent += ` · context ${tokens(model.context.used)}${model.context.window ? ` of ${tokens(model.context.window)}` : ''}`;
  if (model.readOnly) statusEl.textContent += ' (read-only: another window drives this session)';
}

function tokens(n: number): string {
  if (n >= 1e6) return `${Math.round(n / 1e5) / 10}M`;
  if (n >= 1e3) return `${Math.round(n / 100) / 10}k`;
  return String(n);
}

// ---- transcript -----------------------------------------------------------------------------------

function renderTranscript(force: boolean): void {
  if (renderedSession !== model.sessionId || force) {
    nodes.clear();
    list.replaceChildren();
    renderedSession = model.sessionId;
  }
  const start = Math.max(0, model.items.length - shown);
  older.hidden = start === 0 && model.olderBefore === null;
  empty.hidden = model.items.length > 0;
  const want = new Set<string>();
  let prev: HTMLElement | null = null;
  for (let i = start; i < model.items.length; i++) {
    const it = model.items[i];
    want.add(it.id);
    let entry = nodes.get(it.id);
    if (!entry || entry.rev !== it.rev) {
      const node = renderItem(it);
      node.dataset.id = it.id;
      if (entry) entry.node.replaceWith(node);
      entry = { rev: it.rev, node };
      nodes.set(it.id, entry);
    }
    const expected: ChildNode | null = prev ? prev.nextSibling : list.firstChild;
    if (expected !== entry.node) list.insertBefore(entry.node, expected);
    prev = entry.node;
  }
  for (const [id, e] of nodes) if (!want.has(id)) { e.node.remove(); nodes.delete(id); }
}

function renderItem(it: Item): HTMLElement {
  switch (it.kind) {
    case 'user': return renderUser(it.message);
    case 'assistant': {
      const d = el('div', `msg assistant${it.done ? '' : ' streaming'}`);
      const { text, reasoning } = assistantText(it);
      if (reasoning) {
        const det = el('details', 'reasoning');
        const sum = el('summary');
        sum.textContent = it.done ? 'Reasoning' : 'Reasoning…';
        const body = el('div', 'reasoning-text');
        body.textContent = reasoning;
        det.append(sum, body);
        d.append(det);
      }
      const md = el('div', 'md');
      md.append(renderMarkdown(text, codeActions));
      d.append(md);
      if (it.interrupted) { const s = el('div', 'interrupted'); s.textContent = '(interrupted)'; d.append(s); }
      return d;
    }
    case 'tool': {
      const d = el('div', `tool ${it.status}`);
      const head = el('div', 'tool-head');
      const badge = el('span', 'badge');
      badge.textContent = { pending: 'pending', 'awaiting-permission': 'awaiting permission', running: 'running', ok: 'ok', error: 'error' }[it.status];
      const name = el('span', 'tool-name');
      name.textContent = it.name;
      const summary = el('span', 'tool-summary');
      summary.textContent = toolSummary(it.args);
      head.append(badge, name, summary);
      d.append(head);
      // The live output tail; after a replay (tool/output is live-only) the command's result stands in.
      const tail = it.output || (it.name === 'run_command' && it.status !== 'running' ? it.result : '');
      if (tail) { const pre = el('pre', 'output'); pre.textContent = tail.trimEnd().split('\n').slice(-12).join('\n'); d.append(pre); }
      if (it.meta?.diff) d.append(diffBlock(it.meta.diff));
      if (it.result && it.status !== 'running') {
        const det = el('details', 'result');
        const sum = el('summary');
        sum.textContent = it.error ? `${it.error.code}` : 'result';
        const pre = el('pre');
        pre.textContent = it.result.length > 4000 ? it.result.slice(0, 4000) + '\n…' : it.result;
        det.append(sum, pre);
        if (it.status === 'error') (det as HTMLDetailsElement).open = true;
        d.append(det);
      }
      return d;
    }
    case 'turnEnd': {
      const r = it.reason;
      const d = el('div', `footer ${r.kind}`);
      const parts: string[] = [];
      parts.push(r.kind === 'completed' ? '✓ completed' : r.kind === 'aborted' ? `■ stopped (${r.cause ?? 'user'})` : r.kind === 'error' ? `✗ error ${r.error?.code ?? ''}` : `• ${r.kind}`);
      if (it.usage) {
        parts.push(`${it.usage.inputTokens} in · ${it.usage.outputTokens} out tokens`);
        const cost = it.usage.costUsd;
        if (typeof cost === 'number') parts.push(cost === 0 ? '$0' : cost < 0.01 ? `$${cost.toPrecision(2)}` : `$${cost.toFixed(2)}`);
      }
      d.textContent = parts.join(' · ');
      if (r.error?.message) { const m = el('div', 'error-message'); m.textContent = r.error.message; d.append(m); }
      return d;
    }
    case 'notice': {
      const d = el('div', `notice ${it.level}`);
      d.textContent = it.text;
      return d;
    }
  }
}

function renderUser(msg: { content: any; source: any }): HTMLElement {
  const src = msg.source ?? { kind: 'user' };
  const text = textOf(msg.content);
  if (src.kind === 'editor') {
    const d = el('details', `context-chip ${src.contextKind ?? ''}`);
    const sum = el('summary');
    sum.textContent = `${contextLabel(src)}`;
    sum.title = 'Editor context';
    const pre = el('pre');
    pre.textContent = text;
    d.append(sum, pre);
    return d;
  }
  if (src.kind === 'user') {
    const d = el('div', 'msg user');
    d.textContent = text;
    return d;
  }
  const d = el('div', 'notice info');
  d.textContent = `${src.plugin ?? src.kind}: ${text}`;
  return d;
}

function contextLabel(src: { uri?: string; contextKind?: string; range?: { start: { line: number }; end: { line: number; character: number } } }): string {
  const name = (src.uri ?? '').split('/').pop() ?? '';
  const kind = src.contextKind ?? 'context';
  if (kind === 'snapshot') return `editor snapshot${name ? ` (${decodeURIComponent(name)})` : ''}`;
  const r = src.range;
  const lines = r ? `:${r.start.line + 1}-${r.end.character === 0 && r.end.line > r.start.line ? r.end.line : r.end.line + 1}` : '';
  return `${kind} ${decodeURIComponent(name)}${lines}`;
}

function toolSummary(args: unknown): string {
  if (!args || typeof args !== 'object') return String(args ?? '');
  const a = args as Record<string, unknown>;
  const v = a.command ?? a.path ?? a.pattern ?? a.glob ?? '';
  return String(v).slice(0, 120);
}

function diffBlock(diff: string): HTMLElement {
  const pre = el('pre', 'diff');
  for (const line of diff.split('\n')) {
    const s = el('span', line.startsWith('+') && !line.startsWith('+++') ? 'add' : line.startsWith('-') && !line.startsWith('---') ? 'del' : line.startsWith('@@') ? 'hunk' : '');
    s.textContent = line + '\n';
    pre.append(s);
  }
  return pre;
}

// ---- permissions ----------------------------------------------------------------------------------

function renderPermissions(): void {
  permissionsEl.replaceChildren(...model.permissions.map(permissionCard));
}

function permissionCard(p: PermissionRequest): HTMLElement {
  const d = el('div', 'permission');
  d.setAttribute('role', 'alertdialog');
  const title = el('div', 'permission-title');
  title.textContent = p.title || `${p.tool}`;
  d.append(title);
  if (p.preview?.command !== undefined) {
    const pre = el('pre', 'command');
    pre.textContent = `$ ${p.preview.command}\n(in ${p.preview.cwd ?? '?'})`;
    d.append(pre);
  }
  if (p.preview?.diff) d.append(diffBlock(p.preview.diff));
  const buttons = el('div', 'row');
  if (p.preview?.diff !== undefined || p.tool === 'edit_file' || p.tool === 'write_file') {
    buttons.append(button('View diff', () => post({ type: 'viewDiff', callId: p.callId }), 'ghost'));
  }
  buttons.append(
    el('span', 'spacer'),
    button('Reject', () => post({ type: 'permission', callId: p.callId, outcome: 'reject' }), 'ghost'),
    button('Allow always', () => post({ type: 'permission', callId: p.callId, outcome: 'allow-always' }), ''),
    button('Allow once', () => post({ type: 'permission', callId: p.callId, outcome: 'allow-once' }), 'primary'),
  );
  d.append(buttons);
  return d;
}

// ---- the queue --------------------------------------------------------------------------------------

function renderQueue(): void {
  const entries = queueOf(model);
  queueEl.hidden = entries.length === 0;
  if (!entries.length) { queueEl.replaceChildren(); return; }
  const head = el('div', 'queue-head');
  head.textContent = `Queue (${entries.length})`;
  const ul = el('ol', 'queue-list');
  ul.setAttribute('aria-label', 'queue');
  for (const q of entries) {
    const li = el('li', `queue-item ${q.label}`);
    li.draggable = editing !== q.message.id;
    li.dataset.id = q.message.id;
    const listOf = q.target === 'next-turn' ? model.inbox.nextTurn : model.inbox.nextStep;
    const pos = listOf.findIndex((m) => m.id === q.message.id);
    li.addEventListener('dragstart', (ev) => { ev.dataTransfer?.setData('text/plain', q.message.id); });
    li.addEventListener('dragover', (ev) => ev.preventDefault());
    li.addEventListener('drop', (ev) => {
      ev.preventDefault();
      const id = ev.dataTransfer?.getData('text/plain');
      if (id && id !== q.message.id) post({ type: 'inboxMove', messageId: id, target: q.target, index: pos });
    });
    const badge = el('span', 'badge');
    badge.textContent = q.label;
    badge.title = queueTooltip(q.message);
    li.append(badge);
    if (editing === q.message.id) {
      const ta = el('textarea') as HTMLTextAreaElement;
      ta.value = q.text;
      ta.rows = 2;
      ta.setAttribute('aria-label', 'edit queued message');
      li.append(ta,
        button('Save', () => { editing = undefined; post({ type: 'inboxReplace', messageId: q.message.id, text: ta.value }); renderQueue(); }, 'primary'),
        button('Cancel', () => { editing = undefined; renderQueue(); }, 'ghost'));
      queueMicrotask(() => ta.focus());
    } else {
      const t = el('span', 'queue-text');
      t.textContent = q.message.source.kind === 'editor' ? contextLabel(q.message.source as any) : q.text;
      t.title = q.text;
      const other: Target = q.target === 'next-turn' ? 'next-step' : 'next-turn';
      const acts = el('span', 'queue-actions');
      li.append(t, acts);
      acts.append(
        button('↑', () => post({ type: 'inboxMove', messageId: q.message.id, target: q.target, index: Math.max(0, pos - 1) }), 'icon', 'Move up'),
        button('↓', () => post({ type: 'inboxMove', messageId: q.message.id, target: q.target, index: pos + 1 }), 'icon', 'Move down'),
        button(other === 'next-step' ? '→ step' : '→ turn', () => post({ type: 'inboxMove', messageId: q.message.id, target: other }), 'icon',
          other === 'next-step' ? 'Move to the next step of the running turn' : 'Make it a prompt of its own turn'),
        button('Edit', () => { editing = q.message.id; renderQueue(); }, 'icon', 'Edit in place'),
        button('✕', () => post({ type: 'inboxRemove', messageId: q.message.id }), 'icon', 'Delete'));
    }
    // The editor context that travels with this item (kept when its text is edited).
    if (q.context.length) {
      const cs = el('div', 'queue-context');
      cs.setAttribute('aria-label', 'attached context');
      for (const c of q.context) {
        const src = c.source as { uri?: string; range?: Range };
        const chip = el('span', 'chip context');
        chip.append(button(contextLabel(c.source as any), () => { if (src.uri) post({ type: 'openFile', uri: src.uri, range: src.range }); }, 'chip-label', textOf(c.content)));
        cs.append(chip);
      }
      li.append(cs);
    }
    ul.append(li);
  }
  queueEl.replaceChildren(head, ul);
}

/** When an item was queued, and whether it waits for Run queue (a non-waking send). */
function queueTooltip(m: { queuedAt?: number; wakeup?: boolean; target?: string }): string {
  const parts: string[] = [];
  if (typeof m.queuedAt === 'number') parts.push(`queued at ${new Date(m.queuedAt).toLocaleTimeString()}`);
  if (m.wakeup === false) parts.push('waits for Run queue or the next prompt');
  return parts.join(' · ');
}

function renderControls(): void {
  const running = model.status === 'running';
  const pending = pendingCount(model) > 0;
  stopBtn.hidden = !running;
  clearBtn.hidden = !running && !pending;
  clearBtn.textContent = running ? 'Stop and clear' : 'Clear queue';
  runQueueBtn.hidden = running || !pending;
  const shutdown = model.lastTurnEnd?.kind === 'aborted' && model.lastTurnEnd.cause === 'shutdown' || model.lastTurnEnd?.kind === 'interrupted';
  continueBtn.hidden = running || pending || !shutdown;
  controls.hidden = stopBtn.hidden && clearBtn.hidden && runQueueBtn.hidden && continueBtn.hidden;
  sendBtn.textContent = running ? 'Queue' : 'Send';
  sendBtn.setAttribute('aria-label', 'Send');
  input.disabled = model.readOnly;
}

function renderChips(): void {
  chipsEl.replaceChildren(...chips.map((c, i) => {
    const s = el('span', 'chip');
    const label = button(`${c.label}`, () => post({ type: 'openFile', uri: c.uri, range: c.range }), 'chip-label', c.uri);
    s.append(label, button('✕', () => { chips.splice(i, 1); renderChips(); }, 'icon', 'Remove'));
    return s;
  }));
}

render();
post({ type: 'ready' });
