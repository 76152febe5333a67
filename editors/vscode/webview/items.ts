// One transcript item as DOM. An assistant item is updated in place as it streams (its markdown
// incrementally, see MarkdownView); the other kinds are small and are built again when they change.
// Nothing here reads layout.
import type { AssistantItem, Item, RetryState, ToolItem, TurnEndItem, UserItem } from '../src/protocol/reducer';
import { assistantText, typedText } from '../src/protocol/reducer';
import type { ToolResultMeta, TurnEndReason } from '../src/protocol/types';
import { textOf } from '../src/protocol/types';
import { el } from './dom';
import { MarkdownView } from './markdown';
import { subagentCard } from './subagentCard';
import { toolOutcomeLook } from './toolWords';

/** An item's DOM; `update` is given the item again when its rev changed. */
export interface ItemView { node: HTMLElement; rev: number; update(it: Item): void }

/** Asks for a frame (set by the transcript): a view that put an update off asks for one later. */
let requestFrame: () => void = () => undefined;
export function setFrameRequester(f: () => void): void { requestFrame = f; }

/** A long reply still streaming is drawn at most this often (a short one at every frame): five
 *  draws a second still read as live, and each draw lays out and paints the reply's end while the
 *  workbench shares the renderer (the 200 KB benchmark's main-thread share). */
const BIG_REPLY = 32_000;
const BIG_REPLY_MS = 200;

export function itemView(it: Item): ItemView {
  if (it.kind === 'assistant') return new AssistantView(it);
  let node = build(it);
  const view: ItemView = {
    node, rev: it.rev,
    update(next) {
      if (next.rev === view.rev) return;
      view.rev = next.rev;
      const fresh = build(next);
      node.replaceWith(fresh);
      node = fresh;
      view.node = fresh;
    },
  };
  return view;
}

function build(it: Item): HTMLElement {
  const node = buildInner(it);
  node.dataset.id = it.id;
  return node;
}

function buildInner(it: Item): HTMLElement {
  switch (it.kind) {
    case 'user': return userNode(it);
    case 'tool': return toolNode(it);
    case 'turnEnd': return turnEndNode(it);
    case 'retry': return retryLine(it.retry);
    case 'notice': {
      if (it.folded) { const d = el('div', 'folded'); d.hidden = true; return d; }
      if (it.level === 'error') return errorBlock(noticeTitle(it.code), it.text, it.code, it.turn, it.code !== 'LEASE_LOST');
      if (!it.topic) return el('div', `notice ${it.level}`, it.text);
      // The daemon's words about the session (the sandbox, an MCP server) or a failed hook: what it is
      // about, then the words.
      const d = el('div', `notice ${it.level} topic-${it.topic}`);
      d.append(el('span', 'notice-topic', NOTICE_TOPIC[it.topic] ?? it.topic), el('span', 'notice-text', it.text));
      if (it.forkOf) {
        const open = el('button', 'ghost small open-original', 'Open original');
        open.type = 'button';
        open.dataset.act = 'openOriginal';
        open.dataset.session = it.forkOf.sessionId;
        open.title = `Open «${it.forkOf.title}», the session this one was forked from`;
        d.append(open);
      }
      return d;
    }
    case 'assistant': return el('div');
  }
}

// ---- assistant ----------------------------------------------------------------------------------

class AssistantView implements ItemView {
  node = el('div', 'msg assistant');
  rev = -1;
  private md = new MarkdownView();
  private reasoning: HTMLDetailsElement | undefined;
  private reasoningBody: HTMLElement | undefined;
  private reasoningText = '';
  private retryEl: HTMLElement | undefined;
  private retry: RetryState | undefined;
  private interruptedEl: HTMLElement | undefined;

  constructor(it: AssistantItem) {
    this.node.dataset.id = it.id;
    this.node.append(this.md.el);
    this.update(it);
  }

  private drawnAt = 0;
  private later: ReturnType<typeof setTimeout> | undefined;

