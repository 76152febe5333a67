"""Tools through the real daemon: permissions answered by the client, edits via applyEdit or disk."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.fakes.deepseek_server import FakeDeepSeek, Reply
from tests.server.harness import UNCONFINED, Daemon, start_daemon, stop_daemon, text_reply, tool_call_stream


def edit_call(path: Path, old: str, new: str, call_id: str = "call_1") -> Reply:
    return Reply.stream(
        tool_call_stream([(call_id, "edit_file", {"path": str(path), "old_string": old, "new_string": new})])
    )


def tool_results(daemon: Daemon, sid: str) -> list[dict[str, Any]]:
    return [e["data"] for e in daemon.of(sid, "tool/result")]


async def run_turn(daemon: Daemon, sid: str, text: str = "do it") -> None:
    done = len(daemon.of(sid, "turn/end"))
    await daemon.request("dsh/followup", {"sessionId": sid, "message": {"content": text}})
    await daemon.wait_idle_turn(sid, done + 1)


async def test_permission_allow_then_edit_on_disk_without_apply_edit(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    target = work / "a.txt"
    target.write_text("hello world\n")
    d = await start_daemon(tmp_path / "state", fake, apply_edit=False, root=work)
    fake.script(edit_call(target, "world", "there"), text_reply("edited"))
    sid = await d.new_session(cwd=str(work))
    await run_turn(d, sid)
    (request,) = d.permission_requests
    assert (
        request["sessionId"] == sid
        and request["tool"] == "edit_file"
        and request["callId"] == d.call_id(sid, "call_1")
    )
    assert request["title"] and request["arguments"]["old_string"] == "world"
    assert "-hello world" in request["preview"]["diff"] and "+hello there" in request["preview"]["diff"]
    assert target.read_text() == "hello there\n"
    assert target.read_text() == "hello there\n"
    assert d.applied_edits == []
    (result,) = tool_results(d, sid)
    assert "error" not in result
    assert "+hello there" in result["meta"]["diff"]
    await stop_daemon(d)


async def test_apply_edit_path_when_the_client_supports_it(tmp_path: Path, fake: FakeDeepSeek) -> None:
    work = tmp_path / "work"
    work.mkdir()
    target = work / "b.py"
    target.write_text("x = 1\n")
    d = await start_daemon(tmp_path / "state", fake, apply_edit=True, root=work)
    fake.script(edit_call(target, "x = 1", "x = 2"), text_reply("edited"))
    sid = await d.new_session(cwd=str(work))
    await run_turn(d, sid)
    (applied,) = d.applied_edits
    changes = applied["edit"]["changes"]
    ((uri, edits),) = changes.items()
    assert uri == target.as_uri() and edits[0]["newText"] == "x = 2\n"
    assert edits[0]["range"]["end"] == {"line": 1, "character": 0}
    # The client offers no `documentSave`: the daemon writes the same text itself (buffer == disk).
    assert target.read_text() == "x = 2\n"
    assert "error" not in tool_results(d, sid)[0]
    await stop_daemon(d)


async def test_permission_reject_gives_the_model_an_error_and_the_turn_goes_on(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    target = work / "c.txt"
    target.write_text("keep me\n")
    d = await start_daemon(tmp_path / "state", fake, root=work)
    d.on_permission = lambda p: {"outcome": "reject"}
    fake.script(edit_call(target, "keep", "lose"), text_reply("ok, not editing"))
    sid = await d.new_session(cwd=str(work))
    await run_turn(d, sid)
    assert target.read_text() == "keep me\n"
    (result,) = tool_results(d, sid)
    assert result["error"]["code"] == "REJECTED"
    assert d.of(sid, "turn/end")[-1]["data"]["reason"] == {"kind": "completed"}
    tool_message = fake.requests[1].json["messages"][-1]
    assert tool_message["role"] == "tool" and "rejected" in tool_message["content"]
    await stop_daemon(d)


async def test_allow_always_is_not_asked_again(tmp_path: Path, fake: FakeDeepSeek) -> None:
    work = tmp_path / "work"
    work.mkdir()
    target = work / "d.txt"
    target.write_text("1\n")
    d = await start_daemon(tmp_path / "state", fake, root=work, apply_edit=False)
    d.on_permission = lambda p: {"outcome": "allow-always"}
    fake.script(
        edit_call(target, "1", "2"), text_reply("a"), edit_call(target, "2", "3", "call_2"), text_reply("b")
    )
    sid = await d.new_session(cwd=str(work))
    await run_turn(d, sid)
    await run_turn(d, sid, "again")
    assert len(d.permission_requests) == 1
    assert target.read_text() == "3\n"
    await stop_daemon(d)


async def test_unanswered_permission_times_out_as_cancelled(tmp_path: Path, fake: FakeDeepSeek) -> None:
    work = tmp_path / "work"
    work.mkdir()
    target = work / "e.txt"
    target.write_text("same\n")

    async def never(params: Any) -> Any:
        await asyncio.sleep(3600)

    d = await start_daemon(
        tmp_path / "state", fake, root=work, init_options={"thinking": False, "permissionTimeoutS": 0.5}
    )
    d.on_permission = never
    fake.script(edit_call(target, "same", "changed"), text_reply("never"))
    sid = await d.new_session(cwd=str(work))
    await d.request("dsh/followup", {"sessionId": sid, "message": {"content": "edit"}})
    await d.request("dsh/followup", {"sessionId": sid, "message": {"content": "queued after"}})
    await d.wait_for(lambda: len(d.of(sid, "turn/end")) >= 1)
    assert d.of(sid, "turn/end")[0]["data"]["reason"] == {"kind": "aborted", "cause": "user"}
    assert target.read_text() == "same\n"
    listing = await d.request("dsh/inbox/list", {"sessionId": sid})
    assert [m["content"][0]["text"] for m in listing["nextTurn"]] == ["queued after"]  # the queue is kept
    await stop_daemon(d)


async def test_cancel_while_permission_pending_resolves_it(tmp_path: Path, fake: FakeDeepSeek) -> None:
    work = tmp_path / "work"
    work.mkdir()
    target = work / "f.txt"
    target.write_text("v1\n")
    gate = asyncio.Event()
    withdrawn = asyncio.Event()

    async def wait(params: Any) -> Any:
        gate.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:  # the client's handler is cancelled by the daemon's $/cancelRequest
            withdrawn.set()
            raise

    d = await start_daemon(tmp_path / "state", fake, root=work)
    d.on_permission = wait
    fake.script(edit_call(target, "v1", "v2"))
    sid = await d.new_session(cwd=str(work))
    await d.request("dsh/followup", {"sessionId": sid, "message": {"content": "edit"}})
    await asyncio.wait_for(gate.wait(), 15)
    await d.request("dsh/cancel", {"sessionId": sid})
    reasons = await d.wait_idle_turn(sid)
    assert reasons == [{"kind": "aborted", "cause": "user"}]
    assert target.read_text() == "v1\n"
    (result,) = tool_results(d, sid)
    assert result["error"]["code"] == "ABORTED_BEFORE_DISPATCH"
    await asyncio.wait_for(withdrawn.wait(), 15)  # issue 24.5: the dialog is withdrawn
    await stop_daemon(d)


async def test_run_command_streams_output_as_tool_output_events(tmp_path: Path, fake: FakeDeepSeek) -> None:
    work = tmp_path / "work"
    work.mkdir()
    d = await start_daemon(tmp_path / "state", fake, root=work, init_options=UNCONFINED)
    command = "for i in 1 2 3; do echo line$i; sleep 0.05; done"
    fake.script(
        Reply.stream(tool_call_stream([("call_1", "run_command", {"command": command})])), text_reply("ran")
    )
    sid = await d.new_session(cwd=str(work))
    await run_turn(d, sid)
    (asked,) = d.permission_requests
    assert asked["preview"] == {"command": command, "cwd": str(work.resolve()), "sandbox": "full-access"}
    chunks = [e["data"]["text"] for e in d.of(sid, "tool/output")]
    assert "".join(chunks).split() == ["line1", "line2", "line3"]
    assert all("seq" not in e for e in d.of(sid, "tool/output"))
    await stop_daemon(d)


async def test_tools_follow_workspace_folder_changes(tmp_path: Path, fake: FakeDeepSeek) -> None:
    from lsprotocol import types

    work, other = tmp_path / "work", tmp_path / "other"
    work.mkdir()
    other.mkdir()
    (other / "notes.txt").write_text("from the second folder\n")
    read = Reply.stream(tool_call_stream([("c1", "read_file", {"path": str(other / "notes.txt")})]))
    fake.script(
        read,
        text_reply("no"),
        Reply.stream(tool_call_stream([("c2", "read_file", {"path": str(other / "notes.txt")})])),
        text_reply("yes"),
    )
    d = await start_daemon(tmp_path / "state", fake, root=work)
    sid = await d.new_session(cwd=str(work))
    await run_turn(d, sid)
    assert tool_results(d, sid)[0]["error"]["code"] == "OUTSIDE_WORKSPACE"
    d.client.workspace_did_change_workspace_folders(
        types.DidChangeWorkspaceFoldersParams(
            event=types.WorkspaceFoldersChangeEvent(
                added=[types.WorkspaceFolder(other.as_uri(), "other")], removed=[]
            )
        )
    )
    await run_turn(d, sid, "again")
    second = tool_results(d, sid)[1]
    assert "error" not in second
    assert "from the second folder" in second["message"]["content"][0]["content"][0]["text"]
    await stop_daemon(d)


async def test_allow_always_for_a_command_covers_that_command_only(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    d = await start_daemon(tmp_path / "state", fake, root=work, init_options=UNCONFINED)
    d.on_permission = lambda p: {"outcome": "allow-always"}

    def run(command: str, call_id: str) -> Reply:
        return Reply.stream(tool_call_stream([(call_id, "run_command", {"command": command})]))

    fake.script(
        run("echo a", "c1"),
        text_reply("1"),
        run("echo a", "c2"),
        text_reply("2"),
        run("echo b", "c3"),
        text_reply("3"),
    )
    sid = await d.new_session(cwd=str(work))
    for n in range(3):
        await run_turn(d, sid, f"turn {n}")
    assert [p["arguments"]["command"] for p in d.permission_requests] == ["echo a", "echo b"]
    await stop_daemon(d)


async def test_an_edit_is_not_made_if_the_file_changed_while_the_user_was_asked(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    target = work / "g.txt"
    target.write_text("alpha beta\n")

    def change_then_allow(params: Any) -> dict[str, str]:
        target.write_text("alpha beta gamma\n")  # someone edits the file while the dialog is open
        return {"outcome": "allow-once"}

    d = await start_daemon(tmp_path / "state", fake, root=work, apply_edit=False)
    d.on_permission = change_then_allow
    fake.script(edit_call(target, "beta", "BETA"), text_reply("ok"))
    sid = await d.new_session(cwd=str(work))
    await run_turn(d, sid)
    assert target.read_text() == "alpha beta gamma\n"  # the approved diff no longer applies: untouched
    assert tool_results(d, sid)[0]["error"]["code"] == "EDIT_CONFLICT"
    await stop_daemon(d)
