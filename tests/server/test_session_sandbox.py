"""The session's own sandbox mode in the host (issue 41.5), which both front ends share: durable in
`session/settings`, read by the commands' sandbox, and told as a new `sandbox/status`."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from dsh_daemon.model.events import SANDBOX_STATUS, SESSION_SETTINGS, Event
from dsh_daemon.sandbox.level import probe_level
from tests.server.test_host import front_end


@pytest.mark.skipif(not probe_level().confined, reason=probe_level().describe())
async def test_the_sessions_sandbox_choice_is_durable_and_told_in_its_status(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    state = tmp_path / "state"
    host_side = front_end(state, work)
    try:
        host = host_side.host
        sid = host.create(str(work)).session_id
        hosted = host.session(sid)
        told: list[Event] = []
        hosted.agent.subscribe(lambda e: told.append(e) if e.type == SANDBOX_STATUS else None)
        for _ in range(500):  # the level is probed off the loop, then the first status is told
            if hosted.sandbox_status() is not None:
                break
            await asyncio.sleep(0.01)
        first = hosted.sandbox_status()
        assert first is not None and first.mode == first.configured_mode == "workspace-write"
        assert host.sandbox_setting(sid) == (None, "workspace-write")
        told.clear()

        host.set_sandbox_mode(sid, "read-only", method="test")
        assert host.sandbox_setting(sid) == ("read-only", "read-only")
        assert [(e.data["mode"], e.data["configuredMode"]) for e in told] == [("read-only", "read-only")]
        stored = host.manager.store.load_events_of_type(sid, SESSION_SETTINGS)
        assert stored[-1].data == {"sandbox": "read-only"}  # on disk on return
        host.set_sandbox_mode(sid, "read-only", method="test")  # the choice already: nothing written
        assert len(host.manager.store.load_events_of_type(sid, SESSION_SETTINGS)) == len(stored)

        # Plan mode still runs commands read-only; configuredMode keeps the session's choice.
        host.set_sandbox_mode(sid, "full-access", method="test")
        host.set_mode(sid, "plan", method="test")
        assert (told[-1].data["mode"], told[-1].data["configuredMode"]) == ("read-only", "full-access")
        host.set_mode(sid, "ask", method="test")
        # None: the configuration's mode again.
        host.set_sandbox_mode(sid, None, method="test")
        assert host.sandbox_setting(sid) == (None, "workspace-write")
        assert told[-1].data["mode"] == "workspace-write"
        with pytest.raises(Exception, match="sandbox must be one of"):
            host.set_sandbox_mode(sid, "yolo", method="test")
        # A model change keeps the sandbox choice in the same event (the latest is the whole choice).
        host.set_sandbox_mode(sid, "read-only", method="test")
        host.set_model_setting(sid, "reasoning_effort", "max", method="test")
        latest = host.manager.store.load_events_of_type(sid, SESSION_SETTINGS)[-1]
        assert latest.data == {"reasoningEffort": "max", "sandbox": "read-only"}
        await host.close_session(sid)
        assert host.sandbox_setting(sid) == ("read-only", "read-only")  # from the store
    finally:
        await host_side.close()
