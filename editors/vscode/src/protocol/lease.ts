// Who drives the session, as this window tells it (protocol.md §3 "dsh/session/takeOver" and
// "dsh/session/handOver"): the take-over this window asked for and waits on, the take-over another
// window asks of this one while its turn runs, and a transcript line each time the driver changes.
// Pure functions over the reducer's model; no vscode import.
import type { NoticeItem, SessionModel } from './reducer';

export interface LeaseState {
  /** This window asked to take the session over (`waiting`: the other window's turn runs first;
   *  `forced`: its turn is being ended). Cleared once the session is driven here. */
  asked?: 'waiting' | 'forced';
  /** Another window asked this one to let go while its turn runs (`session/handover`). */
  handover?: { force: boolean };
  /** Transcript lines told by this window so far (their ids). */
  lines: number;
  /** A live `session/lease` told the change: the durable lease notice that follows it is not a second line. */
  told?: boolean;
  /** The line of a durable lease notice that came before the live `session/lease` of the same change
   *  (the two come by different paths, in either order): that event words it again rather than adding one. */
  noticeId?: string;
}

const NONE: LeaseState = { lines: 0 };

function leaseOf(model: SessionModel): LeaseState {
  return model.lease ?? NONE;
}

/** The person pressed Take over (or Take over now: `force`). */
export function takeOverAsked(model: SessionModel, force: boolean): SessionModel {
  if (!model.readOnly) return model;
  return { ...model, lease: { ...leaseOf(model), asked: force ? 'forced' : 'waiting' }, rev: model.rev + 1 };
}

/** A live `session/handover`: another window waits for this one's turn (or forces it to end). */
export function handoverRequested(model: SessionModel, data: { force?: boolean }): SessionModel {
  if (model.readOnly) return model;
  return { ...model, lease: { ...leaseOf(model), handover: { force: !!data.force } } };
}

/** A turn ended: a handover asked for during it is done or moot (the lease event says which). */
export function turnEnded(model: SessionModel): SessionModel {
  return model.lease?.handover ? { ...model, lease: { ...model.lease, handover: undefined } } : model;
}

/** A live `session/lease`: the session is driven here now, or by another window; a line says so when
 *  the driver changed while this window showed the session. */
export function leaseChanged(model: SessionModel, data: { readOnly?: boolean; holder?: unknown }): [SessionModel, NoticeItem | undefined] {
  const readOnly = !!data.readOnly;
  const lease = leaseOf(model);
  let text: string | undefined;
  if (!readOnly && model.readOnly) {
    text = lease.asked ? 'This window took the session over: it drives it from here on.'
      : 'The other window let go: this window drives the session from here on.';
  } else if (readOnly && !model.readOnly) {
    text = 'Another window took this session over: this window follows it from here on.';
  }
  const next: LeaseState = { lines: lease.lines, told: lease.told };
  if (!text) return [{ ...model, readOnly, lease: next }, undefined];
  const before = lease.noticeId !== undefined ? model.items[model.index[lease.noticeId]] : undefined;
  if (before?.kind === 'notice' && before.id === lease.noticeId) return [{ ...model, readOnly, lease: next }, { ...before, text }];
  next.lines += 1;
  next.told = true;
  const line: NoticeItem = { id: `lease:${next.lines}`, kind: 'notice', rev: 0, turn: model.currentTurn, level: 'info', topic: 'lease', text };
  return [{ ...model, readOnly, lease: next }, line];
}

/** The words of a durable lease notice (`session/notice {kind: "lease"}`): which window it names is
 *  not this one's to tell (its process id), so they say what happened without it. */
export const LEASE_NOTICE = 'The session was taken over here by another window.';

/** A durable lease notice as events bring it: no line when a live `session/lease` told the change
 *  already; else its line (`item`), which a live `session/lease` of the same change words again. */
export function leaseNoticed(model: SessionModel, item: NoticeItem): [SessionModel, NoticeItem | undefined] {
  const lease = leaseOf(model);
  if (lease.told) return [{ ...model, lease: { ...lease, told: false } }, undefined];
  return [{ ...model, lease: { ...lease, noticeId: item.id } }, item];
}

/** What was live is over (an attach reply, a new turn): a later lease event is a change of its own. */
export function leaseSettled(model: SessionModel): SessionModel {
  return model.lease && (model.lease.told || model.lease.noticeId) ? { ...model, lease: { lines: model.lease.lines, asked: model.lease.asked, handover: model.lease.handover } } : model;
}
