"""Review findings folded from a log (model/review.py): the reported findings in order, less the
dismissed ones and those of turns a `conversation/cut` took back (cuts after cuts included), a
malformed stored event taken for nothing; and `/review`'s arguments and its typed form."""

from __future__ import annotations

from typing import Any

from dsh_daemon.model import events as ev
from dsh_daemon.model.events import Event
from dsh_daemon.model.jsonvalue import freeze_json
from dsh_daemon.model.review import fold_reviews, parse_review_arguments, typed_review


def log(*entries: tuple[str, dict[str, Any]]) -> list[Event]:
    return [Event(kind, freeze_json(data), seq) for seq, (kind, data) in enumerate(entries)]


def found(turn: int, finding_id: str) -> tuple[str, dict[str, Any]]:
    return ev.REVIEW_FINDING, {
        "reviewId": f"review-{turn}",
        "findingId": finding_id,
        "turn": turn,
        "path": "app.py",
        "startLine": 1,
        "endLine": 1,
        "severity": "warning",
        "title": finding_id,
        "body": "",
    }


def done(turn: int, count: int) -> tuple[str, dict[str, Any]]:
    return ev.REVIEW_COMPLETED, {
        "reviewId": f"review-{turn}",
        "turn": turn,
        "target": {"kind": "uncommitted"},
        "findings": count,
    }


def ids(events: list[Event]) -> list[str]:
    return [f.finding_id for f in fold_reviews(events).findings()]


def test_findings_dismissals_and_cuts() -> None:
    events = log(found(1, "a"), found(1, "b"), done(1, 2), found(3, "c"), done(3, 1))
    assert ids(events) == ["a", "b", "c"]
    assert list(fold_reviews(events).completed) == ["review-1", "review-3"]
    dismissed = [*events, *log((ev.REVIEW_DISMISSED, {"findingId": "b"}))]
    assert ids(dismissed) == ["a", "c"] and fold_reviews(dismissed).known("b")
    # A cut before turn 2 takes back turn 3's finding and completion, not turn 1's.
    cut = [*dismissed, *log((ev.CONVERSATION_CUT, {"beforeTurn": 2}))]
    tracker = fold_reviews(cut)
    assert ids(cut) == ["a"] and list(tracker.completed) == ["review-1"] and not tracker.known("c")
    # A later review (turn 4) counts again; a second cut before turn 1 takes everything back.
    later = [*cut, *log(found(4, "d"))]
    assert ids(later) == ["a", "d"]
    assert ids([*later, *log((ev.CONVERSATION_CUT, {"beforeTurn": 1}))]) == []


def test_a_malformed_event_is_no_finding() -> None:
    bad = (ev.REVIEW_FINDING, {"findingId": "x", "turn": "one"})
    assert ids(log(bad, found(1, "a"), (ev.REVIEW_DISMISSED, {}))) == ["a"]


def test_review_arguments_and_typed_form() -> None:
    assert parse_review_arguments("") == {}
    assert parse_review_arguments("look at the locking") == {"instructions": "look at the locking"}
    assert parse_review_arguments("base main") == {"base": "main"}
    assert parse_review_arguments("commit abc123 only the parser") == {
        "commit": "abc123",
        "instructions": "only the parser",
    }
    assert parse_review_arguments("base") == {"instructions": "base"}  # no branch: plain words
    sha = "0123456789abcdef0123456789abcdef01234567"
    record = {"target": {"kind": "commit", "ref": sha}, "instructions": "be brief"}
    assert typed_review(record) == "/review commit 0123456789ab be brief"
    assert typed_review({"target": {"kind": "uncommitted"}}) == "/review"
