"""Deterministic closers for a turn left open by a crash (D6, docs/design.md §7).

First a `subagent/finished {interrupted}` per subagent the open turn started and did not see finish.
Per unanswered tool call of the open step's assistant message: an error `tool/result` with
`TOOL_NOT_STARTED` when no `tool/call` was logged, else `TOOL_OUTCOME_UNKNOWN` citing the call seq;
then `step/end` if a step is open; then `turn/end {interrupted}`. All stamped with the last event's time.

Input the open turn claimed at its last boundary but no `step/start` entered (the crash came between
the claim and the step) is returned to the front of its lists first (`unentered_claims`), so every
acknowledged message stays entered, pending, or discarded by an acknowledged request.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from dsh_daemon.model.events import (
    ASSISTANT_MESSAGE,
    INBOX_SPLICED,
    STEP_END,
    STEP_START,
    SUBAGENT_FINISHED,
    SUBAGENT_STARTED,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    Event,
)
from dsh_daemon.model.inbox import InboxItem
from dsh_daemon.model.messages import AssistantMessage, tool_result_message
from dsh_daemon.model.payloads import (
    AssistantMessageLogged,
    InboxSpliced,
    Payload,
    StepEnded,
    StepStarted,
    SubagentFinished,
    SubagentStarted,
    ToolCalled,
    ToolResulted,
    TurnEnded,
    TurnStarted,
    entry,
)
from dsh_daemon.model.wire import ToolErrorInfo, TurnEndReason

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

SUBAGENT_INTERRUPTED_TEXT = "The daemon stopped before the subagent finished; its session was closed."


def open_turn(events: Sequence[Event]) -> int | None:
    """The number of the turn left open at the tail of the log, if any."""
    for event in reversed(events):
        if event.type == TURN_END:
            return None
        if event.type == TURN_START:
            return TurnStarted.of(event).turn
    return None


def unentered_claims(
    events: Sequence[Event], pending_before: Iterable[InboxItem] = ()
) -> tuple[list[InboxItem], InboxItem | None]:
    """(next-step messages, next-turn prompt) that the open tail turn claimed after its last
    `step/start` (or since `turn/start`) and that no step entered; ([], None) when the tail is closed.
    `events` may be the log's tail after a point where no turn was open; `pending_before` are the
    items pending at that point (a claim may take an item inserted before it)."""
    if open_turn(events) is None:
        return [], None
    start = max(i for i, e in enumerate(events) if e.type == TURN_START)
    last_step = max((i for i, e in enumerate(events) if e.type == STEP_START and i > start), default=start)
    known: dict[str, InboxItem] = {item.id: item for item in pending_before}
    next_step: list[InboxItem] = []
    prompt: InboxItem | None = None
    for index, event in enumerate(events):
        if event.type != INBOX_SPLICED:
            continue
        splice = InboxSpliced.of(event)
        for raw in splice.inserted:
            known[str(raw["id"])] = InboxItem.from_json(raw, event.time)
        is_claim = splice.removed_count and splice.outcome is None
        if index <= last_step or not is_claim:
            continue
        # removedIds lists every message of each item (attachments first); the item's own id is last
        claimed = [known[i] for i in splice.removed_ids or () if i in known]
        if splice.target == "next-turn":
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
    children: dict[str, str] = {}  # subagents started in the open turn and not finished: call -> child
    for event in tail:
        if event.type == SUBAGENT_STARTED:
            started = SubagentStarted.of(event)
            children[started.call_id] = started.child_id
        elif event.type == SUBAGENT_FINISHED:
            children.pop(SubagentFinished.of(event).call_id, None)
        elif event.type == STEP_START:
            step, calls, logged_calls, answered = StepStarted.of(event).step, [], {}, set()
        elif event.type == STEP_END:
            step = None
        elif event.type == ASSISTANT_MESSAGE:
            logged = AssistantMessageLogged.of(event)
            if not logged.interrupted:
                calls = [(c.id, c.name) for c in AssistantMessage.from_json(logged.message).tool_calls]
        elif event.type == TOOL_CALL:
            logged_calls[ToolCalled.of(event).call_id] = event.seq  # type: ignore[assignment]
        elif event.type == TOOL_RESULT:
            answered.add(ToolResulted.of(event).call_id)
    closers: list[Payload] = [
        SubagentFinished(call_id, child_id, "interrupted", SUBAGENT_INTERRUPTED_TEXT)
        for call_id, child_id in children.items()
    ]
    if step is not None:
        for call_id, name in calls:
            if call_id in answered:
                continue
            if call_id in logged_calls:
                message = tool_result_message(call_id, OUTCOME_UNKNOWN_TEXT.format(name=name), is_error=True)
                error = ToolErrorInfo(name, TOOL_OUTCOME_UNKNOWN)
                seqs: tuple[int, ...] | None = (logged_calls[call_id],)
            else:
                message = tool_result_message(call_id, NOT_STARTED_TEXT.format(name=name), is_error=True)
                error, seqs = ToolErrorInfo(name, TOOL_NOT_STARTED), None
            closers.append(ToolResulted(turn, step, call_id, name, message.to_json(), error, None, seqs))
        closers.append(StepEnded(turn, step))
    closers.append(TurnEnded(turn, TurnEndReason("interrupted")))
    return [entry(closer) for closer in closers]
