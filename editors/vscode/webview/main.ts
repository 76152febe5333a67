// The chat webview: plain TypeScript + DOM. It runs the same reducer as the host over the batched
// actions the host posts and renders once per animation frame: layout is read first, then the DOM is
// written (the transcript, windowed, in TranscriptView; the panels below it only when what they show
// changed).
import type { ConnectionState, HostToWebview, PanelAction, WebviewToHost } from '../src/protocol/panelMessages';
import { emptyModel, pendingCount, queueOf, reduce, SessionModel, statusLabel } from '../src/protocol/reducer';
import type { Escalation, HooksUntrusted, Inbox, ModelInfo, PermissionRequest, Plan, ProcessInfo, ProcessOutput, SandboxMode, SandboxStatus, Target } from '../src/protocol/types';
import { textOf } from '../src/protocol/types';
import { ChangedFilesBar } from './changedFiles';
import { actionButtons, Composer } from './composer';
import { button, el, srOnly } from './dom';
import { contextLabel, diffBlock } from './items';
import { modelPicker, modelValue, modelOptions, modePicker } from './headerPickers';
import { LeaseBars } from './leaseBars';
import { codeInfo, renderMarkdown } from './markdown';
import { TranscriptView } from './transcriptView';

declare function acquireVsCodeApi(): { postMessage(m: unknown): void; getState(): any; setState(s: unknown): void };
const vscode = acquireVsCodeApi();
const post = (m: WebviewToHost) => vscode.postMessage(m);

/** What the panel keeps across a Reload Window (the webview's state): the draft and the prompts sent,
 *  and the context meter of the session shown (the host's model has none until the next step reports). */
interface PanelState { draft?: unknown; history?: unknown; context?: { sessionId?: unknown; used?: unknown; window?: unknown } }
let saved: PanelState = (vscode.getState() as PanelState | undefined) ?? {};
function saveState(patch: PanelState): void {
  saved = { ...saved, ...patch };
  vscode.setState(saved);
}

/** A permission card's buttons wait this long before they take a click or a key: a click or an Enter
 *  meant for something else, landing as the card appears, cannot approve a tool. */
export const ARM_MS = 600;

let model: SessionModel = emptyModel();
let connection: ConnectionState = { state: 'starting' };
let editing: string | undefined;

// ---- skeleton -----------------------------------------------------------------------------------

const app = document.getElementById('app')!;

const header = el('div', 'header');
const titleRow = el('div', 'title-row');
const titleEl = el('span', 'session-title');
titleEl.setAttribute('aria-label', 'session title');
// Set API key: an icon (the title row is narrow); its name and tooltip say what it does.
const keyButton = button('', () => post({ type: 'setApiKey' }), 'icon key-button', 'Set API key: store the provider API key (VS Code SecretStorage)');
keyButton.setAttribute('aria-label', 'Set API key');
keyButton.append(keyIcon());
// Where commands run (`sandbox/status`): a shield and the mode, which is also the picker; the level
// reached and why a layer is missing are in its tooltip.
const SANDBOX_MODES: Array<[SandboxMode, string]> = [
  ['read-only', 'Commands may read; they write only a private temp directory; no network'],
  ['workspace-write', 'Commands write inside the workspace (and the allowed paths), reach only the allowed domains'],
  ['full-access', 'No sandbox: commands run as you, with your whole account; each one asks first'],
];
const sandboxBox = el('span', 'sandbox');
sandboxBox.append(shieldIcon());
const sandboxSelect = el('select', 'sandbox-select') as HTMLSelectElement;
sandboxSelect.setAttribute('aria-label', 'Sandbox mode');
for (const [value, title] of SANDBOX_MODES) { const o = el('option', undefined, value) as HTMLOptionElement; o.value = value; o.title = title; sandboxSelect.append(o); }
sandboxSelect.addEventListener('change', () => {
  sandboxPending = sandboxSelect.value as SandboxMode;
  post({ type: 'setSandboxMode', mode: sandboxPending });
});
sandboxBox.append(sandboxSelect);
sandboxBox.hidden = true;
/** The mode picked and not yet confirmed by a `sandbox/status` (shown meanwhile). */
let sandboxPending: SandboxMode | undefined;
// A fork says so beside its title; the original's title and the turn are in the tooltip.
const forkBadge = el('span', 'fork-badge', 'fork');
forkBadge.hidden = true;
titleRow.append(titleEl, forkBadge, sandboxBox, keyButton);
const stateRow = el('div', 'state-row');
const dot = el('span', 'dot');
dot.setAttribute('aria-hidden', 'true');
const statusEl = el('span', 'status');
statusEl.setAttribute('role', 'status');
const contextEl = el('span', 'context');
const meter = el('span', 'meter');
const meterFill = el('span', 'fill');
meter.append(meterFill);
const contextText = el('span', 'context-text');
contextEl.append(meter, contextText);
// The session's mode (daemons with `modes`): what the agent may do without asking; and its model
// (daemons with `models`), with the reasoning effort where the model has one (headerPickers.ts).
const modeSelect = modePicker((mode) => post({ type: 'setMode', mode }));
modeSelect.el.hidden = true;
const modelSelect = modelPicker((choice) => post({ type: 'setModel', ...choice }));
modelSelect.el.hidden = true;
/** The models offered, and for which session and choice they were last asked. */
let models: { list: ModelInfo[]; current: string; effort?: string; settable: boolean } | undefined;
let modelsAsked = '';
let modelsShown = '';
stateRow.append(dot, statusEl, el('span', 'spacer'), modelSelect.el, modeSelect.el, contextEl);
header.append(titleRow, stateRow);

const announcer = el('div', 'sr-only');
announcer.setAttribute('role', 'status');
announcer.setAttribute('aria-live', 'polite');

let frame = 0;
function scheduleRender(): void {
  if (!frame) frame = requestAnimationFrame(() => { frame = 0; render(); });
}

const view = new TranscriptView({
  requestHistory: (beforeTurn, limit) => post({ type: 'history', beforeTurn, limit }),
  announce: (text) => { announcer.textContent = ''; announcer.textContent = text; },
}, scheduleRender);
const transcriptBox = el('div', 'transcript-box');
transcriptBox.append(view.scroller, view.pill);

