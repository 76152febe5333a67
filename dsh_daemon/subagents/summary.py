"""A child's result, read from its log: how its turn ended and the text of its last reply."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dsh_daemon.model.events import ASSISTANT_MESSAGE, TURN_END, Event
from dsh_daemon.model.payloads import SubagentStatus, TurnEnded

NO_REPLY = "(the subagent ended without a reply)"


def last_reply(events: Sequence[Event]) -> str:
    """The text blocks of the last assistant message in `events` (empty when there is none)."""
    for event in reversed(events):
        if event.type == ASSISTANT_MESSAGE:
            content = event.data.get("message", {}).get("content", ())
            text = "".join(str(b.get("text", "")) for b in content if b.get("type") == "text")
            if text.strip():
                return text.strip()
    return ""


def turn_status(end: Event) -> SubagentStatus:
    """What a child's `turn/end` says of it, as `subagent/finished` names it."""
    reason = TurnEnded.of(end).reason
    if reason.kind == "completed":
        return "completed"
    if reason.kind == "budget":
        return "budget"
    if reason.kind == "interrupted":
        return "interrupted"
    if reason.kind == "aborted":
        return "interrupted" if reason.cause in ("shutdown", "disposed") else "cancelled"
    return "error"


def child_result(events: Sequence[Event]) -> tuple[SubagentStatus, str]:
    """(status, summary) of a child whose turn ended: its last `turn/end` and the reply before it.
    A child stopped early says so before whatever it had written, so the parent's model does not
    take a partial answer for a whole one."""
    ends = [e for e in events if e.type == TURN_END]
    if not ends:
        return "interrupted", NO_REPLY
    status = turn_status(ends[-1])
    reply = last_reply(events) or NO_REPLY
    if status == "completed":
        return status, reply
    reason = TurnEnded.of(ends[-1]).reason
    why = {
        "budget": "it used up its step budget",
        "cancelled": "it was cancelled",
        "interrupted": "the daemon stopped",
        "error": f"{reason.kind} ({_message(reason.error)})",
    }[status]
    return status, f"[The subagent stopped before finishing: {why}. Its last reply follows.]\n{reply}"


def _message(error: object) -> str:
    message = error.get("message") if isinstance(error, Mapping) else None
    return str(message) if message else "no details"
