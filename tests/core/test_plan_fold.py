"""The current plan folded from a log (model/plan.py): the latest `plan/updated`, with each
`conversation/cut` putting it back to what it was when the cut's turn began, cuts after cuts
included, and a malformed stored event not taken for a plan."""

from __future__ import annotations

from typing import Any

from dsh_daemon.model import events as ev
from dsh_daemon.model.events import Event
from dsh_daemon.model.jsonvalue import freeze_json
from dsh_daemon.model.plan import PlanTracker, current_plan


def log(*entries: tuple[str, dict[str, Any]]) -> list[Event]:
    return [Event(kind, freeze_json(data), seq) for seq, (kind, data) in enumerate(entries)]


def turn(n: int) -> tuple[str, dict[str, Any]]:
    return ev.TURN_START, {"turn": n}


def plan(n: int, title: str) -> tuple[str, dict[str, Any]]:
    return ev.PLAN_UPDATED, {"turn": n, "steps": [{"title": title, "status": "in_progress"}]}


def cut(before: int) -> tuple[str, dict[str, Any]]:
    return ev.CONVERSATION_CUT, {"beforeTurn": before}


def titles(events: list[Event]) -> list[str] | None:
    found = current_plan(events)
    return None if found is None else [step.title for step in found.steps]


def test_the_latest_update_is_the_plan() -> None:
    assert titles(log(turn(1), plan(1, "a"), plan(1, "b"), turn(2))) == ["b"]
    assert titles(log(turn(1))) is None


def test_a_cut_goes_back_to_the_plan_its_turn_began_with_even_after_earlier_cuts() -> None:
    events = log(
        turn(1), plan(1, "one"),
        turn(2), plan(2, "two"),
        turn(3), plan(3, "three"),
        cut(3),  # back to turn 2's plan
        turn(4), plan(4, "four"),
        cut(2),  # back to turn 1's plan, though turn 3 was cut already
    )  # fmt: skip
    assert titles(events) == ["one"]
    assert titles([*events, *log(cut(1))]) is None  # before turn 1 there was no plan
    # A cut to a turn that began after an earlier cut: the plan it began with then.
    again = log(turn(1), plan(1, "one"), turn(2), plan(2, "two"), cut(2), turn(3), plan(3, "x"), cut(3))
    assert titles(again) == ["one"]


def test_feed_says_when_the_plan_changed() -> None:
    tracker = PlanTracker()
    changed = [tracker.feed(e) for e in log(turn(1), plan(1, "a"), turn(2), cut(2), cut(1))]
    assert changed == [False, True, False, False, True]  # cut(2): turn 2 began with plan "a"


def test_a_malformed_update_is_not_a_plan() -> None:
    bad = Event(ev.PLAN_UPDATED, freeze_json({"turn": 1, "steps": "not a list"}), 2)
    assert titles([*log(turn(1), plan(1, "a")), bad]) == ["a"]
