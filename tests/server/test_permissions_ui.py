"""Permissions a UI can show and take back (issue 10 item 8): full old/new text in edit previews,
live permission/requested|resolved events, open requests in the attach reply and answerable with
dsh/permissions/respond, and "allow always" grants listed and revoked."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.fakes.deepseek_server import FakeDeepSeek, Reply
from tests.server.harness import UNCONFINED, start_daemon, stop_daemon, text_reply, tool_call_stream
from tests.server.test_tools_e2e import edit_call, run_turn, tool_results


def run_call(command: str, call_id: str) -> Reply:
    return Reply.stream(tool_call_stream([(call_id, "run_command", {"command": command})]))


async def test_an_edit_preview_carries_old_and_new_text_and_both_events(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    target = work / "a.txt"
    target.write_text("hello world\nsecond line\n")
    d = await start_daemon(tmp_path / "state", fake, apply_edit=False, root=work)
    fake.script(edit_call(target, "world", "there"), text_reply("edited"))
    sid = await d.new_session(cwd=str(work))
    await run_turn(d, sid)
    (request,) = d.permission_requests
    preview = request["preview"]
    assert preview["oldText"] == "hello world\nsecond line\n"
    assert preview["newText"] == "hello there\nsecond line\n"
    assert preview["created"] is False and "truncated" not in preview
    asked, resolved = d.of(sid, "permission/requested"), d.of(sid, "permission/resolved")
    call = d.call_id(sid, "call_1")
    assert [e["data"]["callId"] for e in asked] == [call] and "seq" not in asked[0]
    assert asked[0]["data"]["preview"] == preview and asked[0]["data"]["tool"] == "edit_file"
    assert [e["data"] for e in resolved] == [{"callId": call, "outcome": "allow-once"}]
    assert d.events.index(asked[0]) < d.events.index(resolved[0])
    await stop_daemon(d)


async def test_a_reloaded_client_sees_the_open_request_on_attach_and_answers_it(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    target = work / "f.txt"
    target.write_text("v1\n")
    asked = asyncio.Event()

    async def lost(params: Any) -> Any:  # the view that got the request was reloaded: never answers
        asked.set()
        await asyncio.sleep(3600)

    d = await start_daemon(tmp_path / "state", fake, apply_edit=False, root=work)
    d.on_permission = lost
    fake.script(edit_call(target, "v1", "v2"), text_reply("done"))
    sid = await d.new_session(cwd=str(work))
    await d.request("dsh/followup", {"sessionId": sid, "message": {"content": "edit"}})
    await asyncio.wait_for(asked.wait(), 15)

    attached = await d.request("dsh/session/attach", {"sessionId": sid, "afterSeq": 10**9})
    (open_request,) = attached["permissionRequests"]
    call = d.call_id(sid, "call_1")
    assert open_request["callId"] == call and open_request["preview"]["newText"] == "v2\n"
    listed = await d.request("dsh/permissions/list", {"sessionId": sid})
    assert [r["callId"] for r in listed["open"]] == [call] and listed["grants"] == []

    answered = await d.request(
        "dsh/permissions/respond", {"sessionId": sid, "callId": call, "outcome": "allow-once"}
    )
    assert answered == {"answered": True}
    await d.wait_idle_turn(sid)
    assert target.read_text() == "v2\n"
    assert "error" not in tool_results(d, sid)[0]
    assert [e["data"]["outcome"] for e in d.of(sid, "permission/resolved")] == ["allow-once"]
    again = await d.request(
        "dsh/permissions/respond", {"sessionId": sid, "callId": call, "outcome": "reject"}
    )
    assert again == {"answered": False}
    assert (await d.request("dsh/permissions/list", {"sessionId": sid}))["open"] == []
    await stop_daemon(d)


async def test_allow_always_grants_are_listed_and_revoked(tmp_path: Path, fake: FakeDeepSeek) -> None:
    work = tmp_path / "work"
    work.mkdir()
    d = await start_daemon(tmp_path / "state", fake, root=work, init_options=UNCONFINED)
    d.on_permission = lambda p: {"outcome": "allow-always"}
    fake.script(run_call("echo a", "c1"), text_reply("1"), run_call("echo a", "c2"), text_reply("2"))
    sid = await d.new_session(cwd=str(work))
    await run_turn(d, sid, "first")
    listed = await d.request("dsh/permissions/list", {"sessionId": sid})
    assert listed["grants"] == [{"scope": "run_command:echo a", "tool": "run_command", "command": "echo a"}]
    revoked = await d.request("dsh/permissions/revoke", {"sessionId": sid, "scope": "run_command:echo a"})
    assert revoked == {"revoked": 1}
    assert (await d.request("dsh/permissions/list", {"sessionId": sid}))["grants"] == []
    await run_turn(d, sid, "second")
    asked = [d.provider_id(sid, p["callId"]) for p in d.permission_requests]
    assert asked == ["c1", "c2"]  # asked again once revoked
    assert (await d.request("dsh/permissions/revoke", {"sessionId": sid})) == {"revoked": 1}
    await stop_daemon(d)
