"""Detach (issue 10 item 2) and live read-only attach (item 3): two daemons on one state directory,
as two editor windows are."""

from __future__ import annotations

from pathlib import Path

import pytest
from pygls.exceptions import JsonRpcException

from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.harness import Daemon, start_daemon, stop_daemon, text_reply


def durable_seqs(daemon: Daemon, sid: str) -> list[int]:
    return [e["seq"] for e in daemon.of(sid) if "seq" in e]


async def test_detaching_an_idle_session_lets_another_window_drive_it(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    state = tmp_path / "state"
    first, second = await start_daemon(state, fake), await start_daemon(state, fake)
    try:
        fake.script(text_reply("one"), text_reply("two"))
        sid = await first.new_session()
        await first.request("dsh/followup", {"sessionId": sid, "message": {"content": "hi"}})
        await first.wait_idle_turn(sid)
        assert await first.request("dsh/session/detach", {"sessionId": sid}) == {}
        seen = len(first.of(sid))

        attached = await second.request("dsh/session/attach", {"sessionId": sid})
        assert "readOnly" not in attached  # the lease was released: this window drives it
        await second.request("dsh/followup", {"sessionId": sid, "message": {"content": "from two"}})
        await second.wait_idle_turn(sid, 2)
        assert len(first.of(sid)) == seen  # the detached window gets nothing more
        with pytest.raises(JsonRpcException) as busy:  # and the first window now reads, not drives
            await first.request("dsh/followup", {"sessionId": sid, "message": {"content": "me"}})
        assert busy.value.data["code"] == "session_busy"
        with pytest.raises(JsonRpcException) as unknown:
            await first.request("dsh/session/detach", {"sessionId": "no-such-session"})
        assert unknown.value.data["code"] == "unknown_session"
    finally:
        await stop_daemon(first)
        await stop_daemon(second)


async def test_a_read_only_window_follows_live_and_becomes_the_driver_when_the_holder_lets_go(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    state = tmp_path / "state"
    first, second = await start_daemon(state, fake), await start_daemon(state, fake)
    try:
        # The first turn is held mid-stream until the read-only checks are done, so "parked" is still
        # pending when they look, however slow the machine.
        fake.script(Reply.stream(text_stream(["w"] * 40), gate_after=(3, "long")), text_reply("queued one"))
        sid = await first.new_session()
        await first.request("dsh/followup", {"sessionId": sid, "message": {"content": "long"}})
        await first.wait_event(sid, "assistant/delta")
        await first.request(
            "dsh/send",
            {"sessionId": sid, "message": {"id": "parked", "content": "later"}, "target": "next-turn",
             "wakeup": False},
        )  # fmt: skip
        attached = await second.request("dsh/session/attach", {"sessionId": sid})
        assert attached["readOnly"] is True
        assert attached["holder"]["pid"] == first.client._server.pid  # type: ignore[union-attr]
        assert [item["id"] for item in attached["inbox"]["nextTurn"]] == ["parked"]
        listed = await second.request("dsh/inbox/list", {"sessionId": sid})  # works read-only
        assert [item["id"] for item in listed["nextTurn"]] == ["parked"]
        fake.open_gate("long")

        # The turn the first window runs reaches the second live, without another attach.
        await second.wait_for(lambda: bool(second.of(sid, "turn/end")))
        await first.wait_idle_turn(sid)
        await second.wait_for(lambda: durable_seqs(second, sid) == durable_seqs(first, sid))

        # The first window detaches (idle): the second takes the session over by itself.
        await first.request("dsh/session/detach", {"sessionId": sid})
        await second.wait_for(lambda: bool(second.of(sid, "session/lease")))
        (lease,) = second.of(sid, "session/lease")
        assert lease["data"] == {"holder": None, "readOnly": False} and "seq" not in lease
        await second.request("dsh/wake", {"sessionId": sid})
        await second.wait_for(lambda: len(second.of(sid, "turn/end")) >= 2)
        seqs = durable_seqs(second, sid)
        assert seqs == list(range(len(seqs)))  # followed, then driven: no gap, no duplicate
    finally:
        await stop_daemon(first)
        await stop_daemon(second)


async def test_detaching_a_running_session_releases_it_when_the_turn_ends(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    state = tmp_path / "state"
    first, second = await start_daemon(state, fake), await start_daemon(state, fake)
    try:
        # Held mid-stream until the second window has attached: the turn is surely still running.
        fake.script(Reply.stream(text_stream(["w"] * 30), gate_after=(3, "long")))
        sid = await first.new_session()
        await first.request("dsh/followup", {"sessionId": sid, "message": {"content": "long"}})
        await first.wait_event(sid, "assistant/delta")
        await first.request("dsh/session/detach", {"sessionId": sid})
        attached = await second.request("dsh/session/attach", {"sessionId": sid})
        assert attached["readOnly"] is True  # still running in the first window
        fake.open_gate("long")
        await second.wait_for(lambda: bool(second.of(sid, "session/lease")))
        assert second.of(sid, "turn/end")[0]["data"]["reason"] == {"kind": "completed"}
        assert first.of(sid, "turn/end") == []  # detached: the first window was told nothing more
    finally:
        await stop_daemon(first)
        await stop_daemon(second)


async def test_a_request_that_finds_the_lease_free_first_still_tells_the_read_only_window(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """The VS Code panel lists the queue (`dsh/inbox/list`) when a followed session's queue changes;
    if that request reaches the daemon after the holder let go but before the follower's poll, it
    opens the session here. The window must still hear `session/lease {readOnly: false}`, or it
    stays read-only while this daemon drives the session."""
    state = tmp_path / "state"
    first, second = await start_daemon(state, fake), await start_daemon(state, fake)
    try:
        fake.script(text_reply("theirs"))
        sid = await first.new_session()
        await first.request("dsh/followup", {"sessionId": sid, "message": {"content": "one"}})
        await first.wait_idle_turn(sid)
        attached = await second.request("dsh/session/attach", {"sessionId": sid})
        assert attached["readOnly"] is True
        await first.request("dsh/session/detach", {"sessionId": sid})
        await second.request("dsh/inbox/list", {"sessionId": sid})  # before the next poll (200 ms)
        await second.wait_for(lambda: bool(second.of(sid, "session/lease")))
        (lease,) = second.of(sid, "session/lease")
        assert lease["data"] == {"holder": None, "readOnly": False}
    finally:
        await stop_daemon(first)
        await stop_daemon(second)