// The last turn's changed files (daemons with `turnDiff`), under the transcript.
const changedFiles = new ChangedFilesBar(post);
const permissionsEl = el('div', 'permissions');
// The agent's plan, pinned above the composer while a turn runs; collapsible (the details element
// keeps its state across updates).
const planEl = el('details', 'plan') as HTMLDetailsElement;
planEl.open = true;
const planSummary = el('summary', 'plan-summary');
const planList = el('ol', 'plan-steps');
planList.setAttribute('aria-label', 'plan');
const planNote = el('div', 'plan-note');
planEl.append(planSummary, planList, planNote);
planEl.hidden = true;
const queueEl = el('div', 'queue');
// The project's hooks waiting for the person's trust (`hooks/untrusted`): one bar, with the hooks to
// look at and the trust asked in a dialog the host shows (never from a single click here).
const hooksBar = el('div', 'hooks-bar');
hooksBar.setAttribute('role', 'status');
hooksBar.hidden = true;
// The session's background processes (`process/started` / `process/exited`): a compact strip, one row
// each, its output on demand and a Stop button.
const processesEl = el('details', 'processes') as HTMLDetailsElement;
processesEl.open = true;
const processesSummary = el('summary', 'processes-summary');
const processesList = el('ul', 'process-list');
processesList.setAttribute('aria-label', 'background processes');
processesEl.append(processesSummary, processesList);
processesEl.hidden = true;
const controls = el('div', 'controls');
const stopBtn = button('Stop', () => post({ type: 'cancel', keepInbox: true }), 'stop', 'Stop the turn; the queue stays (Esc)');
// Stop's menu: what else a stop can do (shown while background processes run).
const stopMenuBtn = button('▾', () => toggleStopMenu(), 'stop stop-more', 'More ways to stop');
stopMenuBtn.setAttribute('aria-haspopup', 'menu');
stopMenuBtn.setAttribute('aria-expanded', 'false');
const stopMenu = el('div', 'stop-menu');
stopMenu.setAttribute('role', 'menu');
stopMenu.hidden = true;
const stopMenuItem = (text: string, tip: string, keepInbox: boolean) => {
  const b = button(text, () => { toggleStopMenu(false); post({ type: 'cancel', keepInbox, stopProcesses: true }); }, 'menu-item', tip);
  b.setAttribute('role', 'menuitem');
  return b;
};
stopMenu.append(
  stopMenuItem('Stop and stop processes', 'Stop the turn and every background process of this session; the queue stays', true),
  stopMenuItem('Stop, clear the queue and stop processes', 'Stop the turn, discard the queue and stop every background process', false),
);
function toggleStopMenu(open = stopMenu.hidden): void {
  stopMenu.hidden = !open;
  stopMenuBtn.setAttribute('aria-expanded', String(open));
  if (open) (stopMenu.firstElementChild as HTMLElement | null)?.focus();
}
document.addEventListener('mousedown', (ev) => { if (!stopMenu.hidden && !(ev.target as HTMLElement).closest('.stop-menu, .stop-more')) toggleStopMenu(false); });
const clearBtn = button('Stop and clear', () => post({ type: 'cancel', keepInbox: false }), 'ghost', 'Stop the turn and discard the queue');
const runQueueBtn = button('Run queue', () => post({ type: 'wake' }), 'primary', 'Run the queued items now');
const continueBtn = button('Continue', () => post({ type: 'continue' }), 'primary', 'The last turn was cut short by a shutdown: continue it');
const stopGroup = el('span', 'stop-group');
stopGroup.append(stopBtn, stopMenuBtn, stopMenu);
controls.append(stopGroup, clearBtn, runQueueBtn, continueBtn);

const leaseBars = new LeaseBars(post);

const daemonBox = el('div', 'daemon-error');
daemonBox.setAttribute('role', 'alert');

const composer = new Composer({
  post,
  canSend: () => !model.readOnly,
  sent: () => view.jumpToLive(),
  save: (state) => saveState(state),
  model: () => model,
  openModePicker: () => { if (!modeSelect.el.hidden) modeSelect.toggle(true); else composer.showNote('Modes are not available here.'); },
}, saved);
composer.acceptDrops(app);

app.append(header, transcriptBox, changedFiles.el, permissionsEl, hooksBar, processesEl, planEl, queueEl, controls, daemonBox, leaseBars.handoverBar, leaseBars.readOnlyBar, composer.el, announcer);

// Esc stops a running turn (the queue stays), unless it closes something first.
document.addEventListener('keydown', (ev) => {
  if (ev.key !== 'Escape' || ev.defaultPrevented) return;
  if (composer.pickerOpen) { composer.closePicker(); return; }
  if (!stopMenu.hidden) { toggleStopMenu(false); return; }
  if (editing) { editing = undefined; renderQueue(true); return; }
  if (model.status === 'running' && !model.readOnly && connection.state === 'ready') {
    ev.preventDefault();
    post({ type: 'cancel', keepInbox: true });
  }
});

// ---- actions in the transcript (one listener for every code block and error block) ----------------

view.scroller.addEventListener('mousedown', (ev) => {
  // A click on a code block's button does not move the focus (so nothing scrolls to show it).
  if ((ev.target as HTMLElement).closest('.code-action')) ev.preventDefault();
});
view.scroller.addEventListener('click', (ev) => {
  const b = (ev.target as HTMLElement).closest<HTMLElement>('[data-act]');
  if (!b) return;
  const act = b.dataset.act!;
  const block = b.closest<HTMLElement>('.codeblock');
  if (block) {
    const info = codeInfo.get(block);
    if (!info) return;
    if (act === 'copy') {
      post({ type: 'copy', text: info.code });
      b.textContent = 'Copied';
      setTimeout(() => { b.textContent = 'Copy'; }, 1200);
    } else if (act === 'insert') post({ type: 'insert', text: info.code });
    else if (act === 'apply') post({ type: 'apply', text: info.code, lang: info.lang, path: info.path });
    else if (act === 'newfile') post({ type: 'newFile', text: info.code, lang: info.lang });
    return;
  }
  if (act === 'retry') {
    const turn = Number(b.closest<HTMLElement>('.error-block')?.dataset.turn);
    const text = view.promptOf(turn);
    if (text) post({ type: 'retry', text });
    else composer.showError('The prompt of that turn is not known here: send it again.', []);
  } else if (act === 'edit') {
    const turn = Number(b.dataset.turn);
    const text = view.promptOf(turn);
    if (turn > 0 && text !== undefined) composer.startEdit(turn, text);
  } else if (act === 'rewind' || act === 'fork') {
    const turn = Number(b.dataset.turn);
    if (turn > 0) post({ type: act, turn });
  } else if (act === 'openOriginal' && b.dataset.session) {
    post({ type: 'openSession', sessionId: b.dataset.session });
  } else if (act === 'setApiKey' || act === 'showLog') {
    post({ type: act });
  }
});

