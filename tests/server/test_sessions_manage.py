"""Session management over real pipes: rename and the durable `session/title`, delete (and when it is
refused), `dsh/session/list` paging with `lastPrompt`, and the capabilities that advertise them."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.harness import Daemon, daemon_env, raw_client, start_daemon, stop_daemon


async def _turn_done(daemon: Daemon, sid: str, text: str) -> None:
    done = len(daemon.of(sid, "turn/end"))
    await daemon.request("dsh/followup", {"sessionId": sid, "message": {"content": text}})
    await daemon.wait_idle_turn(sid, done + 1)


async def _error(daemon: Daemon, method: str, params: dict[str, Any]) -> JsonRpcException:
    with pytest.raises(JsonRpcException) as error:
        await daemon.request(method, params)
    return error.value


def _titles(daemon: Daemon, sid: str) -> list[tuple[int, str]]:
    return [(e["seq"], e["data"]["title"]) for e in daemon.of(sid, "session/title")]


async def _listed(daemon: Daemon, sid: str) -> dict[str, Any]:
    (row,) = [s for s in (await daemon.request("dsh/session/list", {}))["sessions"] if s["sessionId"] == sid]
    return row


async def test_capabilities_advertise_transcript_and_session_management(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    state = tmp_path / "state"
    (state / "home").mkdir(parents=True)
    client = raw_client()
    await client.start_io(sys.executable, "-m", "dsh_daemon", env=daemon_env(state, fake))
    try:
        result = await client.initialize_session(
            types.InitializeParams(capabilities=types.ClientCapabilities(), root_uri=tmp_path.as_uri())
        )
        dsh = result.capabilities.experimental["dsh"]
        assert dsh["protocolVersion"] == 1
        assert dsh["transcript"] is True and dsh["sessionManagement"] is True
        await client.shutdown_session()
    finally:
        await client.stop()


async def test_titles_are_durable_events_from_the_first_prompt_and_from_rename(daemon: Daemon) -> None:
    sid = await daemon.new_session()
    await _turn_done(daemon, sid, "Fix the   flaky\ntest")
    ((seq, title),) = _titles(daemon, sid)
    assert title == "Fix the flaky test" and (await _listed(daemon, sid))["title"] == title
    attached = await daemon.request("dsh/session/attach", {"sessionId": sid, "replay": "none"})
    assert attached["title"] == title  # a client that reattaches needs no session list for it
    (splice,) = [e for e in daemon.of(sid, "agent/inbox/spliced")][:1]
    assert seq == splice["seq"] + 1  # right after the prompt's insertion

    assert (
        await daemon.request("dsh/session/rename", {"sessionId": sid, "title": "  Flaky\ttest,  again "})
        == {}
    )
    assert _titles(daemon, sid)[-1][1] == "Flaky test, again"  # live, before the reply
    assert (await _listed(daemon, sid))["title"] == "Flaky test, again"
    await daemon.request("dsh/session/rename", {"sessionId": sid, "title": "Flaky test, again"})
    assert len(_titles(daemon, sid)) == 2  # unchanged: no event
    await _turn_done(daemon, sid, "a second prompt names nothing")
    assert len(_titles(daemon, sid)) == 2

    for title in ("   ", "x" * 201, 5):
        error = await _error(daemon, "dsh/session/rename", {"sessionId": sid, "title": title})
        assert error.data["code"] == "invalid_params", title
    error = await _error(daemon, "dsh/session/rename", {"sessionId": "nope", "title": "t"})
    assert error.data["code"] == "unknown_session"

    named = await daemon.new_session(title="Named")
    assert _titles(daemon, named) == [(0, "Named")]
    seqs = [e["seq"] for e in daemon.of(sid) if "seq" in e]
    assert seqs == list(range(len(seqs)))

    # the titles are in the log: an attach after a restart replays them
    attached = await daemon.request("dsh/session/attach", {"sessionId": sid})
    assert attached["lastSeq"] == seqs[-1]
    assert [t for _, t in _titles(daemon, sid)][-2:] == ["Fix the flaky test", "Flaky test, again"]


async def test_delete_removes_the_session_and_a_later_request_gets_unknown_session(daemon: Daemon) -> None:
    keep = await daemon.new_session()
    sid = await daemon.new_session()
    await _turn_done(daemon, sid, "hello")
    await daemon.request(
        "dsh/send",
        {"sessionId": sid, "message": {"content": "parked"}, "target": "next-turn", "wakeup": False},
    )
    assert await daemon.request("dsh/session/delete", {"sessionId": sid}) == {}
    listed = await daemon.request("dsh/session/list", {})
    assert [s["sessionId"] for s in listed["sessions"]] == [keep]
    for method, params in [
        ("dsh/inbox/list", {"sessionId": sid}),
        ("dsh/followup", {"sessionId": sid, "message": {"content": "x"}}),
        ("dsh/session/attach", {"sessionId": sid}),
        ("dsh/session/transcript", {"sessionId": sid}),
        ("dsh/session/rename", {"sessionId": sid, "title": "t"}),
        ("dsh/session/delete", {"sessionId": sid}),
    ]:
        error = await _error(daemon, method, params)
        assert error.data["code"] == "unknown_session", method
    # the other session is untouched and still works
    await _turn_done(daemon, keep, "still here")


async def test_delete_is_refused_while_a_turn_runs_here(daemon: Daemon) -> None:
    daemon.fake.script(Reply.stream(text_stream(["x"])[:-2], tail="stall"))
    sid = await daemon.new_session()
    await daemon.request("dsh/followup", {"sessionId": sid, "message": {"content": "go"}})
    await daemon.wait_event(sid, "assistant/delta")
    error = await _error(daemon, "dsh/session/delete", {"sessionId": sid})
    assert error.code == -32803 and error.data["code"] == "session_busy" and error.data["reason"] == "running"
    assert "turn is running in this dsh-daemon" in error.message
    await daemon.request("dsh/cancel", {"sessionId": sid})
    await daemon.wait_idle_turn(sid)
    assert await daemon.request("dsh/session/delete", {"sessionId": sid}) == {}


async def test_delete_is_refused_while_another_daemon_drives_the_session(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    state = tmp_path / "state"
    driver = await start_daemon(state, fake)
    other = await start_daemon(state, fake)
    try:
        sid = await driver.new_session()
        await _turn_done(driver, sid, "mine")
        error = await _error(other, "dsh/session/delete", {"sessionId": sid})
        assert error.data["code"] == "session_busy" and error.data["reason"] == "leased"
        pid = driver.client._server.pid  # type: ignore[union-attr]
        assert error.data["holderPid"] == pid and f"driven by another dsh-daemon (pid {pid}" in error.message
        assert [s["sessionId"] for s in (await other.request("dsh/session/list", {}))["sessions"]] == [sid]
        renamed = await _error(other, "dsh/session/rename", {"sessionId": sid, "title": "theirs"})
        assert renamed.data["code"] == "session_busy"
        await _turn_done(driver, sid, "still mine")  # the refused delete changed nothing
    finally:
        await stop_daemon(driver)
    assert await other.request("dsh/session/delete", {"sessionId": sid}) == {}  # the holder has gone
    assert (await other.request("dsh/session/list", {}))["sessions"] == []
    await stop_daemon(other)


async def test_list_pages_by_updated_at_with_a_last_prompt_preview(daemon: Daemon) -> None:
    sids = [await daemon.new_session() for _ in range(5)]
    long_prompt = "Explain   this\n\nplease: " + "word " * 60
    await _turn_done(daemon, sids[1], "first prompt")
    await _turn_done(daemon, sids[1], long_prompt)
    await daemon.request(
        "dsh/send",
        {"sessionId": sids[2], "message": {"content": "queued"}, "target": "next-turn", "wakeup": False},
    )
    everything = (await daemon.request("dsh/session/list", {}))["sessions"]
    assert sorted(s["sessionId"] for s in everything) == sorted(sids)
    by_id = {s["sessionId"]: s for s in everything}
    preview = by_id[sids[1]]["lastPrompt"]
    assert preview == " ".join(long_prompt.split())[:120] and len(preview) == 120
    assert "lastPrompt" not in by_id[sids[0]] and "lastPrompt" not in by_id[sids[2]]  # entered prompts only

    pages, before = [], None
    while True:
        params: dict[str, Any] = {"limit": 2}
        if before is not None:
            params["before"] = before
        page = await daemon.request("dsh/session/list", params)
        pages.append(page["sessions"])
        if not page["hasMore"]:
            break
        before = page["sessions"][-1]["updatedAt"]
        assert len(pages) < 10
    paged = [s for p in pages for s in p]
    assert [s["sessionId"] for s in paged] == [s["sessionId"] for s in everything]  # no loss, no repeat
    assert all(len(p) >= 1 for p in pages)
    stamps = [s["updatedAt"] for s in paged]
    assert stamps == sorted(stamps, reverse=True)

    assert (await daemon.request("dsh/session/list", {"limit": 100}))["hasMore"] is False
    assert "hasMore" not in await daemon.request("dsh/session/list", {})  # unpaged: as before
    for params in ({"limit": 0}, {"limit": "2"}, {"before": 1.5}):
        error = await _error(daemon, "dsh/session/list", params)
        assert error.data["code"] == "invalid_params", params