  update(it: Item): void {
    if (it.kind !== 'assistant' || it.rev === this.rev) return;
    // A long reply still streaming: at most every BIG_REPLY_MS (its rev stays old until drawn, so the
    // frame asked for then draws it). Each frame's cost grows with the text shown; the last text
    // comes with the finished message, which is drawn at once.
    const wait = this.drawnAt + BIG_REPLY_MS - performance.now();
    if (!it.done && it.text.length + it.liveText.length > BIG_REPLY && wait > 0) {
      this.later ??= setTimeout(() => { this.later = undefined; requestFrame(); }, wait);
      return;
    }
    this.drawnAt = performance.now();
    this.rev = it.rev;
    const { text, reasoning } = assistantText(it);
    this.node.classList.toggle('streaming', !it.done);
    this.setRetry(it.retry);
    this.setReasoning(reasoning, it.done);
    this.md.update(text, it.done);
    if (it.interrupted && !this.interruptedEl) {
      this.interruptedEl = el('div', 'interrupted', '(interrupted)');
      this.node.append(this.interruptedEl);
    }
  }

  private setRetry(retry: RetryState | undefined): void {
    if (retry === this.retry) return;
    this.retry = retry;
    const line = retry ? retryLine(retry) : undefined;
    if (this.retryEl) this.retryEl.remove();
    this.retryEl = line;
    if (line) this.node.prepend(line);
  }

  /** Reasoning stays collapsed; its text is put in only while it is open. */
  private setReasoning(reasoning: string, done: boolean): void {
    this.reasoningText = reasoning;
    if (!reasoning) return;
    if (!this.reasoning) {
      const det = el('details', 'reasoning');
      const sum = el('summary');
      const body = el('div', 'reasoning-text');
      det.append(sum, body);
      det.addEventListener('toggle', () => { if (det.open) body.textContent = this.reasoningText; else body.textContent = ''; });
      this.reasoning = det;
      this.reasoningBody = body;
      this.node.insertBefore(det, this.md.el);
    }
    const summary = this.reasoning.firstElementChild as HTMLElement;
    const label = done ? 'Reasoning' : 'Reasoning…';
    if (summary.textContent !== label) summary.textContent = label;
    if (this.reasoning.open && this.reasoningBody) this.reasoningBody.textContent = reasoning;
  }
}

// ---- the others ---------------------------------------------------------------------------------

const TAG_LABEL: Record<string, [string, string]> = {
  steer: ['steer', 'Sent as a steer: it joined the running turn at its next step'],
  inject: ['injected', 'Injected into the running turn at its next step'],
  queued: ['queued', 'Waited in the queue until the turn before it ended'],
  rewound: ['rewound', 'A restored checkpoint took this turn back: the model no longer sees it'],
};

const NOTICE_TOPIC: Record<string, string> = { sandbox: 'sandbox', mcp: 'MCP', hook: 'hook', lease: 'window', fork: 'fork' };

