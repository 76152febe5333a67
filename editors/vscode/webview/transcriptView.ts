// The transcript, windowed: at most MAX_ITEMS items and about MAX_NODES DOM nodes are in the DOM, as
// one section per turn, however long the session (items differ a lot in size: a reply with code and
// tables is a hundred nodes, a tool card a few). The live model (kept short by the host's `trim`) holds the newest turns; older
// turns come from `dsh/session/transcript` pages (asked of the host as the person scrolls up), kept in
// a bounded cache and read again when they were dropped. Sections far out of view are removed.
//
// Layout is read only at the start of a frame, before anything is written (the layout of the frame
// before is still valid then: no forced layout), except once when the view jumps to the newest item.
// Following the stream needs no reads at all: while pinned to the bottom every item opts out of
// scroll anchoring and a sentinel after them is the anchor, so the browser keeps the bottom in view
// as text arrives (CSS `overflow-anchor`). Prepending older sections keeps the view still by the
// browser's normal scroll anchoring.
import type { Item, SessionModel, UserItem } from '../src/protocol/reducer';
import { transcriptItems, typedText } from '../src/protocol/reducer';
import type { TranscriptPage } from '../src/protocol/types';
import { button, el } from './dom';
import { itemView, setFrameRequester, type ItemView } from './items';

export const PAGE_TURNS = 20;
const MAX_ITEMS = 200; // items in the DOM at most (a single turn longer than this is kept whole)
const MAX_NODES = 3_500; // the sections' DOM nodes at most, when scrolled (the rest of the page is ~200)
const STEP_ITEMS = 50; // items added at a time when the person scrolls towards an end
const CACHE_TURNS = 200; // older turns kept in memory beyond those shown
const ASK_AGAIN_MS = 3000;

/** A turn's items in the DOM; `nodes` its DOM nodes, counted again when `stale` (an item changed). */
interface Section { turn: number; el: HTMLElement; views: Map<string, ItemView>; order: string[]; count: number; nodes: number; stale: boolean }

/** The nodes (elements, text) in `root`'s tree: a walk of the tree, no layout. */
function nodesIn(root: Node): number {
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_ALL);
  let n = 1;
  while (walker.nextNode()) n++;
  return n;
}

export interface TranscriptHost {
  /** Asks for the turns before `beforeTurn` (at most `limit`); the page comes to `onHistory`. */
  requestHistory(beforeTurn: number, limit: number): void;
  /** Called when a reply finished live (not one loaded from history): for the screen reader. */
  announce(text: string): void;
}

/** Shows or hides `el`, touching the DOM only when that changes. */
function show(el: HTMLElement, visible: boolean): void {
  if (el.hidden === visible) el.hidden = !visible;
}

export class TranscriptView {
  readonly scroller = el('div', 'transcript pinned');
  private readonly list = el('div', 'items');
  private readonly loader = el('div', 'loader');
  private readonly empty = el('div', 'empty', 'Ask dsh anything. Enter sends; while a turn runs, Enter queues it and Ctrl+Enter steers the running turn. Type @ to attach files, the selection or problems.');
  private readonly sentinel = el('div', 'anchor');
  readonly pill: HTMLButtonElement;
  private model: SessionModel | undefined;
  private session: string | null | undefined;
  private sections: Section[] = [];
  private cache = new Map<number, Item[]>();
  private asked = new Map<number, number>();
  private firstTurn = 1; // the session's first turn, once a page said there is none older
  private live = true; // the window reaches the newest turn
  private pinned = true; // and the view is at its bottom
  private unseen = false; // output arrived while the person read something else
  private jump = true; // land at the newest item after the next render
  private scrolled = false; // a scroll happened since the last frame
  private metrics: { top: number; height: number; client: number } | undefined;
  private edges: Array<{ top: number; bottom: number }> = [];
  private announced = new Set<string>();
  private baseRev = Infinity; // items changed after this rev are live (announced when a turn ends)
  private lastTail: Item | undefined; // the model's newest item at the last frame

