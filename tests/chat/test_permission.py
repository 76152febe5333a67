"""An escalation's permission question in the chat (issue 41.5): its answers, and what the chat sends
back for each — "Always (saved to config)" only where the daemon advertises `persistWidening`, never
for running unconfined, and on the wire `{"outcome": "allow-always", "persist": true}`.

The chat's model (`Chat`) is driven as the daemon's request reaches it (`on_request`) and answered with
a typed line as at a dumb terminal (`answer_line`); the plain view writes into buffers. The real
daemon, which advertises the flag, is driven in tests/chat/test_tui_sandbox.py."""

from __future__ import annotations

import asyncio
import io
from typing import Any, cast

from dsh_daemon.chat.core import Chat
from dsh_daemon.chat.permission import ALLOW_ALWAYS, ALLOW_SAVED, REJECT, wire_answer
from dsh_daemon.chat.plain import PlainView
from dsh_daemon.chat.rpc import RpcPipe


def escalation(**widening: Any) -> dict[str, Any]:
    command = "npm ci"
    escalate = {"reason": "npm keeps its cache there", "writable": [], "network": [], "unconfined": False}
    escalate.update(widening)
    return {
        "sessionId": "s",
        "callId": "call_4",
        "tool": "run_command",
        "title": f"Widen the sandbox to run: {command}",
        "arguments": {"command": command, "escalate": escalate},
        "preview": {"command": command, "cwd": "/w", "sandbox": "workspace-write", "escalation": escalate},
    }


async def ask(params: dict[str, Any], line: str, *, flags: dict[str, Any]) -> tuple[Any, str, list[str]]:
    """The answer the chat sends for `params` when `line` is typed, what it showed, and the menu."""
    notes = io.StringIO()
    view = PlainView(io.StringIO(), notes, color=False, stream_answers=False)
    chat = Chat(cast(RpcPipe, None), view, cwd="/w", auto_allow=False, answers=True)
    chat.capabilities = flags
    asked = asyncio.ensure_future(chat.on_request("dsh/requestPermission", params))
    await asyncio.sleep(0)  # the request runs up to the open question
    assert chat.question is not None
    menu = [option.label for option in chat.question.options]
    assert chat.answer_line(line), (line, menu)
    return await asked, notes.getvalue(), menu


async def test_always_saved_is_offered_only_with_the_flag_and_sends_persist() -> None:
    params = escalation(writable=["/home/me/.npm"], network=["registry.npmjs.org"])
    answer, shown, menu = await ask(params, "3", flags={"persistWidening": True})
    assert answer == {"outcome": "allow-always", "persist": True}
    assert menu[2] == "Always: save it to config.json (every later session too)" and len(menu) == 5
    assert "why: npm keeps its cache there" in shown
    assert "widen: writable: /home/me/.npm; network: registry.npmjs.org" in shown
    assert "answer with a line: 1-5" in shown and "save" in shown
    assert "→ allowed always, saved to config.json" in shown

    answer, _, _ = await ask(params, "save", flags={"persistWidening": True})
    assert answer == {"outcome": "allow-always", "persist": True}
    answer, _, _ = await ask(params, "2", flags={"persistWidening": True})
    assert answer == {"outcome": "allow-always"}  # this session only: no `persist`

    # Without the flag the daemon could not keep it: not offered, and 3 is Reject.
    answer, shown, menu = await ask(params, "3", flags={})
    assert answer == {"outcome": "reject"} and len(menu) == 4
    assert not any("config.json" in label for label in menu) and "save" not in shown.split("answer with")[1]


async def test_running_unconfined_is_never_saved() -> None:
    params = escalation(unconfined=True)
    answer, shown, menu = await ask(params, "2", flags={"persistWidening": True})
    assert answer == {"outcome": "allow-always"}
    assert menu[1] == "Yes, and run exactly `npm ci` unconfined whenever it comes in this session"
    assert not any("config.json" in label for label in menu) and len(menu) == 4
    assert "widen: unconfined (the command runs outside the sandbox, as your account)" in shown


async def test_save_is_no_answer_where_it_is_not_offered() -> None:
    """`save` typed to a question without that answer is a prompt, not a silent session grant."""
    notes = io.StringIO()
    view = PlainView(io.StringIO(), notes, color=False, stream_answers=False)
    chat = Chat(cast(RpcPipe, None), view, cwd="/w", auto_allow=False, answers=True)
    asked = asyncio.ensure_future(chat.on_request("dsh/requestPermission", escalation(unconfined=True)))
    await asyncio.sleep(0)
    assert not chat.answer_line("save")
    assert chat.answer_line("no")
    assert await asked == {"outcome": REJECT}


def test_the_wire_answers() -> None:
    assert wire_answer(ALLOW_SAVED) == {"outcome": "allow-always", "persist": True}
    assert wire_answer(ALLOW_ALWAYS) == {"outcome": "allow-always"}


def plan_request() -> dict[str, Any]:
    plan = "1. Read app.py.\n2. Fix the loop."
    return {
        "sessionId": "s",
        "callId": "call_p",
        "tool": "propose_plan",
        "title": "Approve the plan?",
        "arguments": {"plan": plan},
        "preview": {"kind": "plan", "plan": plan},
    }


async def test_a_plan_is_approved_into_a_mode_or_sent_back_with_the_typed_words() -> None:
    """A plan's approval (protocol.md §3): the plan is shown whole; 1 and 2 approve into accept edits
    or ask (allow-once with `mode`), 3 revises without words, and any other line is the words to
    revise by (reject with `feedback`), never a prompt."""
    answer, shown, menu = await ask(plan_request(), "1", flags={})
    assert answer == {"outcome": "allow-once", "mode": "accept-edits"}
    assert menu[:3] == [
        "Yes, approve and accept edits (the plan runs now)",
        "Yes, approve and ask before each edit",
        "No, keep planning (or type what to change and press Enter)",
    ]
    assert "│ 1. Read app.py." in shown and "│ 2. Fix the loop." in shown
    assert "→ plan approved: accept edits" in shown
    answer, _, _ = await ask(plan_request(), "2", flags={})
    assert answer == {"outcome": "allow-once", "mode": "ask"}
    answer, _, _ = await ask(plan_request(), "3", flags={})
    assert answer == {"outcome": "reject"}
    answer, shown, _ = await ask(plan_request(), "  also add a test  ", flags={})
    assert answer == {"outcome": "reject", "feedback": "also add a test"}
    assert "with: also add a test" in shown
