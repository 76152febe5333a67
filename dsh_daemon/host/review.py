"""Review turns (protocol.md "Review"): `dsh/review/start` queues a person's message that carries
the diff to review, marked `source.review = {reviewId, target, instructions?}`; the turn it enters
is a review turn.

A review turn only reads: from the step its message enters to the end of the turn, the tools
offered are the read-only ones (plan mode's, without commands) and `report_finding`, and a call to
any other is refused. Each finding is a durable `review/finding` (`tools/review.py`); when the model
is done (the turn stops normally) a durable `review/completed` counts them. An aborted or failed
review keeps the findings it recorded and has no `review/completed`.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from dsh_daemon.agent.hooks import (
    PreStepContext,
    PreStepDecision,
    RequestConfig,
    RequestContext,
    TurnStoppingContext,
)
from dsh_daemon.agent.tools import Deny, ToolCall
from dsh_daemon.host.review_diff import ReviewDiff
from dsh_daemon.model.codec import WireValueError, structure, unstructure
from dsh_daemon.model.messages import UserMessage
from dsh_daemon.model.payloads import ReviewCompleted, ReviewTarget
from dsh_daemon.model.review import ReviewTracker
from dsh_daemon.tools.policy import READ_ONLY_TOOLS
from dsh_daemon.tools.review import REVIEW_TOOL, ActiveReviews, ReviewRun

REVIEW_TOOLS = frozenset(READ_ONLY_TOOLS - {"update_plan"}) | {REVIEW_TOOL}
MAX_INSTRUCTIONS_CHARS = 20_000

REVIEW_PROMPT = """\
Review the code changes below as a careful senior reviewer. Look for bugs, security problems, \
broken edge cases, missing error handling, races and misleading names or comments; do not report \
style nits a formatter would fix. Read the files around a change when you need to (read_file, \
grep); you cannot change anything in this turn.

Report each problem with the report_finding tool (the file, the 1-based lines of the file as it is \
now, severity error/warning/info, a short title, a body saying why and what to do, and a unified \
diff in suggestedPatch when you have a concrete fix). When you are done, answer with a short \
summary of the review."""


def describe(target: ReviewTarget) -> str:
    if target.kind == "base":
        return f"the changes since this branch left {target.ref}"
    if target.kind == "commit":
        return f"commit {target.ref}"
    return "the uncommitted changes (staged, unstaged and untracked)"


def review_title(record: Mapping[str, Any]) -> str:
    """A session's title for a review's message (`source.review`), not the prompt's first words."""
    target = record.get("target")
    kind = target.get("kind") if isinstance(target, Mapping) else None
    ref = target.get("ref") if isinstance(target, Mapping) else None
    if kind == "base" and isinstance(ref, str):
        return f"Review: changes since {ref}"
    if kind == "commit" and isinstance(ref, str):
        return f"Review: commit {ref[:12]}"  # a full id is 40 characters; 12 name it
    return "Review: uncommitted changes"


def review_message(diff: ReviewDiff, instructions: str | None) -> tuple[str, UserMessage]:
    """(reviewId, the message that starts the review turn)."""
    review_id = "review-" + uuid.uuid4().hex[:16]
    fence = "`" * max(3, 1 + _longest_backtick_run(diff.text))
    parts = [REVIEW_PROMPT, f"What to review: {describe(diff.target)}, in the git work tree {diff.root}."]
    if instructions:
        parts.append(f"The person's instructions for this review:\n{instructions}")
    if diff.files:
        parts.append("Changed files:\n" + "\n".join(f"- {name}" for name in diff.files))
    if not diff.text.strip():
        parts.append("The diff is empty: there is nothing to review. Say so.")
    else:
        cut = " (cut short: read the changed files for the rest)" if diff.truncated else ""
        parts.append(f"The diff{cut}:\n{fence}diff\n{diff.text}\n{fence}")
    record: dict[str, Any] = {"reviewId": review_id, "target": unstructure(diff.target)}
    if instructions:
        record["instructions"] = instructions
    message = UserMessage.create(
        [{"type": "text", "text": "\n\n".join(parts)}], {"kind": "user", "review": record}
    )
    return review_id, message


def review_listing(tracker: ReviewTracker) -> dict[str, Any]:
    """`dsh/review/list`'s result: the live findings in the order reported, the finished reviews."""
    return {
        "findings": [finding.data() for finding in tracker.findings()],
        "reviews": [done.data() for done in tracker.completed.values()],
    }


def _longest_backtick_run(text: str) -> int:
    longest = run = 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    return longest


def review_of(message: UserMessage) -> tuple[str, ReviewTarget] | None:
    """(reviewId, target) of a review's message; None for any other."""
    record = message.source.get("review") if message.source.get("kind") == "user" else None
    if not isinstance(record, Mapping):
        return None
    review_id, target = record.get("reviewId"), record.get("target")
    if not isinstance(review_id, str) or not review_id:
        return None
    try:
        return review_id, structure(dict(target) if isinstance(target, Mapping) else {}, ReviewTarget)
    except (WireValueError, TypeError, ValueError):
        return None


class ReviewTurns:
    """Which turns are reviews (a pre-step hook marks them as their messages enter), what they may
    offer (the request hook) and call (the tool hook), and their `review/completed` (turn stopping).
    `record` appends a payload durably; the host sets it when it adopts the session."""

    def __init__(self) -> None:
        self.active = ActiveReviews()
        self.record: Callable[[ReviewCompleted], None] | None = None
        self._completed: set[str] = set()

    async def pre_step(
        self, ctx: PreStepContext, next_: Callable[[], Awaitable[PreStepDecision]]
    ) -> PreStepDecision:
        decision = await next_()
        if decision.kind != "enter":
            return decision
        for message in decision.messages:
            review = review_of(message)
            if review is not None and ctx.turn not in self.active.by_turn:
                self.active.by_turn[ctx.turn] = ReviewRun(*review)
        for old in [t for t in self.active.by_turn if t < ctx.turn]:
            del self.active.by_turn[old]
        return decision

    async def request(
        self, ctx: RequestContext, next_: Callable[[], Awaitable[RequestConfig]]
    ) -> RequestConfig:
        config = await next_()
        if ctx.turn in self.active.by_turn:
            tools = tuple(t for t in config.tools if t.name in REVIEW_TOOLS)
        else:
            tools = tuple(t for t in config.tools if t.name != REVIEW_TOOL)
        return RequestConfig(config.config, config.system, tools)

    async def pre_execute(self, call: ToolCall, signal: object) -> Deny | None:
        reviewing = call.turn in self.active.by_turn
        if reviewing and call.name not in REVIEW_TOOLS:
            return Deny(
                f"a review turn only reads and reports: {', '.join(sorted(REVIEW_TOOLS))}", reason="review"
            )
        if not reviewing and call.name == REVIEW_TOOL:
            return Deny("report_finding is only offered in a review turn (dsh/review/start)", reason="review")
        return None

    async def turn_stopping(self, ctx: TurnStoppingContext) -> None:
        run = self.active.get(ctx.turn)
        if run is None or run.review_id in self._completed or self.record is None:
            return
        self._completed.add(run.review_id)
        self.record(ReviewCompleted(run.review_id, ctx.turn, run.target, run.findings))
