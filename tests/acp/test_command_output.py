"""Issue 24.6: command output over ACP. Without client terminals, live output costs the wire in
proportion to what was printed (a bounded tail, never the accumulated text again); with them,
`run_command` runs in the client's terminal (Zed embeds it) and the output still reaches the model
and the session log."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from acp import text_block

from tests.acp.harness import acp_daemon, settle
from tests.acp.terminal_client import TerminalClient
from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.harness import tool_call_stream

LINES = 456
LINE = "x" * 999 + "\n"  # 456 lines: 456 KB printed
# Prints a line at a time, flushed, with pauses: the output reaches the daemon in many reads.
PRINTER = (
    f'{sys.executable} -c "import sys, time\n'
    f"for i in range({LINES}):\n"
    f"    sys.stdout.write('%06d' % i + '{LINE[6:-1]}' + chr(10)); sys.stdout.flush()\n"
    f'    time.sleep(0.002 if i % 8 == 0 else 0)"'
)


def call_updates(client: Any, sid: str) -> list[dict[str, Any]]:
    """The frames of the session's one tool call (the daemon names it, not the script)."""
    frames = [
        m
        for m in client.wire
        if m.get("method") == "session/update"
        and m["params"]["sessionId"] == sid
        and "toolCallId" in m["params"]["update"]
    ]
    assert len({m["params"]["update"]["toolCallId"] for m in frames}) <= 1, frames
    return frames


def run_then_done(command: str, call_id: str = "call_run_1", **extra: Any) -> tuple[Reply, Reply]:
    call = (call_id, "run_command", {"command": command, **extra})
    return Reply.stream(tool_call_stream([call])), Reply.stream(text_stream(["ran"]))