// ---- messages from the host ---------------------------------------------------------------------

let queueDirty = true;

window.addEventListener('message', (ev: MessageEvent<HostToWebview>) => {
  const m = ev.data;
  switch (m.type) {
    case 'snapshot':
      model = m.model;
      connection = m.connection;
      if (connection.state === 'ready') composer.daemonRunning();
      view.reload();
      queueDirty = true;
      break;
    case 'actions':
      for (const a of m.actions) {
        if (a.kind === 'trim') view.absorbTrim(model, a.beforeTurn);
        if (a.kind === 'sent' || a.kind === 'inbox' || a.kind === 'attached' || a.kind === 'reset') queueDirty = true;
        model = reduce(model, a);
      }
      break;
    case 'connection':
      connection = m.connection;
      // The host says so when the daemon (re)starts (`Daemon.onState`): a "not running" note goes now.
      if (connection.state === 'ready') composer.daemonRunning();
      break;
    case 'history': if (m.page) view.onHistory(m.sessionId, m.page, m.beforeTurn, m.limit); return;
    case 'chips': composer.addChips(m.chips); composer.focus(); return;
    case 'chip': composer.addChips([m.chip]); composer.focus(); return;
    case 'focusComposer': composer.focus(); return;
    case 'sendResult': composer.sendResult(m.id, m.ok, m.error, m.actions ?? [], m.daemonDown === true); return;
    case 'mentions': composer.mentionResults(m.id, m.items); return;
    case 'commands': composer.commandResults(m.id, m.commands); return;
    case 'processOutput': if (m.sessionId === model.sessionId) showProcessOutput(m.processId, m.output, m.error); return;
    case 'turnDiffNote': if (m.sessionId === model.sessionId) changedFiles.note(m.text, m.warning); return;
    case 'error': composer.showError(m.message, m.actions ?? []); return;
    case 'note': composer.showNote(m.text); return;
    case 'editPreview': composer.editPreview(m.turn, m.files, m.laterPrompts, m.canRewind); return;
    case 'models':
      models = { list: m.models, current: m.current, effort: m.reasoningEffort, settable: m.settable };
      renderModels();
      return;
    case 'sandboxModeDeclined': sandboxPending = undefined; shown.sandbox = null; break;
    case 'proposalEdited':
      if (m.edited) editedProposals.add(m.callId); else editedProposals.delete(m.callId);
      markEdited(m.callId);
      return;
  }
  scheduleRender();
});

// ---- rendering ----------------------------------------------------------------------------------

const shown: {
  inbox?: Inbox; perms?: PermissionRequest[]; readOnly?: boolean; status?: string; key?: string; header?: string;
  sandbox?: SandboxStatus | null; sandboxPending?: SandboxMode; sandboxReadOnly?: boolean; plan?: Plan; planShown?: boolean;
  processes?: ProcessInfo[]; processesKey?: string; processesSession?: string | null; hooks?: HooksUntrusted | null; hooksKey?: string;
} = {};

function render(): void {
  view.read(); // layout reads first, while the last frame's layout is valid
  renderHeader();
  renderPermissions();
  renderHooks();
  renderProcesses();
  changedFiles.render({ diff: model.turnDiff, running: model.status === 'running', readOnly: model.readOnly, root: connection.root });
  renderPlan();
  renderQueue(false);
  renderControls();
  view.write(model);
}

function renderHeader(): void {
  const title = model.title ?? '';
  const failedKey = model.lastTurnEnd?.kind === 'error' && (model.lastTurnEnd.error?.code === 'AUTH' || model.lastTurnEnd.error?.code === 'CONFIG');
  let state: string;
  let label: string;
  if (connection.state === 'error') { state = 'error'; label = 'daemon failed to start'; }
  else if (connection.state === 'starting') { state = 'starting'; label = 'starting…'; }
  else if (connection.state === 'stopped') { state = 'error'; label = 'daemon stopped'; }
  else if (model.readOnly) { state = model.status === 'running' ? 'running' : 'idle'; label = `read-only · ${statusLabel(model)}`; }
  else { state = model.permissions.length ? 'awaiting' : model.status; label = statusLabel(model); }
  const ctx = connection.state === 'ready' ? contextShown() : undefined;
  // Written only when something shown changed: a streamed word leaves the header alone.
  const fork = model.forkOf;
  const key = `${title}|${failedKey}|${connection.needsKey}|${state}|${label}|${ctx?.used}|${ctx?.window}|${fork?.sessionId}`;
  if (shown.header !== key) {
    shown.header = key;
    titleEl.textContent = title || 'New chat';
    titleEl.title = title;
    titleEl.classList.toggle('untitled', !title);
    forkBadge.hidden = !fork;
    forkBadge.title = fork ? `Forked from «${fork.title}» at turn ${fork.atTurn}` : '';
    forkBadge.setAttribute('aria-label', forkBadge.title);
    keyButton.hidden = !(connection.needsKey || failedKey);
    statusEl.textContent = label;
    dot.className = `dot ${state}`;
    contextEl.hidden = !ctx;
    if (ctx) {
      // "ctx 5%" fits beside the pickers at 300 px; the numbers are in the tooltip. With no window
      // known, the tokens alone, with their unit.
      const pct = ctx.window ? Math.min(100, Math.round((100 * ctx.used) / ctx.window)) : 0;
      contextText.textContent = ctx.window ? `ctx ${pct}%` : `${tokens(ctx.used)} tokens`;
      meter.hidden = !ctx.window;
      meterFill.style.width = `${pct}%`;
      contextEl.title = `Context at the last step: ${ctx.used.toLocaleString()}${ctx.window ? ` of ${ctx.window.toLocaleString()} tokens (${pct} %)` : ' tokens'}`;
      contextEl.setAttribute('aria-label', contextEl.title);
    }
  }
  renderSandbox();
  renderDaemon();
}

