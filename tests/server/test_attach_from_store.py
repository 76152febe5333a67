"""`dsh/session/attach {replay: "none"}` on a session nobody drives is answered from the store (a
fast reattach of a long session); the session is opened right after and its events go on from the
reply's lastSeq with no gap and no duplicate (issue 10 item 11)."""

from __future__ import annotations

from pathlib import Path

from dsh_daemon.session.store import SessionStore
from tests.fakes.deepseek_server import FakeDeepSeek
from tests.server.harness import start_daemon, stop_daemon, text_reply


async def test_reattach_without_replay_then_drive_goes_on_from_last_seq(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    state = tmp_path / "state"
    first = await start_daemon(state, fake)
    fake.script(text_reply("one"), text_reply("two"))
    sid = await first.new_session()
    await first.request("dsh/followup", {"sessionId": sid, "message": {"content": "first"}})
    await first.wait_idle_turn(sid)
    await first.request(
        "dsh/send",
        {
            "sessionId": sid,
            "message": {"id": "later", "content": "second"},
            "target": "next-turn",
            "wakeup": False,
        },
    )
    await stop_daemon(first)

    second = await start_daemon(state, fake)
    try:
        attached = await second.request("dsh/session/attach", {"sessionId": sid, "replay": "none"})
        assert "readOnly" not in attached and attached["status"] == "idle"
        assert [item["id"] for item in attached["inbox"]["nextTurn"]] == ["later"]
        assert attached["title"] == "first" and attached["permissionRequests"] == []
        last = attached["lastSeq"]
        assert second.of(sid) == []  # nothing replayed
        assert await second.request("dsh/wake", {"sessionId": sid}) == {"started": True}
        await second.wait_idle_turn(sid)
        seqs = [e["seq"] for e in second.of(sid) if "seq" in e]
        assert seqs == list(range(last + 1, last + 1 + len(seqs)))  # no gap, no duplicate
        assert second.of(sid, "session/lease") == []  # it was never shown read-only
        page = await second.request("dsh/session/transcript", {"sessionId": sid})
        assert [t["turn"] for t in page["turns"]] == [2, 1]
    finally:
        await stop_daemon(second)


async def test_a_session_reattached_from_the_store_is_opened_in_the_background(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    state = tmp_path / "state"
    first = await start_daemon(state, fake)
    fake.script(text_reply("one"))
    sid = await first.new_session()
    await first.request("dsh/followup", {"sessionId": sid, "message": {"content": "hello"}})
    await first.wait_idle_turn(sid)
    await stop_daemon(first)

    second = await start_daemon(state, fake)
    store = SessionStore(state)
    try:
        await second.request("dsh/session/attach", {"sessionId": sid, "replay": "none"})
        # Within a poll this daemon drives it (takes the lease) without any further request.
        pid = second.client._server.pid  # type: ignore[union-attr]
        await second.wait_for(lambda: (store.read_lease(sid) or (None, 0))[1] == pid)
    finally:
        store.close()
        await stop_daemon(second)
