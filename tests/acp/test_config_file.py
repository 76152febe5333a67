"""Issue 18 item 11 in ACP mode: an ACP agent panel has no place for `tools` but `_meta.dsh`, which
Zed and CodeCompanion do not let a person write; `$DSH_HOME/config.json` is that place. Its settings
apply, and a mistake in it is shown (`_dsh/notice`, and a message in the session the person opens),
never silently dropped, and never keeps the agent from starting."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.acp.harness import raw_acp
from tests.fakes.deepseek_server import FakeDeepSeek, Reply
from tests.server.harness import text_reply, tool_call_stream


async def test_config_json_applies_in_acp_mode_and_its_mistakes_are_shown(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    config = {
        "tools": {"permissions": {"write_file": "allow", "read_file": 3}},
        "agent": {"appendSystemPrompt": "RULES-FROM-THE-FILE"},
        "permisionTimeoutS": 5,  # misspelt
    }
    (state / "config.json").write_text(json.dumps(config))
    fake.script(
        Reply.stream(tool_call_stream([("c1", "write_file", {"path": "out.txt", "content": "written\n"})])),
        text_reply("done"),
    )
    async with raw_acp(state, fake) as raw:
        work = state / "work"
        init = await raw.call("initialize", {"protocolVersion": 1, "_meta": {"dsh": {"thinking": False}}})
        assert "result" in init, init
        notices = [await raw.until(lambda m: m.get("method") == "_dsh/notice") for _ in range(2)]
        texts = sorted(n["params"]["message"] for n in notices)
        assert all(n["params"]["level"] == "warning" for n in notices)
        assert any("'permisionTimeoutS'" in t for t in texts) and any("read_file" in t for t in texts), texts

        sid = (await raw.call("session/new", {"cwd": str(work), "mcpServers": []}))["result"]["sessionId"]
        told = await raw.until(
            lambda m: (
                m.get("method") == "session/update"
                and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
            )
        )
        update: dict[str, Any] = told["params"]["update"]
        assert told["params"]["sessionId"] == sid and update["sessionUpdate"] == "agent_message_chunk"
        assert (
            "'permisionTimeoutS'" in update["content"]["text"] and "config.json" in update["content"]["text"]
        )

        done = await raw.call(
            "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}
        )
        assert done["result"]["stopReason"] == "end_turn", done
        assert not [m for m in raw.received if m.get("method") == "session/request_permission"]
        assert (work / "out.txt").read_text() == "written\n"
        assert "RULES-FROM-THE-FILE" in fake.requests[0].json["messages"][0]["content"]
    log = (state / "daemon.log").read_text()
    assert "permisionTimeoutS" in log and "Traceback" not in log


async def test_agent_budget_from_meta_stops_an_acp_turn_as_max_turn_requests(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """Issue 35 item 2 in ACP mode: `agent.budget` from `_meta.dsh` stops the turn before the request
    that would pass it, answered with ACP's `max_turn_requests`."""
    state = tmp_path / "state"
    state.mkdir()
    (state / "work").mkdir()
    (state / "work" / "a.txt").write_text("a\n")
    fake.script(
        Reply.stream(tool_call_stream([("c1", "read_file", {"path": "a.txt"})])), text_reply("never sent")
    )
    async with raw_acp(state, fake) as raw:
        meta = {"dsh": {"thinking": False, "agent": {"budget": {"steps": 1}}}}
        init = await raw.call("initialize", {"protocolVersion": 1, "_meta": meta})
        assert "result" in init, init
        cwd = str(state / "work")
        sid = (await raw.call("session/new", {"cwd": cwd, "mcpServers": []}))["result"]["sessionId"]
        done = await raw.call(
            "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}
        )
        assert done["result"]["stopReason"] == "max_turn_requests", done
        assert len(fake.requests) == 1
