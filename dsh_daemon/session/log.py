"""The in-memory session log in front of the store: seq assignment, write-behind, chunk coalescing.

Invariants kept here:
- `append` validates (lossless JSON, no reentrancy) before anything changes; a failed commit leaves
  the log exactly as it was and raises.
- seqs are assigned in append order, contiguous from the stored tail.
- Streaming deltas are coalesced into `assistant/chunk` events: a chunk event is materialised before
  any other append (so the log stays in time order), when the write-behind window closes, and at every
  commit. The write-behind window is at most `write_delay` seconds (D7: <= 100 ms).
- Observers of durable events run after the append and cannot append themselves (a reentrant append
  raises and changes nothing).
- A durable event is published only below the seq ceiling known to be on disk; one at or above it
  is committed first, and every commit raises the ceiling `RESERVE_SEQS` past the log's end in the
  same transaction. So a seq a client saw is never reused after a crash (`gaps.py`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dsh_daemon.model.events import ASSISTANT_CHUNK, Event, EventBus
from dsh_daemon.model.jsonvalue import FrozenDict, freeze_flat_objects, freeze_json
from dsh_daemon.session.gaps import RESERVE_SEQS
from dsh_daemon.session.logevents import LogEvents
from dsh_daemon.session.store import LeaseLostError, SessionStore, now_ms

logger = logging.getLogger(__name__)

WRITE_DELAY_S = 0.1
RETRY_WRITE_S = 1.0  # after a failed write (disk full, database locked by another process...)


class ReentrantAppendError(RuntimeError):
    """An append from inside a durable-event observer."""


@dataclass
class ChunkStream:
    """The chunk events of one model attempt; `seqs` are what its assistant message cites."""

    turn: int
    step: int
    buffer: list[Mapping[str, Any]] = field(default_factory=list)
    seqs: list[int] = field(default_factory=list)


class SessionLog:
    def __init__(
        self,
        store: SessionStore,
        session_id: str,
        events: list[Event] | LogEvents,
        bus: EventBus,
        *,
        write_delay: float = WRITE_DELAY_S,
        pending_count: Callable[[], int] = lambda: 0,
        on_lease_lost: Callable[[LeaseLostError], None] | None = None,
        lease_holder: str | None = None,
    ) -> None:
        """`pending_count` feeds the sessions row; `on_lease_lost` hears that another process took the
        session over (a write found the lease gone); `lease_holder`, when set, is checked at every
        write. Building a log reserves seqs on disk (`gaps.py`): call it to drive the session."""
        self.store = store
        self.session_id = session_id
        # Seq i is `events[i]`; a resume from a snapshot leaves the older events on disk until read.
        self.events: LogEvents = events if isinstance(events, LogEvents) else LogEvents(events)
        self.bus = bus
        self.write_delay = write_delay
        self.pending_count = pending_count
        self.lease_holder = lease_holder
        self.lease_lost: LeaseLostError | None = None
        self.on_lease_lost = on_lease_lost
        self._unwritten: list[Event] = []
        self._chunks: ChunkStream | None = None
        self._publishing = False
        self._timer: asyncio.TimerHandle | None = None
        self.write_failures = 0
        # Seqs below this are reserved on disk and may be published before they are stored (taking
        # the lease settled any older reservation); reserved here first, then raised by each commit.
        self._ceiling = store.reserve_seqs(session_id, len(events) + RESERVE_SEQS)

    @property
    def publishing(self) -> bool:
        """True while durable-event observers run (they cannot append)."""
        return self._publishing

    @property
    def next_seq(self) -> int:
        return len(self.events)

    # ---- appends -------------------------------------------------------------------------------------

    def append(
        self,
        type: str,
        data: Mapping[str, Any],
        *,
        commit: bool = False,
        ignorable: bool = False,
        time: int | None = None,
        pending_after: int | None = None,
        undo_on_failure: bool = False,
    ) -> Event:
        """Append one durable event; with `commit`, it (and everything before it) is on disk on return.

        A failed commit raises. With `undo_on_failure` (an acknowledged inbox change: its caller reports
        the failure, so nothing may remain) the event is taken back. Otherwise it stays in the log,
        unwritten, and the write is retried: execution events (a `turn/end`, say) must never vanish
        from memory, or the next turn would open inside a turn the log still thinks is open.
        `pending_after`: the inbox size this event leaves (an inbox splice commits before the in-memory
        lists change, so the sessions row would otherwise lag one change behind)."""
        if self._publishing:
            raise ReentrantAppendError(f"cannot append {type} from inside a durable-event observer")
        if self.lease_lost is not None:
            raise self.lease_lost  # another process drives this session now: nothing more is ours to log
        frozen = freeze_json(data)
        self._materialize_chunks()
        event = self._add(type, frozen, ignorable, time)
        if commit:
            try:
                self.commit(pending_after)
            except BaseException:
                if undo_on_failure:
                    self.events.pop()
                    self._unwritten.pop()
                elif self.lease_lost is None:
                    self._schedule_write(RETRY_WRITE_S)
                raise
        else:
            self._schedule_write()
        self._publish(event)
        return event

    def _add(self, type: str, data: FrozenDict, ignorable: bool, time: int | None = None) -> Event:
        event = Event(type, data, len(self.events), now_ms() if time is None else time, ignorable)
        self.events.append(event)
        self._unwritten.append(event)
        return event

    def _publish(self, event: Event) -> None:
        if event.seq is not None and event.seq >= self._ceiling and self.lease_lost is None:
            # Past the reservation: store it (and reserve more) before any client can see its seq.
            try:
                self._write()
            except LeaseLostError:
                raise
            except Exception:
                self._schedule_write(RETRY_WRITE_S)
                raise
        self._publishing = True
        try:
            self.bus.publish(event)
        finally:
            self._publishing = False

    # ---- streaming chunks ----------------------------------------------------------------------------

    def open_chunks(self, turn: int, step: int) -> ChunkStream:
        self._materialize_chunks()
        self._chunks = ChunkStream(turn, step)
        return self._chunks

    def add_chunk(self, stream: ChunkStream, delta: Mapping[str, Any]) -> None:
        if stream is not self._chunks:
            raise RuntimeError("chunk stream is closed")
        stream.buffer.append(delta)
        self._schedule_write()

    def close_chunks(self, stream: ChunkStream) -> None:
        if stream is self._chunks:
            self._materialize_chunks()
            self._chunks = None

    def _materialize_chunks(self) -> None:
        stream = self._chunks
        if stream is None or not stream.buffer:
            return
        deltas, stream.buffer = stream.buffer, []
        frozen = freeze_flat_objects(deltas, path="$.deltas")
        event = self._add(
            ASSISTANT_CHUNK, FrozenDict({"turn": stream.turn, "step": stream.step, "deltas": frozen}), False
        )
        stream.seqs.append(event.seq)  # type: ignore[arg-type]
        self._publish(event)

    # ---- durability ----------------------------------------------------------------------------------

    def commit(self, pending: int | None = None) -> None:
        """Write everything appended so far, in one transaction (nothing once the lease is lost)."""
        if self.lease_lost is not None:
            return
        self._materialize_chunks()
        self._write(pending)

    def _write(self, pending: int | None = None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._unwritten:
            return
        count = self.pending_count() if pending is None else pending
        ceiling = len(self.events) + RESERVE_SEQS
        try:
            self.store.append_events(
                self.session_id, self._unwritten, pending=count, holder=self.lease_holder, reserve_to=ceiling
            )
        except LeaseLostError as exc:
            self._lose_lease(exc)
            raise
        self._unwritten = []
        self._ceiling = max(self._ceiling, ceiling)

    def _schedule_write(self, delay: float | None = None) -> None:
        if self._timer is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.commit()
            return
        self._timer = loop.call_later(self.write_delay if delay is None else delay, self._write_behind)

    def _lose_lease(self, exc: LeaseLostError) -> None:
        """Another process took the session over: stop writing (its log wins) and tell the owner once."""
        if self.lease_lost is not None:
            return
        self.lease_lost = exc
        logger.warning("session %s: %s; this process stops driving it", self.session_id, exc)
        if self.on_lease_lost is not None:
            self.on_lease_lost(exc)

    def _write_behind(self) -> None:
        self._timer = None
        if self.lease_lost is not None:
            return
        try:
            self.commit()
        except LeaseLostError:
            return
        except Exception:
            # Kept ahead of newer events, in order; retried until it succeeds.
            self.write_failures += 1
            logger.exception("session %s: write-behind batch failed; retrying", self.session_id)
            self._schedule_write(RETRY_WRITE_S)

    @property
    def on_disk(self) -> bool:
        """Every event appended so far is stored (and the lease still ours)."""
        return not self._unwritten and self._chunks_empty and self.lease_lost is None

    @property
    def _chunks_empty(self) -> bool:
        return self._chunks is None or not self._chunks.buffer

    def close(self) -> None:
        self.commit()
