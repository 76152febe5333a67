"""MCP servers' tools through the real daemon (LSP wire), with the FastMCP fixture server over stdio."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.fakes.deepseek_server import FakeDeepSeek, Reply
from tests.mcp.support import fixture_server
from tests.server.harness import Daemon, start_daemon, stop_daemon, text_reply, tool_call_stream


def call(name: str, args: dict[str, Any], call_id: str = "call_1") -> Reply:
    return Reply.stream(tool_call_stream([(call_id, name, args)]))


def offered(fake: FakeDeepSeek, index: int) -> dict[str, Any]:
    """The tools of the model request `index`, by name."""
    tools = fake.requests[index].json.get("tools") or []
    return {t["function"]["name"]: t["function"] for t in tools}


def tool_results(daemon: Daemon, sid: str) -> list[dict[str, Any]]:
    return [e["data"] for e in daemon.of(sid, "tool/result")]


async def run_turn(daemon: Daemon, sid: str, text: str = "do it") -> None:
    done = len(daemon.of(sid, "turn/end"))
    await daemon.request("dsh/followup", {"sessionId": sid, "message": {"content": text}})
    await daemon.wait_idle_turn(sid, done + 1)


async def test_tool_offered_called_and_its_result_in_the_next_request(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    options = {"thinking": False, "mcpServers": {"fix": fixture_server()}}
    d = await start_daemon(tmp_path / "state", fake, init_options=options)
    fake.script(call("mcp__fix__echo", {"text": "hi there"}), text_reply("done"))
    sid = await d.new_session()
    await run_turn(d, sid)
    tools = offered(fake, 0)
    assert "read_file" in tools and "mcp__fix__echo" in tools
    assert tools["mcp__fix__echo"]["parameters"]["properties"]["text"]["type"] == "string"
    assert tools["mcp__fix__echo"]["description"] == "Echo the text back."
    (request,) = d.permission_requests  # asked by default
    assert request["tool"] == "mcp__fix__echo" and request["arguments"] == {"text": "hi there"}
    assert request["preview"] == {"server": "fix", "tool": "echo"}
    (result,) = tool_results(d, sid)
    assert "error" not in result
    tool_message = fake.requests[1].json["messages"][-1]
    assert tool_message["role"] == "tool" and tool_message["content"] == "echo: hi there"
    (status,) = d.of(sid, "mcp/status")
    assert status["data"]["server"] == "fix" and status["data"]["state"] == "ready"
    assert "mcp__fix__echo" in status["data"]["tools"]
    assert d.of(sid, "turn/end")[-1]["data"]["reason"] == {"kind": "completed"}
    await stop_daemon(d)