function userNode(it: UserItem): HTMLElement {
  const msg = it.message;
  const src = (msg.source ?? { kind: 'user' }) as { kind: string; plugin?: string; form?: string; contextKind?: string; uri?: string; range?: any; event?: string; hook?: string; command?: { name: string; origin?: string; path?: string } };
  const text = textOf(msg.content);
  if (src.kind === 'hook') {
    // What a hook of the person's (or the project's) said: context it added, or why it blocked a prompt
    // or kept a turn going. A quiet line naming the hook, opening to its words.
    const d = el('details', 'quiet-line hook-message');
    const first = text.split('\n')[0];
    const sum = el('summary');
    sum.append(el('span', 'hook-label', `hook ${src.hook ?? ''}`.trim()), el('span', 'hook-event', src.event ?? ''), el('span', 'hook-text', first.length > 120 ? first.slice(0, 119) + '…' : first));
    sum.title = `What the ${src.event ?? ''} hook ${src.hook ?? ''} told the model`;
    const pre = el('pre');
    d.addEventListener('toggle', () => { pre.textContent = d.open ? text : ''; });
    d.append(sum, pre);
    return d;
  }
  if (src.kind === 'editor') {
    // Ambient editor state: one quiet line. Attached context: a chip that opens to its text.
    const quiet = src.contextKind === 'snapshot';
    const d = el('details', quiet ? 'quiet-line snapshot' : `context-chip ${src.contextKind ?? ''}`);
    const sum = el('summary', undefined, quiet ? `editor state · ${fileName(src.uri)}` : contextLabel(src));
    sum.title = quiet ? 'What the editor showed the model at this step' : 'Context sent with the prompt';
    const pre = el('pre');
    d.addEventListener('toggle', () => { pre.textContent = d.open ? text : ''; });
    d.append(sum, pre);
    return d;
  }
  if (src.kind === 'user') {
    const d = el('div', 'msg user');
    for (const tag of it.tags ?? []) {
      const [label, title] = TAG_LABEL[tag] ?? [tag, ''];
      const b = el('span', `tag ${tag}`, label);
      b.title = title;
      d.append(b);
    }
    const review = (msg.source as { review?: unknown } | undefined)?.review;
    const approved = (msg.source as { approvedPlan?: { mode?: string } } | undefined)?.approvedPlan;
    if (approved) {
      // The plan the person approved in plan mode (§3): tagged, the plan itself as its text.
      const b = el('span', 'tag approved-plan', approved.mode === 'accept-edits' ? 'approved plan · accept edits' : 'approved plan · ask');
      b.title = 'The plan you approved, sent as your prompt';
      d.append(b, el('span', 'user-text', text));
    } else if (src.command || review) {
      // A custom command: the line as typed; a review (dsh/review/start): what was asked for, not the
      // diff it sent. What it expanded to opens below it.
      const b = src.command
        ? el('span', 'tag command', src.command.origin === 'project' ? 'project command' : 'command')
        : el('span', 'tag review', 'review');
      b.title = src.command?.path ?? '';
      d.append(b, el('span', 'user-text', typedText(msg)));
      const det = el('details', 'quiet-line command-expansion');
      const pre = el('pre');
      det.addEventListener('toggle', () => { pre.textContent = det.open ? text : ''; });
      det.append(el('summary', undefined, 'the prompt it sent'), pre);
      d.append(det);
    } else {
      d.append(el('span', 'user-text', text));
    }
    // The prompt that started a turn (not a steer into it) can take the session back to before it:
    // a button beside the prompt, not in it (the prompt's text stays only the prompt).
    if (!it.tags?.some((t) => t === 'steer' || t === 'inject' || t === 'rewound')) {
      const wrap = el('div', 'prompt');
      const row = el('div', 'turn-actions rewind-actions');
      // Icon buttons in a narrow column beside the prompt (named for screen readers and tests).
      const edit = turnAct('edit', '✎', it.turn, 'Edit this prompt and send it again: the files and the conversation go back to before it first (shown before you send)');
      edit.setAttribute('aria-label', 'Edit');
      const restore = turnAct('rewind', '↶', it.turn, 'Restore checkpoint: take the files and the conversation back to before this prompt (shows the files first)');
      restore.setAttribute('aria-label', 'Restore checkpoint');
      row.append(edit, restore);
      wrap.append(d, row);
      return wrap;
    }
    return d;
  }
  if (src.kind === 'plugin' && src.form === 'notice') {
    // What the daemon tells the model (e.g. a file changed since it was read): for the model, not an
    // alarm for the person; one quiet line that opens to the text.
    const d = el('details', 'quiet-line model-note');
    const sum = el('summary', undefined, 'note to the model');
    const pre = el('pre');
    d.addEventListener('toggle', () => { pre.textContent = d.open ? text : ''; });
    d.append(sum, pre);
    return d;
  }
  return el('div', 'notice info', `${src.plugin ?? src.kind}: ${text}`);
}

