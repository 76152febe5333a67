"""Issue 41.5 over ACP: the sandbox mode as a per-session config option (durable, like the model),
and an escalation asked through `session/request_permission` with the exact widening shown."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from acp import text_block

from dsh_daemon.sandbox.level import probe_level
from tests.acp.harness import acp_daemon, settle
from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.harness import tool_call_stream

confined = pytest.mark.skipif(not probe_level().confined, reason=probe_level().describe())


def run_then_done(command: str, **extra: Any) -> tuple[Reply, Reply]:
    call = ("call_run_1", "run_command", {"command": command, **extra})
    return Reply.stream(tool_call_stream([call])), Reply.stream(text_stream(["ran"]))


def tool_result(fake: FakeDeepSeek) -> str:
    (tool,) = [m for m in fake.requests[-1].json["messages"] if m["role"] == "tool"]
    return str(tool["content"])


def sandbox_of(options: Any) -> Any:
    return next(o for o in options if (o.id if hasattr(o, "id") else o["id"]) == "sandbox")


def configured(state: Path, mode: str) -> None:
    state.mkdir(parents=True, exist_ok=True)
    (state / "config.json").write_text(json.dumps({"tools": {"sandbox": mode}}))


@confined
async def test_the_sandbox_is_a_config_option_of_the_session_kept_across_processes(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    state, project = tmp_path / "state", tmp_path / "project"
    project.mkdir()
    configured(state, "workspace-write")
    async with acp_daemon(state, fake) as d:
        created = await d.conn.new_session(cwd=str(project), mcp_servers=[])
        sid = created.session_id
        option = sandbox_of(created.config_options)
        assert option.current_value == "workspace-write"
        assert [o.value for o in option.options] == ["read-only", "workspace-write", "full-access"]
        assert "configured: workspace-write" in (option.description or "")
        changed = await settle(
            d.conn.set_config_option(config_id="sandbox", session_id=sid, value="read-only")
        )
        assert sandbox_of(changed.config_options).current_value == "read-only"
        await d.wait_for(lambda: bool(d.client.updates(sid, "config_option_update")))
        (update,) = d.client.updates(sid, "config_option_update")
        assert sandbox_of(update["configOptions"])["currentValue"] == "read-only"
        # In effect from the next command: a write in the workspace is refused, unasked.
        fake.script(*run_then_done("echo hi > made.txt"))
        assert (
            await settle(d.conn.prompt(session_id=sid, prompt=[text_block("go")]))
        ).stop_reason == "end_turn"
        assert not (project / "made.txt").exists() and d.client.permission_requests == []
        assert "ran confined in read-only mode" in tool_result(fake)
        # A mode not offered is refused naming the choices; the choice stays.
        with pytest.raises(Exception, match="sandbox must be one of read-only, workspace-write, full-access"):
            await settle(d.conn.set_config_option(config_id="sandbox", session_id=sid, value="yolo"))
    # The next process that loads the session shows and uses the session's choice.
    async with acp_daemon(state, fake) as d:
        loaded = await settle(d.conn.load_session(cwd=str(project), session_id=sid, mcp_servers=[]))
        assert sandbox_of(loaded.config_options).current_value == "read-only"
        fake.script(*run_then_done("echo again > made.txt"))
        assert (
            await settle(d.conn.prompt(session_id=sid, prompt=[text_block("go")]))
        ).stop_reason == "end_turn"
        assert not (project / "made.txt").exists()
        # full-access chosen in the client: the command runs unconfined, after asking.
        await settle(d.conn.set_config_option(config_id="sandbox", session_id=sid, value="full-access"))
        fake.script(*run_then_done(f"echo out > {tmp_path}/outside.txt"))
        d.client.permission_answer = "allow-once"
        assert (
            await settle(d.conn.prompt(session_id=sid, prompt=[text_block("go")]))
        ).stop_reason == "end_turn"
        assert (tmp_path / "outside.txt").read_text() == "out\n"
        assert len(d.client.permission_requests) == 1
    # The durable choice is in the session's log, the latest one whole.
    async with acp_daemon(state, fake) as d:
        resumed = await settle(d.conn.resume_session(cwd=str(project), session_id=sid, mcp_servers=[]))
        assert sandbox_of(resumed.config_options).current_value == "full-access"


@confined
async def test_an_escalation_shows_the_reason_and_the_exact_widening(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    state, project, cache = tmp_path / "state", tmp_path / "project", tmp_path / "cache"
    project.mkdir()
    cache.mkdir()
    configured(state, "workspace-write")
    escalate = {"reason": "the build keeps its cache there", "writable": [str(cache)]}
    async with acp_daemon(state, fake) as d:
        sid = await d.new_session(cwd=project)
        fake.script(*run_then_done(f"echo kept > {cache}/c.txt", escalate=escalate))
        d.client.permission_answer = "allow-once"
        assert (
            await settle(d.conn.prompt(session_id=sid, prompt=[text_block("go")]))
        ).stop_reason == "end_turn"
        assert (cache / "c.txt").read_text() == "kept\n"
        (request,) = d.client.permission_requests
        call = request["toolCall"]
        assert call["title"] == f"Widen the sandbox (writable: {cache}) to run: echo kept > {cache}/c.txt"
        text = call["content"][0]["content"]["text"]
        assert "Reason: the build keeps its cache there" in text and f"Writable: {cache}" in text
        assert "(workspace-write)" in text and "every later command" in text
        assert [(o["optionId"], o["kind"], o["name"]) for o in request["options"]] == [
            ("allow-once", "allow_once", "Allow once"),
            ("allow-always", "allow_always", "Allow for this session"),
            ("reject", "reject_once", "Reject"),
        ]
        # Rejected: nothing runs.
        fake.script(*run_then_done(f"echo again > {cache}/d.txt", escalate=escalate))
        d.client.permission_answer = "reject"
        assert (
            await settle(d.conn.prompt(session_id=sid, prompt=[text_block("go")]))
        ).stop_reason == "end_turn"
        assert not (cache / "d.txt").exists()
        # An unconfined escalation says so, and what "for this session" covers.
        fake.script(*run_then_done("true", escalate={"reason": "needs it", "unconfined": True}))
        d.client.permission_answer = "reject"
        assert (
            await settle(d.conn.prompt(session_id=sid, prompt=[text_block("go")]))
        ).stop_reason == "end_turn"
        text = d.client.permission_requests[-1]["toolCall"]["content"][0]["content"]["text"]
        assert "Unconfined: no sandbox at all" in text and "this exact command unconfined" in text
