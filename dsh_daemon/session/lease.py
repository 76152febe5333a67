"""Per-session driver leases (D7): one process drives a session at a time.

A lease passes to another process only when its holder is gone: released on exit, or the holder is
dead (its pid no longer exists on this host, or now belongs to a process that started later: free at
once) or, for a holder on another host, silent (no heartbeat for `STALE_AFTER_MS`).
"""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass
from pathlib import Path

from dsh_daemon.session.store import SessionStore, StoreError, now_ms

STALE_AFTER_MS = 30_000
HEARTBEAT_EVERY_S = 5.0


class SessionBusyError(StoreError):
    """The session is driven by another live process."""

    def __init__(self, session_id: str, holder: str, pid: int, host: str) -> None:
        super().__init__(f"session {session_id} is driven by another dsh-daemon (pid {pid} on {host})")
        self.session_id = session_id
        self.holder = holder
        self.pid = pid
        self.host = host


def process_start(pid: int) -> str:
    """The process's start time in clock ticks since boot (Linux), or "" where /proc has no answer."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return ""
    fields = stat[stat.rfind(")") + 2 :].split()
    return fields[19] if len(fields) > 19 else ""


def holder_started(holder: str) -> str:
    """The start time recorded in a holder id (`host:pid:start:nonce`), or "" for older ids."""
    parts = holder.split(":")
    return parts[2] if len(parts) == 4 else ""


def pid_alive(pid: int) -> bool:
    """Whether `pid` is a running process. A zombie (exited, not yet reaped by its parent: an editor
    that has not waited for its old daemon yet) holds nothing and counts as gone (Linux: /proc)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return _process_state(pid) not in ("Z", "X")


def _process_state(pid: int) -> str:
    """The one-letter state from /proc/<pid>/stat (R, S, D, Z, …), or "" where /proc has no answer."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return ""
    fields = stat[stat.rfind(")") + 2 :].split()
    return fields[0] if fields else ""


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
        start = process_start(self.pid)
        self.holder = self.holder or f"{self.host}:{self.pid}:{start}:{uuid.uuid4().hex[:8]}"

    def acquire(self, session_id: str) -> None:
        """Take the driver lease or raise `SessionBusyError` naming the live holder."""
        current = self.store.read_lease(session_id)
        replace: str | None = None
        if current is not None:
            holder, pid, host, _ = current
            if holder != self.holder:
                if self.other_holder_lives(current):
                    raise SessionBusyError(session_id, holder, pid, host)
                replace = holder
        if not self.store.write_lease(session_id, self.holder, self.pid, self.host, replace_holder=replace):
            current = self.store.read_lease(session_id)
            assert current is not None
            raise SessionBusyError(session_id, current[0], current[1], current[2])

    def other_holder_lives(self, lease: tuple[str, int, str, int]) -> bool:
        """Whether the holder of `lease` (`read_lease`'s row) still drives its session."""
        holder, pid, host, heartbeat = lease
        if holder == self.holder:
            return False
        same_host = host == self.host
        recorded = holder_started(holder)
        # A pid that lives but started later than the holder did is a reused pid: the holder died.
        reused = bool(recorded) and same_host and process_start(pid) not in ("", recorded)
        dead = same_host and (not pid_alive(pid) or reused)
        # A silent heartbeat only counts across hosts: here a live pid is proof of life (a suspended
        # laptop or a busy loop must not hand the session to a second driver).
        stale = not same_host and now_ms() - heartbeat > STALE_AFTER_MS
        return not (dead or stale)

    def silent_for_ms(self, lease: tuple[str, int, str, int]) -> int | None:
        """How long a holder that keeps its lease (`other_holder_lives`) has not heartbeated, when
        that is over `STALE_AFTER_MS` (None: it beats, or it holds nothing). A silent holder on this
        host keeps its lease (its pid lives), but is no daemon that will hand the session over: a
        crashed daemon's pid now another program's, a stopped process."""
        if not self.other_holder_lives(lease):
            return None
        silent = now_ms() - lease[3]
        return silent if silent > STALE_AFTER_MS else None

    def holds(self, session_id: str) -> bool:
        current = self.store.read_lease(session_id)
        return current is not None and current[0] == self.holder

    def release(self, session_id: str) -> None:
        self.store.release_lease(session_id, self.holder)

    def heartbeat(self) -> None:
        self.store.heartbeat_leases(self.holder)