/** The context meter's numbers: the session's last `context/usage`, else the one this panel kept for
 *  the same session before a reload. */
function contextShown(): { used: number; window: number | null } | undefined {
  const c = model.context;
  const kept = saved.context;
  if (c) {
    if (model.sessionId && (kept?.sessionId !== model.sessionId || kept.used !== c.used || kept.window !== c.window)) {
      saveState({ context: { sessionId: model.sessionId, used: c.used, window: c.window } });
    }
    return c;
  }
  if (!model.sessionId || kept?.sessionId !== model.sessionId || typeof kept.used !== 'number') return undefined;
  return { used: kept.used, window: typeof kept.window === 'number' ? kept.window : null };
}

// ---- the sandbox --------------------------------------------------------------------------------

/** A one-path icon drawn as a stroke in the text colour (the shield, the key). */
function strokeIcon(cls: string, d: string): SVGSVGElement {
  const ns = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(ns, 'svg');
  svg.setAttribute('viewBox', '0 0 16 16');
  svg.setAttribute('class', cls);
  svg.setAttribute('aria-hidden', 'true');
  const path = document.createElementNS(ns, 'path');
  path.setAttribute('d', d);
  svg.append(path);
  return svg;
}

function keyIcon(): SVGSVGElement {
  return strokeIcon('key-icon', 'M1.2 11.5a3.3 3.3 0 1 0 6.6 0 3.3 3.3 0 1 0-6.6 0zM6.8 9.2 14 2M11.2 4.8l1.8 1.8M9.4 6.6l1.4 1.4');
}
function shieldIcon(): SVGSVGElement {
  return strokeIcon('shield', 'M8 1.2 2.5 3.3v4.2c0 3.3 2.3 6.1 5.5 7.3 3.2-1.2 5.5-4 5.5-7.3V3.3L8 1.2z');
}

/** How the sandbox stands, for its tooltip: the mode, the level, what is allowed, why a layer is missing. */
export function sandboxTooltip(s: SandboxStatus): string {
  const lines = [`Sandbox: ${s.mode}${s.mode !== s.configuredMode ? ` now (plan mode; configured: ${s.configuredMode})` : ''}`, `Level: ${s.level}`];
  if (refused(s)) lines.push('This machine cannot confine commands: every command is refused. Choose full-access to run them unconfined (each asks first).');
  else if (s.mode === 'full-access') lines.push('Commands run unconfined, with your whole account; each one asks first.');
  if (s.writable.length) lines.push(`Also writable: ${s.writable.join(', ')}`);
  if (s.network.length) lines.push(`Network: ${s.network.join(', ')}`);
  else if (s.mode === 'workspace-write') lines.push('Network: none allowed');
  if (s.reasons.length) lines.push(...s.reasons.map((r) => `Missing: ${r}`));
  lines.push('Change the mode here (the setting dsh.sandbox.mode).');
  return lines.join('\n');
}

/** A confined mode this machine cannot give: commands are refused rather than run unconfined. */
function refused(s: SandboxStatus): boolean {
  return !s.available && s.mode !== 'full-access';
}

function renderSandbox(): void {
  const s = connection.state === 'ready' ? model.sandbox : undefined;
  if (sandboxPending && s?.configuredMode === sandboxPending) sandboxPending = undefined;
  // A new status is a new object (the reducer replaces it only on `sandbox/status`): compared by
  // reference, a frame that changed nothing here costs nothing.
  if (shown.sandbox === s && shown.sandboxPending === sandboxPending && shown.sandboxReadOnly === model.readOnly) return;
  shown.sandbox = s;
  shown.sandboxPending = sandboxPending;
  shown.sandboxReadOnly = model.readOnly;
  sandboxBox.hidden = !s;
  if (!s) return;
  const look = refused(s) ? 'refused' : s.mode === 'full-access' ? 'unconfined' : 'confined';
  sandboxBox.className = `sandbox ${look}`;
  sandboxSelect.value = sandboxPending ?? s.configuredMode;
  // A session another window drives is not driven from here; the mode is daemon-wide all the same,
  // but changing it from a read-only view would surprise the window that drives it.
  sandboxSelect.disabled = model.readOnly;
  const tip = sandboxTooltip(s);
  sandboxBox.title = tip;
  sandboxSelect.title = tip;
  sandboxSelect.setAttribute('aria-description', tip);
}

// ---- a project's hooks waiting for trust ---------------------------------------------------------

function renderHooks(): void {
  const h = model.hooksUntrusted ?? null;
  const key = `${model.readOnly}|${connection.state}`;
  if (shown.hooks === h && shown.hooksKey === key) return;
  shown.hooks = h;
  shown.hooksKey = key;
  hooksBar.hidden = !h || model.readOnly || connection.state !== 'ready';
  if (!h || hooksBar.hidden) { hooksBar.replaceChildren(); return; }
  const count = `${h.hooks} hook${h.hooks === 1 ? '' : 's'}`;
  const text = el('div', 'hooks-text');
  text.append(el('strong', undefined, h.changed ? "This project's hooks changed" : 'This project has hooks'),
    el('span', undefined, ` (${count}${h.events.length ? `: ${h.events.join(', ')}` : ''}). They do not run until you trust them.`));
  text.title = h.path;
  const parts: HTMLElement[] = [text];
  if (h.problems?.length) {
    const p = el('div', 'hooks-problems', `${h.problems.length} entr${h.problems.length === 1 ? 'y' : 'ies'} left out`);
    p.title = h.problems.join('\n');
    parts.push(p);
  }
  const row = el('div', 'row');
  row.append(
    button('Show hooks', () => post({ type: 'showHooks' }), 'ghost small', `Open ${h.path}`),
    button('Trust…', () => post({ type: 'trustHooks' }), 'small', "Trust this project's hooks (you see them first)"),
  );
  hooksBar.replaceChildren(...parts, row);
}

// ---- background processes -------------------------------------------------------------------------

