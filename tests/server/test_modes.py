"""Session modes (issue 24.9): ask, accept-edits, plan — durable, per session, over the LSP wire."""

from __future__ import annotations

from pathlib import Path

import pytest
from pygls.exceptions import JsonRpcException

from tests.fakes.deepseek_server import FakeDeepSeek, Reply
from tests.server.harness import UNCONFINED, start_daemon, stop_daemon, text_reply, tool_call_stream
from tests.server.test_tools_e2e import edit_call, run_turn, tool_results


def offered_tools(fake: FakeDeepSeek, index: int = -1) -> set[str]:
    return {t["function"]["name"] for t in fake.requests[index].json.get("tools", [])}


async def test_plan_offers_only_read_tools_and_refuses_an_edit_the_model_tries(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    state = tmp_path / "state"
    work = tmp_path / "work"
    work.mkdir()
    target = work / "a.txt"
    target.write_text("one\n")
    d = await start_daemon(state, fake, root=work)
    try:
        sid = await d.new_session(cwd=str(work))
        assert (await d.request("dsh/session/attach", {"sessionId": sid}))["mode"] == "ask"
        assert await d.request("dsh/session/setMode", {"sessionId": sid, "mode": "plan"}) == {}
        (event,) = d.of(sid, "session/mode")
        assert event["data"] == {"mode": "plan"} and isinstance(event["seq"], int)
        fake.script(edit_call(target, "one", "two"), text_reply("planned"))
        await run_turn(d, sid)
        # (run_command too: its commands run read-only in plan mode)
        assert offered_tools(fake, 0) == {
            "read_file",
            "list_dir",
            "find_files",
            "grep",
            "run_command",
            "update_plan",
            "propose_plan",
        }
        assert d.permission_requests == []  # nobody is asked: the call is refused
        (result,) = tool_results(d, sid)
        assert "plan mode" in str(result)
        assert target.read_text() == "one\n"
        # The same mode again writes nothing; a mode that does not exist is refused by name.
        await d.request("dsh/session/setMode", {"sessionId": sid, "mode": "plan"})
        assert len(d.of(sid, "session/mode")) == 1
        with pytest.raises(JsonRpcException) as bad:
            await d.request("dsh/session/setMode", {"sessionId": sid, "mode": "yolo"})
        assert bad.value.data["code"] == "invalid_params" and "mode" in bad.value.message
    finally:
        await stop_daemon(d)
    # The mode is the session's: a later process opens it in plan mode.
    d = await start_daemon(state, fake, root=work)
    try:
        attached = await d.request("dsh/session/attach", {"sessionId": sid})
        assert attached["mode"] == "plan"
        fake.script(text_reply("still planning"))
        await run_turn(d, sid, "more")
        assert offered_tools(fake) == {
            "read_file",
            "list_dir",
            "find_files",
            "grep",
            "run_command",
            "update_plan",
            "propose_plan",
        }
        await d.request("dsh/session/setMode", {"sessionId": sid, "mode": "ask"})
        fake.script(text_reply("back"))
        await run_turn(d, sid, "and now")
        assert {"edit_file", "write_file", "run_command"} <= offered_tools(fake)
    finally:
        await stop_daemon(d)


async def test_accept_edits_applies_edits_without_asking_and_still_asks_for_unconfined_commands(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    target = work / "b.txt"
    target.write_text("one\n")
    d = await start_daemon(tmp_path / "state", fake, root=work, init_options=UNCONFINED)
    try:
        sid = await d.new_session(cwd=str(work))
        await d.request("dsh/session/setMode", {"sessionId": sid, "mode": "accept-edits"})
        command = ("call_2", "run_command", {"command": "echo hi"})
        fake.script(
            edit_call(target, "one", "two"), Reply.stream(tool_call_stream([command])), text_reply("done")
        )
        await run_turn(d, sid)
        assert len(d.applied_edits) == 1  # the edit went to the editor without a question
        assert tool_results(d, sid)[0].get("isError") is not True
        assert [r["tool"] for r in d.permission_requests] == ["run_command"]
    finally:
        await stop_daemon(d)


async def test_models_list_names_the_configured_models(tmp_path: Path, fake: FakeDeepSeek) -> None:
    d = await start_daemon(tmp_path / "state", fake)
    try:
        listed = await d.request("dsh/models/list", {})
        assert listed["current"] == "deepseek-v4-flash"
        assert [m["id"] for m in listed["models"]][:2] == ["deepseek-v4-flash", "deepseek-v4-pro"]
        assert listed["models"][0]["contextWindow"] == 1_000_000
    finally:
        await stop_daemon(d)


async def test_set_model_reaches_the_next_request_is_durable_and_listed(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """`dsh/session/setModel` (issue 36.5): the session's own model and effort, from its next request, in a
    durable `session/settings`; `dsh/models/list {sessionId}` answers them; the daemon's `current` stays."""
    state = tmp_path / "state"
    thinking = {"thinking": True}  # the effort is sent only while the model thinks
    d = await start_daemon(state, fake, init_options=thinking)
    try:
        sid = await d.new_session()
        listed = await d.request("dsh/models/list", {"sessionId": sid})
        assert (listed["current"], listed["reasoningEffort"]) == ("deepseek-v4-flash", "high")
        efforts = {m["id"]: m.get("reasoningEfforts") for m in listed["models"]}
        assert efforts["deepseek-v4-pro"] == ["high", "max"]
        params = {"sessionId": sid, "model": "deepseek-v4-pro", "reasoningEffort": "max"}
        assert await d.request("dsh/session/setModel", params) == {}
        (event,) = d.of(sid, "session/settings")
        assert (event["data"]["model"], event["data"]["reasoningEffort"]) == ("deepseek-v4-pro", "max")
        fake.script(text_reply("on pro"))
        await run_turn(d, sid)
        body = fake.requests[-1].json
        assert (body["model"], body["reasoning_effort"]) == ("deepseek-v4-pro", "max")
        listed = await d.request("dsh/models/list", {"sessionId": sid})
        assert (listed["current"], listed["reasoningEffort"]) == ("deepseek-v4-pro", "max")
        assert (await d.request("dsh/models/list", {}))["current"] == "deepseek-v4-flash"
        # A model not offered, an effort that does not exist, or nothing at all: refused, nothing written.
        for bad in ({"model": "gpt-9"}, {"reasoningEffort": "low"}, {}):
            with pytest.raises(JsonRpcException) as refused:
                await d.request("dsh/session/setModel", {"sessionId": sid, **bad})
            assert refused.value.data["code"] == "invalid_params"
        assert len(d.of(sid, "session/settings")) == 1
    finally:
        await stop_daemon(d)
    d = await start_daemon(state, fake, init_options=thinking)  # a later process keeps the choice
    try:
        await d.request("dsh/session/attach", {"sessionId": sid})
        fake.script(text_reply("still pro"))
        await run_turn(d, sid)
        assert (fake.requests[-1].json["model"], fake.requests[-1].json["reasoning_effort"]) == (
            "deepseek-v4-pro",
            "max",
        )
    finally:
        await stop_daemon(d)
