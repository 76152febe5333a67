"""Issue 24.11: a missing API key is an auth method and a typed `auth_required`, not a failed first
turn; `session_info_update` carries `updatedAt`; compaction and an MCP server that failed are said in
the chat and kept in the log, so a replay in another process shows them."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from acp import RequestError, text_block
from acp.schema import EnvVariable, McpServerStdio

from tests.acp.harness import acp_daemon, settle
from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.mcp.support import FIXTURE

NO_KEY = {"DEEPSEEK_API_KEY": "", "DEEPSEEK_BASE_URL": "https://api.deepseek.com"}


async def test_without_a_key_the_client_is_told_what_to_set(tmp_path: Path, fake: FakeDeepSeek) -> None:
    state = tmp_path / "state"
    async with acp_daemon(state, fake, env=NO_KEY) as d:
        (init,) = [m["result"] for m in d.client.wire if "agentCapabilities" in (m.get("result") or {})]
        (method,) = init["authMethods"]
        assert method["id"] == "deepseek-api-key" and method["type"] == "env_var"
        assert method["vars"] == [{"name": "DEEPSEEK_API_KEY", "label": "DeepSeek API key", "secret": True}]
        sid = await d.new_session()  # sessions open (and old ones load) without a key
        try:
            await settle(d.conn.prompt(session_id=sid, prompt=[text_block("hello")]))
        except RequestError as error:
            refused: Any = error
        else:
            raise AssertionError("a prompt without a key was accepted")
        assert refused.code == -32000
        assert refused.data == {"code": "auth_required", "variable": "DEEPSEEK_API_KEY"}
        assert "set DEEPSEEK_API_KEY" in str(refused)
        try:
            await settle(d.conn.authenticate(method_id="deepseek-api-key"))
        except RequestError as error:
            assert error.code == -32000 and "DEEPSEEK_API_KEY" in str(error)
        else:
            raise AssertionError("authenticate without a key succeeded")
        # A command that needs no model still works; nothing reached any provider.
        response = await settle(d.conn.prompt(session_id=sid, prompt=[text_block("/rename Keyless")]))
        assert response.stop_reason == "end_turn"
        assert fake.requests == []
    async with acp_daemon(state, fake) as d:  # with a key
        assert (await settle(d.conn.authenticate(method_id="deepseek-api-key"))) is not None
        try:
            await settle(d.conn.authenticate(method_id="oauth"))
        except RequestError as error:
            assert error.code == -32602 and "deepseek-api-key" in str(error)
        else:
            raise AssertionError("an unknown auth method was accepted")


def info_updates(client: Any, sid: str) -> list[dict[str, Any]]:
    return [u for u in client.updates(sid, "session_info_update")]


async def test_session_info_update_carries_updated_at(tmp_path: Path, fake: FakeDeepSeek) -> None:
    fake.script(Reply.stream(text_stream(["one"])), Reply.stream(text_stream(["two"])))
    async with acp_daemon(tmp_path / "state", fake) as d:
        sid = await d.new_session()
        await settle(d.conn.prompt(session_id=sid, prompt=[text_block("first")]))
        first = [u["updatedAt"] for u in info_updates(d.client, sid) if "updatedAt" in u]
        await settle(d.conn.prompt(session_id=sid, prompt=[text_block("second")]))
        await d.wait_for(
            lambda: len([u for u in info_updates(d.client, sid) if "updatedAt" in u]) > len(first)
        )
        times = [u["updatedAt"] for u in info_updates(d.client, sid) if "updatedAt" in u]
        assert first and times == sorted(times) and times[-1] > first[-1]
        assert all(t.endswith("Z") and "T" in t for t in times)
        (listed,) = (await d.conn.list_sessions(cwd=str(d.work))).sessions
        # The time of the session's latest stored event; the list shows when that was committed.
        assert listed.updated_at >= times[-1]
    fake.script()
    async with acp_daemon(tmp_path / "state", fake) as d:
        await settle(d.conn.load_session(cwd=str(d.work), session_id=sid, mcp_servers=[]))
        replayed = [u for u in info_updates(d.client, sid) if "updatedAt" in u]
        assert replayed and replayed[-1]["updatedAt"] == times[-1]


async def test_compaction_is_said_in_the_chat_and_replayed(tmp_path: Path, fake: FakeDeepSeek) -> None:
    fake.script(
        Reply.stream(text_stream(["a long answer " * 20])),
        Reply.stream(text_stream(["Summary: the person said hello."])),
    )
    async with acp_daemon(tmp_path / "state", fake) as d:
        sid = await d.new_session()
        await settle(d.conn.prompt(session_id=sid, prompt=[text_block("hello")]))
        await settle(d.conn.prompt(session_id=sid, prompt=[text_block("/compact")]))
        await d.wait_for(lambda: "Compacted the conversation" in d.client.text(sid))
        assert "a summary now stands for the earlier messages" in d.client.text(sid)
    fake.script()
    async with acp_daemon(tmp_path / "state", fake) as d:
        await settle(d.conn.load_session(cwd=str(d.work), session_id=sid, mcp_servers=[]))
        text = d.client.text(sid)
        assert text.index("a long answer") < text.index("Compacted the conversation (asked)")


async def test_an_mcp_server_that_fails_is_said_in_the_chat_and_replayed(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    async with acp_daemon(tmp_path / "state", fake) as d:
        server = McpServerStdio(
            name="broken",
            command=sys.executable,
            args=[str(FIXTURE)],
            env=[EnvVariable(name="FIXTURE_FAIL_START", value="no database at /nowhere")],
        )
        sid = (await d.conn.new_session(cwd=str(d.work), mcp_servers=[server])).session_id
        await d.wait_for(lambda: "MCP server broken could not start" in d.client.text(sid))
        said = d.client.text(sid)
        assert "its tools are no longer offered" in said
    fake.script()
    async with acp_daemon(tmp_path / "state", fake) as d:
        await settle(d.conn.load_session(cwd=str(d.work), session_id=sid, mcp_servers=[]))
        assert "MCP server broken could not start" in d.client.text(sid)
        log = json.dumps(d.client.wire)
        assert log.count("MCP server broken could not start") == 1  # replayed once (not started again)
