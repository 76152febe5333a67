"""Sessions created before the session machinery is loaded (issue 20.2): a first `session/new` is
answered from the store alone (its row, its id, this process's lease), and its tools, agent and
provider are wired once the machinery is loaded (`SessionHost.adopt_early`), before the session is
used.

Light on purpose: it imports the store and the leases, nothing of the agent, the tools or the
provider, so a front end can answer while `host/preload.py` is still importing those. The session
host built later takes over this store and lease holder: the lease taken here is the host's own.

Invariants kept here:
- A session created here exists durably (its row, on disk on return) and is driven by this process
  (its lease) before its id is returned; a failure leaves neither behind.
- It stays in `pending` until the host has wired it (`take`), so no request uses it half-built.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dsh_daemon.mcp.config import ServerSource
from dsh_daemon.session.lease import LeaseHolder
from dsh_daemon.session.store import SessionStore


@dataclass(frozen=True)
class EarlySession:
    """What a session created early is to be wired with (the arguments of `SessionHost.create`)."""

    session_id: str
    cwd: str
    extra_roots: tuple[str, ...]
    mcp_servers: ServerSource | None


class EarlySessions:
    def __init__(self, state_dir: Path) -> None:
        self.store = SessionStore(state_dir)
        self.leases = LeaseHolder(self.store)
        self.pending: dict[str, EarlySession] = {}

    def create_durably(
        self, cwd: str, extra_roots: Sequence[str], mcp_servers: ServerSource | None
    ) -> EarlySession:
        """A new session's row and lease (on disk on return), to be wired later."""
        session_id = str(uuid.uuid4())
        self.store.create_session(session_id, title=None, cwd=cwd)
        try:
            self.leases.acquire(session_id)
        except BaseException:
            self.store.delete_session(session_id, holder=self.leases.holder)
            raise
        early = EarlySession(session_id, cwd, tuple(extra_roots), mcp_servers)
        self.pending[session_id] = early
        return early

    def take(self) -> list[EarlySession]:
        """The sessions still to be wired, in the order they were created (and none left here)."""
        out = list(self.pending.values())
        self.pending.clear()
        return out

    def close(self) -> None:
        """The process ends before a session host took these sessions over: the leases of those still
        to be wired go (their rows stay: their ids were given out, and a later attach opens them), and
        the store closes. Not for a store a host has taken over (the host closes it)."""
        for early in self.take():
            self.leases.release(early.session_id)
        self.store.close()
