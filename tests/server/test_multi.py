"""Two daemons on one state directory (two editor windows), and editor progress."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.harness import Daemon, start_daemon, stop_daemon


async def test_a_second_daemon_reads_a_driven_session_and_gets_session_busy(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    state = tmp_path / "state"
    first = await start_daemon(state, fake)
    second = await start_daemon(state, fake)
    try:
        sid = await first.new_session()
        await first.request("dsh/followup", {"sessionId": sid, "message": {"content": "hello"}})
        await first.wait_idle_turn(sid)
        listed = await second.request("dsh/session/list", {})
        assert [s["sessionId"] for s in listed["sessions"]] == [sid]
        attached = await second.request("dsh/session/attach", {"sessionId": sid})
        assert attached["readOnly"] is True and attached["holder"]["code"] == "session_busy"
        assert [e["seq"] for e in second.of(sid)] == [e["seq"] for e in first.of(sid) if "seq" in e]
        with pytest.raises(JsonRpcException) as busy:
            await second.request("dsh/followup", {"sessionId": sid, "message": {"content": "me too"}})
        assert busy.value.data["code"] == "session_busy"
        assert busy.value.data["holderPid"] == first.client._server.pid  # type: ignore[union-attr]
    finally:
        await stop_daemon(first)
    # the holder exited: the lease passes on at once
    await second.request("dsh/followup", {"sessionId": sid, "message": {"content": "now me"}})
    await second.wait_for(lambda: len(second.of(sid, "turn/end")) >= 2)
    seqs = [e["seq"] for e in second.of(sid) if "seq" in e]
    assert seqs == list(range(len(seqs)))  # read-only history, then the rest: no gap, no duplicate
    await stop_daemon(second)


async def test_each_turn_reports_progress_and_the_editor_can_cancel_it(daemon: Daemon) -> None:
    daemon.fake.script(
        Reply.stream(text_stream(["a"] * 5)), Reply.stream(text_stream(["b"] * 100), delay=0.1)
    )
    sid = await daemon.new_session()
    await daemon.request("dsh/followup", {"sessionId": sid, "message": {"content": "one"}})
    await daemon.wait_idle_turn(sid)
    token = f"dsh-{sid}-1"
    await daemon.wait_for(
        lambda: any(
            isinstance(r, types.WorkDoneProgressEnd) for r in daemon.client.progress_reports.get(token, [])
        )
    )
    reports = daemon.client.progress_reports[token]
    assert isinstance(reports[0], types.WorkDoneProgressBegin) and reports[0].cancellable
    assert reports[-1].message == "completed"

    await daemon.request("dsh/followup", {"sessionId": sid, "message": {"content": "two"}})
    await daemon.request("dsh/followup", {"sessionId": sid, "message": {"content": "queued"}})
    token = f"dsh-{sid}-2"
    await daemon.wait_for(lambda: bool(daemon.client.progress_reports.get(token)))
    await daemon.wait_event(sid, "assistant/delta", 6)
    daemon.client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
    await daemon.wait_for(lambda: len(daemon.of(sid, "turn/end")) >= 2)
    assert daemon.of(sid, "turn/end")[1]["data"]["reason"] == {"kind": "aborted", "cause": "user"}
    listing = await daemon.request("dsh/inbox/list", {"sessionId": sid})
    assert [m["content"][0]["text"] for m in listing["nextTurn"]] == ["queued"]  # cancel kept the inbox