  constructor(private readonly host: TranscriptHost, private readonly schedule: () => void) {
    setFrameRequester(schedule);
    this.scroller.setAttribute('role', 'log');
    // Announced one finished reply at a time (the announcer), not every streamed word.
    this.scroller.setAttribute('aria-live', 'off');
    this.scroller.setAttribute('aria-label', 'Conversation');
    this.scroller.tabIndex = 0;
    const older = button('Load older messages', () => { this.metrics = { top: 0, height: 1, client: 1 }; this.schedule(); }, 'older');
    this.loader.append(older);
    this.loader.hidden = true;
    this.pill = button('↓ New output', () => this.jumpToLive(), 'new-output', 'Scroll to the end of the conversation');
    this.pill.hidden = true;
    this.scroller.append(this.loader, this.empty, this.list, this.sentinel);
    this.scroller.addEventListener('scroll', () => { this.scrolled = true; this.schedule(); }, { passive: true });
    // The view got shorter (the controls or a card appeared below it): scroll anchoring keeps the top
    // where it was, so a pinned view is put back at its bottom. Resize observers run after layout,
    // so these reads force nothing.
    new ResizeObserver(() => {
      if (this.pinned && this.live) this.scroller.scrollTop = this.scroller.scrollHeight;
    }).observe(this.scroller);
  }

  /** Shows the newest item and follows the stream again. */
  jumpToLive(): void {
    this.jump = true;
    this.schedule();
  }

  /** A new snapshot of the model (the view was reloaded, or the daemon restarted): built again. */
  reload(): void {
    this.baseRev = Infinity;
    this.jumpToLive();
  }

  /** The text of the person's prompt that started `turn` (for Retry). */
  promptOf(turn: number): string | undefined {
    const items = this.itemsOf(turn) ?? [];
    const first = items.find((i): i is UserItem => i.kind === 'user' && (i.message.source?.kind ?? 'user') === 'user');
    return first ? typedText(first.message) : undefined;
  }

  /** Items of turns the model drops (a host `trim`) stay readable from the cache. */
  absorbTrim(model: SessionModel, beforeTurn: number): void {
    for (const it of model.items) {
      if (it.turn >= beforeTurn) break;
      const list = this.cache.get(it.turn) ?? [];
      if (!this.cache.has(it.turn)) this.cache.set(it.turn, list);
      list.push(it);
    }
  }

  onHistory(sessionId: string, page: TranscriptPage, beforeTurn: number, limit: number): void {
    if (sessionId !== this.session) return;
    const first = this.firstModelTurn();
    for (const t of page.turns) if (t.turn < first) this.cache.set(t.turn, transcriptItems([t], 0));
    // Turns of the asked range the page does not hold have no items (kept so they are not asked again).
    for (let t = Math.max(1, beforeTurn - limit); t < beforeTurn && t < first; t++) if (!this.cache.has(t)) this.cache.set(t, []);
    const oldest = page.turns.reduce((m, t) => Math.min(m, t.turn), beforeTurn);
    if (!page.hasMore) this.firstTurn = Math.min(oldest, beforeTurn);
    this.asked.delete(beforeTurn);
    this.schedule();
  }

  // ---- a frame ----------------------------------------------------------------------------------

  /** Reads layout (valid from the frame before): call first in a frame, before anything is written. */
  read(): void {
    if (this.jump || !this.scrolled && this.metrics) return;
    this.scrolled = false;
    const s = this.scroller;
    this.metrics = { top: s.scrollTop, height: s.scrollHeight, client: s.clientHeight };
    const atBottom = this.metrics.height - this.metrics.top - this.metrics.client < 8;
    this.pinned = atBottom && this.live;
    if (this.pinned) this.unseen = false;
    // Where each section is, to drop only those far out of view (only when that may be needed).
    this.edges = this.count() > MAX_ITEMS - STEP_ITEMS || this.nodes() > MAX_NODES * 0.7 ? this.sections.map((x) => ({ top: x.el.offsetTop, bottom: x.el.offsetTop + x.el.offsetHeight })) : [];
  }

