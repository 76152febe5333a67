"""Custom slash commands and skills over ACP (protocol.md "Custom commands and skills"), a real
daemon over real pipes and the fake provider: what the client is offered, what the model receives,
and that a command's `allowed-tools` only narrows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.acp.harness import raw_acp
from tests.acp.test_raw import prompt, start
from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.harness import tool_call_stream


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def advertised(raw: Any) -> Any:
    return lambda m: (
        m.get("method") == "session/update"
        and m["params"]["update"]["sessionUpdate"] == "available_commands_update"
    )


def users(body: dict[str, Any]) -> list[Any]:
    return [m["content"] for m in body["messages"] if m["role"] == "user"]


async def test_a_custom_command_and_a_skill_reach_the_model(tmp_path: Path, fake: FakeDeepSeek) -> None:
    state = tmp_path / "state"
    work = state / "work"
    write(
        work / ".dsh" / "commands" / "audit.md",
        "---\ndescription: Review a file\nargument-hint: PATH\nallowed-tools: [read_file, skill]\n---\n"
        "Review $ARGUMENTS for bugs; be brief.\n",
    )
    write(state / "commands" / "hello.md", "Say hello in French.\n")
    write(state / "commands" / "model.md", "A person's command named as a built-in one.\n")
    write(
        work / ".dsh" / "skills" / "changelog" / "SKILL.md",
        "---\nname: changelog\ndescription: How this project writes changelog entries\n---\n"
        "Entries go in CHANGES.md, newest first, one line each.\n",
    )
    fake.script(
        Reply.stream(tool_call_stream([("c1", "skill", {"name": "changelog"})])),
        Reply.stream(tool_call_stream([("c2", "run_command", {"command": "echo hi"})])),
        Reply.stream(text_stream(["reviewed"])),
        Reply.stream(text_stream(["bonjour"])),
    )
    async with raw_acp(state, fake) as raw:
        sid = await start(raw, work)
        update = (await raw.until(advertised(raw)))["params"]["update"]
        names = [c["name"] for c in update["availableCommands"]]
        assert names[-2:] == ["hello", "audit"]  # after the built-in ones; /model stays the built-in
        assert names.count("model") == 1
        audit = update["availableCommands"][-1]
        assert audit == {"name": "audit", "description": "Review a file", "input": {"hint": "PATH"}}

        answer = await raw.call("session/prompt", {"sessionId": sid, "prompt": prompt("/audit app.py")})
        assert answer["result"]["stopReason"] == "end_turn"
        first = fake.requests[0].json
        assert users(first)[-1] == "Review app.py for bugs; be brief."
        system = first["messages"][0]["content"]
        assert "# Skills" in system and "- changelog: How this project writes changelog entries" in system
        # allowed-tools narrows what the turn offers (run_command is left out) …
        assert sorted(t["function"]["name"] for t in first["tools"]) == ["read_file", "skill"]
        # … the model read the skill's body through the tool …
        second = fake.requests[1].json
        assert "Entries go in CHANGES.md" in json.dumps(second["messages"][-1])
        # … and a call to a tool the command does not allow is refused, not run.
        third = json.dumps(fake.requests[2].json["messages"][-1])
        assert "allows only: read_file, skill" in third

        await raw.call("session/prompt", {"sessionId": sid, "prompt": prompt("/hello")})
        fourth = fake.requests[3].json
        assert users(fourth)[-1] == "Say hello in French."
        assert "run_command" in [t["function"]["name"] for t in fourth["tools"]]  # the next turn: all

    # Another connection loads the session: the person's line is replayed as typed.
    async with raw_acp(state, fake) as raw:
        await raw.call("initialize", {"protocolVersion": 1})
        loaded = await raw.call("session/load", {"sessionId": sid, "cwd": str(work), "mcpServers": []})
        assert "error" not in loaded, loaded
        said = [
            m["params"]["update"]["content"]["text"]
            for m in raw.received
            if m.get("method") == "session/update"
            and m["params"]["update"]["sessionUpdate"] == "user_message_chunk"
        ]
        assert said == ["/audit app.py", "/hello"]
