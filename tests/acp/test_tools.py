"""Tool calls over ACP: a permission round trip with a diff, and edits through the client's fs."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from acp import text_block

from tests.acp.harness import acp_daemon, settle
from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.harness import tool_call_stream


def edit_then_done(path: str, old: str, new: str) -> tuple[Reply, Reply]:
    call = ("call_edit_1", "edit_file", {"path": path, "old_string": old, "new_string": new})
    return Reply.stream(tool_call_stream([call])), Reply.stream(text_stream(["done"]))


async def test_a_permission_round_trip_with_a_diff(tmp_path: Path, fake: FakeDeepSeek) -> None:
    fake.script(*edit_then_done("app.py", "x = 1", "x = 2"))
    async with acp_daemon(tmp_path / "state", fake) as d:
        target = d.work / "app.py"
        target.write_text("# app\nx = 1\n")
        sid = await d.new_session()
        response = await settle(d.conn.prompt(session_id=sid, prompt=[text_block("bump x")]))
        assert response.stop_reason == "end_turn"
        (request,) = d.client.permission_requests
        assert request["sessionId"] == sid
        assert {o["kind"] for o in request["options"]} == {"allow_once", "allow_always", "reject_once"}
        call = request["toolCall"]
        # the daemon's own id for the call, never the provider's
        assert call["toolCallId"].startswith("call-") and call["kind"] == "edit"
        assert call["locations"] == [{"path": str(target)}]
        (diff,) = [c for c in call["content"] if c["type"] == "diff"]
        assert diff["path"] == str(target)
        assert "x = 1" in diff["oldText"] and "x = 2" in diff["newText"] and "x = 1" not in diff["newText"]
        assert target.read_text() == "# app\nx = 2\n"  # no fs capability: written to disk
        # The client saw the call announced, then running, then completed with the diff.
        updates = d.client.call_updates(sid)
        assert {u["toolCallId"] for u in updates} == {call["toolCallId"]}
        assert updates[0]["sessionUpdate"] == "tool_call" and updates[0]["status"] == "pending"
        assert updates[-1]["status"] == "completed"
        assert any(c["type"] == "diff" for c in updates[-1]["content"])
        # The model got the tool result, then answered.
        tool_messages = [m for m in fake.requests[-1].json["messages"] if m["role"] == "tool"]
        assert tool_messages and tool_messages[0]["tool_call_id"] == "call_edit_1"


async def test_a_rejected_edit_fails_the_call_and_the_turn_goes_on(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    fake.script(*edit_then_done("app.py", "x = 1", "x = 2"))
    async with acp_daemon(tmp_path / "state", fake) as d:
        target = d.work / "app.py"
        target.write_text("x = 1\n")
        d.client.permission_answer = "reject"
        sid = await d.new_session()
        assert (
            await settle(d.conn.prompt(session_id=sid, prompt=[text_block("bump")]))
        ).stop_reason == "end_turn"
        assert target.read_text() == "x = 1\n"
        last = d.client.call_updates(sid)[-1]
        assert last["status"] == "failed"


async def test_edits_go_through_the_clients_fs_when_it_advertises_it(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    fake.script(*edit_then_done("app.py", "unsaved = 1", "unsaved = 2"))
    async with acp_daemon(tmp_path / "state", fake, fs=True) as d:
        target = d.work / "app.py"
        target.write_text("saved = 1\n")
        d.client.buffers[str(target)] = "unsaved = 1\n"  # the editor's buffer differs from the disk
        sid = await d.new_session()
        assert (
            await settle(d.conn.prompt(session_id=sid, prompt=[text_block("edit")]))
        ).stop_reason == "end_turn"
        assert d.client.writes == [(str(target), "unsaved = 2\n")]
        assert target.read_text() == "saved = 1\n"  # the editor owns saving
        (request,) = d.client.permission_requests
        (diff,) = [c for c in request["toolCall"]["content"] if c["type"] == "diff"]
        assert diff["oldText"] == "unsaved = 1\n" and diff["newText"] == "unsaved = 2\n"


async def test_command_output_accumulates_in_the_tool_call(tmp_path: Path, fake: FakeDeepSeek) -> None:
    call = ("call_run_1", "run_command", {"command": "echo one; echo two"})
    fake.script(Reply.stream(tool_call_stream([call])), Reply.stream(text_stream(["ran"])))
    async with acp_daemon(tmp_path / "state", fake) as d:
        d.client.permission_answer = "allow-always"
        sid = await d.new_session()
        assert (
            await settle(d.conn.prompt(session_id=sid, prompt=[text_block("run")]))
        ).stop_reason == "end_turn"
        (request,) = d.client.permission_requests
        assert request["toolCall"]["kind"] == "execute"
        updates = d.client.call_updates(sid)
        outputs = [
            u["content"][0]["content"]["text"]
            for u in updates
            if u.get("status") == "in_progress" and u.get("content")
        ]
        assert (
            outputs and "one\ntwo" in outputs[-1]
        )  # each update shows the end of the output so far (all of it, this short)
        assert updates[-1]["status"] == "completed"


async def test_a_cancelled_permission_cancels_the_turn(tmp_path: Path, fake: FakeDeepSeek) -> None:
    fake.script(*edit_then_done("app.py", "x = 1", "x = 2"))
    async with acp_daemon(tmp_path / "state", fake) as d:
        target = d.work / "app.py"
        target.write_text("x = 1\n")
        d.client.permission_answer = None
        sid = await d.new_session()
        assert (
            await settle(d.conn.prompt(session_id=sid, prompt=[text_block("bump")]))
        ).stop_reason == "cancelled"
        assert target.read_text() == "x = 1\n"


async def test_session_cancel_withdraws_the_open_permission_request(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """Issue 24.5: the client's permission dialog is withdrawn with `$/cancel_request` naming the
    request when `session/cancel` aborts the turn that asked (the tool run's task is cancelled)."""
    fake.script(*edit_then_done("app.py", "x = 1", "x = 2"))
    async with acp_daemon(tmp_path / "state", fake) as d:
        target = d.work / "app.py"
        target.write_text("x = 1\n")
        d.client.permission_answer = "hang"
        sid = await d.new_session()
        prompt = asyncio.ensure_future(d.conn.prompt(session_id=sid, prompt=[text_block("bump")]))
        await d.wait_for(lambda: bool(d.client.permission_requests))
        (asked,) = [m for m in d.client.wire if m.get("method") == "session/request_permission"]
        await d.conn.cancel(session_id=sid)
        assert (await settle(prompt)).stop_reason == "cancelled"
        await d.wait_for(
            lambda: any(
                m.get("method") == "$/cancel_request" and m["params"] == {"requestId": asked["id"]}
                for m in d.client.wire
            )
        )
        assert target.read_text() == "x = 1\n"


async def test_a_provider_reusing_call_0_gets_a_tool_call_id_per_call(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """OpenAI-compatible servers reuse `call_0` across turns: each call still gets its own `toolCallId`
    (live, in the permission request, and replayed by `session/load`), and the provider gets `call_0`
    back twice, as it sent it."""

    def edit(old: str, new: str) -> Reply:
        args = {"path": "app.py", "old_string": old, "new_string": new}
        return Reply.stream(tool_call_stream([("call_0", "edit_file", args)]))

    fake.script(edit("x = 1", "x = 2"), Reply.stream(text_stream(["one"])))
    fake.script(edit("x = 2", "x = 3"), Reply.stream(text_stream(["two"])))
    state = tmp_path / "state"
    async with acp_daemon(state, fake) as d:
        target = d.work / "app.py"
        target.write_text("x = 1\n")
        sid = await d.new_session()
        for text in ("bump", "bump again"):
            response = await settle(d.conn.prompt(session_id=sid, prompt=[text_block(text)]))
            assert response.stop_reason == "end_turn"
        assert target.read_text() == "x = 3\n"
        announced = [u["toolCallId"] for u in d.client.updates(sid, "tool_call")]
        assert len(set(announced)) == 2 and "call_0" not in announced
        assert [r["toolCall"]["toolCallId"] for r in d.client.permission_requests] == announced
        finished = [u["toolCallId"] for u in d.client.updates(sid) if u.get("status") == "completed"]
        assert finished == announced
        messages = fake.requests[-1].json["messages"]
        calls = [c["id"] for m in messages if m["role"] == "assistant" for c in m.get("tool_calls", ())]
        assert calls == ["call_0", "call_0"]
        assert [m["tool_call_id"] for m in messages if m["role"] == "tool"] == ["call_0", "call_0"]
    async with acp_daemon(state, fake) as again:
        await settle(again.conn.load_session(cwd=str(again.work), session_id=sid, mcp_servers=[]))
        assert [u["toolCallId"] for u in again.client.updates(sid, "tool_call")] == announced


async def test_a_widening_offers_always_saved_to_config_and_keeps_it(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """An escalation gets a fourth option; choosing it saves the widening to config.json (protocol.md
    §16) and the call runs. A plain command's request does not offer it, and choosing it there anyway
    counts as cancelled (nothing runs)."""
    state = tmp_path / "state"
    state.mkdir()
    (state / "config.json").write_text('{"tools": {"sandbox": "full-access"}, "model": "deepseek-chat"}\n')
    outside = tmp_path / "outside"
    outside.mkdir()
    widen = {"reason": "the cache lives there", "writable": [str(outside)], "network": ["pypi.org"]}
    kept = ("call_1", "run_command", {"command": f"echo kept > {outside}/a.txt", "escalate": widen})
    plain = ("call_2", "run_command", {"command": f"echo plain > {outside}/b.txt"})
    fake.script(
        Reply.stream(tool_call_stream([kept])),
        Reply.stream(text_stream(["done"])),
        Reply.stream(tool_call_stream([plain])),
    )
    async with acp_daemon(state, fake) as d:
        d.client.permission_answer = "allow-always-persist"
        sid = await d.new_session()
        response = await settle(d.conn.prompt(session_id=sid, prompt=[text_block("go")]))
        assert response.stop_reason == "end_turn"
        response = await settle(d.conn.prompt(session_id=sid, prompt=[text_block("again")]))
        assert response.stop_reason == "cancelled"
        widened, asked = d.client.permission_requests
        assert [o["optionId"] for o in widened["options"]] == [
            "allow-once", "allow-always", "allow-always-persist", "reject",
        ]  # fmt: skip
        assert "allow-always-persist" not in [o["optionId"] for o in asked["options"]]
    assert (outside / "a.txt").read_text() == "kept\n" and not (outside / "b.txt").exists()
    saved = json.loads((state / "config.json").read_text())
    assert saved["tools"]["sandbox"] == {
        "mode": "full-access", "writable": [str(outside.resolve())], "network": {"allow": ["pypi.org"]},
    }  # fmt: skip
    assert saved["model"] == "deepseek-chat"


def test_tool_kinds_and_titles_of_the_process_tools() -> None:
    """Issue 39.8: each of dsh's tools gets the ACP kind that fits (a background process's output is
    read, input and stop execute); nothing fetches, so no tool is `fetch`."""
    from dsh_daemon.acp.updates import KINDS, describe_tool

    shown = {
        name: (d.title, d.kind)
        for name, args in (
            ("process_read", {"process_id": 3}),
            ("process_write", {"process_id": 3, "text": "q\n"}),
            ("process_stop", {"process_id": 3}),
            ("run_command", {"command": "npm run dev", "background": True}),
            ("update_plan", {"steps": []}),
        )
        for d in [describe_tool(name, args, "/p")]
    }
    assert shown == {
        "process_read": ("Read the output of process 3", "read"),
        "process_write": ("Write to process 3", "execute"),
        "process_stop": ("Stop process 3", "execute"),
        "run_command": ("Run in the background: npm run dev", "execute"),
        "update_plan": ("Update the plan", "think"),
    }
    assert "fetch" not in KINDS.values()
