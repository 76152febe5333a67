"""A command the agent runs never sees the daemon's secrets (docs/design.md; `tools/environment.py`):
`env` run through run_command over the real wire shows neither the API key (under its own name or
another), nor DSH_HOME, nor the values the MCP servers are configured with (env values, header
tokens); the person's other variables are passed on."""

from __future__ import annotations

from pathlib import Path

from tests.fakes.deepseek_server import FakeDeepSeek, Reply
from tests.server.harness import start_daemon, stop_daemon, text_reply, tool_call_stream

API_KEY = "sk-test-secret-key-0000"  # what the harness gives the daemon as DEEPSEEK_API_KEY
MCP_ENV_VALUE = "mcp-env-secret-value-1234"
HEADER_TOKEN = "header-token-secret-5678"


async def test_env_in_run_command_shows_none_of_the_daemons_secrets(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    servers = {
        "local": {"command": "/bin/false", "env": {"SERVICE_TOKEN": MCP_ENV_VALUE, "LOG": "1"}},
        "remote": {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": f"Bearer {HEADER_TOKEN}"}},
    }
    env = {
        "ANOTHER_NAME_FOR_THE_KEY": API_KEY,  # the same key exported again
        "SERVICE_TOKEN": MCP_ENV_VALUE,  # what the MCP server's env was set from
        "HEADER_TOKEN_COPY": HEADER_TOKEN,
        "PERSONS_SETTING": "kept-for-the-command",
        "ONE": "1",  # as short as an MCP env setting ("LOG": "1"): a setting, not a secret
    }
    state = tmp_path / "state"
    d = await start_daemon(state, fake, root=work, env=env, init_options={"mcpServers": servers})
    fake.script(
        Reply.stream(tool_call_stream([("call_1", "run_command", {"command": "env"})])), text_reply("ran")
    )
    sid = await d.new_session(cwd=str(work))
    await d.request("dsh/followup", {"sessionId": sid, "message": {"content": "show env"}})
    await d.wait_idle_turn(sid)
    (shown,) = [m["content"] for m in fake.requests[-1].json["messages"] if m["role"] == "tool"]
    names = {line.split("=", 1)[0] for line in shown.splitlines() if "=" in line}
    assert "PERSONS_SETTING=kept-for-the-command" in shown and "ONE=1" in shown, shown[:2000]
    assert {"DEEPSEEK_API_KEY", "DSH_HOME", "ANOTHER_NAME_FOR_THE_KEY", "SERVICE_TOKEN"}.isdisjoint(names)
    for secret in (API_KEY, MCP_ENV_VALUE, HEADER_TOKEN):
        assert secret not in shown, secret
    await stop_daemon(d)
