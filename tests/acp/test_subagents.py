"""Subagents over ACP (issue 34.1): a child runs under its parent's own sandbox mode, and its
permission question comes through the parent's `session/request_permission`, naming the child."""

from __future__ import annotations

from pathlib import Path

import pytest
from acp import text_block

from dsh_daemon.sandbox.level import probe_level
from tests.acp.harness import acp_daemon, settle
from tests.acp.test_sandbox import configured
from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.harness import tool_call_stream

confined = pytest.mark.skipif(not probe_level().confined, reason=probe_level().describe())


def delegate(prompt: str, tools: str) -> Reply:
    call = ("s1", "run_subagent", {"description": "worker", "prompt": prompt, "tools": tools})
    return Reply.stream(tool_call_stream([call]))


@confined
async def test_a_child_runs_under_its_parents_sandbox_mode(tmp_path: Path, fake: FakeDeepSeek) -> None:
    state, project = tmp_path / "state", tmp_path / "project"
    project.mkdir()
    configured(state, "workspace-write")
    async with acp_daemon(state, fake) as d:
        sid = await d.new_session(cwd=project)
        await settle(d.conn.set_config_option(config_id="sandbox", session_id=sid, value="read-only"))
        fake.script(delegate("CHILD-WRITER: write a file", "all"), Reply.stream(text_stream(["done"])))
        fake.script_for(
            "CHILD-WRITER",
            Reply.stream(tool_call_stream([("w1", "run_command", {"command": "echo hi > made.txt"})])),
            Reply.stream(text_stream(["SUMMARY-WRITER"])),
        )
        stop = await settle(d.conn.prompt(session_id=sid, prompt=[text_block("go")]))
        assert stop.stop_reason == "end_turn"
        # the parent's read-only mode held for the child: refused unasked, nothing written
        assert not (project / "made.txt").exists() and d.client.permission_requests == []
        child_tool_results = [
            str(m["content"])
            for r in fake.requests
            if "CHILD-WRITER" in str(next(m for m in r.json["messages"] if m["role"] == "user"))
            for m in r.json["messages"]
            if m["role"] == "tool"
        ]
        assert any("read-only" in text for text in child_tool_results), child_tool_results


async def test_a_childs_permission_question_reaches_the_acp_client_naming_the_child(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    state, project = tmp_path / "state", tmp_path / "project"
    project.mkdir()
    (project / "a.txt").write_text("one\n")
    async with acp_daemon(state, fake) as d:
        sid = await d.new_session(cwd=project)
        fake.script(delegate("CHILD-EDITOR: edit a.txt", "edit"), Reply.stream(text_stream(["done"])))
        edit = {"path": str(project / "a.txt"), "old_string": "one", "new_string": "two"}
        fake.script_for(
            "CHILD-EDITOR",
            Reply.stream(tool_call_stream([("e1", "edit_file", edit)])),
            Reply.stream(text_stream(["SUMMARY-EDITOR"])),
        )
        d.client.permission_answer = "allow-once"
        stop = await settle(d.conn.prompt(session_id=sid, prompt=[text_block("go")]))
        assert stop.stop_reason == "end_turn"
        (request,) = d.client.permission_requests
        assert "worker" in str(request) and (project / "a.txt").read_text() == "two\n"
