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

from dsh_daemon.model.review import typed_review
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
local subagents = {}
for _, a in pairs(st.subagents) do
  local tools = {}
  for _, c in ipairs(a.calls) do
    tools[#tools + 1] = { name = c.name, result = c.result or vim.NIL }
  end
  subagents[#subagents + 1] = { callId = a.callId, childId = a.childId, description = a.description,
    tools = tools, status = a.status, summary = a.summary or vim.NIL }
end
table.sort(subagents, function(x, y) return x.callId < y.callId end)
local plan = vim.NIL -- the plan the window bar and :DshPlan show (st.plan; an empty one: none)
if session.plan_steps(st.plan) then
  plan = { steps = {}, note = st.plan.note }
  for _, step in ipairs(st.plan.steps) do
    plan.steps[#plan.steps + 1] = { title = step.title, status = step.status }
  end
end
return vim.json.encode({ ops = ops, status = st.status, queue = queue, usage = { inputTokens = input, outputTokens = output },
  subagents = subagents, plan = plan })
"""

# The whole chat, not only its reducer: a real chat buffer gets each event as the client's listener
# routes it (events.lua: hooks, review findings, processes, subagent cards). No daemon answers here
# (the fixture is the daemon's recording): a request the chat would send is noted, not answered.
CHAT_REPLAY = """
local fixture = vim.json.decode(..., { luanil = { object = true } })
local client = require('dsh.client')
local real_request = client.request
local asked = {}
client.request = function(_root, method) asked[#asked + 1] = method end
local root = '/state/work'
local chat = require('dsh.chat').Chat.new(root, fixture.sessionId)
require('dsh.state').chats[fixture.sessionId] = chat
local ok, err = pcall(function()
  for _, ev in ipairs(fixture.events) do
    ev.sessionId = fixture.sessionId
    require('dsh.events').event(root, ev)
  end
  chat:flush()
end)
client.request = real_request
local findings = {}
for _, item in ipairs(require('dsh.findings').qf_items()) do
  if item.user_data.sessionId == fixture.sessionId then
    findings[#findings + 1] = item.user_data.findingId
  end
end
local lines = chat:lines()
require('dsh.state').chats[fixture.sessionId] = nil
for _, buf in ipairs({ chat.buf, chat.input }) do
  pcall(vim.api.nvim_buf_delete, buf, { force = true })
end
assert(ok, err)
return vim.json.encode({ lines = lines, findings = findings, asked = asked,
  hooksUntrusted = chat.state.hooks_untrusted or vim.NIL })
"""

# A reload: the session's transcript page rendered as the chat renders it (`turn_ops`).
PAGE_LINES = """
local page = vim.json.decode(..., { luanil = { object = true } })
local session = require('dsh.session')
local st = session.new('session-1')
local out = {}
for i = #page.turns, 1, -1 do
  for _, op in ipairs(session.turn_ops(st, page.turns[i])) do
    if op.op == 'line' then
      out[#out + 1] = op.text
    end
  end
end
return out
"""

PROCESS_LINES = """
local rows = vim.json.decode(..., { luanil = { object = true } })
local processes = require('dsh.processes')
local known, out = {}, {}
for _, row in ipairs(rows) do
  out[#out + 1] = processes.event_line(known, 'process/started', row)
  if not row.running then
    out[#out + 1] = processes.event_line(known, 'process/exited', row)
  end
end
return out
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
            # A review's prompt: the plugin words the command its own way (`/review the uncommitted
            # changes`); the fixture lists it as the command (README).
            text = typed_review(op["review"]) if isinstance(op.get("review"), dict) else op["text"]
            items.append({"type": "user", "text": text})
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
        if "expectedPlan" in fixture:  # the plan that stands after the rewind's cut
            assert got["plan"] == fixture["expectedPlan"], name
        if "expectedSubagents" in fixture:  # the nested card's state, folded by the reducer
            assert got["subagents"] == fixture["expectedSubagents"], name
        if "expectedProcesses" in fixture:
            want = editor.lua(PROCESS_LINES, json.dumps(fixture["expectedProcesses"]))
            shown = [op["text"] for op in got["ops"] if op["op"] == "line" and op["text"][:1] in ("▶", "■")]
            assert sorted(shown) == sorted(want), name  # each start and exit once, with how it ended
            if "transcriptPage" in fixture:  # after a reload, from the page's `event` items
                assert editor.lua(PAGE_LINES, json.dumps(fixture["transcriptPage"])) == shown, name


def test_the_chat_shows_hooks_findings_and_subagent_cards_as_recorded(
    editor: Editor, fixtures: list[tuple[str, dict[str, Any]]]
) -> None:
    """The events a chat routes past the reducer (hooks, review findings) and the subagent card,
    replayed into a real chat buffer."""
    checked = set()
    for name, fixture in fixtures:
        got = json.loads(editor.lua(CHAT_REPLAY, json.dumps(fixture)))
        lines: list[str] = got["lines"]
        if "expectedHooks" in fixture:
            hooks = fixture["expectedHooks"]
            failed = [line for line in lines if line.startswith("⚠ hook ")]
            assert [line.split(" failed:")[0] for line in failed] == [
                f"⚠ hook {h['hook']} ({h['event']})" for h in hooks["failed"]
            ], name
            untrusted = [line for line in lines if line.startswith("⚠ this project has ")]
            assert len(untrusted) == 1 and hooks["untrusted"]["path"] in untrusted[0], name
            shown = {k: got["hooksUntrusted"][k] for k in ("root", "path", "events", "hooks")}
            assert shown == hooks["untrusted"], name  # what :DshTrust trusts
            checked.add("hooks")
        if "expectedFindings" in fixture:
            assert got["findings"] == [f["findingId"] for f in fixture["expectedFindings"]], name
            checked.add("findings")
        if "expectedSubagents" in fixture:
            for card in fixture["expectedSubagents"]:
                at = lines.index(f"  ▾ subagent “{card['description']}” (edit) · {card['status']}")
                nested = lines[at + 1 : at + 1 + len(card["tools"]) + 1]
                assert [line.split()[2] for line in nested[:-1]] == [t["name"] for t in card["tools"]], name
                assert all(line.endswith("  ✓") for line in nested[:-1]), name
                assert nested[-1] == "  │ ↳ " + card["summary"], name
            checked.add("subagents")
    assert checked == {"hooks", "findings", "subagents"}


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
