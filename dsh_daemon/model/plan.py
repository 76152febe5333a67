"""The agent's current plan, folded from the log: the latest `plan/updated` no `conversation/cut` has
taken back. A cut before turn N puts the plan back to what it was when turn N began, the same rule
the model's history follows (`agent/derive.py`), so a rewind's plan is exactly the earlier one.

Every reader of events uses this one fold (the ACP front end, the terminal chat); the daemon keeps
no plan of its own: the events are the plan.
"""

from __future__ import annotations

from collections.abc import Iterable

from dsh_daemon.model import events as ev
from dsh_daemon.model.codec import WireValueError
from dsh_daemon.model.events import Event
from dsh_daemon.model.payloads import ConversationCut, PlanStep, PlanUpdated, TurnStarted

PLAN_EVENTS = frozenset({ev.PLAN_UPDATED, ev.TURN_START, ev.CONVERSATION_CUT})  # what `feed` reads


def progress(steps: tuple[PlanStep, ...]) -> str:
    done = sum(step.status == "done" for step in steps)
    return f"{done}/{len(steps)} done"


class PlanTracker:
    """Feed events in log order; `current` is the plan as it stands (None: no plan yet, or the last
    one was taken back by a cut). `feed` says whether the current plan changed."""

    def __init__(self) -> None:
        self.current: PlanUpdated | None = None
        # Each turn start with the plan as it stood then, undecoded: a long session has thousands and
        # a cut (rare) needs one of them, so a fold decodes only what a cut looks back over.
        self._turn_starts: list[tuple[Event, PlanUpdated | None]] = []

    def feed(self, event: Event) -> bool:
        kind = event.type
        try:
            if kind == ev.PLAN_UPDATED:
                self.current = PlanUpdated.of(event)
                return True
            if kind == ev.TURN_START:
                self._turn_starts.append((event, self.current))
            elif kind == ev.CONVERSATION_CUT:
                at_start = self._plan_at_start_of(ConversationCut.of(event).before_turn)
                if at_start is not None:
                    previous, self.current = self.current, at_start[0]
                    return previous != self.current
        except WireValueError:  # a malformed event is not a plan; the rest of the log still counts
            return False
        return False

    def _plan_at_start_of(self, turn: int) -> tuple[PlanUpdated | None] | None:
        """The plan when the latest start of `turn` so far was logged (in a 1-tuple: None is a plan
        state); None when no such turn started."""
        for event, plan in reversed(self._turn_starts):
            try:
                if TurnStarted.of(event).turn == turn:
                    return (plan,)
            except WireValueError:  # a malformed turn start starts no turn
                continue
        return None


def current_plan(events: Iterable[Event]) -> PlanUpdated | None:
    tracker = PlanTracker()
    for event in events:
        tracker.feed(event)
    return tracker.current