  /** Brings the DOM up to `model` (writes only, except a jump to the newest item). */
  write(model: SessionModel): void {
    if (model.sessionId !== this.session) this.reset(model.sessionId);
    if (!model.items.length && this.sections.length && this.session === model.sessionId) this.jump = true; // emptied (reset)
    this.model = model;
    if (this.baseRev === Infinity) this.baseRev = model.rev;
    const newest = this.newestTurn();
    const tail = model.items[model.items.length - 1];
    const tailChanged = tail !== this.lastTail;
    this.lastTail = tail;
    show(this.empty, !(model.items.length > 0 || this.cache.size > 0 || model.readOnly));
    if (this.jump) {
      this.reset(model.sessionId, false);
      this.fillBackFrom(newest);
    } else if (!this.sections.length) {
      this.fillBackFrom(newest);
    } else {
      const changed = this.syncModelSections();
      if (this.live) for (let t = this.hi() + 1; t <= newest; t++) this.appendTurn(t);
      if (this.live && this.pinned) this.dropAboveWhilePinned();
      if ((changed || tailChanged) && !(this.pinned && this.live)) this.unseen = true;
      this.scrollEnds();
    }
    this.live = !this.sections.length || this.hi() >= newest;
    const pinned = this.pinned && this.live;
    if (this.scroller.classList.contains('pinned') !== pinned) this.scroller.classList.toggle('pinned', pinned);
    show(this.loader, this.hasOlder());
    show(this.pill, !pinned && this.sections.length > 0);
    const pill = this.unseen ? '↓ New output' : '↓ Newest';
    if (this.pill.textContent !== pill) this.pill.textContent = pill;
    this.evict();
    if (this.jump) {
      this.jump = false;
      this.scroller.scrollTop = this.scroller.scrollHeight; // once, on open or on request
      this.pinned = true;
      this.unseen = false;
      this.scroller.classList.add('pinned');
      this.pill.hidden = true;
      this.metrics = undefined;
      this.scrolled = true;
    }
  }

  // ---- window ------------------------------------------------------------------------------------

  private reset(session: string | null, newSession = true): void {
    this.list.replaceChildren();
    this.sections = [];
    if (newSession) {
      this.session = session;
      this.cache.clear();
      this.asked.clear();
      this.firstTurn = 1;
      this.announced.clear();
      this.baseRev = Infinity;
      this.lastTail = undefined;
      this.jump = true;
    }
    this.live = true;
    this.edges = [];
  }

  private lo(): number { return this.sections[0].turn; }
  /** Turns older than the window exist (in the model, the cache or the daemon). */
  private hasOlder(): boolean {
    if (!this.sections.length) return false;
    const lo = this.lo();
    if (lo <= this.firstTurn) return false;
    return lo > this.firstModelTurn() || this.model!.olderBefore !== null;
  }
  private hi(): number { return this.sections[this.sections.length - 1].turn; }
  private count(): number { return this.sections.reduce((n, s) => n + s.count, 0); }
  /** The sections' DOM nodes; a section whose items changed is counted again unless `stale` is fine
   *  (following the stream: its reply's nodes are counted once it is scrolled or finished). */
  private nodes(staleOk = false): number {
    let n = 0;
    for (const s of this.sections) {
      if (s.stale && !staleOk) { s.nodes = nodesIn(s.el); s.stale = false; }
      n += s.nodes;
    }
    return n;
  }
  /** More in the DOM than the window keeps. */
  private over(staleOk = false): boolean { return this.count() > MAX_ITEMS || this.nodes(staleOk) > MAX_NODES; }

  private firstModelTurn(): number {
    const m = this.model!;
    return m.items.length ? m.items[0].turn : m.olderBefore ?? m.currentTurn;
  }

