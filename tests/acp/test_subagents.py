"""Subagents over ACP (issue 34.1): a child runs under its parent's own sandbox mode, and its
permission question comes through the parent's `session/request_permission`, naming the child.
Issue 39.8: the `run_subagent` call is a card whose content follows the child's steps live and ends
as the child's summary; a child's call a permission request announced is finished, not left pending."""

from __future__ import annotations

from pathlib import Path

import pytest
from acp import text_block

from dsh_daemon.sandbox.level import probe_level
from dsh_daemon.session.store import SessionStore
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
        assert request["toolCall"]["title"].startswith("Subagent “worker”:")
        assert (project / "a.txt").read_text() == "two\n"
        # the child's call was announced as a card of its own, naming the child, and it ends completed
        child_call = request["toolCall"]["toolCallId"]
        card = [u for u in d.client.updates(sid) if u.get("toolCallId") == child_call]
        assert card[0]["sessionUpdate"] == "tool_call" and card[0]["title"].startswith("Subagent “worker”:")
        assert card[-1]["status"] == "completed", card


async def test_the_subagent_card_follows_the_childs_steps_and_ends_with_its_summary(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    state, project = tmp_path / "state", tmp_path / "project"
    project.mkdir()
    (project / "a.txt").write_text("one\n")
    async with acp_daemon(state, fake) as d:
        sid = await d.new_session(cwd=project)
        fake.script(delegate("CHILD-READER: read a.txt", "explore"), Reply.stream(text_stream(["done"])))
        reads = [("r1", "read_file", {"path": "a.txt"}), ("r2", "grep", {"pattern": "one", "path": "."})]
        fake.script_for(
            "CHILD-READER",
            Reply.stream(tool_call_stream(reads)),
            Reply.stream(text_stream(["SUMMARY-READER: a.txt says one"])),
        )
        stop = await settle(d.conn.prompt(session_id=sid, prompt=[text_block("go")]))
        assert stop.stop_reason == "end_turn"
        card = [u for u in d.client.updates(sid) if "toolCallId" in u]
        assert len({u["toolCallId"] for u in card}) == 1, card  # the child's calls are lines, not cards
        assert card[0]["sessionUpdate"] == "tool_call" and card[0]["title"] == "Subagent “worker”"
        shown = [u["content"][0]["content"]["text"] for u in card[1:-1] if u.get("content")]
        assert shown and shown[0].startswith("Subagent “worker”, session ")
        assert "▸ Read a.txt\n▸ Search one in .\n" in shown[-1], shown
        assert card[-1]["status"] == "completed"
        assert "SUMMARY-READER: a.txt says one" in card[-1]["content"][0]["content"]["text"]
    fake.script()
    async with acp_daemon(state, fake) as d:  # a replay shows the card with its summary
        await settle(d.conn.load_session(cwd=str(project), session_id=sid, mcp_servers=[]))
        card = [u for u in d.client.updates(sid) if "toolCallId" in u]
        assert card[0]["title"] == "Subagent “worker”"
        assert "SUMMARY-READER" in card[-1]["content"][0]["content"]["text"]


async def test_the_cost_is_the_whole_tasks_live_and_after_a_load(tmp_path: Path, fake: FakeDeepSeek) -> None:
    """`usage_update`'s `cost` adds what the session's subagents cost (their turns are their own
    sessions'), so the editor's figure is what the task cost: live, and from the store on a load."""
    state, project = tmp_path / "state", tmp_path / "project"
    project.mkdir()
    async with acp_daemon(state, fake) as d:
        sid = await d.new_session(cwd=project)
        fake.script(delegate("CHILD-ASKED: say one thing", "explore"), Reply.stream(text_stream(["done"])))
        fake.script_for("CHILD-ASKED", Reply.stream(text_stream(["SUMMARY-ASKED"])))
        stop = await settle(d.conn.prompt(session_id=sid, prompt=[text_block("go")]))
        assert stop.stop_reason == "end_turn"
        live = [u["cost"]["amount"] for u in d.client.updates(sid, "usage_update") if "cost" in u]
    store = SessionStore(state)
    ((child, _call),) = store.children_of(sid)

    def cost_of(session_id: str) -> float:
        return sum(e.data["usage"]["costUsd"] for e in store.load_events_of_type(session_id, "turn/usage"))

    own, children = cost_of(sid), cost_of(child)
    assert own > 0 and children > 0
    # The child's turn ended before the parent's: its cost came first, then the whole.
    assert live == [pytest.approx(children, abs=1e-6), pytest.approx(own + children, abs=1e-6)]
    fake.script()
    async with acp_daemon(state, fake) as d:
        await settle(d.conn.load_session(cwd=str(project), session_id=sid, mcp_servers=[]))
        loaded = [u["cost"]["amount"] for u in d.client.updates(sid, "usage_update") if "cost" in u]
        assert loaded[-1] == pytest.approx(own + children, abs=1e-6)
