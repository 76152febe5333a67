"""Handing a session over between processes (`dsh/session/takeOver`, ACP `session/load` of a
session another process drives).

The asking process writes a handover request into the shared store; the holder's watcher polls for
requests on the sessions it drives and, once the session is idle (at once, or when its turn ends; a
forcing request aborts the turn with cause `handover`, keeping its queue, which the asker runs once
it drives the session: `SessionHost.forced`), passes its lease to the asker in one store
transaction. The asker's read-only follower then finds the lease is its own and opens the session
for driving, continuing its stream from the last seq delivered; the old holder's
connection, if it followed the session, goes on following it read-only.

Invariants kept here:
- The lease moves from holder to asker in one transaction (`hand_over_lease`): no third process can
  take it between a release and a take, and the holder's log is flushed before it moves.
- A holder never hands over a session while a turn of it runs here.
- A process holds the lease of a session it does not drive only between the handover and its
  follower's next poll; a connection that stops following before then gives it back (`host.detach`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from dsh_daemon.model.payloads import HandoverAsked
from dsh_daemon.model.wire import LeaseHolder

if TYPE_CHECKING:
    from dsh_daemon.host.sessions import SessionHost

logger = logging.getLogger(__name__)

POLL_S = 0.2  # how soon a holder notices a handover request


class HandoverWatcher:
    """The holder's side: hands sessions it drives over to the processes that ask for them."""

    def __init__(self, host: SessionHost) -> None:
        self._host = host
        self._forced: set[str] = set()  # sessions whose turn this watcher aborted for a handover
        self._told: dict[str, str] = {}  # the asker each session's clients were told of (once per asker)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(POLL_S)
            if not self._host.sessions:
                continue
            try:
                self.poll_once()
            except Exception:  # a bug, or a store error: the next poll tries again
                logger.exception("handover watch failed")

    def poll_once(self) -> None:
        host = self._host
        manager = host.manager
        for session_id, requester, force, pid, machine in manager.store.handover_requests(
            manager.leases.holder
        ):
            hosted = host.sessions.get(session_id)
            if hosted is not None and hosted.agent.running:
                if self._told.get(session_id) != requester:
                    # The person here learns that someone waits, and can hand over at once.
                    self._told[session_id] = requester
                    asked = HandoverAsked(LeaseHolder(pid, machine), force)
                    host.front_end.deliver(session_id, asked.event(), replayed=False)
                if force and session_id not in self._forced:
                    self._forced.add(session_id)
                    logger.info("session %s: turn aborted to hand it over to %s", session_id, requester)
                    hosted.cancel("handover", keep_inbox=True)
                continue
            self._forced.discard(session_id)
            self._told.pop(session_id, None)
            if host.hand_over(session_id):
                logger.info("session %s: handed over to %s", session_id, requester)
