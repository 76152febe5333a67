"""Live read-only attach: follow sessions another process drives, by tailing the shared store.

A connection that attached a session leased by another live process gets that session's durable
events as the other process writes them (polled every `POLL_S`), a live `session/lease` event when
the lease changes hands, and, once the holder has released the lease or died, the session itself:
this process takes the lease and the connection drives it from then on, with no gap and no duplicate
in the stream and no second attach (the host's `session` continues from the last seq delivered).

Live command output (`tool/output`) is not in the log: the driver shares it through the store's
`tool_output` rows (`session/liveoutput.py`), and each poll turns the rows written since the
connection began following into the same `tool/output` events the driver's own connections got live.

Invariants kept here:
- Rows are read after the events of the same poll, and a row is delivered only once the events up
  to its `after_seq` are: so a call's output comes after its `tool/call` and before its `tool/result`,
  in the order it was printed, and never twice. The driver's own connections never get a row (they
  are not followers), so nobody receives the output twice.
- Where rows are missing (the driver's per-call cap deleted them before this poll read them, or the
  connection began following mid-call), the text says how many characters are not shown.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dsh_daemon.model.payloads import LeaseChanged, ToolOutput
from dsh_daemon.model.wire import LeaseHolder
from dsh_daemon.session.lease import SessionBusyError
from dsh_daemon.session.store import SharedOutputRow, StoreError

if TYPE_CHECKING:
    from dsh_daemon.host.sessions import SessionHost

logger = logging.getLogger(__name__)

POLL_S = 0.2  # lag of a read-only view behind its driver (at most 250 ms)


@dataclass
class _OutputCursor:
    """Where a followed session's shared output stands for this connection."""

    last_id: int  # the newest row read
    held: list[SharedOutputRow] = field(default_factory=list)  # read, after events not yet delivered
    next_start: dict[tuple[int, str], int] = field(default_factory=dict)  # per (turn, call): shown up to


def not_shown(chars: int) -> str:
    """The words standing for output a follower missed."""
    return f"[… {chars:,} characters of output not shown here; the result keeps the beginning and end]\n"


class ReadOnlyFollower:
    def __init__(self, host: SessionHost) -> None:
        self._host = host
        self._holders: dict[str, tuple[int, str] | None] = {}  # last holder announced per session
        self._quiet: set[str] = set()  # taken over without a `session/lease` (see `follow`)
        self._output: dict[str, _OutputCursor] = {}
        self._task: asyncio.Task[None] | None = None

    def follow(
        self, session_id: str, holder: tuple[int, str] | None, *, announce_takeover: bool = True
    ) -> None:
        """Start following `session_id` (the host has put it in `read_only`). Without
        `announce_takeover`, taking it over sends no `session/lease` (the client never saw it read-only)."""
        self._holders[session_id] = holder
        if session_id not in self._output:
            # From the rows written from now on (the caller has read the events it replayed): a
            # finished call's output is not replayed; its result holds what the model saw.
            self._output[session_id] = _OutputCursor(self._host.manager.store.last_tool_output_id(session_id))
        if not announce_takeover:
            self._quiet.add(session_id)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    def forget(self, session_id: str) -> None:
        self._holders.pop(session_id, None)
        self._quiet.discard(session_id)
        self._output.pop(session_id, None)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def _run(self) -> None:
        while self._host.read_only:
            await asyncio.sleep(POLL_S)
            for session_id in list(self._host.read_only):
                try:
                    self.poll_once(session_id)
                except StoreError as exc:  # deleted or unreadable meanwhile: stop following it, once
                    self._stop(session_id, str(exc))
                except Exception:  # a bug; one session must not stop following the others
                    logger.exception("following session %s failed", session_id)
                    self._stop(session_id, "internal error")

    def _stop(self, session_id: str, why: str) -> None:
        self._host.read_only.pop(session_id, None)
        self.forget(session_id)
        logger.warning("stopped following session %s: %s", session_id, why)

    def poll_once(self, session_id: str) -> None:
        host = self._host
        delivered = host.read_only.get(session_id)
        if delivered is None:
            return
        events = host.manager.read(session_id, delivered)
        self.read_output(session_id)  # after the events: see the module's invariants
        for event in events:
            if event.seq is not None:
                self.deliver_output(session_id, event.seq - 1)
            host.front_end.deliver(session_id, event, replayed=True)
        if events:
            # (not `seq or delivered`: seq 0 is falsy, and a poll that read only the session's first
            # event left the cursor before it, so the next poll delivered it again)
            last = events[-1].seq
            delivered = host.read_only[session_id] = delivered if last is None else last
        self.deliver_output(session_id, delivered)
        lease = host.manager.store.read_lease(session_id)
        lives = lease is not None and host.manager.leases.other_holder_lives(lease)
        holder = (lease[1], lease[2]) if lease is not None and lives else None
        if holder is not None:
            self._announce(session_id, holder, read_only=True)
            return
        try:
            host.session(session_id)  # takes the lease, continues the stream, says so (`taken_over`)
        except SessionBusyError:
            return  # another process was quicker: it is announced at the next poll
        except StoreError as exc:
            # It cannot be opened (an unreadable log, a deleted session): stop following it, once;
            # the client's next request on it gets the same typed error.
            self._stop(session_id, str(exc))

    def read_output(self, session_id: str) -> None:
        cursor = self._output.get(session_id)
        if cursor is None:
            return
        rows = self._host.manager.store.tool_output_after(session_id, cursor.last_id)
        if rows:
            cursor.last_id = rows[-1].id
            cursor.held += rows

    def deliver_output(self, session_id: str, through_seq: int) -> None:
        """The held rows written after no event later than `through_seq`, as live `tool/output`."""
        cursor = self._output.get(session_id)
        if cursor is None or not cursor.held:
            return
        ready = [row for row in cursor.held if row.after_seq <= through_seq]
        if not ready:
            return
        cursor.held = [row for row in cursor.held if row.after_seq > through_seq]
        for row in ready:
            key = (row.turn, row.call_id)
            shown_to = cursor.next_start.get(key, 0)
            if row.start + len(row.text) <= shown_to:
                continue  # (a row already shown; cannot happen with one driver, but never twice)
            text = row.text[max(0, shown_to - row.start) :]
            if row.start > shown_to:
                text = not_shown(row.start - shown_to) + text
            cursor.next_start[key] = row.start + len(row.text)
            event = ToolOutput(row.turn, row.step, row.call_id, text).event()
            self._host.front_end.deliver(session_id, event, replayed=False)

    def taken_over(self, session_id: str) -> None:
        """The session this connection followed read-only is driven here now. Called by the host
        wherever that happens (this poll, or a request of the client's, e.g. `dsh/inbox/list`, that
        found the lease free first), so the client always learns it is writable again."""
        quiet = session_id in self._quiet
        self.forget(session_id)
        if not quiet:
            self._lease_event(session_id, LeaseChanged(None, read_only=False))

    def _announce(self, session_id: str, holder: tuple[int, str], *, read_only: bool) -> None:
        if self._holders.get(session_id) == holder:
            return
        self._holders[session_id] = holder
        self._lease_event(session_id, LeaseChanged(LeaseHolder(*holder), read_only))

    def _lease_event(self, session_id: str, change: LeaseChanged) -> None:
        """A live `session/lease`: who drives the session the connection follows read-only, now."""
        self._host.front_end.deliver(session_id, change.event(), replayed=False)
