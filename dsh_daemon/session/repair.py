"""Deterministic closers for a turn left open by a crash (D6, docs/design.md §7).

Per unanswered tool call of the open step's assistant message: an error `tool/result` with
`TOOL_NOT_STARTED` when no `tool/call` was logged, else `TOOL_OUTCOME_UNKNOWN` citing the call seq;
then `step/end` if a step is open; then `turn/end {interrupted}`. All stamped with the last event's time.

Input the open turn claimed at its last boundary but no `step/start` entered (the crash came between
the claim and the step) is returned to the front of its lists first (`unentered_claims`), so every
acknowledged message stays entered, pending, or discarded by an acknowledged request.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dsh_daemon.model.events import (
    ASSISTANT_MESSAGE,
    INBOX_SPLICED,
    STEP_END,
    STEP_START,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    Event,
)
from dsh_daemon.model.inbox import InboxItem
from dsh_daemon.model.messages import AssistantMessage, tool_result_message

TOOL_NOT_STARTED = "TOOL_NOT_STARTED"
TOOL_OUTCOME_UNKNOWN = "TOOL_OUTCOME_UNKNOWN"

NOT_STARTED_TEXT = (
    "Error: tool call {name} was interrupted before dsh-daemon recorded it as started. "
    "Retry it if it is still needed."
)
OUTCOME_UNKNOWN_TEXT = (
    "Error: tool call {name} was started but dsh-daemon stopped before it finished; its outcome is "
    "unknown. Retry only if it is read-only or idempotent; otherwise verify the external state or ask "
    "the user."
)


def open_turn(events: Sequence[Event]) -> int | None:
    """The number of the turn left open at the tail of the log, if any."""
    for event in reversed(events):
        if event.type == TURN_END:
            return None
        if event.type == TURN_START:
            return int(event.data["turn"])
    return None


def unentered_claims(events: Sequence[Event]) -> tuple[list[InboxItem], InboxItem | None]:
    """(next-step messages, next-turn prompt) that the open tail turn claimed after its last
    `step/start` (or since `turn/start`) and that no step entered; ([], None) when the tail is closed."""
    if open_turn(events) is None:
        return [], None
    start = max(i for i, e in enumerate(events) if e.type == TURN_START)
    last_step = max((i for i, e in enumerate(events) if e.type == STEP_START and i > start), default=start)
    known: dict[str, InboxItem] = {}
    next_step: list[InboxItem] = []
    prompt: InboxItem | None = None
    for index, event in enumerate(events):
        if event.type != INBOX_SPLICED:
            continue
        for raw in event.data.get("inserted", ()):
            known[str(raw["id"])] = InboxItem.from_json(raw, event.time)
        is_claim = event.data.get("removedCount") and "outcome" not in event.data
        if index <= last_step or not is_claim:
            continue
        # removedIds lists every message of each item (attachments first); the item's own id is last
        claimed = [known[str(i)] for i in event.data.get("removedIds", ()) if str(i) in known]
        if event.data["target"] == "next-turn":
            prompt = claimed[0] if claimed else prompt
        else:
            next_step += claimed
    return next_step, prompt


def repair_closers(events: Sequence[Event]) -> list[tuple[str, dict[str, Any]]]:
    """The (type, data) closers an open tail turn needs, in order; [] when the tail is closed."""
    turn = open_turn(events)
    if turn is None:
        return []
    start = max(i for i, e in enumerate(events) if e.type == TURN_START)
    tail = events[start:]
    step: int | None = None
    calls: list[tuple[str, str]] = []
    logged_calls: dict[str, int] = {}
    answered: set[str] = set()
    for event in tail:
        if event.type == STEP_START:
            step, calls, logged_calls, answered = int(event.data["step"]), [], {}, set()
        elif event.type == STEP_END:
            step = None
        elif event.type == ASSISTANT_MESSAGE and not event.data.get("interrupted"):
            assistant = AssistantMessage.from_json(event.data["message"])
            calls = [(c.id, c.name) for c in assistant.tool_calls]
        elif event.type == TOOL_CALL:
            logged_calls[str(event.data["callId"])] = event.seq  # type: ignore[assignment]
        elif event.type == TOOL_RESULT:
            answered.add(str(event.data["message"]["source"]["callId"]))
    closers: list[tuple[str, dict[str, Any]]] = []
    if step is not None:
        for call_id, name in calls:
            if call_id in answered:
                continue
            if call_id in logged_calls:
                message = tool_result_message(call_id, OUTCOME_UNKNOWN_TEXT.format(name=name), is_error=True)
                closers.append(
                    (
                        TOOL_RESULT,
                        {
                            "turn": turn,
                            "step": step,
                            "callId": call_id,
                            "name": name,
                            "message": message.to_json(),
                            "error": {"name": name, "code": TOOL_OUTCOME_UNKNOWN},
                            "sourceEventSeqs": [logged_calls[call_id]],
                        },
                    )
                )
            else:
                message = tool_result_message(call_id, NOT_STARTED_TEXT.format(name=name), is_error=True)
                closers.append(
                    (
                        TOOL_RESULT,
                        {
                            "turn": turn,
                            "step": step,
                            "callId": call_id,
                            "name": name,
                            "message": message.to_json(),
                            "error": {"name": name, "code": TOOL_NOT_STARTED},
                        },
                    )
                )
        closers.append((STEP_END, {"turn": turn, "step": step}))
    closers.append((TURN_END, {"turn": turn, "reason": {"kind": "interrupted"}}))
    return closers