/** Processes whose output is open, and what was read of it. */
const processOutputs = new Map<string, { text?: string; truncated?: boolean; error?: string }>();

export function processState(p: ProcessInfo): string {
  if (p.running) return 'running';
  const how = typeof p.exitCode === 'number' ? `exited (code ${p.exitCode})` : typeof p.signal === 'number' ? `ended (signal ${p.signal})` : 'ended';
  const by: Record<string, string> = {
    person: 'stopped by you', agent: 'stopped by the agent', cancel: 'stopped with the turn', 'session-close': 'stopped as the session closed',
    shutdown: 'stopped as the daemon shut down', 'daemon-stopped': 'ended with the daemon',
  };
  return p.stoppedBy ? `${by[p.stoppedBy] ?? `stopped (${p.stoppedBy})`}${typeof p.signal === 'number' || typeof p.exitCode === 'number' ? `, ${how}` : ''}` : how;
}

function renderProcesses(): void {
  const list = model.processes ?? [];
  const key = `${model.readOnly}|${connection.state}`;
  if (shown.processes === list && shown.processesKey === key) return;
  shown.processes = list;
  shown.processesKey = key;
  // Process ids are per session (p1, p2, …): another session's open outputs are not this one's.
  if (shown.processesSession !== model.sessionId) { processOutputs.clear(); shown.processesSession = model.sessionId; }
  processesEl.hidden = list.length === 0;
  for (const id of [...processOutputs.keys()]) if (!list.some((p) => p.processId === id)) processOutputs.delete(id);
  if (!list.length) { processesList.replaceChildren(); return; }
  const running = list.filter((p) => p.running).length;
  processesSummary.replaceChildren(el('span', 'processes-label', 'Processes'),
    el('span', 'processes-count', running ? `${running} running` : 'none running'),
    ...(list.length > running ? [el('span', 'processes-ended', `${list.length - running} ended`)] : []));
  processesList.replaceChildren(...list.map(processRow));
}

function processRow(p: ProcessInfo): HTMLElement {
  const li = el('li', `process ${p.running ? 'running' : 'ended'}`);
  li.dataset.id = p.processId;
  const head = el('div', 'process-head');
  const mark = el('span', 'process-mark', p.running ? '●' : '○');
  mark.setAttribute('aria-hidden', 'true');
  const name = el('span', 'process-name', p.name || p.processId);
  name.title = `${p.processId}${p.pid ? ` · pid ${p.pid}` : ''}${p.confined ? ' · in the sandbox' : ' · unconfined'}`;
  head.append(mark, name, el('span', 'process-state', processState(p)), el('span', 'spacer'));
  const open = processOutputs.has(p.processId);
  const out = button(open ? 'Hide output' : 'Output', () => {
    if (processOutputs.has(p.processId)) processOutputs.delete(p.processId);
    else { processOutputs.set(p.processId, {}); post({ type: 'processOutput', processId: p.processId }); }
    li.replaceWith(processRow(p));
  }, 'ghost small', open ? 'Hide its output' : 'Show its newest output');
  head.append(out);
  if (p.running && !model.readOnly) head.append(button('Stop', () => post({ type: 'processStop', processId: p.processId }), 'small stop-process', `Stop ${p.name || p.processId} and everything it started`));
  const cmd = el('div', 'process-command', p.command);
  cmd.title = p.command;
  li.append(head, cmd);
  const o = processOutputs.get(p.processId);
  if (o) {
    const box = el('div', 'process-output');
    if (o.error) box.append(el('div', 'process-output-error', o.error));
    else if (o.text === undefined) box.append(el('div', 'process-output-note', 'Reading…'));
    else {
      if (o.truncated) box.append(el('div', 'process-output-note', '(only its newest output)'));
      box.append(el('pre', 'process-output-text', o.text || '(no output yet)'));
      box.append(button('Refresh', () => { post({ type: 'processOutput', processId: p.processId }); }, 'ghost small', 'Read its newest output again'));
    }
    li.append(box);
  }
  return li;
}

function showProcessOutput(processId: string, output: ProcessOutput | undefined, error: string | undefined): void {
  if (!processOutputs.has(processId)) return; // closed meanwhile
  processOutputs.set(processId, output ? { text: output.text, truncated: output.truncated } : { error: error ?? 'Its output could not be read.' });
  const p = model.processes.find((x) => x.processId === processId);
  const row = processesList.querySelector<HTMLElement>(`li[data-id="${CSS.escape(processId)}"]`);
  if (p && row) row.replaceWith(processRow(p));
}

// ---- the plan -----------------------------------------------------------------------------------

const STEP_MARK: Record<string, [string, string]> = { pending: ['○', 'to do'], in_progress: ['◐', 'in progress'], done: ['✓', 'done'] };

function renderPlan(): void {
  const plan = model.plan;
  const visible = !!plan && model.status === 'running';
  if (shown.plan === plan && shown.planShown === visible) return;
  shown.plan = plan;
  shown.planShown = visible;
  planEl.hidden = !visible;
  if (!plan || !visible) return;
  const done = plan.steps.filter((st) => st.status === 'done').length;
  const current = plan.steps.find((st) => st.status === 'in_progress');
  planSummary.replaceChildren(el('span', 'plan-label', 'Plan'), el('span', 'plan-count', `${done}/${plan.steps.length}`),
    ...(current ? [el('span', 'plan-current', current.title)] : []));
  planSummary.title = current ? `Now: ${current.title}` : `${done} of ${plan.steps.length} steps done`;
  planList.replaceChildren(...plan.steps.map((st) => {
    const [mark, words] = STEP_MARK[st.status] ?? ['•', st.status];
    const li = el('li', `plan-step ${st.status}`);
    const m = el('span', 'plan-mark', mark);
    m.setAttribute('aria-hidden', 'true');
    li.append(m, srOnly(`${words}: `), el('span', 'plan-title', st.title));
    return li;
  }));
  planNote.textContent = plan.note ?? '';
  planNote.hidden = !plan.note;
}

