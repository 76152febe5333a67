"""Accepting an edited proposal (issues 21.4, 22.3; protocol.md §8, flag `editedAccept`): the person's
`newText` is what gets written, and the model's next request says the person changed the proposal."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from pygls.exceptions import JsonRpcException

from tests.fakes.deepseek_server import FakeDeepSeek, Reply
from tests.server.harness import UNCONFINED, start_daemon, stop_daemon, text_reply, tool_call_stream

BEFORE = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"
PROPOSED = "def add(a, b):\n    return a + b + 0\n\n\ndef sub(a, b):\n    return b - a\n"
# The person kept the first hunk as proposed, rejected the second, and added a docstring.
ACCEPTED = 'def add(a, b):\n    """Sum."""\n    return a + b + 0\n\n\ndef sub(a, b):\n    return a - b\n'


def write_call(path: Path, content: str) -> Reply:
    return Reply.stream(tool_call_stream([("call_1", "write_file", {"path": str(path), "content": content})]))


def tool_message(fake: FakeDeepSeek) -> str:
    (message,) = [m for m in fake.requests[1].json["messages"] if m["role"] == "tool"]
    return str(message["content"])


async def test_the_accepted_text_is_written_and_the_model_is_told_what_changed(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    target = work / "calc.py"
    target.write_text(BEFORE)
    d = await start_daemon(tmp_path / "state", fake, root=work, apply_edit=False)
    d.on_permission = lambda p: {"outcome": "allow-once", "newText": ACCEPTED}
    fake.script(write_call(target, PROPOSED), text_reply("thanks"))
    sid = await d.new_session(cwd=str(work))
    await d.request("dsh/followup", {"sessionId": sid, "message": {"content": "fix calc"}})
    await d.wait_idle_turn(sid)
    assert target.read_text() == ACCEPTED
    (result,) = [e["data"] for e in d.of(sid, "tool/result")]
    assert "error" not in result and result["meta"]["editedByUser"] is True
    assert '+    """Sum."""' in result["meta"]["diff"]  # the diff of what was written
    told = tool_message(fake)
    assert "The user changed your proposed edit of calc.py before accepting it" in told
    assert "-    return b - a" in told and "+    return a - b" in told  # from the proposal to theirs
    assert '+    \\"\\"\\"Sum.\\"\\"\\"' in json.dumps(told)
    await stop_daemon(d)


async def test_respond_carries_new_text_and_refuses_it_where_it_cannot_apply(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    target = work / "calc.py"
    target.write_text(BEFORE)
    asked = asyncio.Event()

    async def hold(params: dict[str, Any]) -> dict[str, Any]:
        asked.set()
        await asyncio.sleep(3600)
        return {"outcome": "cancelled"}

    d = await start_daemon(tmp_path / "state", fake, root=work, apply_edit=False)
    d.on_permission = hold
    fake.script(write_call(target, PROPOSED), text_reply("ok"))
    sid = await d.new_session(cwd=str(work))
    await d.request("dsh/followup", {"sessionId": sid, "message": {"content": "fix calc"}})
    await asyncio.wait_for(asked.wait(), 15)
    respond = {"sessionId": sid, "callId": d.call_id(sid, "call_1"), "newText": ACCEPTED}
    try:
        await d.request("dsh/permissions/respond", {**respond, "outcome": "reject"})
        raise AssertionError("newText with reject was taken")
    except JsonRpcException as exc:
        assert "newText" in str(exc)
    assert (await d.request("dsh/permissions/respond", {**respond, "outcome": "allow-once"}))["answered"]
    await d.wait_idle_turn(sid)
    assert target.read_text() == ACCEPTED
    assert "changed your proposed edit" in tool_message(fake)
    await stop_daemon(d)


async def test_new_text_for_a_command_fails_closed(tmp_path: Path, fake: FakeDeepSeek) -> None:
    work = tmp_path / "work"
    work.mkdir()
    d = await start_daemon(tmp_path / "state", fake, root=work, init_options=UNCONFINED)
    d.on_permission = lambda p: {"outcome": "allow-once", "newText": "rm -rf /"}
    marker = work / "ran"
    fake.script(
        Reply.stream(tool_call_stream([("call_1", "run_command", {"command": f"touch {marker}"})])),
        text_reply("never"),
    )
    sid = await d.new_session(cwd=str(work))
    await d.request("dsh/followup", {"sessionId": sid, "message": {"content": "run"}})
    reasons = await d.wait_idle_turn(sid)
    assert reasons == [{"kind": "aborted", "cause": "user"}] and not marker.exists()
    await stop_daemon(d)
