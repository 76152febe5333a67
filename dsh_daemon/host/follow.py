"""Live read-only attach: follow sessions another process drives, by tailing the shared store.

A connection that attached a session leased by another live process gets that session's durable
events as the other process writes them (polled every `POLL_S`), a live `session/lease` event when
the lease changes hands, and, once the holder has released the lease or died, the session itself:
this process takes the lease and the connection drives it from then on, with no gap and no duplicate
in the stream and no second attach (the host's `session` continues from the last seq delivered).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from dsh_daemon.model.payloads import LeaseChanged
from dsh_daemon.model.wire import LeaseHolder
from dsh_daemon.session.lease import SessionBusyError
from dsh_daemon.session.store import StoreError

if TYPE_CHECKING:
    from dsh_daemon.host.sessions import SessionHost

logger = logging.getLogger(__name__)

POLL_S = 0.2  # lag of a read-only view behind its driver (at most 250 ms)


class ReadOnlyFollower:
    def __init__(self, host: SessionHost) -> None:
        self._host = host
        self._holders: dict[str, tuple[int, str] | None] = {}  # last holder announced per session
        self._quiet: set[str] = set()  # taken over without a `session/lease` (see `follow`)
        self._task: asyncio.Task[None] | None = None

    def follow(
        self, session_id: str, holder: tuple[int, str] | None, *, announce_takeover: bool = True
    ) -> None:
        """Start following `session_id` (the host has put it in `read_only`). Without
        `announce_takeover`, taking it over sends no `session/lease` (the client never saw it read-only)."""
        self._holders[session_id] = holder
        if not announce_takeover:
            self._quiet.add(session_id)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    def forget(self, session_id: str) -> None:
        self._holders.pop(session_id, None)
        self._quiet.discard(session_id)

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
        for event in events:
            host.front_end.deliver(session_id, event, replayed=True)
        if events:
            host.read_only[session_id] = events[-1].seq or delivered
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
