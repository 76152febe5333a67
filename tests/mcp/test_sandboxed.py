"""stdio MCP servers confined by the session's sandbox (issue 41.4; `mcpServers.NAME.sandbox`),
through the real daemon (LSP wire) with a real FastMCP server that tries to write outside the
workspace: refused; its normal tools work; its own `env` reaches it, the daemon's secrets do not;
a server whose confinement cannot be had is refused, never started unconfined."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.deepseek_server import FakeDeepSeek, Reply
from tests.server.harness import Daemon, start_daemon, stop_daemon, text_reply, tool_call_stream
from tests.server.test_sandbox_wire import confined_here
from tests.server.test_tools_e2e import run_turn, tool_results

BOX = Path(__file__).with_name("sandbox_server.py")
OWN_TOKEN = "box-own-token-1234"  # the server's own configured secret: it must get it


def box(sandbox: Any, **env: str) -> dict[str, Any]:
    config: dict[str, Any] = {
        "command": sys.executable,
        "args": [str(BOX)],
        "env": {"BOX_TOKEN": OWN_TOKEN, **env},
    }
    if sandbox is not None:
        config["sandbox"] = sandbox
    return config


def calls(*calls: tuple[str, dict[str, Any]]) -> list[Reply]:
    replies = [
        Reply.stream(tool_call_stream([(f"call_{i}", f"mcp__box__{name}", args)]))
        for i, (name, args) in enumerate(calls)
    ]
    return [*replies, text_reply("done")]


def answers(d: Daemon, sid: str) -> list[str]:
    out = []
    for result in tool_results(d, sid):
        assert "error" not in result, result
        (block,) = result["message"]["content"][0]["content"]
        out.append(block["text"])
    return out


async def run_box(
    tmp_path: Path,
    fake: FakeDeepSeek,
    server: dict[str, Any],
    *steps: tuple[str, dict[str, Any]],
    **init: Any,
) -> tuple[Daemon, str]:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    env, tools = init.pop("env", None), init.pop("tools", {})
    options = {
        "thinking": False,
        "mcpServers": {"box": server},
        "tools": {"permissions": {"mcp__box": "allow"}, **tools},
        **init,
    }
    d = await start_daemon(tmp_path / "state", fake, root=work, init_options=options, env=env)
    fake.script(*calls(*steps))
    sid = await d.new_session(cwd=str(work))
    await run_turn(d, sid)
    return d, sid


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    path = tmp_path / "outside"
    path.mkdir()
    (path / "existing.txt").write_text("before\n")
    return path


async def test_unconfined_the_same_server_writes_anywhere(
    tmp_path: Path, fake: FakeDeepSeek, outside: Path
) -> None:
    """The control: without `sandbox` the server's write does land (so a refusal below is the sandbox's)."""
    d, sid = await run_box(
        tmp_path, fake, box(None), ("write", {"path": str(outside / "x.txt"), "text": "x"})
    )
    try:
        assert answers(d, sid) == [f"wrote {outside / 'x.txt'}"]
        assert (outside / "x.txt").read_text() == "x"
    finally:
        await stop_daemon(d)


@confined_here
async def test_a_workspace_write_server_is_refused_outside_and_works_inside(
    tmp_path: Path, fake: FakeDeepSeek, outside: Path
) -> None:
    work = tmp_path / "work"
    d, sid = await run_box(
        tmp_path,
        fake,
        box("workspace-write"),
        ("write", {"path": str(outside / "x.txt"), "text": "escaped"}),
        ("write", {"path": str(outside / "existing.txt"), "text": "overwritten"}),
        ("write", {"path": str(work / "inside.txt"), "text": "inside"}),
        ("read", {"path": str(work / "inside.txt")}),
        ("env", {"name": "BOX_TOKEN"}),
        ("env", {"name": "DEEPSEEK_API_KEY"}),
        ("env", {"name": "DSH_HOME"}),
        ("read", {"path": str(tmp_path / "state" / "config.json")}),
    )
    try:
        (status,) = d.of(sid, "mcp/status")
        assert status["data"]["state"] == "ready", status
        escaped, overwritten, inside, read_back, token, key, home, store = answers(d, sid)
        assert escaped.startswith("refused") and overwritten.startswith("refused")
        assert not (outside / "x.txt").exists() and (outside / "existing.txt").read_text() == "before\n"
        assert inside == f"wrote {work / 'inside.txt'}" and (work / "inside.txt").read_text() == "inside"
        assert read_back == "read: inside"
        assert token == f"BOX_TOKEN={OWN_TOKEN}"  # its own configured env, credential-like name or not
        assert key == "DEEPSEEK_API_KEY=<unset>" and home == "DSH_HOME=<unset>"
        assert store.startswith("refused")  # DSH_HOME is masked
    finally:
        await stop_daemon(d)


@confined_here
async def test_read_only_and_the_sessions_mode(tmp_path: Path, fake: FakeDeepSeek) -> None:
    work = tmp_path / "work"
    target = {"path": str(work / "inside.txt"), "text": "x"}
    d, sid = await run_box(
        tmp_path, fake, box("read-only"), ("write", target), ("env", {"name": "BOX_TOKEN"})
    )
    try:
        refused, token = answers(d, sid)
        assert refused.startswith("refused") and not (work / "inside.txt").exists()
        assert token == f"BOX_TOKEN={OWN_TOKEN}"
    finally:
        await stop_daemon(d)
    # `true`: the session's configured mode (read-only here).
    d, sid = await run_box(
        tmp_path, fake, box(True), ("write", target), tools={"sandbox": {"mode": "read-only"}}
    )
    try:
        (refused,) = answers(d, sid)
        assert refused.startswith("refused") and not (work / "inside.txt").exists()
    finally:
        await stop_daemon(d)


async def test_a_server_whose_confinement_cannot_be_had_is_refused_never_started_unconfined(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    mark = tmp_path / "started"
    d, sid = await run_box(
        tmp_path, fake, box("workspace-write", BOX_MARK=str(mark)), env={"DSH_SANDBOX_LAYERS": "none"}
    )
    try:
        (status,) = d.of(sid, "mcp/status")
        data = status["data"]
        assert data["state"] == "failed"
        assert "never started unconfined" in data["error"] and "DSH_SANDBOX_LAYERS=none" in data["error"]
        assert not mark.exists()  # it never ran
        assert not [e for e in d.of(sid, "turn/end") if e["data"]["reason"]["kind"] != "completed"]
        (notice,) = d.of(sid, "session/notice")
        assert "box could not start" in notice["data"]["message"]
    finally:
        await stop_daemon(d)


async def test_the_setting_is_checked(tmp_path: Path, fake: FakeDeepSeek) -> None:
    from dsh_daemon.mcp.config import McpConfigError, parse_servers

    assert parse_servers({"a": box(True)})["a"].sandbox == "session"  # type: ignore[union-attr]
    assert parse_servers({"a": box(False)})["a"].sandbox is None  # type: ignore[union-attr]
    assert parse_servers({"a": box("read-only")})["a"].sandbox == "read-only"  # type: ignore[union-attr]
    for bad in ("full-access", "yes", 1):
        with pytest.raises(McpConfigError, match=r"mcpServers\.a\.sandbox"):
            parse_servers({"a": box(bad)})
    with pytest.raises(McpConfigError, match="unknown settings"):
        parse_servers({"h": {"url": "https://example.com/mcp", "sandbox": True}})
    # config.json takes it too (a bad value is left out and reported, the rest kept).
    state = tmp_path / "state"
    state.mkdir()
    (state / "config.json").write_text(json.dumps({"mcpServers": {"ok": box("read-only"), "bad": box(7)}}))
    from dsh_daemon.host.options import parse_options

    options = parse_options(state, {}, {}, {}, what="options")
    assert options.mcp_servers["ok"].sandbox == "read-only"  # type: ignore[union-attr]
    assert "bad" not in options.mcp_servers and any("sandbox" in p for p in options.file_problems)
