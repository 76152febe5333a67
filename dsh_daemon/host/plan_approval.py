"""A plan the person approved (protocol.md §3 "Plan approval"): the session leaves plan mode for the
mode they chose, and the plan is queued as their next prompt, both in one commit.

The prompt is the person's (`source.kind` "user", so it counts as a human prompt), marked
`source.approvedPlan = {callId, mode}` so clients can show it as the approved plan rather than as
something typed. It wakes the driver: the turn that proposed the plan ends, and the next one carries
it out at once.
"""

from __future__ import annotations

import time
from typing import Any

from dsh_daemon.agent.loop import Agent
from dsh_daemon.model.inbox import InboxItem
from dsh_daemon.model.messages import UserMessage
from dsh_daemon.model.payloads import SessionModeSet, entry
from dsh_daemon.model.wire import SessionMode

PROMPT_HEAD = "Carry out this plan; I approved it:"


def approved_plan_message(plan: str, mode: SessionMode, call_id: str) -> UserMessage:
    source: dict[str, Any] = {"kind": "user", "approvedPlan": {"callId": call_id, "mode": mode}}
    return UserMessage.create([{"type": "text", "text": f"{PROMPT_HEAD}\n\n{plan}"}], source)


def approve_plan_durably(agent: Agent, plan: str, mode: SessionMode, call_id: str) -> UserMessage:
    """Queue the plan as the next prompt and record the mode, on disk together on return: a crash
    leaves both or neither (the splice is written with the `session/mode` that commits it). The
    caller applies the mode to the session's tools."""
    message = approved_plan_message(plan, mode, call_id)
    inbox = agent.inbox
    item = InboxItem(message, (), True, "followup", int(time.time() * 1000))
    inbox.splice("next-turn", len(inbox.items("next-turn")), 0, [item], commit=False)
    agent.log.append(*entry(SessionModeSet(mode, call_id)), commit=True, ignorable=True)
    return message