function fileName(uri: string | undefined): string {
  return uri ? decodeURIComponent(uri.split('/').pop() ?? '') : '';
}

export function contextLabel(src: { uri?: string; contextKind?: string; range?: { start: { line: number }; end: { line: number; character: number } } }): string {
  const name = fileName(src.uri);
  const kind = src.contextKind === 'gitDiff' ? 'git diff' : src.contextKind ?? 'context';
  const r = src.range;
  const lines = r ? `:${r.start.line + 1}-${r.end.character === 0 && r.end.line > r.start.line ? r.end.line : r.end.line + 1}` : '';
  return `${kind} ${name}${lines}`;
}

function toolNode(it: ToolItem): HTMLElement {
  const look = toolOutcomeLook(it);
  const d = el('div', `tool ${look.cls}`);
  const head = el('div', 'tool-head');
  const badge = el('span', 'badge', look.badge);
  head.append(badge, el('span', 'tool-name', it.name), el('span', 'tool-summary', toolSummary(it.args)));
  const told = it.status === 'running' ? undefined : resultNote(it.meta);
  if (told) {
    const note = el('span', `tool-note ${told.kind}`, told.text);
    if (told.title) note.title = told.title;
    head.append(note);
  }
  d.append(head);
  if (look.why) d.append(el('div', 'tool-why', look.why));
  // The live output tail; after a replay (tool/output is live-only) the command's result stands in.
  // (A call that never ran, rejected or refused, has no output: its result is only the model's words.)
  const ran = look.cls !== 'rejected' && look.cls !== 'denied';
  const tail = it.output || (it.name === 'run_command' && it.status !== 'running' && ran ? it.result : '');
  if (tail) d.append(el('pre', 'output', tail.trimEnd().split('\n').slice(-12).join('\n')));
  // The person changed the proposal before allowing it: the diff below is their version.
  if (it.meta?.editedByUser) d.append(el('div', 'edited-by-you', `✎ You changed the proposal before accepting it: ${(it.meta.path ?? '').split('/').pop() || 'the file'} holds your version.`));
  if (it.meta?.diff) d.append(diffBlock(it.meta.diff));
  // A subagent: its nested card says what it did and gave back (the summary is the call's result).
  if (it.name === 'run_subagent') { d.classList.add('has-subagent'); d.append(subagentCard(it)); return d; }
  if (it.result && it.status !== 'running') {
    const det = el('details', 'result');
    const sum = el('summary', undefined, look.summary ?? 'result');
    const pre = el('pre');
    const full = it.result.length > 4000 ? it.result.slice(0, 4000) + '\n…' : it.result;
    det.addEventListener('toggle', () => { pre.textContent = det.open ? full : ''; });
    det.append(sum, pre);
    d.append(det);
  }
  return d;
}

export function toolSummary(args: unknown): string {
  if (!args || typeof args !== 'object') return String(args ?? '');
  const a = args as Record<string, unknown>;
  // definition / references / hover name a symbol on a line of a file: say which and where.
  if (typeof a.symbol === 'string' && typeof a.path === 'string') {
    return `${a.symbol}  ${a.path.split('/').pop()}${typeof a.line === 'number' ? `:${a.line}` : ''}`.slice(0, 120);
  }
  return String(a.command ?? a.path ?? a.pattern ?? a.glob ?? a.query ?? a.description ?? '').slice(0, 120);
}

/** What the agent was told beyond the tool's own answer, worth seeing without opening the result:
 *  new problems the language server reported after an edit (the errors in the tooltip), or that no
 *  language server answered. Read from the result's meta (protocol.md §9), never from its words:
 *  those are for the model and may change. */