function renderDaemon(): void {
  const key = `${connection.state}|${connection.message}|${connection.detail}|${connection.kind}|${connection.restartOffer}`;
  if (shown.key === key) return;
  shown.key = key;
  daemonBox.classList.toggle('restart-offer', false);
  if (connection.state === 'ready' && connection.restartOffer) {
    // Changed settings the running daemon takes only at a restart: asked here until answered.
    daemonBox.hidden = false;
    daemonBox.classList.toggle('restart-offer', true);
    daemonBox.replaceChildren(el('div', 'restart-text', 'The daemon uses the changed settings after a restart.'), el('div', 'row', undefined));
    (daemonBox.lastElementChild as HTMLElement).append(
      button('Restart daemon', () => post({ type: 'restartDaemon' }), 'primary small', 'A running turn stops; the queue and the sessions are kept'),
      button('Not now', () => post({ type: 'declineRestart' }), 'ghost small'));
    return;
  }
  if (connection.state !== 'error' && connection.state !== 'stopped') { daemonBox.hidden = true; daemonBox.replaceChildren(); return; }
  daemonBox.hidden = false;
  const actions: PanelAction[] = connection.state === 'stopped' ? ['restartDaemon', 'showLog']
    : connection.kind === 'notFound' ? ['installDaemon', 'openSettings', 'showLog', 'restartDaemon'] : ['openSettings', 'showLog', 'restartDaemon'];
  const title = connection.state === 'stopped' ? 'The daemon stopped.' : connection.message ?? 'The daemon could not start.';
  daemonBox.replaceChildren(el('div', 'error-title', `✗ ${title}`), ...(connection.detail ? [el('div', 'error-message', connection.detail)] : []),
    el('div', 'row', undefined));
  (daemonBox.lastElementChild as HTMLElement).append(...actionButtons(actions, post));
}

function tokens(n: number): string {
  if (n >= 1e6) return `${Math.round(n / 1e5) / 10}M`;
  if (n >= 1e3) return `${Math.round(n / 100) / 10}k`;
  return String(n);
}

// ---- permissions ----------------------------------------------------------------------------------

const cards = new Map<string, HTMLElement>();
/** Requests whose proposed side the person changed in the diff editor: allowing sends their version. */
const editedProposals = new Set<string>();

function markEdited(callId: string): void {
  const card = cards.get(callId);
  if (!card) return;
  const note = card.querySelector<HTMLElement>('.proposal-edited');
  if (note) note.hidden = !editedProposals.has(callId);
}

function renderPermissions(): void {
  if (shown.perms === model.permissions && shown.readOnly === model.readOnly) return;
  shown.perms = model.permissions;
  const want = new Set(model.permissions.map((p) => p.callId));
  for (const [id, card] of cards) if (!want.has(id)) { card.remove(); cards.delete(id); editedProposals.delete(id); }
  for (const p of model.permissions) if (!cards.has(p.callId)) { const c = permissionCard(p); cards.set(p.callId, c); permissionsEl.append(c); markEdited(p.callId); }
}

function permissionCard(p: PermissionRequest): HTMLElement {
  const esc = p.preview?.escalation;
  if (esc) return escalationCard(p, esc);
  if (p.preview?.kind === 'plan') return planCard(p);
  const d = el('div', 'permission');
  d.setAttribute('role', 'group');
  d.setAttribute('aria-label', `Permission: ${p.title || p.tool}`);
  if (p.subagent) d.append(el('div', 'permission-subagent', `Asked by the subagent “${p.subagent.description}”`));
  d.append(el('div', 'permission-title', p.title || p.tool));
  if (p.preview?.command !== undefined) d.append(el('pre', 'command', `$ ${p.preview.command}\n(in ${p.preview.cwd ?? '?'})`));
  const name = (p.preview?.path ?? '').split('/').pop() || 'the file';
  if (p.preview?.unsaved === 'overlaps') {
    d.append(el('div', 'unsaved-note', `${name} has unsaved changes in the editor that this edit overlaps: write both to the file, keep the edit in the buffer only (commands will not see it), or reject.`));
  } else if (p.preview?.unsaved === 'apart') {
    d.append(el('div', 'unsaved-note', `${name} has unsaved changes: they stay unsaved; only this edit is written.`));
  }
  if (p.preview?.diff) d.append(diffBlock(p.preview.diff));
  const note = el('div', 'proposal-edited', '✎ You changed the proposal in the diff editor: allowing writes your version.');
  note.hidden = true;
  d.append(note);
  const buttons = el('div', 'row');
  if (p.preview?.diff !== undefined || p.tool === 'edit_file' || p.tool === 'write_file') {
    buttons.append(button('View diff', () => post({ type: 'viewDiff', callId: p.callId }), 'ghost'));
  }
  const answer = (outcome: 'reject' | 'allow-always' | 'allow-once') => () => post({ type: 'permission', callId: p.callId, outcome });
  if (p.preview?.unsaved === 'overlaps') {
    // The three answers of an edit overlapping the person's unsaved changes (protocol.md §8).
    const keep = (unsaved: 'both' | 'buffer-only') => () => post({ type: 'permission', callId: p.callId, outcome: 'allow-once', unsaved });
    d.append(answerRow(d, buttons, [
      button('Reject', answer('reject'), 'ghost'),
      button('Write both', keep('both'), '', 'Save the file with your unsaved changes and the edit'),
      button('Buffer only', keep('buffer-only'), 'primary', 'Put the edit in the editor only: nothing is saved, commands will not see it'),
    ]));
    return d;
  }
  const answers = [
    button('Reject', answer('reject'), 'ghost'),
    button('Allow always', answer('allow-always'), ''),
    button('Allow once', answer('allow-once'), 'primary'),
  ];
  d.append(answerRow(d, buttons, answers));
  return d;
}

/** A request to widen the sandbox for one command (`preview.escalation`, protocol.md §16): the
 *  command, the agent's reason and exactly what would be widened, with four answers. "Always" saves
 *  the widening to config.json: offered only when the daemon can (`persistWidening`) and never for
 *  "unconfined" (which the daemon does not save). */
