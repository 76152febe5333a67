"""What a client needs to word a session's lines and rows, through the real daemon process: a call refused
in plan mode says so as data (`DENIED` with `meta.denied`, protocol.md §11), live and in the transcript,
and a fork's `dsh/session/list` row says which session it was forked from (`forkOf`, §3), across a
restart and for a fork of a fork."""

from __future__ import annotations

from pathlib import Path

import pytest
from pygls.exceptions import JsonRpcException

from tests.fakes.deepseek_server import FakeDeepSeek, Reply
from tests.server.harness import Daemon, start_daemon, stop_daemon, text_reply, tool_call_stream


async def run_turn(daemon: Daemon, sid: str, text: str) -> None:
    done = len(daemon.of(sid, "turn/end"))
    await daemon.request("dsh/followup", {"sessionId": sid, "message": {"content": text}})
    await daemon.wait_idle_turn(sid, done + 1)


async def test_a_write_refused_in_plan_mode_says_plan_mode_as_data_live_and_in_the_transcript(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    target = work / "notes.txt"
    d = await start_daemon(tmp_path / "state", fake, root=work)
    fake.script(
        Reply.stream(tool_call_stream([("call_1", "write_file", {"path": str(target), "content": "x"})])),
        text_reply("planning instead"),
    )
    sid = await d.new_session(cwd=str(work))
    await d.request("dsh/session/setMode", {"sessionId": sid, "mode": "plan"})
    await run_turn(d, sid, "write it")
    (result,) = d.of(sid, "tool/result")
    assert result["data"]["error"]["code"] == "DENIED"
    assert result["data"]["meta"] == {"denied": "plan-mode"}
    assert not target.exists()
    page = await d.request("dsh/session/transcript", {"sessionId": sid})
    (tool,) = [i for t in page["turns"] for i in t["items"] if i["type"] == "tool"]
    assert tool["result"]["error"]["code"] == "DENIED" and tool["result"]["meta"] == {"denied": "plan-mode"}
    await stop_daemon(d)


async def test_a_fork_row_says_what_it_was_forked_from_across_a_restart_and_for_a_fork_of_a_fork(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    state = tmp_path / "state"
    d = await start_daemon(state, fake, apply_edit=False, root=work)
    fake.script(text_reply("one"), text_reply("two"))
    sid = await d.new_session(cwd=str(work), title="Work")
    await run_turn(d, sid, "prompt one")
    fork_id = (await d.request("dsh/session/fork", {"sessionId": sid, "atTurn": 1}))["sessionId"]
    await d.request("dsh/session/attach", {"sessionId": fork_id})
    await d.wait_for(lambda: len(d.of(fork_id, "turn/end")) == 1)
    await run_turn(d, fork_id, "prompt two")
    again_id = (await d.request("dsh/session/fork", {"sessionId": fork_id, "atTurn": 2}))["sessionId"]
    await stop_daemon(d)

    d = await start_daemon(state, fake, apply_edit=False, root=work)
    for params in ({}, {"cwd": str(work), "limit": 10}):
        rows = {s["sessionId"]: s for s in (await d.request("dsh/session/list", params))["sessions"]}
        assert "forkOf" not in rows[sid]
        assert rows[fork_id]["forkOf"] == {"sessionId": sid, "atTurn": 1, "title": "Work"}
        # the copied log holds the first fork's notice too: the row names the session it was cut from
        assert rows[again_id]["forkOf"] == {"sessionId": fork_id, "atTurn": 2, "title": "Work (fork)"}
    await d.request("dsh/session/delete", {"sessionId": fork_id})
    rows = {s["sessionId"]: s for s in (await d.request("dsh/session/list", {}))["sessions"]}
    assert fork_id not in rows and rows[again_id]["forkOf"]["sessionId"] == fork_id
    await stop_daemon(d)


async def test_a_reloaded_transcript_says_how_many_times_a_failed_turn_was_retried(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    d = await start_daemon(tmp_path / "state", fake)
    fake.script(
        Reply.error(503, retry_after="0"),
        Reply.error(503, retry_after="0"),
        Reply.error(400),  # not retried: the turn fails after two retries
        Reply.error(503, retry_after="0"),
        text_reply("recovered"),  # a retried request that went through: no retries on the turn
    )
    sid = await d.new_session()
    await run_turn(d, sid, "one")
    await run_turn(d, sid, "two")
    assert [e["data"]["retry"] for e in d.of(sid, "llm/retry")] == [1, 2, 1]
    page = await d.request("dsh/session/transcript", {"sessionId": sid})
    failed, recovered = sorted(page["turns"], key=lambda t: t["turn"])
    assert failed["end"]["kind"] == "error" and failed["retries"] == 2
    assert recovered["end"]["kind"] == "completed" and "retries" not in recovered
    await stop_daemon(d)


async def test_a_git_diff_travels_with_a_prompt_as_an_editor_message_and_bad_refs_queue_nothing(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    d = await start_daemon(tmp_path / "state", fake, root=work)
    fake.script(text_reply("I see the change"))
    sid = await d.new_session(cwd=str(work))
    diff = "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"
    ref = {"uri": work.as_uri(), "kind": "gitDiff", "diff": diff}
    for bad in (
        {"uri": work.as_uri(), "kind": "gitDiff"},  # no text
        {"uri": "untitled:x", "kind": "gitDiff", "diff": diff},  # no folder
        {"uri": (work / "a.py").as_uri(), "kind": "file", "diff": diff},  # a diff on another kind
    ):
        with pytest.raises(JsonRpcException) as caught:
            await d.request(
                "dsh/followup", {"sessionId": sid, "message": {"content": "look"}, "context": [bad]}
            )
        assert caught.value.data["code"] == "invalid_params"
    assert d.of(sid, "agent/inbox/inserted") == [] and d.of(sid, "turn/start") == []

    sent = await d.request(
        "dsh/followup", {"sessionId": sid, "message": {"content": "review my changes"}, "context": [ref]}
    )
    assert len(sent["contextIds"]) == 1
    await d.wait_idle_turn(sid, 1)
    (entered, prompt) = [e["data"] for e in d.of(sid, "user/message")]
    assert entered["source"] == {"kind": "editor", "uri": work.as_uri(), "contextKind": "gitDiff"}
    assert (
        entered["content"][0]["text"] == f"Uncommitted changes in {work} (git diff HEAD):\n```diff\n{diff}```"
    )
    assert prompt["content"][0]["text"] == "review my changes"
    users = [m["content"] for m in fake.requests[-1].json["messages"] if m["role"] == "user"]
    assert any("+x = 2" in u for u in users)
    # The same through dsh/context/add; an empty diff says there is none.
    added_id = (await d.request("dsh/context/add", {"sessionId": sid, **ref, "diff": ""}))["messageId"]
    inbox = await d.request("dsh/inbox/list", {"sessionId": sid})
    (added,) = inbox["nextStep"]
    assert added["id"] == added_id
    assert added["content"][0]["text"] == f"Uncommitted changes in {work} (git diff HEAD): none."
    await stop_daemon(d)
