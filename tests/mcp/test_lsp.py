"""MCP servers' tools through the real daemon (LSP wire), with the FastMCP fixture server over stdio."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

from tests.fakes.deepseek_server import FakeDeepSeek, Reply
from tests.mcp.support import FIXTURE, alive, fixture_server, read_pids
from tests.server.harness import start_daemon, stop_daemon, text_reply, tool_call_stream
from tests.server.test_tools_e2e import run_turn, tool_results


def call(name: str, args: dict[str, Any], call_id: str = "call_1") -> Reply:
    return Reply.stream(tool_call_stream([(call_id, name, args)]))


def offered(fake: FakeDeepSeek, index: int) -> dict[str, Any]:
    """The tools of the model request `index`, by name."""
    tools = fake.requests[index].json.get("tools") or []
    return {t["function"]["name"]: t["function"] for t in tools}


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
    attached = await d.request("dsh/session/attach", {"sessionId": sid, "replay": "none"})
    assert [(m["server"], m["state"]) for m in attached["mcpServers"]] == [("fix", "ready")]
    assert d.of(sid, "turn/end")[-1]["data"]["reason"] == {"kind": "completed"}
    await stop_daemon(d)


async def test_permission_is_skipped_for_an_allowed_tool_or_server(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """`tools.permissions` names a tool exactly, or a whole server as `mcp__{server}`; servers given
    at dsh/session/new join the configured ones."""
    options = {"thinking": False, "tools": {"permissions": {"mcp__one__echo": "allow", "mcp__two": "allow"}}}
    d = await start_daemon(tmp_path / "state", fake, init_options=options)
    fake.script(
        call("mcp__one__echo", {"text": "a"}),
        call("mcp__two__echo", {"text": "b"}, "call_2"),
        call("mcp__three__echo", {"text": "c"}, "call_3"),
        text_reply("done"),
    )
    servers = {"one": fixture_server(), "two": fixture_server(), "three": fixture_server()}
    sid = await d.new_session(mcpServers=servers)
    await run_turn(d, sid)
    assert [r["tool"] for r in d.permission_requests] == ["mcp__three__echo"]  # the default: ask
    assert [r["message"]["content"][0]["content"][0]["text"] for r in tool_results(d, sid)] == [
        "echo: a",
        "echo: b",
        "echo: c",
    ]
    await stop_daemon(d)


async def test_results_errors_images_and_the_result_budget(tmp_path: Path, fake: FakeDeepSeek) -> None:
    options = {
        "thinking": False,
        "mcpServers": {"fix": fixture_server()},
        "tools": {"permissions": {"mcp__fix": "allow"}, "limits": {"result_max_chars": 2000}},
    }
    d = await start_daemon(tmp_path / "state", fake, init_options=options)
    fake.script(
        call("mcp__fix__fail", {"message": "no such thing"}),
        call("mcp__fix__picture", {}, "call_2"),
        call("mcp__fix__big", {"size": 50_000}, "call_3"),
        text_reply("done"),
    )
    sid = await d.new_session()
    await run_turn(d, sid)
    failed, picture, _ = tool_results(d, sid)
    assert failed["error"]["code"] == "MCP_TOOL_ERROR"
    assert "no such thing" in fake.requests[1].json["messages"][-1]["content"]
    assert "error" not in picture
    note = fake.requests[2].json["messages"][-1]["content"]
    assert note == "[image/png, 72 bytes from fix: picture; not readable by this text-only model]"
    (shown,) = picture["meta"]["mcpContent"]  # the image itself, for an editor that shows it
    assert shown["type"] == "image" and shown["mimeType"] == "image/png" and shown["data"]
    text = fake.requests[3].json["messages"][-1]["content"]
    assert len(text) < 2500 and text.startswith("line 0\n") and "elided" in text  # whole lines kept
    assert d.of(sid, "turn/end")[-1]["data"]["reason"] == {"kind": "completed"}
    await stop_daemon(d)


async def test_a_server_that_dies_mid_session_is_reported_and_its_tools_fail_cleanly(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    options = {"thinking": False, "mcpServers": {"fix": fixture_server()}}
    d = await start_daemon(tmp_path / "state", fake, init_options=options)
    fake.script(
        call("mcp__fix__crash", {}),
        text_reply("the server is gone"),
        call("mcp__fix__echo", {"text": "anyone?"}, "call_2"),
        text_reply("still gone"),
    )
    sid = await d.new_session()
    await run_turn(d, sid)
    (crashed,) = tool_results(d, sid)
    assert crashed["error"]["code"] == "MCP_UNAVAILABLE"
    assert "exited" in fake.requests[1].json["messages"][-1]["content"]
    ready, exited = (e["data"] for e in d.of(sid, "mcp/status"))
    assert ready["state"] == "ready"
    assert exited["server"] == "fix" and exited["state"] == "exited" and exited["error"]
    assert "mcp__fix__crash" in offered(fake, 0)
    assert not [name for name in offered(fake, 1) if name.startswith("mcp__")]  # gone from the request
    assert "read_file" in offered(fake, 1)
    assert d.of(sid, "turn/end")[-1]["data"]["reason"] == {"kind": "completed"}
    # A later call to one of its tools (the model remembers them) fails at once, nobody asked.
    await run_turn(d, sid, "try again")
    assert tool_results(d, sid)[-1]["error"]["code"] == "MCP_UNAVAILABLE"
    assert [r["tool"] for r in d.permission_requests] == ["mcp__fix__crash"]
    assert [e["data"]["reason"]["kind"] for e in d.of(sid, "turn/end")] == ["completed", "completed"]
    await stop_daemon(d)


async def test_a_server_that_fails_to_start_is_reported_and_the_turn_runs_without_it(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    servers = {
        "bad": fixture_server(FIXTURE_FAIL_START="no database at /nowhere"),
        "nope": {"command": "/no/such/mcp"},
    }
    d = await start_daemon(tmp_path / "state", fake, init_options={"thinking": False, "mcpServers": servers})
    fake.script(text_reply("fine"))
    sid = await d.new_session()
    await run_turn(d, sid)
    statuses = {e["data"]["server"]: e["data"] for e in d.of(sid, "mcp/status")}
    assert statuses["bad"]["state"] == "failed" and "no database at /nowhere" in statuses["bad"]["error"]
    assert statuses["nope"]["state"] == "failed" and "/no/such/mcp" in statuses["nope"]["error"]
    assert not [name for name in offered(fake, 0) if name.startswith("mcp__")]
    assert d.of(sid, "turn/end")[-1]["data"]["reason"] == {"kind": "completed"}
    assert not d.of(sid, "agent/error")
    await stop_daemon(d)


async def test_servers_from_config_json_leave_no_process_behind(tmp_path: Path, fake: FakeDeepSeek) -> None:
    """The fixture leaves a grandchild that ignores the end of stdin: the daemon's shutdown kills the
    server's whole tree."""
    state = tmp_path / "state"
    state.mkdir()
    pids = tmp_path / "pids"
    config = {"mcpServers": {"fix": fixture_server(FIXTURE_PIDS=str(pids))}}
    (state / "config.json").write_text(json.dumps(config))
    d = await start_daemon(state, fake)
    fake.script(text_reply("hello"))
    sid = await d.new_session()
    await run_turn(d, sid)
    assert "mcp__fix__echo" in offered(fake, 0)
    server, grandchild = read_pids(pids)
    assert alive(server) and alive(grandchild)
    await stop_daemon(d)
    await d.wait_for(lambda: not alive(server) and not alive(grandchild))


