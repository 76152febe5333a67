"""Take over (issues 21.2, 24.1): a window following a session another daemon drives asks it to let
go (`dsh/session/takeOver`); two daemons on one state directory, as two editor windows are."""

from __future__ import annotations

from pathlib import Path

import pytest
from pygls.exceptions import JsonRpcException

from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.harness import Daemon, start_daemon, stop_daemon, text_reply


def durable_seqs(daemon: Daemon, sid: str) -> list[int]:
    return [e["seq"] for e in daemon.of(sid) if "seq" in e]


def leases(daemon: Daemon, sid: str) -> list[dict[str, object]]:
    return [e["data"] for e in daemon.of(sid, "session/lease")]


async def test_an_idle_holder_hands_the_session_over_and_follows_it_read_only(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    state = tmp_path / "state"
    first, second = await start_daemon(state, fake), await start_daemon(state, fake)
    try:
        fake.script(text_reply("one"), text_reply("two"))
        sid = await first.new_session()
        await first.request("dsh/followup", {"sessionId": sid, "message": {"content": "hi"}})
        await first.wait_idle_turn(sid)
        attached = await second.request("dsh/session/attach", {"sessionId": sid})
        assert attached["readOnly"] is True

        assert await second.request("dsh/session/takeOver", {"sessionId": sid}) == {}
        await second.wait_for(lambda: {"holder": None, "readOnly": False} in leases(second, sid))
        await second.request("dsh/followup", {"sessionId": sid, "message": {"content": "from two"}})
        await second.wait_idle_turn(sid, 2)
        seqs = durable_seqs(second, sid)
        assert seqs == list(range(len(seqs)))  # followed, then driven: no gap, no duplicate

        # The first window goes on following, read-only, told who drives it now.
        second_pid = second.client._server.pid  # type: ignore[union-attr]
        await first.wait_for(
            lambda: any(
                lease["readOnly"] is True and lease["holder"]["pid"] == second_pid  # type: ignore[index]
                for lease in leases(first, sid)
            )
        )
        await first.wait_for(lambda: len(first.of(sid, "turn/end")) == 2)  # the second's turn, live
        with pytest.raises(JsonRpcException) as busy:
            await first.request("dsh/followup", {"sessionId": sid, "message": {"content": "me"}})
        assert busy.value.data["code"] == "session_busy"
        # And it can take the session back the same way.
        await first.request("dsh/session/takeOver", {"sessionId": sid})
        await first.wait_for(lambda: leases(first, sid)[-1] == {"holder": None, "readOnly": False})
        fake.script(text_reply("three"))
        await first.request("dsh/followup", {"sessionId": sid, "message": {"content": "back"}})
        await first.wait_idle_turn(sid, 3)
    finally:
        await stop_daemon(first)
        await stop_daemon(second)


async def test_a_running_holder_lets_go_when_its_turn_ends_or_at_once_with_force(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    state = tmp_path / "state"
    first, second = await start_daemon(state, fake), await start_daemon(state, fake)
    try:
        fake.script(
            Reply.stream(text_stream(["w"] * 30), gate_after=(3, "long")),
            Reply.stream(text_stream(["x"] * 30), gate_after=(3, "never")),
        )
        sid = await first.new_session()
        await first.request("dsh/followup", {"sessionId": sid, "message": {"content": "long"}})
        await first.wait_event(sid, "assistant/delta")
        await second.request("dsh/session/attach", {"sessionId": sid})
        await second.request("dsh/session/takeOver", {"sessionId": sid})
        await second.wait_for(lambda: bool(second.of(sid, "user/message")))  # the durable part so far
        assert {"holder": None, "readOnly": False} not in leases(second, sid)  # the turn still runs
        fake.open_gate("long")
        await second.wait_for(lambda: {"holder": None, "readOnly": False} in leases(second, sid))
        assert second.of(sid, "turn/end")[0]["data"]["reason"] == {"kind": "completed"}

        # Now the second drives a turn that hangs; the first forces it back.
        await second.request("dsh/followup", {"sessionId": sid, "message": {"content": "hang"}})
        await second.request(
            "dsh/send",
            {"sessionId": sid, "message": {"id": "kept", "content": "later"}, "target": "next-turn",
             "wakeup": False},
        )  # fmt: skip
        await first.wait_for(lambda: len(first.of(sid, "user/message")) == 2)  # "hang" runs
        # ... and its request holds the hanging reply (else the kept turn below would get it, and hang)
        await first.wait_for(lambda: fake.pending == 0)
        await first.request("dsh/session/takeOver", {"sessionId": sid, "force": True})
        await first.wait_for(lambda: leases(first, sid)[-1:] == [{"holder": None, "readOnly": False}])
        reasons = await first.wait_idle_turn(sid, 3)
        assert reasons[1:] == [{"kind": "aborted", "cause": "handover"}, {"kind": "completed"}]
        # The holder's queue is kept, and runs here by itself, as it would have there after its turn.
        assert first.of(sid, "agent/inbox/claimed")[-1]["data"]["message"]["id"] == "kept"
        listing = await first.request("dsh/inbox/list", {"sessionId": sid})
        assert listing["nextTurn"] == []
        seqs = durable_seqs(first, sid)
        assert seqs == list(range(len(seqs)))
    finally:
        fake.open_gate("never")
        await stop_daemon(first)
        await stop_daemon(second)


async def test_a_forced_take_over_runs_the_holders_queue_in_the_new_driver(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """The queue the forced holder kept is what the person asked of the session next: the process that
    took the session runs it at once, by itself, as the holder would have after its turn (protocol.md
    §3, `dsh/session/takeOver`)."""
    state = tmp_path / "state"
    first, second = await start_daemon(state, fake), await start_daemon(state, fake)
    try:
        fake.script(Reply.stream(text_stream(["x"] * 30), gate_after=(3, "never")), text_reply("queued done"))
        sid = await first.new_session()
        await first.request("dsh/followup", {"sessionId": sid, "message": {"content": "hang"}})
        await first.wait_event(sid, "assistant/delta")
        queued = {"id": "queued-1", "content": "then this"}
        await first.request("dsh/followup", {"sessionId": sid, "message": queued})
        await second.request("dsh/session/attach", {"sessionId": sid})
        await second.request("dsh/session/takeOver", {"sessionId": sid, "force": True})
        await second.wait_for(lambda: {"holder": None, "readOnly": False} in leases(second, sid))
        # No request of the second's: the kept queue runs there by itself.
        reasons = await second.wait_idle_turn(sid, 2)
        assert reasons == [{"kind": "aborted", "cause": "handover"}, {"kind": "completed"}]
        claimed = second.of(sid, "agent/inbox/claimed")
        assert [c["data"]["message"]["id"] for c in claimed][-1:] == ["queued-1"]
        assert len(fake.requests) == 2
        listing = await second.request("dsh/inbox/list", {"sessionId": sid})
        assert listing["nextTurn"] == [] and listing["nextStep"] == []
        seqs = durable_seqs(second, sid)
        assert seqs == list(range(len(seqs)))
    finally:
        fake.open_gate("never")
        await stop_daemon(first)
        await stop_daemon(second)


async def test_take_over_needs_an_attached_session(tmp_path: Path, fake: FakeDeepSeek) -> None:
    state = tmp_path / "state"
    first, second = await start_daemon(state, fake), await start_daemon(state, fake)
    try:
        sid = await first.new_session()
        with pytest.raises(JsonRpcException) as refused:
            await second.request("dsh/session/takeOver", {"sessionId": sid})
        assert refused.value.data["code"] == "invalid_params"
        assert "attach it" in refused.value.message
        with pytest.raises(JsonRpcException) as unknown:
            await second.request("dsh/session/takeOver", {"sessionId": "nope"})
        assert unknown.value.data["code"] == "unknown_session"
        assert await first.request("dsh/session/takeOver", {"sessionId": sid}) == {}  # driven here
    finally:
        await stop_daemon(first)
        await stop_daemon(second)


async def test_the_driver_is_told_who_waits_and_can_hand_over_at_once(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """Issue 36.1: a take-over waiting for a running turn is no longer silent where the turn runs. The
    driving connection gets a live `session/handover` naming the asking process, once, and
    `dsh/session/handOver` lets the session go at once: its turn ends aborted (handover), its queue
    is kept and runs in the process that asked, by itself (as a forced take-over does)."""
    state = tmp_path / "state"
    first, second = await start_daemon(state, fake), await start_daemon(state, fake)
    try:
        fake.script(Reply.stream(text_stream(["x"] * 30), gate_after=(3, "never")), text_reply("queued done"))
        sid = await first.new_session()
        await first.request("dsh/followup", {"sessionId": sid, "message": {"content": "hang"}})
        await first.wait_event(sid, "assistant/delta")  # its request holds the hanging reply
        with pytest.raises(JsonRpcException) as nobody:
            await first.request("dsh/session/handOver", {"sessionId": sid})
        assert "nobody asked to take session" in str(nobody.value)
        await first.request(
            "dsh/followup", {"sessionId": sid, "message": {"id": "q-1", "content": "then this"}}
        )
        await second.request("dsh/session/attach", {"sessionId": sid})
        await second.request("dsh/session/takeOver", {"sessionId": sid})
        asked = await first.wait_event(sid, "session/handover")
        assert asked["data"]["force"] is False and asked["data"]["requester"]["pid"] > 0
        assert "seq" not in asked  # live only
        await first.request("dsh/session/handOver", {"sessionId": sid})
        await second.wait_for(lambda: {"holder": None, "readOnly": False} in leases(second, sid))
        reasons = await second.wait_idle_turn(sid, 2)
        assert reasons == [{"kind": "aborted", "cause": "handover"}, {"kind": "completed"}]
        assert [c["data"]["message"]["id"] for c in second.of(sid, "agent/inbox/claimed")][-1:] == ["q-1"]
        assert len(first.of(sid, "session/handover")) == 1  # told once
        # The first now follows read-only, naming the new driver.
        await first.wait_for(lambda: any(lease.get("readOnly") for lease in leases(first, sid)))
    finally:
        fake.open_gate("never")
        await stop_daemon(first)
        await stop_daemon(second)
