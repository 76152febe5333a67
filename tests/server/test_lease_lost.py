"""A session whose lease another daemon took while this one still had it open (a holder that fell
silent on another host: its lease goes stale, and the other daemon takes it; this one finds out at
its next write): what this daemon shows of the session is read from the store, never its own
now-stale choices."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from pygls.exceptions import JsonRpcException

from dsh_daemon.session.store import SessionStore
from tests.fakes.deepseek_server import FakeDeepSeek
from tests.server.harness import start_daemon, stop_daemon


def make_holder_look_silent_elsewhere(state: Path, session_id: str) -> None:
    """The lease row as a holder on another host that stopped beating would leave it."""
    store = SessionStore(state)
    try:
        with store.transaction() as db:
            db.execute(
                "UPDATE leases SET host = 'another-host', heartbeat = heartbeat - 120000 WHERE session_id = ?",
                (session_id,),
            )
    finally:
        store.close()


async def test_a_session_whose_lease_was_lost_shows_the_model_settings_its_store_holds(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    state = tmp_path / "state"
    first, second = await start_daemon(state, fake), await start_daemon(state, fake)
    try:
        sid = await first.new_session()
        set_model = {"sessionId": sid, "model": "deepseek-v4-pro", "reasoningEffort": "high"}
        await first.request("dsh/session/setModel", set_model)
        first_pid = first.client._server.pid  # type: ignore[union-attr]
        os.kill(first_pid, signal.SIGSTOP)  # no heartbeat may freshen the row while it is taken
        try:
            make_holder_look_silent_elsewhere(state, sid)
            took = {"sessionId": sid, "model": "deepseek-v4-flash", "reasoningEffort": "max"}
            await second.request("dsh/session/setModel", took)  # opens the session: takes the lease
        finally:
            os.kill(first_pid, signal.SIGCONT)
        with pytest.raises(JsonRpcException) as busy:  # the first's next write finds the lease lost
            await first.request("dsh/session/setModel", {**set_model, "reasoningEffort": "max"})
        assert busy.value.data["code"] == "session_busy"
        assert busy.value.data["holderPid"] == second.client._server.pid  # type: ignore[union-attr]

        listed = await first.request("dsh/models/list", {"sessionId": sid})
        assert (listed["current"], listed["reasoningEffort"]) == ("deepseek-v4-flash", "max")
        assert await first.request("dsh/models/list", {"sessionId": sid}) == await second.request(
            "dsh/models/list", {"sessionId": sid}
        )
    finally:
        await stop_daemon(first)
        await stop_daemon(second)