function escalationCard(p: PermissionRequest, esc: Escalation): HTMLElement {
  const d = el('div', 'permission escalation');
  d.setAttribute('role', 'group');
  d.setAttribute('aria-label', `Permission: ${p.title || 'widen the sandbox'}`);
  const head = el('div', 'permission-title');
  head.append(shieldIcon(), el('span', undefined, esc.unconfined ? 'Run a command without the sandbox?' : 'Widen the sandbox for a command?'));
  d.append(head);
  if (p.subagent) d.append(el('div', 'permission-subagent', `Asked by the subagent “${p.subagent.description}”`));
  if (p.preview?.command !== undefined) d.append(el('pre', 'command', `$ ${p.preview.command}\n(in ${p.preview.cwd ?? '?'})`));
  const why = el('div', 'escalation-reason');
  why.append(el('span', 'escalation-label', 'The agent says: '), el('span', 'escalation-why', esc.reason));
  d.append(why);
  const list = el('ul', 'widening');
  list.setAttribute('aria-label', 'what would be widened');
  if (esc.unconfined) list.append(el('li', 'unconfined', 'Unconfined: no sandbox at all (your whole account, any file, any network)'));
  for (const w of esc.writable) { const li = el('li', 'writable'); li.append(el('span', 'widening-kind', 'write '), el('code', undefined, w)); list.append(li); }
  for (const n of esc.network) { const li = el('li', 'network'); li.append(el('span', 'widening-kind', 'network '), el('code', undefined, n)); list.append(li); }
  d.append(list);
  const answer = (outcome: 'reject' | 'allow-always' | 'allow-once', persist = false) => () =>
    post({ type: 'permission', callId: p.callId, outcome, ...(persist ? { persist: true } : {}) });
  const answers = [
    button('Reject', answer('reject'), 'ghost', 'Run nothing; the agent is told you refused'),
    button('Allow once', answer('allow-once'), 'primary', esc.unconfined ? 'Run this command unconfined, this time only' : 'Run this command with the widening; later commands stay as they were'),
    button('Allow for this session', answer('allow-always'), '', esc.unconfined
      ? 'Allow this exact command unconfined for the rest of this session'
      : 'Widen the sandbox for every later command of this session'),
  ];
  if (connection.persistWidening && !esc.unconfined) {
    answers.push(button('Always (saved to config)', answer('allow-always', true), '', 'Write the widening into your config.json (tools.sandbox): every later session gets it'));
  }
  d.append(answerRow(d, el('div', 'row'), answers));
  return d;
}

/** A plan the model proposes in plan mode (`propose_plan`, protocol.md §3 "Plan approval"): the plan
 *  itself (markdown), a field for what to change, and three answers. Approve switches the session to
 *  the mode named and the plan runs at once as the next prompt; Revise sends the field's words back
 *  and the session stays in plan mode. */
function planCard(p: PermissionRequest): HTMLElement {
  const d = el('div', 'permission plan-approval');
  d.setAttribute('role', 'group');
  d.setAttribute('aria-label', 'Permission: Approve the plan?');
  d.append(el('div', 'permission-title', 'Approve the plan?'));
  const body = el('div', 'plan-text');
  body.append(renderMarkdown(p.preview?.plan ?? ''));
  d.append(body);
  const feedback = el('textarea', 'plan-feedback') as HTMLTextAreaElement;
  feedback.rows = 2;
  feedback.placeholder = 'What should change? (for Revise)';
  feedback.setAttribute('aria-label', 'What should change in the plan');
  d.append(feedback);
  const approve = (mode: 'accept-edits' | 'ask') => () => post({ type: 'permission', callId: p.callId, outcome: 'allow-once', mode });
  const revise = () => post({ type: 'permission', callId: p.callId, outcome: 'reject', ...(feedback.value.trim() ? { feedback: feedback.value.trim() } : {}) });
  d.append(answerRow(d, el('div', 'row'), [
    button('Revise', revise, 'ghost', 'Send the plan back with what you wrote above; the agent stays in plan mode'),
    button('Approve: ask', approve('ask'), '', 'Run the plan now; edits and commands ask first'),
    button('Approve: accept edits', approve('accept-edits'), 'primary', 'Run the plan now; edits run without asking'),
  ]));
  return d;
}

/** A card's answers: armed only ARM_MS after the card appears, kept together as one group in `buttons`. */
function answerRow(card: HTMLElement, buttons: HTMLElement, answers: HTMLButtonElement[]): HTMLElement {
  for (const b of answers) b.disabled = true;
  card.dataset.armMs = String(ARM_MS);
  setTimeout(() => { for (const b of answers) b.disabled = false; }, ARM_MS);
  // The answers are one group, kept in their order and together: in a narrow sidebar the group
  // moves to its own line as a whole rather than leaving "Allow once" alone on a row.
  const group = el('div', 'answers');
  group.setAttribute('role', 'group');
  group.setAttribute('aria-label', 'answer');
  group.append(...answers);
  buttons.append(el('span', 'spacer'), group);
  return buttons;
}

// ---- the queue: one row per item, its actions on hover or focus ------------------------------------