async def test_deleting_a_session_stops_its_servers(tmp_path: Path, fake: FakeDeepSeek) -> None:
    pids = tmp_path / "pids"
    d = await start_daemon(tmp_path / "state", fake)
    sid = await d.new_session(mcpServers={"fix": fixture_server(FIXTURE_PIDS=str(pids))})
    await d.wait_event(sid, "mcp/status")
    server, grandchild = read_pids(pids)
    await d.request("dsh/session/delete", {"sessionId": sid})
    await d.wait_for(lambda: not alive(server) and not alive(grandchild))
    await stop_daemon(d)


async def test_detaching_an_idle_session_stops_its_servers_and_reopening_starts_them(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    pids = tmp_path / "pids"
    (state / "config.json").write_text(
        json.dumps({"mcpServers": {"fix": fixture_server(FIXTURE_PIDS=str(pids))}})
    )
    d = await start_daemon(state, fake)
    fake.script(text_reply("one"), text_reply("two"))
    sid = await d.new_session()
    await run_turn(d, sid)
    server, grandchild = read_pids(pids)
    await d.request("dsh/session/detach", {"sessionId": sid})
    await d.wait_for(lambda: not alive(server) and not alive(grandchild))
    pids.unlink()
    await d.request("dsh/session/attach", {"sessionId": sid, "replay": "none"})
    await run_turn(d, sid)
    assert "mcp__fix__echo" in offered(fake, 1)  # the configured server runs again for the new turn
    await stop_daemon(d)


async def test_bad_mcp_servers_are_refused_naming_the_key(tmp_path: Path, fake: FakeDeepSeek) -> None:
    d = await start_daemon(tmp_path / "state", fake)
    try:
        await d.request("dsh/session/new", {"mcpServers": {"x": {"command": ""}}})
    except Exception as exc:
        assert "mcpServers.x.command" in str(exc)
    else:
        raise AssertionError("accepted")
    await stop_daemon(d)


async def test_a_streamable_http_server(tmp_path: Path, fake: FakeDeepSeek) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "FIXTURE_HTTP_PORT": str(port)}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(FIXTURE),
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        await until_listening(port)
        options = {"thinking": False, "mcpServers": {"web": {"url": url, "headers": {"X-Test": "1"}}}}
        d = await start_daemon(tmp_path / "state", fake, init_options=options)
        fake.script(call("mcp__web__echo", {"text": "over http"}), text_reply("done"))
        sid = await d.new_session()
        await run_turn(d, sid)
        assert "mcp__web__echo" in offered(fake, 0)
        assert fake.requests[1].json["messages"][-1]["content"] == "echo: over http"
        (status,) = d.of(sid, "mcp/status")
        assert status["data"]["state"] == "ready" and status["data"]["transport"] == "http"
        await stop_daemon(d)
    finally:
        process.kill()
        await process.wait()


async def until_listening(port: int) -> None:
    for _ in range(500):
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.02)
            continue
        writer.close()
        return
    raise AssertionError(f"nothing listens on {port}")