export function resultNote(meta: ToolResultMeta | undefined): { kind: 'warn' | 'quiet'; text: string; title?: string } | undefined {
  const count = meta?.newErrors;
  if (typeof count === 'number' && count > 0) {
    const listed = (meta?.newErrorList ?? []).map((p) => `${p.path}:${p.line}:${p.col}: ${p.message}${p.source ? ` [${p.source}]` : ''}`);
    if (listed.length < count) listed.push(`… and ${count - listed.length} more`);
    return { kind: 'warn', text: `⚠ ${count} new error${count === 1 ? '' : 's'}`, title: listed.join('\n') };
  }
  if (meta?.noLanguageServer === true) return { kind: 'quiet', text: 'no language server' };
  return undefined;
}

export function diffBlock(diff: string): HTMLElement {
  const pre = el('pre', 'diff');
  for (const line of diff.split('\n')) {
    const cls = line.startsWith('+') && !line.startsWith('+++') ? 'add' : line.startsWith('-') && !line.startsWith('---') ? 'del' : line.startsWith('@@') ? 'hunk' : '';
    pre.append(el('span', cls, line + '\n'));
  }
  return pre;
}

function retryLine(r: RetryState): HTMLElement {
  const d = el('div', `retry-line ${r.state}`);
  d.hidden = r.state === 'failed'; // the turn's error block says how many times it was retried
  const why = r.status ? `${friendlyCode(r.code)} ${r.status}` : friendlyCode(r.code);
  d.textContent = r.state === 'waiting'
    ? `↻ Retrying ${r.retry}/5 in ${seconds(r.delayMs)}… (${why})`
    : `↻ Recovered after ${r.retry} ${r.retry === 1 ? 'retry' : 'retries'} (${why})`;
  d.title = r.message;
  return d;
}

function seconds(ms: number): string {
  return ms < 1000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms / 1000)} s`;
}

/** What a provider error code means, for a person. */
export function friendlyCode(code: string): string {
  const known: Record<string, string> = {
    AUTH: 'the API key was refused', QUOTA: 'the provider quota is used up', RATE_LIMIT: 'rate limited',
    SERVER: 'server error', TIMEOUT: 'timed out', TRANSPORT: 'could not reach the provider', STREAM_CLOSED: 'the stream broke off',
    MALFORMED_RESPONSE: 'an unreadable reply', EMPTY_RESPONSE: 'an empty reply', CONTENT_FILTER: 'blocked by the content filter',
    INVALID_REQUEST: 'the provider refused the request', CONTEXT_WINDOW_EXCEEDED: "the conversation no longer fits the model's context window",
    INSUFFICIENT_SYSTEM_RESOURCE: 'the provider is overloaded', CONFIG: 'not configured', LEASE_LOST: 'another window took this session over',
  };
  return known[code] ?? (/^HTTP_\d+$/.test(code) ? `HTTP ${code.slice(5)}` : code.toLowerCase().replace(/_/g, ' '));
}

function noticeTitle(code: string | undefined): string {
  if (code === 'LEASE_LOST') return 'Another window took this session over';
  return code ? `Error: ${friendlyCode(code)}` : 'Error';
}

function turnEndNode(it: TurnEndItem): HTMLElement {
  const r = it.reason;
  if (r.kind === 'error') {
    const code = r.error?.code ?? 'UNKNOWN';
    const title = `The turn failed: ${friendlyCode(code)}${it.retries ? ` (after ${it.retries} ${it.retries === 1 ? 'retry' : 'retries'})` : ''}`;
    return errorBlock(title, r.error?.message ?? '', code, it.turn, true, it.usage ? usageText(it) : '');
  }
  const d = el('div', `footer ${r.kind}`);
  // A budget stop is a sentence of its own (what stopped it, what to do), the usage under it.
  if (r.kind === 'budget') d.append(el('div', 'budget-text', budgetText(r.budget)));
  const parts: string[] = [];
  if (r.kind !== 'budget') parts.push(r.kind === 'completed' ? '✓ completed'
    : r.kind === 'aborted' ? (r.cause === 'shutdown' ? '■ stopped (the daemon shut down)' : r.cause === 'handover' ? '■ stopped (handed over to another window)' : r.cause === 'user' || !r.cause ? '■ stopped' : `■ stopped (${r.cause})`)
      : r.kind === 'max-tokens' ? '• stopped at the token limit'
        : r.kind === 'interrupted' ? '• interrupted (the daemon stopped)'
          : `• ${r.kind}`);
  if (it.usage) parts.push(usageText(it));
  d.append(el('span', 'footer-text', parts.join(' · ')));
  const row = el('span', 'turn-actions fork-actions');
  row.append(turnAct('fork', 'Fork from here', it.turn, 'A new session with the conversation up to here (this one stays as it is)'));
  d.append(row);
  return d;
}

/** A `budget` turn end in words (agent.budget, protocol.md §7): the cap, what the turn used of it,
 *  and what to do. The turn stopped before a model request that would have passed the cap; what is
 *  queued stays parked. */
export function budgetText(b: TurnEndReason['budget']): string {
  const go = 'raise agent.budget (config.json) to go on; what is queued waits.';
  if (!b) return `■ Stopped: the turn's budget is spent — ${go}`;
  const money = (n: number) => `$${n < 0.01 ? n.toPrecision(2) : n.toFixed(2)}`;
  const count = (n: number) => Math.round(n).toLocaleString('en-US');
  let cap: string;
  let used: string;
  if (b.limit === 'costUsd') {
    cap = money(b.cap);
    used = typeof b.used === 'number' ? `${money(b.used)} used` : "the model has no prices, so its cost cannot be counted";
  } else if (b.limit === 'tokens') {
    cap = `${count(b.cap)} tokens`;
    used = typeof b.used === 'number' ? `${count(b.used)} used` : '';
  } else {
    cap = `${count(b.cap)} model request${b.cap === 1 ? '' : 's'}`;
    used = typeof b.used === 'number' ? `${count(b.used)} made` : '';
  }
  return `■ Stopped: the turn's budget of ${cap} is spent${used ? ` (${used})` : ''} — ${go}`;
}

