"""The command line: `chat` drives the real daemon over stdio; `sessions` and `export` read the store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.harness import ROOT, daemon_env, tool_call_stream


def run_cli(
    args: list[str], env: dict[str, str], stdin: str = "", cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dsh_daemon", *args], input=stdin, capture_output=True, text=True, env=env,
        timeout=120, cwd=cwd or ROOT,
    )  # fmt: skip


def test_chat_streams_the_reply_queues_piped_lines_and_exits(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with FakeDeepSeek() as fake:
        fake.script(
            Reply.stream(text_stream(["Hello", " there"]), delay=0.05),
            Reply.stream(text_stream(["Second answer"])),
        )
        env = daemon_env(tmp_path / "state", fake)
        result = run_cli(
            ["--no-thinking", "chat", "first question"], env, stdin="second question\n", cwd=work
        )
        assert result.returncode == 0, result.stderr
        # the answers on stdout, the rest (prompts, notes) on stderr
        assert result.stdout == "Hello there\nSecond answer\n"
        assert "[queued #2] second question" in result.stderr
        assert [r.json["messages"][-1]["content"] for r in fake.requests] == [
            "first question",
            "second question",
        ]

        listing = run_cli(["sessions"], env)
        assert listing.returncode == 0
        session_id = listing.stdout.split()[0]
        assert "first question" in listing.stdout

        exported = run_cli(["export", session_id], env)
        lines = [json.loads(line) for line in exported.stdout.splitlines()]
        assert lines[0]["type"] == "session" and lines[0]["sessionId"] == session_id
        users = [r["data"]["content"][0]["text"] for r in lines if r["type"] == "user/message"]
        assert users == ["first question", "second question"]

        fake.script(Reply.stream(text_stream(["resumed fine"])))
        resumed = run_cli(["--no-thinking", "chat", "--resume", session_id, "third"], env, cwd=work)
        assert "› first question" in resumed.stderr  # history replayed
        assert resumed.stdout == "resumed fine\n"
        # the two earlier exchanges and the new prompt (a system prompt, if any, aside)
        assert len([m for m in fake.requests[-1].json["messages"] if m["role"] != "system"]) == 5


def test_chat_shows_tool_cards_and_auto_allows_with_yes(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("alpha\n")
    with FakeDeepSeek() as fake:
        fake.script(
            Reply.stream(
                tool_call_stream(
                    [("c1", "edit_file", {"path": "notes.txt", "old_string": "alpha", "new_string": "beta"})]
                )
            ),
            Reply.stream(text_stream(["Done."])),
        )
        env = daemon_env(tmp_path / "state", fake)
        result = run_cli(["--no-thinking", "chat", "--yes", "edit it"], env, cwd=work)
        assert result.returncode == 0, result.stderr
        assert "⚙ edit_file notes.txt (+1 −1)" in result.stderr and "✓ edit_file" in result.stderr
        assert result.stdout == "Done.\n"
        assert (work / "notes.txt").read_text() == "beta\n"


def test_export_unknown_session_is_a_clear_error(tmp_path: Path) -> None:
    env = {**os.environ, "DSH_HOME": str(tmp_path / "state")}
    result = run_cli(["export", "nope"], env)
    assert result.returncode == 1 and "unknown session" in result.stderr


def test_version() -> None:
    result = subprocess.run([sys.executable, "-m", "dsh_daemon", "--version"], capture_output=True, text=True)
    assert result.stdout.startswith("dsh-daemon ")


def _frames(*messages: dict[str, object]) -> bytes:
    out = b""
    for message in messages:
        body = json.dumps(message).encode()
        out += b"Content-Length: %d\r\n\r\n" % len(body) + body
    return out


def test_the_stdio_flag_that_language_clients_append_is_accepted(tmp_path: Path) -> None:
    """vscode-languageclient starts `command args… --stdio`: with or without `serve`, it serves."""
    with FakeDeepSeek() as fake:
        env = daemon_env(tmp_path / "state", fake)
        (tmp_path / "state" / "home").mkdir(parents=True)
        for args in (["--stdio"], ["serve", "--stdio"]):
            stdin = _frames(
                {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}},
                {"jsonrpc": "2.0", "id": 2, "method": "shutdown"},
                {"jsonrpc": "2.0", "method": "exit"},
            )
            result = subprocess.run(
                [sys.executable, "-m", "dsh_daemon", *args], input=stdin, capture_output=True, env=env,
                timeout=60, cwd=ROOT,
            )  # fmt: skip
            assert result.returncode == 0, result.stderr.decode()
            assert b'"protocolVersion": 1' in result.stdout or b'"protocolVersion":1' in result.stdout


def test_provider_flags_after_the_command_are_taken(tmp_path: Path) -> None:
    """Zed passes `"args": ["acp", "--model", …]`: the flags after the command configure the provider
    exactly as before it (they used to make argparse exit 2 before the agent started)."""
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "state" / "home").mkdir(parents=True)
    with FakeDeepSeek() as fake:
        fake.script(Reply.stream(text_stream(["ok"])))
        # the environment points nowhere: only the --base-url after `acp` reaches the fake
        env = daemon_env(tmp_path / "state", fake, DEEPSEEK_BASE_URL="http://127.0.0.1:9")
        lines = [
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {"protocolVersion": 1, "clientCapabilities": {}},
            },
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "session/new",
                "params": {"cwd": str(work), "mcpServers": []},
            },
        ]
        process = subprocess.Popen(
            [sys.executable, "-m", "dsh_daemon", "acp", "--model", "flag-model", "--no-thinking",
             "--base-url", fake.base_url],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT, text=True,
        )  # fmt: skip
        assert process.stdin is not None and process.stdout is not None
        for line in lines:
            process.stdin.write(json.dumps(line) + "\n")
        process.stdin.flush()
        replies = [json.loads(process.stdout.readline()) for _ in lines]
        session_id = replies[1]["result"]["sessionId"]
        prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": "hi"}]}
        process.stdin.write(
            json.dumps({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": prompt}) + "\n"
        )
        process.stdin.flush()
        while (reply := json.loads(process.stdout.readline())).get("id") != 3:
            pass
        process.stdin.close()
        assert process.wait(timeout=30) == 0
        assert reply["result"]["stopReason"] == "end_turn"
        body = fake.requests[0].json
        assert body["model"] == "flag-model"
        assert body["thinking"] == {"type": "disabled"}


def test_printing_commands_end_quietly_when_the_reader_stops_reading(tmp_path: Path) -> None:
    """`dsh-daemon schema | head -1` and the like: a closed pipe ends the command like any Unix tool
    (the shell's SIGPIPE status), with no BrokenPipeError traceback on the terminal."""
    from dsh_daemon.session.store import SessionStore

    store = SessionStore(tmp_path)
    store.create_session("s1", title="a title", cwd=None)
    store.close()
    env = {**os.environ, "DSH_HOME": str(tmp_path)}
    for command in (["schema"], ["sessions"], ["config"], ["export", "s1"]):
        read_end, write_end = os.pipe()
        os.close(read_end)  # the reader is gone before the first line is written
        try:
            result = subprocess.run(
                [sys.executable, "-m", "dsh_daemon", *command],
                stdout=write_end, stderr=subprocess.PIPE, env=env, cwd=ROOT, text=True, timeout=60,
            )  # fmt: skip
        finally:
            os.close(write_end)
        assert "Traceback" not in result.stderr and "BrokenPipe" not in result.stderr, (
            command,
            result.stderr,
        )
        assert result.returncode == 141, (command, result.returncode, result.stderr)
