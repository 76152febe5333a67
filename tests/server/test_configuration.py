"""`workspace/didChangeConfiguration` (issue 10 item 9): the editor's `dsh` settings apply from the
next model request or tool call, without a restart; bad values change nothing and say why."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lsprotocol import types

from tests.fakes.deepseek_server import FakeDeepSeek, Reply
from tests.server.harness import UNCONFINED, Daemon, start_daemon, stop_daemon, text_reply, tool_call_stream
from tests.server.test_tools_e2e import run_turn, tool_results


def change_settings(daemon: Daemon, dsh: Any) -> None:
    daemon.client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"dsh": dsh})
    )


async def test_provider_settings_apply_to_the_next_request_and_keep_the_key(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    d = await start_daemon(tmp_path / "state", fake)
    fake.script(text_reply("one"), text_reply("two"))
    sid = await d.new_session()
    await run_turn(d, sid, "first")
    change_settings(d, {"provider": {"model": "local-coder", "maxTokens": 123}})
    await run_turn(d, sid, "second")
    first, second = (r.json for r in fake.requests)
    assert first["model"] == "deepseek-v4-flash" and second["model"] == "local-coder"
    assert second["max_tokens"] == 123
    assert fake.requests[1].headers["authorization"] == "Bearer sk-test-secret-key-0000"
    await stop_daemon(d)


async def test_a_bad_setting_is_shown_and_changes_nothing(tmp_path: Path, fake: FakeDeepSeek) -> None:
    d = await start_daemon(tmp_path / "state", fake)
    fake.script(text_reply("one"))
    sid = await d.new_session()
    change_settings(d, {"provider": {"model": "never-used"}, "permissionTimeoutS": "ten"})
    await d.wait_for(lambda: bool(d.client.messages))
    (shown,) = d.client.messages
    assert shown.type == types.MessageType.Error and "permissionTimeoutS" in shown.message
    await run_turn(d, sid, "still the old settings")
    assert fake.requests[0].json["model"] == "deepseek-v4-flash"
    await stop_daemon(d)


async def test_tool_permissions_change_for_the_next_call(tmp_path: Path, fake: FakeDeepSeek) -> None:
    work = tmp_path / "work"
    work.mkdir()
    d = await start_daemon(tmp_path / "state", fake, root=work, init_options=UNCONFINED)

    def run(call_id: str) -> Reply:
        return Reply.stream(tool_call_stream([(call_id, "run_command", {"command": "echo hi"})]))

    fake.script(run("c1"), text_reply("ran"), run("c2"), text_reply("refused"))
    sid = await d.new_session(cwd=str(work))
    await run_turn(d, sid, "run it")
    change_settings(d, {"tools": {"permissions": {"run_command": "deny"}}})
    await run_turn(d, sid, "run it again")
    asked = [d.provider_id(sid, p["callId"]) for p in d.permission_requests]
    assert asked == ["c1"]  # the second was never asked
    results = tool_results(d, sid)
    assert "error" not in results[0] and results[1]["error"]["code"] == "DENIED"
    await stop_daemon(d)


async def test_agent_budget_applies_to_an_open_session_from_its_next_request(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """Issue 35 item 2: `agent.budget` set by an editor while a session is open stops its next turn
    before the request past the cap (`turn/end` `budget`); lifted, the turn runs to its end again."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("a\n")
    d = await start_daemon(tmp_path / "state", fake, root=work)

    def read(call_id: str) -> Reply:
        return Reply.stream(tool_call_stream([(call_id, "read_file", {"path": "a.txt"})]))

    fake.script(read("c1"), read("c2"), text_reply("read it"))
    sid = await d.new_session(cwd=str(work))
    change_settings(d, {"agent": {"budget": {"steps": 1}}})
    await run_turn(d, sid, "read it")
    ends = [e["data"]["reason"] for e in d.of(sid, "turn/end")]
    assert ends == [{"kind": "budget", "budget": {"limit": "steps", "cap": 1, "used": 1}}]
    assert len(fake.requests) == 1
    change_settings(d, {"agent": {"budget": None}})
    await run_turn(d, sid, "go on")
    assert d.of(sid, "turn/end")[-1]["data"]["reason"] == {"kind": "completed"}
    assert len(fake.requests) == 3
    await stop_daemon(d)
