"""A session's review findings, folded from the log: every `review/finding` that no
`review/dismissed` names and no `conversation/cut` has taken back. A cut before turn N takes back
what turns N and later reported (their findings and completions), the rule plan uses
(`model/plan.py`): after a rewind the findings are exactly those of the turns that remain.

Every reader uses this one fold (`dsh/review/list`, the terminal chat, ACP); the daemon keeps no
findings of its own: the events are the findings, so they survive a restart.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from dsh_daemon.model import events as ev
from dsh_daemon.model.codec import WireValueError
from dsh_daemon.model.events import Event
from dsh_daemon.model.payloads import ConversationCut, ReviewCompleted, ReviewDismissed, ReviewFinding

REVIEW_EVENTS = frozenset(
    {ev.REVIEW_FINDING, ev.REVIEW_COMPLETED, ev.REVIEW_DISMISSED, ev.CONVERSATION_CUT}
)  # what `feed` reads


class ReviewTracker:
    """Feed events in log order; `findings()` are the live ones, `completed` the finished reviews."""

    def __init__(self) -> None:
        self._findings: dict[str, ReviewFinding] = {}  # by findingId, in log order
        self._dismissed: set[str] = set()
        self.completed: dict[str, ReviewCompleted] = {}  # by reviewId

    def finding(self, finding_id: str) -> ReviewFinding | None:
        """A finding reported in the turns that remain, dismissed or not."""
        return self._findings.get(finding_id)

    def feed(self, event: Event) -> bool:
        """Whether the live findings (or the finished reviews) changed."""
        kind = event.type
        try:
            if kind == ev.REVIEW_FINDING:
                finding = ReviewFinding.of(event)
                self._findings[finding.finding_id] = finding
                return finding.finding_id not in self._dismissed
            if kind == ev.REVIEW_COMPLETED:
                done = ReviewCompleted.of(event)
                self.completed[done.review_id] = done
                return True
            if kind == ev.REVIEW_DISMISSED:
                finding_id = ReviewDismissed.of(event).finding_id
                self._dismissed.add(finding_id)
                return finding_id in self._findings
            if kind == ev.CONVERSATION_CUT:
                before = ConversationCut.of(event).before_turn
                cut = [f for f, finding in self._findings.items() if finding.turn >= before]
                for finding_id in cut:
                    del self._findings[finding_id]
                gone = [r for r, done in self.completed.items() if done.turn >= before]
                for review_id in gone:
                    del self.completed[review_id]
                return bool(cut or gone)
        except WireValueError:  # a malformed event is no finding; the rest of the log still counts
            return False
        return False

    def known(self, finding_id: str) -> bool:
        """Whether the log holds this finding (dismissed or not), not taken back by a cut."""
        return finding_id in self._findings

    def findings(self) -> list[ReviewFinding]:
        return [f for f in self._findings.values() if f.finding_id not in self._dismissed]


def fold_reviews(events: Iterable[Event]) -> ReviewTracker:
    tracker = ReviewTracker()
    for event in events:
        if event.type in REVIEW_EVENTS:
            tracker.feed(event)
    return tracker


def typed_review(record: Mapping[str, Any]) -> str:
    """A review's message (its `source.review`) as the command that started it, the way every client
    shows it instead of the diff it holds: `/review [base B | commit C] [instructions]`."""
    target = record.get("target")
    parts = ["/review"]
    if isinstance(target, Mapping) and target.get("kind") in ("base", "commit") and target.get("ref"):
        ref = str(target["ref"])
        parts += [str(target["kind"]), ref[:12] if target["kind"] == "commit" else ref]
    if record.get("instructions"):
        parts.append(str(record["instructions"]))
    return " ".join(parts)


def parse_review_arguments(text: str) -> dict[str, str]:
    """What follows `/review` (the chat's and ACP's command) as `dsh/review/start`'s params less the
    session: `base BRANCH` or `commit SHA` first, then the instructions, all optional."""
    words = text.split(None, 2)
    params: dict[str, str] = {}
    rest = text.strip()
    if len(words) >= 2 and words[0] in ("base", "commit"):
        params[words[0]] = words[1]
        rest = words[2].strip() if len(words) > 2 else ""
    if rest:
        params["instructions"] = rest
    return params
