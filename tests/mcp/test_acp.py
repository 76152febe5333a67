"""ACP: `session/new.mcpServers` (ACP's list shape) makes an MCP server's tools available."""

from __future__ import annotations

import sys
from pathlib import Path

from acp import text_block
from acp.schema import EnvVariable, McpServerStdio

from tests.acp.harness import acp_daemon, settle
from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.mcp.support import FIXTURE, alive, read_pids
from tests.server.harness import tool_call_stream


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
        assert request["toolCall"]["toolCallId"] == "call_mcp_1"
        updates = [u for u in d.client.updates(sid) if u.get("toolCallId") == "call_mcp_1"]
        assert updates[-1]["status"] == "completed"
        tool_messages = [m for m in fake.requests[1].json["messages"] if m["role"] == "tool"]
        assert tool_messages[-1]["content"] == "echo: from zed"
        statuses = [m["params"] for m in d.client.wire if m.get("method") == "_dsh/mcp/status"]
        assert statuses and statuses[0]["sessionId"] == sid and statuses[0]["state"] == "ready"
        server_pid, grandchild = read_pids(pids)
        assert alive(server_pid) and alive(grandchild)
    await d.wait_for(lambda: not alive(server_pid) and not alive(grandchild))  # gone with the daemon
