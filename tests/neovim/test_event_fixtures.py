"""One event semantics for every client (issue 19.4), the Neovim side: the recorded event sequences of
tests/fixtures/events (tests/fixtures/events/README.md) replayed through the plugin's session reducer
(`lua/dsh/session.lua`) in a real headless Neovim must end where the daemon ended: the same
transcript (prompts, replies, tool calls and their outcome), queue, status, turn ends and tokens.

The events are decoded as Neovim's LSP client decodes a frame (`vim.json.decode` with `luanil`), and
the render operations the reducer returns are folded the way the chat buffer shows them (a reply is
the text and reasoning between its first delta and its `assistant_end`; an empty one only anchors
tool calls and shows nothing)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.neovim.harness import Editor
from tests.test_event_fixtures import fixture_files

REPLAY = """
local session = require('dsh.session')
local fixture = vim.json.decode(..., { luanil = { object = true } })
local render = require('dsh.render')
local st = session.new(fixture.sessionId)
local ops = {}
for _, ev in ipairs(fixture.events) do
  ev.sessionId = fixture.sessionId
  for _, op in ipairs(session.reduce(st, ev)) do
    if op.op == 'tool_result' and not op.error then
      op.note = render.tool_note(op.meta) -- what the card says the language server told the agent
    end
    ops[#ops + 1] = op
  end
end
local queue = { nextTurn = {}, nextStep = {} }
for _, m in ipairs(st.inbox['next-turn']) do
  queue.nextTurn[#queue.nextTurn + 1] = m.id
end
for _, m in ipairs(st.inbox['next-step']) do
  queue.nextStep[#queue.nextStep + 1] = m.id
end
local input, output = 0, 0
for _, u in pairs(st.usage) do
  input = input + (u.inputTokens or 0)
  output = output + (u.outputTokens or 0)
end
return vim.json.encode({ ops = ops, status = st.status, queue = queue, usage = { inputTokens = input, outputTokens = output } })
"""


def fold(ops: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """The transcript items and turn-end kinds the chat shows for these render operations."""
    items: list[dict[str, Any]] = []
    ends: list[str] = []
    reply: dict[str, str] | None = None
    tools: dict[str, dict[str, Any]] = {}
    for op in ops:
        kind = op["op"]
        if kind in ("text", "reasoning"):
            reply = reply or {"text": "", "reasoning": ""}
            reply[kind] += op["text"]
        elif kind == "assistant_end":
            text, reasoning = (reply or {}).get("text", ""), (reply or {}).get("reasoning", "")
            if text or reasoning or op.get("interrupted"):
                item: dict[str, Any] = {"type": "assistant", "text": text}
                if reasoning:
                    item["reasoning"] = reasoning
                if op.get("interrupted"):
                    item["interrupted"] = True
                items.append(item)
            reply = None
        elif kind == "user":
            items.append({"type": "user", "text": op["text"]})
        elif kind == "tool_call" and op["callId"] not in tools:
            tools[op["callId"]] = {"type": "tool", "callId": op["callId"], "name": op["name"], "result": None}
            items.append(tools[op["callId"]])
        elif kind == "tool_result" and op.get("callId") in tools:
            tools[op["callId"]]["result"] = "error" if op.get("error") else "ok"
            if op.get("note"):
                tools[op["callId"]]["note"] = op["note"]
        elif kind == "turn_end":
            ends.append(op["reason"].get("kind"))
    return items, ends


def replay(editor: Editor, fixture: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(editor.lua(REPLAY, json.dumps(fixture)))
    return result


@pytest.fixture(scope="module")
def fixtures() -> list[tuple[str, dict[str, Any]]]:
    return [(p.stem, json.loads(p.read_text())) for p in fixture_files()]


def test_the_lua_reducer_agrees_with_every_recording(
    editor: Editor, fixtures: list[tuple[str, dict[str, Any]]]
) -> None:
    assert len(fixtures) >= 8
    for name, fixture in fixtures:
        got = replay(editor, fixture)
        expected = fixture["expected"]
        transcript, ends = fold(got["ops"])
        assert transcript == expected["transcript"], name
        assert ends == expected["turnEnds"], name
        assert got["queue"] == expected["queue"], name
        assert got["status"] == expected["status"], name
        assert got["usage"] == expected["usage"], name


def test_a_reducer_that_disagrees_is_caught(
    editor: Editor, fixtures: list[tuple[str, dict[str, Any]]]
) -> None:
    """The comparison can fail: a recording with one reply delta dropped no longer matches."""
    name, fixture = next((n, f) for n, f in fixtures if n == "simple-turn")
    broken = dict(fixture)
    broken["events"] = [
        e for e in fixture["events"] if e["type"] not in ("assistant/delta", "assistant/chunk")
    ]
    transcript, _ = fold(replay(editor, broken)["ops"])
    assert transcript != fixture["expected"]["transcript"], name


def test_fixture_files_are_found() -> None:
    assert all(Path(p).exists() for p in fixture_files())