  private newestTurn(): number {
    const m = this.model!;
    return Math.max(m.currentTurn, m.items.length ? m.items[m.items.length - 1].turn : 0);
  }

  /** The model's items of `turn` (they are in turn order). */
  private modelItems(turn: number): Item[] {
    const items = this.model!.items;
    let hi = items.length;
    while (hi > 0 && items[hi - 1].turn > turn) hi--;
    let lo = hi;
    while (lo > 0 && items[lo - 1].turn === turn) lo--;
    return items.slice(lo, hi);
  }

  /** `turn`'s items, or undefined while its page is on its way (asked for here). */
  private itemsOf(turn: number): Item[] | undefined {
    if (turn >= this.firstModelTurn()) return this.modelItems(turn);
    const cached = this.cache.get(turn);
    if (cached) return cached;
    this.ask(turn);
    return undefined;
  }

  private ask(turn: number): void {
    const first = this.firstModelTurn();
    const start = Math.floor((turn - 1) / PAGE_TURNS) * PAGE_TURNS + 1;
    const before = Math.min(start + PAGE_TURNS, first);
    const at = this.asked.get(before);
    if (at !== undefined && Date.now() - at < ASK_AGAIN_MS) return;
    this.asked.set(before, Date.now());
    this.host.requestHistory(before, before - start);
  }

  /** The window at the newest turns: turns back from `newest` until there are enough items. */
  private fillBackFrom(newest: number): void {
    if (newest < 0 || !this.model) return;
    const hasAny = this.model.items.length > 0;
    if (!hasAny) return;
    let n = 0;
    for (let t = newest; t >= Math.max(this.firstTurn, 0) && n < STEP_ITEMS * 2; t--) {
      const items = this.itemsOf(t);
      if (!items) break;
      this.prependTurn(t, items);
      n += items.length;
      if (t <= this.firstModelTurn() && this.model.olderBefore === null) break;
    }
  }

  private makeSection(turn: number, items: Item[]): Section {
    const s: Section = { turn, el: el('section', 'turn'), views: new Map(), order: [], count: items.length, nodes: 0, stale: true };
    s.el.dataset.turn = String(turn);
    for (const it of items) {
      const v = itemView(it);
      s.views.set(it.id, v);
      s.order.push(it.id);
      s.el.append(v.node);
    }
    s.nodes = nodesIn(s.el);
    s.stale = false;
    return s;
  }

  private prependTurn(turn: number, items: Item[]): void {
    const s = this.makeSection(turn, items);
    this.list.prepend(s.el);
    this.sections.unshift(s);
  }

  private appendTurn(turn: number): boolean {
    const items = this.itemsOf(turn);
    if (!items) return false;
    const s = this.makeSection(turn, items);
    this.list.append(s.el);
    this.sections.push(s);
    this.noteFinished(items);
    return true;
  }

  /** Sections of model turns follow the model: changed items are updated, new ones added. */
  private syncModelSections(): boolean {
    const first = this.firstModelTurn();
    let changed = false;
    for (const s of this.sections) {
      if (s.turn < first) continue;
      const items = this.modelItems(s.turn);
      for (let i = 0; i < items.length; i++) {
        const it = items[i];
        const v = s.views.get(it.id);
        if (v) {
          if (v.rev !== it.rev) { v.update(it); changed = true; s.stale = true; this.noteFinished([it]); }
          continue;
        }
        const nv = itemView(it);
        s.views.set(it.id, nv);
        const next = i + 1 < items.length ? s.views.get(items[i + 1].id) : undefined;
        s.el.insertBefore(nv.node, next?.node ?? null);
        s.order.splice(i, 0, it.id);
        s.count++;
        s.stale = true;
        changed = true;
        this.noteFinished([it]);
      }
    }
    return changed;
  }

