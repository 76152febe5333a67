"""Issue 20.2: a first `session/new` sent right after `initialize` is answered from the store alone,
before the agent, the tools and the provider are loaded; they are wired after the reply. Nothing a
client sees may differ: the reply is the one a session created later gets, a prompt sent at once
runs, and a bad request is refused as before.

The first `session/new` of a connection is always answered that way (the front end is built only
after it), so pipelining it with `initialize` makes each test take that path whatever the timing;
the second `session/new` of the same connection is answered the way every session was before.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.acp.harness import RawAcp, raw_acp
from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream

# Options that make the config options say something of their own: a model of the configuration
# (with its context window), thinking off, the maximum effort.
OPTIONS = {
    "thinking": False,
    "model": "my-local-model",
    "contextWindow": {"my-local-model": 32768},
    "reasoningEffort": "max",
}


def pipelined(raw: RawAcp, *requests: tuple[str, Any]) -> list[int]:
    """`initialize` and `requests` written to the daemon in one write: all arrive before any reply."""
    lines, ids = [], []
    for method, params in (("initialize", {"protocolVersion": 1, "_meta": {"dsh": OPTIONS}}), *requests):
        raw._ids += 1
        ids.append(raw._ids)
        lines.append(json.dumps({"jsonrpc": "2.0", "id": raw._ids, "method": method, "params": params}))
    raw.send_line("\n".join(lines).encode())
    return ids[1:]


def updates_of(raw: RawAcp, session_id: str) -> list[dict[str, Any]]:
    return [
        m["params"]["update"]
        for m in raw.received
        if m.get("method") == "session/update" and m["params"]["sessionId"] == session_id
    ]


async def test_the_first_session_is_answered_as_every_later_one(tmp_path: Path, fake: FakeDeepSeek) -> None:
    async with raw_acp(tmp_path / "state", fake) as raw:
        work = str(tmp_path / "state" / "work")
        (first_id,) = pipelined(raw, ("session/new", {"cwd": work, "mcpServers": []}))
        first = (await raw.response(first_id))["result"]
        second = (await raw.call("session/new", {"cwd": work, "mcpServers": []}))["result"]
        assert first.keys() == second.keys() == {"sessionId", "modes", "configOptions"}
        assert first["sessionId"] != second["sessionId"]
        assert first["modes"] == second["modes"]
        assert first["configOptions"] == second["configOptions"]
        assert first["modes"]["currentModeId"] == "ask"
        assert [o["id"] for o in first["configOptions"]] == [
            "mode",
            "model",
            "thinking",
            "reasoning_effort",
            "sandbox",
        ]
        assert first["configOptions"][0]["currentValue"] == "ask"
        model = first["configOptions"][1]
        assert model["currentValue"] == "my-local-model"
        assert {
            "value": "my-local-model",
            "name": "my-local-model",
            "description": "32,768 tokens of context",
        } in (model["options"])
        assert [o["currentValue"] for o in first["configOptions"][2:]] == ["off", "max", "full-access"]
        # Both sessions hear the slash commands, both are listed once they hold work, and the first is
        # driven here.
        for session_id in (first["sessionId"], second["sessionId"]):
            await raw.until(
                lambda m, sid=session_id: (
                    m.get("method") == "session/update"
                    and m["params"]["sessionId"] == sid
                    and m["params"]["update"]["sessionUpdate"] == "available_commands_update"
                )
            )
        commands = [u for s in (first, second) for u in updates_of(raw, s["sessionId"])]
        assert commands[0] == commands[1]
        # Neither is listed before it holds work (issue 39.9); with a note pending, both are.
        assert (await raw.call("session/list", {}))["result"]["sessions"] == []
        for session_id in (first["sessionId"], second["sessionId"]):
            note = [{"type": "text", "text": "the build uses make"}]
            assert (
                "messageId"
                in (await raw.call("_dsh/inject", {"sessionId": session_id, "prompt": note}))["result"]
            )
        listed = (await raw.call("session/list", {}))["result"]["sessions"]
        assert {s["sessionId"] for s in listed} == {first["sessionId"], second["sessionId"]}
        mode = await raw.call("session/set_mode", {"sessionId": first["sessionId"], "modeId": "plan"})
        assert mode["result"] == {}
        log = (tmp_path / "state" / "daemon.log").read_text()
        early = "created before the session machinery, wired after its reply"
        assert f"session {first['sessionId']}: {early}" in log  # the path this test is about was taken
        assert f"session {second['sessionId']}: {early}" not in log


async def test_a_prompt_sent_at_once_runs_once_the_session_is_wired(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    fake.script(Reply.stream(text_stream(["hello ", "there"])))
    async with raw_acp(tmp_path / "state", fake) as raw:
        work = str(tmp_path / "state" / "work")
        (new_id,) = pipelined(raw, ("session/new", {"cwd": work, "mcpServers": []}))
        session_id = (await raw.response(new_id))["result"]["sessionId"]
        # Sent the moment the reply arrives: the session's agent may not be built yet.
        prompt = [{"type": "text", "text": "hi"}]
        answer = await raw.call("session/prompt", {"sessionId": session_id, "prompt": prompt})
        assert answer["result"]["stopReason"] == "end_turn"
        text = "".join(
            u["content"]["text"]
            for u in updates_of(raw, session_id)
            if u["sessionUpdate"] == "agent_message_chunk"
        )
        assert text == "hello there"
        assert len(fake.requests) == 1
        assert fake.requests[0].json["model"] == "my-local-model"


async def test_a_bad_first_session_new_is_refused_as_before(tmp_path: Path, fake: FakeDeepSeek) -> None:
    async with raw_acp(tmp_path / "state", fake) as raw:
        missing = str(tmp_path / "nowhere")
        work = str(tmp_path / "state" / "work")
        ids = pipelined(
            raw,
            ("session/new", {"cwd": missing, "mcpServers": []}),
            ("session/new", {"cwd": work, "mcpServers": [{"name": "x", "command": 3}]}),
            ("session/new", {"cwd": "relative", "mcpServers": []}),
        )
        errors = [(await raw.response(i))["error"] for i in ids]
        assert [e["code"] for e in errors] == [-32602, -32602, -32602]
        assert "is not a directory" in errors[0]["message"]
        assert "mcpServers" in errors[1]["message"]
        assert "absolute path" in errors[2]["message"]
        # Nothing was created, and the connection goes on.
        assert (await raw.call("session/list", {}))["result"]["sessions"] == []
        new = await raw.call("session/new", {"cwd": work, "mcpServers": []})
        assert new["result"]["sessionId"]