async def test_live_output_costs_the_wire_in_proportion_to_what_was_printed(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    fake.script(*run_then_done(PRINTER))
    async with acp_daemon(tmp_path / "state", fake) as d:
        d.client.permission_answer = "allow-once"
        sid = await d.new_session()
        response = await settle(d.conn.prompt(session_id=sid, prompt=[text_block("print")]))
        assert response.stop_reason == "end_turn"
        frames = call_updates(d.client, sid)
        live = [m for m in frames if m["params"]["update"].get("status") == "in_progress"]
        live_text = [
            u["params"]["update"]["content"][0]["content"]["text"]
            for u in live
            if "content" in u["params"]["update"]
        ]
        printed = LINES * len(LINE)
        wire = sum(len(json.dumps(m)) for m in frames)
        assert len(live_text) > 4, "the output arrived in several pieces"
        assert wire < 3 * printed, f"{wire} bytes on the wire for {printed} printed"
        # Each update shows the end of the output so far, after a marker saying what came before.
        assert all(len(text) <= 8_200 for text in live_text)
        late = live_text[-1]
        assert late.startswith("[… ") and "earlier characters not shown here" in late
        assert late.endswith("\n") and late.rstrip("\n").rsplit("\n", 1)[-1].startswith("000")
        # The result (what the model got) keeps the beginning and the end.
        final = frames[-1]["params"]["update"]
        assert final["status"] == "completed"
        result = final["content"][-1]["content"]["text"]
        assert result.startswith("000000") and "000455" in result and "[exit code 0]" in result


async def test_run_command_runs_in_the_clients_terminal(tmp_path: Path, fake: FakeDeepSeek) -> None:
    fake.script(*run_then_done("echo hello from $PWD; echo to stderr >&2; exit 3"))
    client = TerminalClient()
    try:
        async with acp_daemon(tmp_path / "state", fake, client=client, terminal=True) as d:
            sid = await d.new_session()
            response = await settle(d.conn.prompt(session_id=sid, prompt=[text_block("run")]))
            assert response.stop_reason == "end_turn"
            # The permission was asked as before, then the client ran the command in the session dir.
            (request,) = client.permission_requests
            assert request["toolCall"]["kind"] == "execute"
            (created,) = client.created
            assert created["args"][0] == "-c" and created["args"][1].startswith("echo hello")
            assert created["cwd"] == str(d.work) and created["limit"] == 30_000
            env = [e.model_dump(exclude_none=True) for e in created["env"]]
            assert {"name": "PAGER", "value": "cat"} in env
            # The daemon's secret variables are blanked in the editor's terminal (it can only set).
            assert {"name": "DEEPSEEK_API_KEY", "value": ""} in env and {
                "name": "DSH_HOME",
                "value": "",
            } in env
            updates = [m["params"]["update"] for m in call_updates(client, sid)]
            embedded = {"type": "terminal", "terminalId": "term-1"}
            assert any(u.get("content") == [embedded] and u["status"] == "in_progress" for u in updates)
            final = updates[-1]
            assert final["status"] == "completed" and final["content"] == [embedded]
            assert final["rawOutput"] == {"exitCode": 3}
            assert client.released == ["term-1"] and not client.killed
            # The model got the output the terminal kept.
            (tool,) = [m for m in fake.requests[-1].json["messages"] if m["role"] == "tool"]
            assert f"hello from {d.work}\nto stderr\n[exit code 3]" in tool["content"]
        # ... and so did the session log: a replay in a new process shows it as text.
        fake.script()
        async with acp_daemon(tmp_path / "state", fake) as d:
            await settle(d.conn.load_session(cwd=str(d.work), session_id=sid, mcp_servers=[]))
            replayed = d.client.call_updates(sid)
            text = replayed[-1]["content"][-1]["content"]["text"]
            assert "hello from" in text and "[exit code 3]" in text
    finally:
        await client.close()


async def test_cancel_kills_the_command_in_the_clients_terminal(tmp_path: Path, fake: FakeDeepSeek) -> None:
    fake.script(*run_then_done("echo started; sleep 60; echo never"))
    client = TerminalClient()
    try:
        async with acp_daemon(tmp_path / "state", fake, client=client, terminal=True) as d:
            client.permission_answer = "allow-always"
            sid = await d.new_session()
            prompt = asyncio.ensure_future(d.conn.prompt(session_id=sid, prompt=[text_block("run")]))
            await d.wait_for(lambda: bool(client.terminals) and bool(client.terminals["term-1"].output))
            await d.conn.cancel(session_id=sid)
            assert (await settle(prompt)).stop_reason == "cancelled"
            await d.wait_for(lambda: client.released == ["term-1"])
            assert client.killed == ["term-1"]
            assert client.terminals["term-1"].process.returncode is not None
            final = [m["params"]["update"] for m in call_updates(client, sid)][-1]
            assert final["status"] == "failed"
            assert final["content"][0] == {"type": "terminal", "terminalId": "term-1"}
            assert "cancelled" in final["content"][1]["content"]["text"]
    finally:
        await client.close()


async def test_the_timeout_kills_the_command_in_the_clients_terminal(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    fake.script(*run_then_done("echo started; sleep 60", timeout=1))
    client = TerminalClient()
    try:
        async with acp_daemon(tmp_path / "state", fake, client=client, terminal=True) as d:
            client.permission_answer = "allow-always"
            sid = await d.new_session()
            response = await settle(d.conn.prompt(session_id=sid, prompt=[text_block("run")]))
            assert response.stop_reason == "end_turn"
            assert client.killed == ["term-1"] and client.released == ["term-1"]
            (tool,) = [m for m in fake.requests[-1].json["messages"] if m["role"] == "tool"]
            assert "started\n[timed out after 1 s" in tool["content"]
    finally:
        await client.close()


async def test_a_terminal_the_client_refuses_runs_the_command_here(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    class Refusing(TerminalClient):
        async def create_terminal(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("no terminals today")

    fake.script(*run_then_done("echo ran here"))
    client = Refusing()
    async with acp_daemon(tmp_path / "state", fake, client=client, terminal=True) as d:
        client.permission_answer = "allow-always"
        sid = await d.new_session()
        assert (
            await settle(d.conn.prompt(session_id=sid, prompt=[text_block("run")]))
        ).stop_reason == "end_turn"
        (tool,) = [m for m in fake.requests[-1].json["messages"] if m["role"] == "tool"]
        assert "ran here\n[exit code 0]" in tool["content"]
