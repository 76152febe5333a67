"""Leases: who may drive a session (a live holder keeps it, a dead or reused pid loses it, a lost
lease stops the agent cleanly). Each test failed before its fix."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from dsh_daemon.llm.scripted import Hang
from dsh_daemon.model import events as ev
from dsh_daemon.model.provider import TextDelta
from dsh_daemon.session.lease import LeaseHolder, SessionBusyError
from dsh_daemon.session.store import SessionStore
from tests.core.harness import Harness, msg


def test_a_live_holder_on_this_host_keeps_its_lease_despite_a_stale_heartbeat(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    store.create_session("s", title=None, cwd=None)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        LeaseHolder(store, pid=child.pid).acquire("s")
        store._db.execute("UPDATE leases SET heartbeat = heartbeat - 3600000")
        with pytest.raises(SessionBusyError):
            LeaseHolder(SessionStore(tmp_path)).acquire("s")
    finally:
        child.kill()
        child.wait()


def test_a_reused_pid_does_not_keep_a_dead_holders_lease(tmp_path: Path) -> None:
    import socket

    store = SessionStore(tmp_path)
    store.create_session("s", title=None, cwd=None)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        # The recorded holder "started" at tick 1: the live process with that pid is someone else.
        store.write_lease(
            "s",
            f"{socket.gethostname()}:{child.pid}:1:dead",
            child.pid,
            socket.gethostname(),
            replace_holder=None,
        )
        taker = LeaseHolder(SessionStore(tmp_path))
        taker.acquire("s")
        assert taker.holds("s")
    finally:
        child.kill()
        child.wait()


async def test_a_lease_lost_mid_turn_stops_the_agent_instead_of_retrying_forever(tmp_path: Path) -> None:
    from dsh_daemon.session.store import LeaseLostError

    h = Harness(tmp_path, [[TextDelta("partial"), Hang()]])
    h.agent.followup(msg("A"))
    for _ in range(200):
        if h.durable(ev.ASSISTANT_CHUNK):
            break
        await asyncio.sleep(0.005)
    # another host's daemon took the session over (its holder now owns the lease row)
    h.agent.log.store._db.execute("UPDATE leases SET holder='elsewhere:1:1:x'")
    with pytest.raises(LeaseLostError):
        h.agent.inject(msg("too late"))
    await asyncio.wait_for(h.idle(), 5)
    errors = [e.data["error"]["code"] for e in h.live(ev.AGENT_ERROR)]
    assert "LEASE_LOST" in errors
    seqs_sent = [e.seq for e in h.events if e.seq is not None]
    stored = SessionStore(tmp_path).load_events(h.agent.session_id)
    assert seqs_sent[-1] <= stored[-1].seq + 1  # nothing announced far past what the store holds
    assert h.agent.log.write_failures == 0  # no endless retry loop
    assert h.agent.session_id not in h.manager.agents


async def test_closing_after_a_lost_lease_is_clean(tmp_path: Path) -> None:
    from dsh_daemon.session.store import LeaseLostError

    h = Harness(tmp_path, [[Hang()]])
    h.agent.followup(msg("A"))
    await asyncio.sleep(0.02)
    h.agent.log.store._db.execute("UPDATE leases SET holder='elsewhere:1:1:x'")
    with pytest.raises(LeaseLostError):
        h.agent.inject(msg("x"))
    await h.agent.dispose()  # must not raise: nothing is ours to write any more
    await h.manager.close()
