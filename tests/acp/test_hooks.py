"""The person's hooks in ACP mode (protocol.md §17): a project's untrusted hooks are said in the chat
and do not run; `_dsh/project/trust` runs them from the next prompt; a bad root is refused. A hook
that fails is said in the chat once (issue 39.8), however often it fails."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from acp import text_block

from tests.acp.harness import acp_daemon, raw_acp, settle
from tests.acp.test_raw import prompt, start
from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.test_hooks import calls, hook, hook_program


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


async def test_a_failing_hook_is_said_once(tmp_path: Path, fake: FakeDeepSeek) -> None:
    state = tmp_path / "state"
    state.mkdir()
    hooks = {"preToolUse": [hook(hook_program(tmp_path), "fail", name="breaks")]}
    (state / "config.json").write_text(json.dumps({"tools": {"sandbox": "full-access"}, "hooks": hooks}))
    fake.script(
        calls(("r1", "read_file", {"path": "a.txt"})),
        calls(("r2", "read_file", {"path": "a.txt"})),
        Reply.stream(text_stream(["done"])),
        calls(("r3", "read_file", {"path": "a.txt"})),
        Reply.stream(text_stream(["done again"])),
    )
    async with acp_daemon(state, fake) as d:
        sid = await d.new_session()
        (d.work / "a.txt").write_text("alpha\n")
        for text in ("read it twice", "read it again"):
            stop = await settle(d.conn.prompt(session_id=sid, prompt=[text_block(text)]))
            assert stop.stop_reason == "end_turn"
        said = d.client.text(sid)
        assert said.count("The preToolUse hook breaks failed (") == 1, said  # it failed three times
        assert "the hook broke" in said and "it was ignored." in said
        results = [u for u in d.client.updates(sid, "tool_call_update") if u.get("status") == "completed"]
        assert len(results) == 3  # the reads ran: a failed hook says nothing
