"""ACP: `session/new.mcpServers` (ACP's list shape) makes an MCP server's tools available."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from acp import text_block
from acp.schema import EnvVariable, McpServerStdio

from tests.acp.harness import acp_daemon, settle
from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.mcp.support import FIXTURE, alive, read_pids
from tests.server.harness import tool_call_stream


def call_titled(d: Any, session_id: str, title: str) -> str:
    """The daemon's id of the tool call first announced with `title` (ids are the daemon's own)."""
    return next(
        u["toolCallId"]
        for u in d.client.updates(session_id)
        if u.get("sessionUpdate") == "tool_call" and u.get("title") == title
    )


async def test_session_new_mcp_servers_make_their_tools_available(tmp_path: Path, fake: FakeDeepSeek) -> None:
    pids = tmp_path / "pids"
    call = ("call_mcp_1", "mcp__fix__echo", {"text": "from zed"})
    fake.script(Reply.stream(tool_call_stream([call])), Reply.stream(text_stream(["done"])))
    async with acp_daemon(tmp_path / "state", fake) as d:
        (init,) = [m for m in d.client.wire if "agentCapabilities" in (m.get("result") or {})]
        assert init["result"]["agentCapabilities"]["mcpCapabilities"] == {"http": True, "sse": False}
        server = McpServerStdio(
            name="fix",
            command=sys.executable,
            args=[str(FIXTURE)],
            env=[EnvVariable(name="FIXTURE_PIDS", value=str(pids))],
        )
        response = await d.conn.new_session(cwd=str(d.work), mcp_servers=[server])
        sid = response.session_id
        result = await settle(d.conn.prompt(session_id=sid, prompt=[text_block("echo something")]))
        assert result.stop_reason == "end_turn"
        tools = {t["function"]["name"] for t in fake.requests[0].json["tools"]}
        assert "mcp__fix__echo" in tools
        (request,) = d.client.permission_requests  # asked by default
        call_id = request["toolCall"]["toolCallId"]  # the daemon's id, not the provider's call_mcp_1
        assert call_id.startswith("call-")
        updates = [u for u in d.client.updates(sid) if u.get("toolCallId") == call_id]
        assert updates[-1]["status"] == "completed"
        tool_messages = [m for m in fake.requests[1].json["messages"] if m["role"] == "tool"]
        assert tool_messages[-1]["content"] == "echo: from zed"
        statuses = [m["params"] for m in d.client.wire if m.get("method") == "_dsh/mcp/status"]
        assert statuses and statuses[0]["sessionId"] == sid and statuses[0]["state"] == "ready"
        server_pid, grandchild = read_pids(pids)
        assert alive(server_pid) and alive(grandchild)
    await d.wait_for(lambda: not alive(server_pid) and not alive(grandchild))  # gone with the daemon


async def test_mcp_images_resources_progress_and_titles_reach_the_client(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """Issue 24.12: an MCP tool's image, resource link and embedded resource are shown to the client
    as ACP content (the text-only model reads a note naming the image), its progress notifications
    become tool-call updates, and the call is titled "server: tool"."""
    fake.script(
        Reply.stream(tool_call_stream([("call_chart", "mcp__fix__chart", {})])),
        Reply.stream(tool_call_stream([("call_slow", "mcp__fix__slow", {"steps": 3})])),
        Reply.stream(text_stream(["done"])),
    )
    async with acp_daemon(tmp_path / "state", fake) as d:
        d.client.permission_answer = "allow-always"
        server = McpServerStdio(name="fix", command=sys.executable, args=[str(FIXTURE)], env=[])
        sid = (await d.conn.new_session(cwd=str(d.work), mcp_servers=[server])).session_id
        result = await settle(d.conn.prompt(session_id=sid, prompt=[text_block("chart it")]))
        assert result.stop_reason == "end_turn"
        chart_id = call_titled(d, sid, "fix: chart")
        chart = [u for u in d.client.updates(sid) if u.get("toolCallId") == chart_id]
        asked = [r["toolCall"] for r in d.client.permission_requests]
        assert chart[0]["title"] == "fix: chart" and asked[0]["title"] == "Run chart (MCP server fix)"
        final = chart[-1]
        assert final["status"] == "completed"
        shown = [c["content"] for c in final["content"]]
        assert shown[0]["type"] == "text" and shown[0]["text"].startswith(
            "the chart:\n[image/png, 14 KB from"
        )
        image = shown[1]
        assert image["type"] == "image" and image["mimeType"] == "image/png" and len(image["data"]) > 18_000
        assert shown[2] == {
            "type": "resource_link",
            "uri": "file:///data/report.csv",
            "name": "report.csv",
            "mimeType": "text/csv",
        }
        assert shown[3] == {
            "type": "resource",
            "resource": {
                "uri": "file:///data/notes.md",
                "mimeType": "text/markdown",
                "text": "# Notes\nfine",
            },
        }
        # The model read words: what the image is and where it came from, the link, the resource.
        (tool,) = [m for m in fake.requests[1].json["messages"] if m["role"] == "tool"]
        assert tool["content"] == (
            "the chart:\n"
            "[image/png, 14 KB from fix: chart; not readable by this text-only model]\n"
            "[resource link: file:///data/report.csv (report.csv)]\n"
            "[resource file:///data/notes.md]\n# Notes\nfine"
        )
        # Progress notifications of the slow tool, as they came.
        slow_id = call_titled(d, sid, "fix: slow")
        slow = [u for u in d.client.updates(sid) if u.get("toolCallId") == slow_id]
        progress = [
            u["content"][0]["content"]["text"]
            for u in slow
            if u["status"] == "in_progress" and u.get("content")
        ]
        assert (
            progress
            and progress[-1] == "[progress 1/3] step 1\n[progress 2/3] step 2\n[progress 3/3] step 3\n"
        )
        assert slow[-1]["status"] == "completed"
        # A replay in a new process shows the image and the resources again (they are in the log).
    fake.script()
    async with acp_daemon(tmp_path / "state", fake) as d:
        await settle(d.conn.load_session(cwd=str(d.work), session_id=sid, mcp_servers=[]))
        replayed = [u for u in d.client.updates(sid) if u.get("toolCallId") == chart_id]
        assert replayed[0]["title"] == "fix: chart"
        assert [c["content"]["type"] for c in replayed[-1]["content"]] == [
            "text",
            "image",
            "resource_link",
            "resource",
        ]
