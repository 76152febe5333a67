""" "Always (saved to config)" for a sandbox widening (issue 41; protocol.md §8, §16, flag
`persistWidening`), over the real wire: the answer `{outcome: "allow-always", persist: true}` writes
the widening into config.json (the file's other keys kept), every open session has it at once, a
later daemon honours it without asking; a config.json that cannot be parsed is never overwritten
(the grant stays the session's, and the person is told); `unconfined` is never saved; `persist`
anywhere else fails closed."""

from __future__ import annotations

import asyncio
import json
import stat
from pathlib import Path
from typing import Any

import pytest
from pygls.exceptions import JsonRpcException

from tests.fakes.deepseek_server import FakeDeepSeek
from tests.server.harness import UNCONFINED, start_daemon, stop_daemon
from tests.server.test_sandbox_wire import code, commands, confined_here, text
from tests.server.test_tools_e2e import run_turn, tool_results

KEEP = {"outcome": "allow-always", "persist": True}
# What a person's config.json may hold besides the sandbox: all of it must survive a save.
OTHER_KEYS: dict[str, Any] = {
    "model": "deepseek-chat",
    "tools": {"permissions": {"edit_file": "ask"}, "sandbox": {"mode": "workspace-write"}},
    "agent": {"instructions": "Be brief."},
    "aKeyFromANewerVersion": {"nested": [1, 2, {"three": True}]},
}


def config(state: Path) -> dict[str, Any]:
    return dict(json.loads((state / "config.json").read_text()))


async def open_session(d: Any, work: Path) -> str:
    return str(await d.new_session(cwd=str(work)))


@pytest.fixture
def places(tmp_path: Path) -> tuple[Path, Path, Path]:
    """The state directory (with a config.json holding other keys), the workspace, a dir outside."""
    state, work, outside = tmp_path / "state", tmp_path / "work", tmp_path / "outside"
    for path in (state, work, outside):
        path.mkdir()
    (state / "config.json").write_text(json.dumps(OTHER_KEYS, indent=2))
    (state / "config.json").chmod(0o640)
    return state, work, outside


@confined_here
async def test_a_kept_widening_is_saved_holds_at_once_and_in_a_later_daemon(
    places: tuple[Path, Path, Path], fake: FakeDeepSeek
) -> None:
    state, work, outside = places
    widen = {"reason": "the build caches there", "writable": [str(outside)], "network": ["PyPI.org"]}
    fake.script(*commands((f"echo one > {outside}/one.txt", {"escalate": widen})))
    d = await start_daemon(state, fake, root=work)
    try:
        assert d.initialized.capabilities.experimental["dsh"]["persistWidening"] is True
        d.on_permission = lambda p: KEEP
        other = await open_session(d, work)  # open before the grant: it gets the widening too
        await d.wait_event(other, "sandbox/status")
        sid = await open_session(d, work)
        await run_turn(d, sid)
        (result,) = tool_results(d, sid)
        assert code(result) is None and (outside / "one.txt").read_text() == "one\n"
        (event,) = d.of(sid, "sandbox/widened")
        assert isinstance(event["seq"], int) and event["data"]["scope"] == "config"
        saved = config(state)
        resolved = str(outside.resolve())
        assert saved["tools"]["sandbox"] == {
            "mode": "workspace-write",
            "writable": [resolved],
            "network": {"allow": ["pypi.org"]},
        }
        # Everything else is as it was, the unknown key included, and the file keeps its permissions.
        assert {k: v for k, v in saved.items() if k != "tools"} == {
            k: v for k, v in OTHER_KEYS.items() if k != "tools"
        }
        assert saved["tools"]["permissions"] == {"edit_file": "ask"}
        assert stat.S_IMODE((state / "config.json").stat().st_mode) == 0o640
        assert [p.name for p in state.iterdir() if p.name.startswith(".config.json")] == []
        # The other open session has it from now on.
        await d.wait_for(
            lambda: any(resolved in e["data"]["writable"] for e in d.of(other, "sandbox/status"))
        )
        assert "pypi.org" in d.of(other, "sandbox/status")[-1]["data"]["network"]
    finally:
        await stop_daemon(d)

    # A new daemon (a restart) reads it: the write that needed the widening runs without asking.
    fake.script(*commands(f"echo two > {outside}/two.txt"))
    d = await start_daemon(state, fake, root=work)
    try:
        sid = await open_session(d, work)
        await run_turn(d, sid)
        (result,) = tool_results(d, sid)
        assert code(result) is None, text(result)
        assert (outside / "two.txt").read_text() == "two\n"
        assert d.permission_requests == []
        status = d.of(sid, "sandbox/status")[-1]["data"]
        assert status["writable"] == [resolved] and status["network"] == ["pypi.org"]
    finally:
        await stop_daemon(d)


