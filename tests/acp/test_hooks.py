"""The person's hooks in ACP mode (protocol.md §17): a project's untrusted hooks are said in the chat
and do not run; `_dsh/project/trust` runs them from the next prompt; a bad root is refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.acp.harness import raw_acp
from tests.acp.test_raw import prompt, start
from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.test_hooks import hook, hook_program


def notice(text: str) -> Any:
    return lambda m: (
        m.get("method") == "session/update"
        and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
        and text in m["params"]["update"]["content"].get("text", "")
    )


async def test_untrusted_project_hooks_wait_for_the_trust(tmp_path: Path, fake: FakeDeepSeek) -> None:
    state = tmp_path / "state"
    work = state / "work"
    (work / ".dsh").mkdir(parents=True)
    program = hook_program(tmp_path)
    hooks = {"userPromptSubmit": [hook(program, "context", name="ctx")]}
    (work / ".dsh" / "config.json").write_text(json.dumps({"hooks": hooks}))
    fake.script(Reply.stream(text_stream(["one"])), Reply.stream(text_stream(["two"])))
    async with raw_acp(state, fake) as raw:
        sid = await start(raw, work)
        await raw.until(notice("_dsh/project/trust"))
        first = await raw.call("session/prompt", {"sessionId": sid, "prompt": prompt("hi")})
        assert first["result"]["stopReason"] == "end_turn"
        assert "userPromptSubmit context" not in json.dumps(fake.requests[0].json["messages"])

        trusted = await raw.call("_dsh/project/trust", {"root": str(work)})
        assert trusted["result"] == {"root": str(work.resolve()), "hooks": 1, "events": ["userPromptSubmit"]}
        await raw.call("session/prompt", {"sessionId": sid, "prompt": prompt("again")})
        assert "userPromptSubmit context (prompt)" in json.dumps(fake.requests[1].json["messages"])

        for bad in ({}, {"root": 5}, {"root": "\u0000"}, {"root": str(tmp_path / "nothing")}):
            refused = await raw.call("_dsh/project/trust", bad)
            assert refused["error"]["code"] == -32602, (bad, refused)
