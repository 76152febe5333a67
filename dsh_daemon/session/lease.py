"""Per-session driver leases (D7): one process drives a session at a time.

A lease passes to another process only when its holder is gone: released on exit, or the holder is
dead (its pid no longer exists on this host: free at once) or silent (no heartbeat for
`STALE_AFTER_MS`, for holders on another host or a recycled pid).
"""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass

from dsh_daemon.session.store import SessionStore, now_ms

STALE_AFTER_MS = 30_000
HEARTBEAT_EVERY_S = 5.0


class SessionBusyError(Exception):
    """The session is driven by another live process."""

    def __init__(self, session_id: str, holder: str, pid: int, host: str) -> None:
        super().__init__(f"session {session_id} is driven by another dsh-daemon (pid {pid} on {host})")
        self.session_id = session_id
        self.holder = holder
        self.pid = pid
        self.host = host


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class LeaseHolder:
    """This process's identity for leases."""

    store: SessionStore
    holder: str = ""
    pid: int = 0
    host: str = ""

    def __post_init__(self) -> None:
        self.pid = self.pid or os.getpid()
        self.host = self.host or socket.gethostname()
        self.holder = self.holder or f"{self.host}:{self.pid}:{uuid.uuid4().hex[:8]}"

    def acquire(self, session_id: str) -> None:
        """Take the driver lease or raise `SessionBusyError` naming the live holder."""
        current = self.store.read_lease(session_id)
        replace: str | None = None
        if current is not None:
            holder, pid, host, heartbeat = current
            if holder != self.holder:
                same_host = host == self.host
                dead = same_host and not pid_alive(pid)
                # A silent heartbeat only counts across hosts: here a live pid is proof of life (a
                # suspended laptop or a busy loop must not hand the session to a second driver).
                stale = not same_host and now_ms() - heartbeat > STALE_AFTER_MS
                if not (dead or stale):
                    raise SessionBusyError(session_id, holder, pid, host)
                replace = holder
        if not self.store.write_lease(session_id, self.holder, self.pid, self.host, replace_holder=replace):
            current = self.store.read_lease(session_id)
            assert current is not None
            raise SessionBusyError(session_id, current[0], current[1], current[2])

    def holds(self, session_id: str) -> bool:
        current = self.store.read_lease(session_id)
        return current is not None and current[0] == self.holder

    def release(self, session_id: str) -> None:
        self.store.release_lease(session_id, self.holder)

    def heartbeat(self) -> None:
        self.store.heartbeat_leases(self.holder)
