"""Issue 18 item 11: every key `initializationOptions` takes works in `$DSH_HOME/config.json`, under the
editor's options; a bad or unknown entry there is left out and reported (LSP: a `window/showMessage`
warning; the terminal chat: a line; the log), never silently dropped; `dsh-daemon config` prints the
effective configuration with where each value came from, secrets masked. All through real processes."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.harness import daemon_env, text_reply, tool_call_stream
from tests.server.test_hostile_input import finish
from tests.server.test_robustness import RawPipe, spawn
from tests.test_cli import run_cli

# what a person might write: good settings of every section, and four mistakes
CONFIG = {
    "model": "model-from-file",  # a provider key, flat, as initializationOptions takes it
    "tools": {"permissions": {"write_file": "allow", "grep": "sometimes"}},
    "permissionTimeoutS": "ten",
    "agent": {"appendSystemPrompt": "RULES-FROM-THE-FILE"},
    "tool": {"permissions": {"run_command": "allow"}},  # a misspelt section
    "provider": {"maxTokens": -5},
}
MISTAKES = ("'grep'", "permissionTimeoutS", "'tool'", "maxTokens")


def write_config(state: Path, config: dict[str, Any]) -> None:
    state.mkdir(parents=True, exist_ok=True)
    (state / "config.json").write_text(json.dumps(config))


async def wait_for(pipe: RawPipe, predicate: Any, timeout: float = 30) -> list[dict[str, Any]]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        found = [m for m in pipe.messages if predicate(m)]
        if found:
            return found
        await asyncio.sleep(0.02)
    raise AssertionError(f"nothing matched; last messages {pipe.messages[-5:]}")


async def test_config_json_settings_apply_and_its_mistakes_are_shown(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    state, work = tmp_path / "state", tmp_path / "work"
    work.mkdir()
    write_config(state, CONFIG)
    pipe = await spawn(state, fake, keep_stderr=True)
    # the editor's own tools.permissions names another tool: the file's write_file entry stays
    init = {"thinking": False, "tools": {"permissions": {"run_command": "allow"}}}
    answer = await pipe.call("init", "initialize", {"capabilities": {}, "rootUri": work.as_uri(),
                                                    "initializationOptions": init})  # fmt: skip
    assert "result" in answer, answer  # a mistake in the file does not refuse initialize
    pipe.frame({"jsonrpc": "2.0", "method": "initialized", "params": {}})

    def shown(m: dict[str, Any]) -> bool:
        return m.get("method") == "window/showMessage"

    await wait_for(pipe, lambda m: shown(m) and "maxTokens" in m["params"]["message"])
    warnings = [m["params"] for m in pipe.messages if shown(m)]
    assert {w["type"] for w in warnings} == {2}  # Warning
    for mistake in MISTAKES:
        assert any(mistake in w["message"] and "config.json" in w["message"] for w in warnings), (
            mistake,
            warnings,
        )
    assert all(w["message"].endswith("ignored") for w in warnings), warnings

    fake.script(
        Reply.stream(tool_call_stream([
            ("c1", "write_file", {"path": "out.txt", "content": "written\n"}),
            ("c2", "run_command", {"command": "echo ran > ran.txt"}),
        ])),
        text_reply("done"),
    )  # fmt: skip
    sid = (await pipe.call("new", "dsh/session/new", {}))["result"]["sessionId"]
    assert "result" in await pipe.call("go", "dsh/followup", {"sessionId": sid, "message": {"content": "go"}})
    await wait_for(pipe, lambda m: m.get("method") == "dsh/event" and m["params"]["type"] == "turn/end")
    assert not [m for m in pipe.messages if m.get("method") == "dsh/requestPermission"]
    assert (work / "out.txt").read_text() == "written\n"  # config.json's tools.permissions
    assert (work / "ran.txt").exists()  # the editor's, merged over the file's
    request = fake.requests[0].json
    assert request["model"] == "model-from-file"
    assert "RULES-FROM-THE-FILE" in request["messages"][0]["content"]
    assert request["max_tokens"] != -5

    # a settings change reads the file again: only a new mistake is shown again
    write_config(state, {**CONFIG, "agent": {"appendSystemPrompt": 5}})
    pipe.frame({"jsonrpc": "2.0", "method": "workspace/didChangeConfiguration",
                "params": {"settings": {"dsh": {"thinking": False}}}})  # fmt: skip
    await wait_for(pipe, lambda m: shown(m) and "appendSystemPrompt" in m["params"]["message"])
    assert len([m for m in pipe.messages if shown(m)]) == len(warnings) + 1

    stderr = (await finish(pipe)).decode()
    assert "Traceback" not in stderr
    for mistake in MISTAKES:  # and the log says it too
        assert any(mistake in line and "WARNING" in line for line in stderr.splitlines()), mistake


async def test_editor_options_still_win_and_are_still_refused_whole(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """The precedence is unchanged: the editor's value for a key wins over the file's, and a mistake in
    the editor's own options is still refused in the `initialize` reply, where the editor shows it."""
    state = tmp_path / "state"
    write_config(state, {"tools": {"permissions": {"write_file": "allow"}}, "permissionTimeoutS": 7})
    pipe = await spawn(state, fake, keep_stderr=True)
    refused = await pipe.call("bad", "initialize", {"capabilities": {},
                                                    "initializationOptions": {"permissionTimeoutS": "x"}})  # fmt: skip
    assert refused["error"]["code"] == -32602 and "permissionTimeoutS" in refused["error"]["message"]
    init = {"thinking": False, "tools": {"permissions": {"write_file": "ask"}}}
    assert "result" in await pipe.call(
        "init", "initialize", {"capabilities": {}, "initializationOptions": init}
    )
    pipe.frame({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    fake.script(Reply.stream(tool_call_stream([("c1", "write_file", {"path": "x.txt", "content": "x"})])))
    sid = (await pipe.call("new", "dsh/session/new", {}))["result"]["sessionId"]
    await pipe.call("go", "dsh/followup", {"sessionId": sid, "message": {"content": "go"}})
    (asked,) = await wait_for(pipe, lambda m: m.get("method") == "dsh/requestPermission")
    assert asked["params"]["tool"] == "write_file"  # the editor's "ask" won
    assert not [m for m in pipe.messages if m.get("method") == "window/showMessage"]  # nothing wrong
    assert b"Traceback" not in await finish(pipe)


def test_config_command_prints_each_value_with_its_source_and_masks_secrets(tmp_path: Path) -> None:
    state = tmp_path / "state"
    write_config(
        state,
        {
            **CONFIG,
            "provider": {"apiKey": "sk-file-secret-9999",
                "maxTokens": -5, "prices": {"m": {"cacheHit": 1, "cacheMiss": 2, "output": 3}}},
            "mcpServers": {"docs": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer tok-123"}},
                           "files": {"command": "srv", "env": {"TOKEN": "env-secret-456"}, "sandbox": "read-only"}},
        },
    )  # fmt: skip
    with FakeDeepSeek() as fake:
        env = daemon_env(state, fake, DSH_MODEL="model-from-env")  # DEEPSEEK_API_KEY is set there too
        result = run_cli(["config", "--json", "--base-url", "http://127.0.0.1:9/v1"], env)
        text = run_cli(["config"], env)
    assert result.returncode == 1, result.stderr  # the file has mistakes: listed, status 1
    report = json.loads(result.stdout)
    settings = {s["key"]: (s["value"], s["source"]) for s in report["settings"]}
    assert settings["provider.model"] == ("model-from-env", "environment DSH_MODEL")
    assert settings["provider.baseUrl"] == ("http://127.0.0.1:9/v1", "flag --base-url")
    assert settings["provider.apiKey"] == ("<set>", "environment DEEPSEEK_API_KEY")
    assert settings["provider.maxTokens"] == (256000, "default")
    assert settings["provider.prices.m"] == (
        {"cacheHit": 1.0, "cacheMiss": 2.0, "output": 3.0},
        "config.json",
    )
    assert settings["tools.permissions.write_file"] == ("allow", "config.json")
    assert settings["tools.permissions.grep"] == ("allow", "default")
    assert settings["permissionTimeoutS"] == (300.0, "default")
    assert settings["agent.appendSystemPrompt"] == ("RULES-FROM-THE-FILE", "config.json")
    assert settings["mcpServers.docs"][0]["headers"] == {"Authorization": "<set>"}
    assert settings["mcpServers.files"][0]["env"] == {"TOKEN": "<set>"}
    assert settings["mcpServers.files"][0]["sandbox"] == "read-only"
    for mistake in MISTAKES:
        assert any(mistake in p for p in report["problems"]), mistake
    for output in (result.stdout, text.stdout, result.stderr, text.stderr):
        for secret in ("sk-file-secret-9999", "sk-test-secret-key-0000", "tok-123", "env-secret-456"):
            assert secret not in output
    assert text.returncode == 1
    line = next(x for x in text.stdout.splitlines() if x.startswith("provider.model "))
    assert '"model-from-env"' in line and line.endswith("environment DSH_MODEL")
    assert "Left out of config.json" in text.stdout


def test_the_terminal_chat_uses_config_json_and_prints_its_mistakes(tmp_path: Path) -> None:
    """The chat has no initializationOptions of its own to put `tools` in: config.json is its place,
    and a mistake there is a line the person sees."""
    state, work = tmp_path / "state", tmp_path / "work"
    work.mkdir()
    write_config(state, {"tools": {"permissions": {"run_command": "allow"}}, "tools_": 1})
    touch = [("c1", "run_command", {"command": "touch ran.txt"})]
    with FakeDeepSeek() as fake:
        fake.script(Reply.stream(tool_call_stream(touch)), Reply.stream(text_stream(["Ran it."])))
        env = daemon_env(state, fake)
        result = run_cli(["--no-thinking", "chat", "run it"], env, cwd=work)
    assert result.returncode == 0, result.stderr  # piped: a question would have cancelled the turn
    assert result.stdout == "Ran it.\n"
    assert (work / "ran.txt").exists()
    assert "[daemon: dsh: " in result.stderr and "'tools_'" in result.stderr, result.stderr


def test_config_command_shows_the_sandbox_mode_and_the_level_reached(tmp_path: Path) -> None:
    state = tmp_path / "state"
    write_config(state, {"tools": {"sandbox": {"mode": "read-only", "network": {"allow": ["pypi.org"]}}}})
    with FakeDeepSeek() as fake:
        report = json.loads(run_cli(["config", "--json"], daemon_env(state, fake)).stdout)
        off = json.loads(
            run_cli(["config", "--json"], daemon_env(state, fake, DSH_SANDBOX_LAYERS="none")).stdout
        )
    settings = {s["key"]: (s["value"], s["source"]) for s in report["settings"]}
    assert settings["tools.sandbox.mode"] == ("read-only", "config.json")
    assert settings["tools.sandbox.network.allow"] == (["pypi.org"], "config.json")
    assert settings["tools.permissions.run_command"] == ("sandbox", "default")
    level, source = settings["tools.sandbox.level"]
    assert source == "this machine (probed)" and ("Landlock" in level or "unconfined" in level)
    refused = {s["key"]: s["value"] for s in off["settings"]}["tools.sandbox.level"]
    assert "DSH_SANDBOX_LAYERS=none" in refused and "refused until tools.sandbox is full-access" in refused
