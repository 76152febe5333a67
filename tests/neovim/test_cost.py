""":DshCost in Neovim over the real daemon: the chat's session's turns, tokens and cost as
`dsh/session/usage` sums them, and its subagents' part on a second line (the child's session is
its own: the daemon sums it apart); no session yet, and a daemon without `sessionUsage`, say so.
The child has a script of its own (`FakeDeepSeek.script_for`), as in tests/neovim/test_subagents.py;
the fake reports 12 input / 3 output tokens per request."""

from __future__ import annotations

from typing import Any

from tests.fakes.deepseek_server import FakeDeepSeek, Reply
from tests.neovim.harness import Editor
from tests.server.harness import text_reply, tool_call_stream

CHILD = "CHILD-LOOK: say what you found"

USAGE = """
local chat = T.chat()
local entry = require('dsh.client').roots[chat.root]
local reply = entry.client:request_sync('dsh/session/usage', { sessionId = chat.id }, 10000)
return { id = chat.id, answer = reply and reply.result, err = reply and reply.err }
"""


def said(editor: Editor) -> list[str]:
    """The :DshCost lines in :messages (the notification's first line and the one after it)."""
    lines: list[str] = editor.lua("return T.messages()").splitlines()
    at = next((i for i, line in enumerate(lines) if line.startswith("dsh: session ")), None)
    return [] if at is None else lines[at : at + 2]


def dollars(cost: float) -> str:
    return f"${cost:.4f}" if cost >= 0.01 else f"${cost:.6f}"


def test_cost_shows_the_sessions_own_figures_and_its_subagents_part(
    editor: Editor, fake: FakeDeepSeek
) -> None:
    delegate = {"description": "look around", "prompt": CHILD}
    fake.script(
        Reply.stream(tool_call_stream([("call_child", "run_subagent", delegate)])),
        text_reply("The child looked."),
    )
    fake.script_for("CHILD-LOOK", text_reply("SUMMARY: two files"))
    editor.cmd("Dsh look around")
    editor.wait_footers(1)
    assert "  ▾ subagent “look around” (explore) · completed" in editor.lines()

    got = editor.lua(USAGE)
    answer: dict[str, Any] = got["answer"]
    assert got.get("err") is None and answer is not None, got
    # The parent's two requests are its turn's; the child's one request is its own session's.
    assert (
        answer["turns"] == 1 and answer["usage"]["inputTokens"] == 24 and answer["usage"]["outputTokens"] == 6
    )
    sub = answer["subagents"]
    assert sub["sessions"] == 1 and sub["turns"] == 1
    assert sub["usage"]["inputTokens"] == 12 and sub["usage"]["outputTokens"] == 3
    assert isinstance(answer["costUsd"], float) and isinstance(sub["costUsd"], float)  # shipped prices

    editor.cmd("DshCost")
    shown = editor.wait(lambda: len(s := said(editor)) == 2 and s, what=":DshCost's two lines")
    cached = answer["usage"].get("cacheReadTokens") or 0
    assert shown == [
        f"dsh: session {got['id'][:8]}: 1 turn · 24 tokens in"
        + (f" ({cached} cached)" if cached else "")
        + f" · 6 out · {dollars(answer['costUsd'])}",
        f"  its subagents (1 session): 1 turn · 12 tokens in · 3 out · {dollars(sub['costUsd'])}",
    ]


def test_cost_without_a_session_says_there_is_none(editor: Editor) -> None:
    editor.cmd("DshCost")
    editor.wait(
        lambda: (
            "dsh: no session here yet, so nothing spent (send a prompt first)"
            in editor.lua("return T.messages()")
        ),
        what="no session",
    )
    editor.cmd("DshNew")  # a draft chat: still no session until its first prompt
    editor.wait(lambda: editor.lua("return vim.b.dsh_kind") == "input", what="a draft chat")
    editor.lua("vim.cmd('messages clear')")
    editor.cmd("DshCost")
    editor.wait(lambda: "no session here yet" in editor.lua("return T.messages()"), what="no session (draft)")
    assert said(editor) == []


def test_a_daemon_without_session_usage_cannot_tell(editor: Editor, fake: FakeDeepSeek) -> None:
    fake.script(text_reply("hi"))
    editor.cmd("Dsh hello")
    editor.wait_footers(1)
    # As an older daemon answers initialize: without the flag (the request itself is never sent).
    editor.lua("require('dsh.client').roots[T.chat().root].info.sessionUsage = nil")
    editor.cmd("DshCost")
    editor.wait(
        lambda: (
            "cannot tell what a session cost (no `sessionUsage` capability)"
            in editor.lua("return T.messages()")
        ),
        what="the refusal",
    )
    assert said(editor) == []


WORDS = """
local lines = require('dsh.cost').lines
return {
  unpriced = lines('0123456789ab', { turns = 2, usage = { inputTokens = 12345, outputTokens = 1200, reasoningTokens = 40 },
    costUsd = vim.NIL, unpricedTurns = 2 }),
  partly = lines('0123456789ab', { turns = 3, usage = { inputTokens = 5490, outputTokens = 288, cacheReadTokens = 3072 },
    costUsd = 0.25, unpricedTurns = 1, subagents = { sessions = 2, turns = 2, usage = { inputTokens = 2210,
    outputTokens = 140 }, costUsd = vim.NIL, unpricedTurns = 2 } }),
  none = lines('0123456789ab', { turns = 0, usage = { inputTokens = 0, outputTokens = 0 }, costUsd = vim.NIL,
    unpricedTurns = 0 }),
}
"""


def test_the_words_for_no_price_part_priced_and_no_turn_yet(editor: Editor) -> None:
    """The cases a fake's priced model does not reach, on answers shaped as protocol.md §3's."""
    got = editor.lua(WORDS)
    assert got["unpriced"] == [
        "session 01234567: 2 turns · 12,345 tokens in · 1,200 out (40 reasoning) · cost not known for this model"
    ]
    assert got["partly"] == [
        "session 01234567: 3 turns · 5,490 tokens in (3,072 cached) · 288 out · $0.2500 (1 turn without a price)",
        "its subagents (2 sessions): 2 turns · 2,210 tokens in · 140 out · cost not known",
    ]
    assert got["none"] == ["session 01234567: no turn has reported its usage yet"]