  /** Grows the window towards the end the person scrolled to and drops sections far from view. */
  private scrollEnds(): void {
    const m = this.metrics;
    if (!m) return;
    const nearTop = m.top < m.client;
    const nearBottom = m.height - m.top - m.client < m.client;
    let grew: 'up' | 'down' | undefined;
    if (nearTop && this.hasOlder()) {
      let n = 0;
      for (let t = this.lo() - 1; t >= this.firstTurn && n < STEP_ITEMS; t--) {
        const items = this.itemsOf(t);
        if (!items) break;
        this.prependTurn(t, items);
        n += items.length;
        grew = 'up';
      }
    } else if (nearBottom && !this.live) {
      let n = 0;
      for (let t = this.hi() + 1; t <= this.newestTurn() && n < STEP_ITEMS; t++) {
        if (!this.appendTurn(t)) break;
        n += this.sections[this.sections.length - 1].count;
        grew = 'down';
      }
    }
    if (grew) {
      this.metrics = undefined; // measured again after the browser laid this out, and maybe grown again
      this.schedule();
    }
    this.shrink(m, grew);
  }

  private shrink(m: { top: number; client: number }, grew: 'up' | 'down' | undefined): void {
    if (!this.edges.length || !this.over()) return;
    // Positions were read before this frame's writes; sections prepended now shift those below, so
    // from the bottom only sections measured before are dropped, by their old position.
    const added = grew === 'up' ? this.sections.length - this.edges.length : 0;
    const edge = (i: number) => this.edges[i - added];
    // Drop far below (the person reads older turns) …
    while (this.sections.length > 1 && this.over()) {
      const i = this.sections.length - 1;
      const e = edge(i);
      if (!e || e.top <= m.top + 2 * m.client) break;
      this.sections.pop()!.el.remove();
      this.edges.pop();
      this.live = false;
    }
    // … and far above (newer turns, or following the stream).
    let dropped = 0;
    while (this.sections.length > 1 && this.over()) {
      const e = edge(added + dropped);
      if (grew === 'up' || !e || e.bottom >= m.top - m.client) break;
      this.sections.shift()!.el.remove();
      dropped++;
    }
    if (dropped) this.edges.splice(0, dropped);
  }

  /** Following the stream at the bottom: the oldest sections go once the newest hold enough items to
   *  fill any view (no layout is read for that: the bottom stays in view by scroll anchoring). */
  private dropAboveWhilePinned(): void {
    let total = this.count();
    let nodes = this.nodes(true);
    while ((total > MAX_ITEMS || nodes > MAX_NODES) && this.sections.length > 1) {
      const rest = total - this.sections[0].count;
      if (rest < STEP_ITEMS * 2) break;
      total = rest;
      nodes -= this.sections[0].nodes;
      this.sections.shift()!.el.remove();
      this.edges = [];
    }
  }

  private evict(): void {
    if (this.cache.size <= CACHE_TURNS) return;
    const lo = this.sections.length ? this.lo() : 0;
    const hi = this.sections.length ? this.hi() : 0;
    const keep = (t: number) => t >= lo - CACHE_TURNS / 2 && t <= hi + CACHE_TURNS / 2;
    for (const t of [...this.cache.keys()]) if (!keep(t)) this.cache.delete(t);
  }

  /** A reply that finished while shown live is announced once (turn ends say how it went). */
  private noteFinished(items: Item[]): void {
    for (const it of items) {
      if (it.kind !== 'turnEnd' || it.rev <= this.baseRev || this.announced.has(it.id)) continue;
      this.announced.add(it.id);
      const replies = this.modelItems(it.turn).filter((x) => x.kind === 'assistant');
      const last = replies[replies.length - 1];
      const text = last && last.kind === 'assistant' ? (last.text + last.liveText).slice(0, 300) : '';
      const how = it.reason.kind === 'completed' ? 'dsh replied' : it.reason.kind === 'error' ? 'The turn failed' : 'The turn stopped';
      this.host.announce(text ? `${how}: ${text}` : how);
    }
  }
}