/** A small button acting on turn `turn` (shown on hover or focus; the body's classes say whether the
 *  daemon offers it and whether it may be used now). */
function turnAct(act: string, label: string, turn: number, title: string): HTMLButtonElement {
  const b = el('button', 'ghost small turn-act', label);
  b.type = 'button';
  b.dataset.act = act;
  b.dataset.turn = String(turn);
  b.title = title;
  return b;
}

function usageText(it: TurnEndItem): string {
  const u = it.usage!;
  const cost = u.costUsd;
  const money = typeof cost === 'number' ? ` · ${cost === 0 ? '$0' : cost < 0.01 ? `$${cost.toPrecision(2)}` : `$${cost.toFixed(2)}`}` : '';
  return `${u.inputTokens} in · ${u.outputTokens} out tokens${money}`;
}

/** One block per failure: what failed, the daemon's words, and what the person can do about it
 *  (Retry sends the failed turn's prompt again). */
function errorBlock(title: string, message: string, code: string | undefined, turn: number, retry: boolean, usage = ''): HTMLElement {
  const d = el('div', 'error-block');
  d.dataset.turn = String(turn);
  d.append(el('div', 'error-title', `✗ ${title}`));
  if (message) d.append(el('div', 'error-message', message));
  {
    const row = el('div', 'row error-actions');
    const act = (name: string, text: string) => { const b = el('button', name === 'retry' ? 'primary' : 'ghost', text); b.type = 'button'; b.dataset.act = name; return b; };
    if (retry) row.append(act('retry', 'Retry'));
    if (code === 'AUTH' || code === 'CONFIG') row.append(act('setApiKey', 'Set API key'));
    row.append(act('showLog', 'Show log'));
    d.append(row);
  }
  if (usage) d.append(el('div', 'error-usage', usage));
  return d;
}