@confined_here
async def test_a_config_file_that_cannot_be_parsed_is_not_overwritten(
    places: tuple[Path, Path, Path], fake: FakeDeepSeek
) -> None:
    state, work, outside = places
    garbage = b'{"model": "deepseek-chat", "tools": {oops\n'
    (state / "config.json").write_bytes(garbage)
    widen = {"reason": "needs it", "writable": [str(outside)]}
    fake.script(
        *commands((f"echo one > {outside}/one.txt", {"escalate": widen}), f"echo two > {outside}/two.txt")
    )
    d = await start_daemon(state, fake, root=work)
    d.on_permission = lambda p: KEEP
    try:
        sid = await open_session(d, work)
        await run_turn(d, sid)
        first, second = tool_results(d, sid)
        assert code(first) is None and code(second) is None  # the session's grant holds
        assert (outside / "two.txt").read_text() == "two\n"
        assert (state / "config.json").read_bytes() == garbage
        (event,) = d.of(sid, "sandbox/widened")
        assert event["data"]["scope"] == "session"
        (notice,) = d.of(sid, "session/notice")
        assert notice["data"]["kind"] == "sandbox" and notice["data"]["level"] == "warning"
        message = notice["data"]["message"]
        assert "not saved" in message and "config.json" in message and "not valid JSON" in message
        assert isinstance(notice["seq"], int)
    finally:
        await stop_daemon(d)


async def test_an_unconfined_escalation_is_never_saved(
    places: tuple[Path, Path, Path], fake: FakeDeepSeek
) -> None:
    state, work, _outside = places
    before = (state / "config.json").read_bytes()
    widen = {"reason": "needs the docker socket", "unconfined": True}
    fake.script(*commands(("echo ran > ran.txt", {"escalate": widen})))
    d = await start_daemon(state, fake, root=work)
    d.on_permission = lambda p: KEEP
    try:
        sid = await open_session(d, work)
        await run_turn(d, sid)
        (result,) = tool_results(d, sid)
        assert code(result) is None and (work / "ran.txt").exists()
        (event,) = d.of(sid, "sandbox/widened")
        assert event["data"]["unconfined"] is True and event["data"]["scope"] == "session"
        assert (state / "config.json").read_bytes() == before
        (notice,) = d.of(sid, "session/notice")
        assert "never saved" in notice["data"]["message"]
    finally:
        await stop_daemon(d)


async def test_persist_anywhere_else_fails_closed(
    places: tuple[Path, Path, Path], fake: FakeDeepSeek
) -> None:
    state, work, outside = places
    before = (state / "config.json").read_bytes()
    # persist beside allow-once on an escalation, and on a request that is no escalation at all.
    widen = {"reason": "needs it", "writable": [str(outside)]}
    for answer, extra in (
        ({"outcome": "allow-once", "persist": True}, {"escalate": widen}),
        (KEEP, {}),
        ({"outcome": "allow-always", "persist": "yes"}, {"escalate": widen}),
    ):
        fake.script(*commands((f"echo x > {outside}/x.txt", extra))[:1])  # the turn ends at the answer
        d = await start_daemon(state, fake, root=work, init_options=UNCONFINED)
        d.on_permission = lambda p, answer=answer: answer  # type: ignore[misc]
        try:
            sid = await open_session(d, work)
            await d.request("dsh/followup", {"sessionId": sid, "message": {"content": "go"}})
            reasons = await d.wait_idle_turn(sid)
            assert reasons == [{"kind": "aborted", "cause": "user"}], (answer, extra)
            assert not (outside / "x.txt").exists() and d.of(sid, "sandbox/widened") == []
        finally:
            await stop_daemon(d)
    assert (state / "config.json").read_bytes() == before


async def test_respond_takes_persist_only_for_an_escalation_kept_always(
    places: tuple[Path, Path, Path], fake: FakeDeepSeek
) -> None:
    state, work, outside = places
    asked = asyncio.Event()

    async def hold(params: dict[str, Any]) -> dict[str, Any]:
        asked.set()
        await asyncio.sleep(3600)
        return {"outcome": "cancelled"}

    widen = {"reason": "needs it", "writable": [str(outside)]}
    # Full access: the widened command runs unconfined whatever the machine gives (the save is the point).
    fake.script(*commands((f"echo x > {outside}/x.txt", {"escalate": widen})))
    d = await start_daemon(state, fake, root=work, init_options=UNCONFINED)
    d.on_permission = hold
    try:
        sid = await open_session(d, work)
        await d.request("dsh/followup", {"sessionId": sid, "message": {"content": "go"}})
        await asyncio.wait_for(asked.wait(), 15)
        respond = {"sessionId": sid, "callId": d.call_id(sid, "call_0"), "persist": True}
        with pytest.raises(JsonRpcException, match="persist"):
            await d.request("dsh/permissions/respond", {**respond, "outcome": "allow-once"})
        answered = await d.request("dsh/permissions/respond", {**respond, "outcome": "allow-always"})
        assert answered["answered"] is True
        await d.wait_idle_turn(sid)
        (event,) = d.of(sid, "sandbox/widened")
        assert event["data"]["scope"] == "config"
        assert config(state)["tools"]["sandbox"]["writable"] == [str(outside.resolve())]
        assert config(state)["aKeyFromANewerVersion"] == OTHER_KEYS["aKeyFromANewerVersion"]
    finally:
        await stop_daemon(d)