function renderQueue(force: boolean): void {
  if (!force && !queueDirty && shown.inbox === model.inbox && shown.readOnly === model.readOnly) return;
  queueDirty = false;
  shown.inbox = model.inbox;
  shown.readOnly = model.readOnly;
  const entries = queueOf(model);
  queueEl.hidden = entries.length === 0;
  if (!entries.length) { queueEl.replaceChildren(); return; }
  const head = el('div', 'queue-head', `Queue (${entries.length})`);
  const ul = el('ol', 'queue-list');
  ul.setAttribute('aria-label', 'queue');
  for (const q of entries) {
    const li = el('li', `queue-item ${q.label}`);
    li.dataset.id = q.message.id;
    li.tabIndex = 0;
    const listOf = q.target === 'next-turn' ? model.inbox.nextTurn : model.inbox.nextStep;
    const pos = listOf.findIndex((m) => m.id === q.message.id);
    const badge = el('span', 'badge', q.label);
    badge.title = queueTooltip(q.message);
    li.append(badge);
    if (editing === q.message.id && !model.readOnly) {
      li.classList.add('editing'); // the editor takes the row's full width (style.css)
      const ta = el('textarea');
      ta.value = q.text;
      ta.rows = 2;
      ta.setAttribute('aria-label', 'edit queued message');
      ta.addEventListener('keydown', (ev) => {
        if (ev.key === 'Enter' && !ev.shiftKey) { ev.preventDefault(); save(); }
      });
      const save = () => { editing = undefined; post({ type: 'inboxReplace', messageId: q.message.id, text: ta.value }); renderQueue(true); };
      li.append(ta, button('Save', save, 'primary small'), button('Cancel', () => { editing = undefined; renderQueue(true); }, 'ghost small'));
      queueMicrotask(() => ta.focus());
    } else {
      const t = el('span', 'queue-text', q.message.source.kind === 'editor' ? contextLabel(q.message.source as any) : q.text);
      t.title = q.text;
      li.append(t);
      // The editor context that travels with this item (kept when its text is edited).
      if (q.context.length) {
        const cs = el('span', 'queue-context');
        cs.setAttribute('aria-label', 'attached context');
        for (const c of q.context) {
          const src = c.source as { uri?: string; range?: any };
          const chip = el('span', 'chip context');
          chip.append(button(contextLabel(c.source as any), () => { if (src.uri) post({ type: 'openFile', uri: src.uri, range: src.range }); }, 'chip-label', `Open ${contextLabel(c.source as any)}`));
          chip.title = textOf(c.content);
          cs.append(chip);
        }
        li.append(cs);
      }
      if (!model.readOnly) {
        const other: Target = q.target === 'next-turn' ? 'next-step' : 'next-turn';
        const acts = el('span', 'queue-actions');
        acts.append(
          button('↑', () => post({ type: 'inboxMove', messageId: q.message.id, target: q.target, index: Math.max(0, pos - 1) }), 'icon', 'Move up'),
          button('↓', () => post({ type: 'inboxMove', messageId: q.message.id, target: q.target, index: pos + 1 }), 'icon', 'Move down'),
          button(other === 'next-step' ? '→ step' : '→ turn', () => post({ type: 'inboxMove', messageId: q.message.id, target: other }), 'icon',
            other === 'next-step' ? 'Move to the next step of the running turn' : 'Make it a prompt of its own turn'),
          button('Edit', () => { editing = q.message.id; renderQueue(true); }, 'icon', 'Edit'),
          button('✕', () => post({ type: 'inboxRemove', messageId: q.message.id }), 'icon', 'Delete'));
        li.append(acts);
        li.draggable = true;
        li.addEventListener('dragstart', (ev) => { ev.dataTransfer?.setData('application/x-dsh-queue', q.message.id); });
        li.addEventListener('dragover', (ev) => { if (ev.dataTransfer?.types.includes('application/x-dsh-queue')) ev.preventDefault(); });
        li.addEventListener('drop', (ev) => {
          const id = ev.dataTransfer?.getData('application/x-dsh-queue');
          if (!id) return;
          ev.preventDefault();
          ev.stopPropagation();
          if (id !== q.message.id) post({ type: 'inboxMove', messageId: id, target: q.target, index: pos });
        });
      }
    }
    ul.append(li);
  }
  queueEl.replaceChildren(head, ul);
}

/** When an item was queued, and whether it waits for Run queue (a non-waking send). */
function queueTooltip(m: { queuedAt?: number; wakeup?: boolean }): string {
  const parts: string[] = [];
  if (typeof m.queuedAt === 'number') parts.push(`queued at ${new Date(m.queuedAt).toLocaleTimeString()}`);
  if (m.wakeup === false) parts.push('waits for Run queue or the next prompt');
  return parts.join(' · ');
}

function renderControls(): void {
  leaseBars.render(model, connection);
  renderModels();
  const running = model.status === 'running';
  const pending = pendingCount(model) > 0;
  const ro = model.readOnly;
  const processesRunning = !!connection.processes && (model.processes ?? []).some((p) => p.running);
  const key = `${running}|${pending}|${ro}|${connection.state}|${model.lastTurnEnd?.kind}|${model.lastTurnEnd?.cause}|${connection.takeOver}|${connection.rewind}|${connection.modes}|${model.mode}|${processesRunning}`;
  if (shown.status === key) return;
  shown.status = key;
  stopBtn.hidden = ro || !running;
  stopMenuBtn.hidden = stopBtn.hidden || !processesRunning;
  if (stopMenuBtn.hidden) toggleStopMenu(false);
  stopGroup.hidden = stopBtn.hidden;
  clearBtn.hidden = ro || (!running && !pending);
  clearBtn.textContent = running ? 'Stop and clear' : 'Clear queue';
  runQueueBtn.hidden = ro || running || !pending;
  const shutdown = model.lastTurnEnd?.kind === 'aborted' && model.lastTurnEnd.cause === 'shutdown' || model.lastTurnEnd?.kind === 'interrupted';
  continueBtn.hidden = ro || running || pending || !shutdown;
  controls.hidden = stopBtn.hidden && clearBtn.hidden && runQueueBtn.hidden && continueBtn.hidden;
  composer.setRunning(running);
  // Read-only: nothing that drives the session is shown; one line says why, with what can be done.
  composer.el.hidden = ro;
  modeSelect.el.hidden = !connection.modes || ro || connection.state !== 'ready';
  modeSelect.show(model.mode ?? 'ask');
  // Restore checkpoint drives the session (not while a turn runs or read-only); Fork only reads it.
  document.body.classList.toggle('has-rewind', !!connection.rewind && !ro);
  document.body.classList.toggle('can-rewind', !!connection.rewind && !ro && !running && connection.state === 'ready');
  document.body.classList.toggle('can-fork', !!connection.rewind && connection.state === 'ready');
}

/** The model picker: asked again when the session or its own choice changes (another window's too). */
function renderModels(): void {
  const ready = connection.state === 'ready' && !!model.sessionId;
  const asked = `${model.sessionId}|${model.modelChoice?.model}|${model.modelChoice?.reasoningEffort}|${model.readOnly}`;
  if (ready && asked !== modelsAsked) { modelsAsked = asked; post({ type: 'models' }); }
  const list = models?.list ?? [];
  const hidden = !ready || !list.length || !models?.settable;
  const key = `${hidden}|${JSON.stringify(list)}|${models?.current}|${models?.effort}`;
  if (key === modelsShown) return;
  modelsShown = key;
  modelSelect.el.hidden = hidden;
  if (!list.length || !models) return;
  modelSelect.setOptions(modelOptions(list));
  modelSelect.show(modelValue(list, models.current, models.effort));
}

render();
post({ type: 'ready' });
