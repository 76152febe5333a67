"""report_finding: one finding of a review turn, each call a durable `review/finding`.

Offered only in a review turn (`host/review.py` says which turns are: `ActiveReviews`), where it
is the model's way to report; a call elsewhere is refused. A finding is checked before it is
recorded: its file inside the workspace and a regular file, its lines within the file, its fields
bounded; a refused one is the call's error (the model reads why and may report it again).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from dsh_daemon.agent.tools import ToolContext, ToolOutcome
from dsh_daemon.model.payloads import ReviewFinding, ReviewSeverity, ReviewTarget
from dsh_daemon.tools.base import ToolBase, get_int, get_opt_str, get_str, make_spec
from dsh_daemon.tools.errors import InvalidArgumentsError, ToolError
from dsh_daemon.tools.safefile import read_prefix_async
from dsh_daemon.tools.workspace import Workspace

REVIEW_TOOL = "report_finding"
SEVERITIES: tuple[ReviewSeverity, ...] = ("error", "warning", "info")
MAX_TITLE_CHARS = 200
MAX_BODY_CHARS = 8_000
MAX_PATCH_CHARS = 32_000
MAX_FINDINGS = 200  # per review: a model that loops on findings is stopped
MAX_FILE_BYTES = 16 * 1024 * 1024  # lines are counted in at most this much of the file


@dataclass
class ReviewRun:
    """A review under way in one turn: what it reads and how many findings it has recorded."""

    review_id: str
    target: ReviewTarget
    findings: int = 0


@dataclass
class ActiveReviews:
    """The review turns of a session by turn number (filled by the host as their messages enter)."""

    by_turn: dict[int, ReviewRun] = field(default_factory=dict)

    def get(self, turn: int) -> ReviewRun | None:
        return self.by_turn.get(turn)


class NotInReviewError(ToolError):
    code = "NOT_IN_REVIEW"


class ReportFindingTool(ToolBase):
    spec = make_spec(
        REVIEW_TOOL,
        "Report one finding of the review you are doing: a problem in the changes, in one file, at "
        "1-based inclusive lines of the file as it is now. Call it once per finding; give a unified "
        "diff in suggestedPatch when you have a concrete fix.",
        {
            "path": {"type": "string", "description": "The file, relative to the working directory."},
            "startLine": {"type": "integer", "minimum": 1},
            "endLine": {"type": "integer", "minimum": 1},
            "severity": {"type": "string", "enum": list(SEVERITIES)},
            "title": {"type": "string", "description": "The problem in a short line."},
            "body": {"type": "string", "description": "Why it is a problem, and what to do."},
            "suggestedPatch": {"type": "string", "description": "Optional: the fix as a unified diff."},
        },
        ["path", "startLine", "endLine", "severity", "title", "body"],
    )
    parallel_safe = False  # findings land in the log in the order the model reported them

    def __init__(self, workspace: Workspace, reviews: ActiveReviews) -> None:
        self.workspace = workspace
        self.reviews = reviews

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        call = ctx.call
        review = self.reviews.get(call.turn)
        if review is None:
            raise NotInReviewError("report_finding is only for review turns (dsh/review/start)")
        if review.findings >= MAX_FINDINGS:
            raise InvalidArgumentsError(f"this review has {MAX_FINDINGS} findings already; stop reporting")
        path = get_str(args, "path", allow_empty=False)
        real = self.workspace.resolve(path)  # OutsideWorkspaceError names the roots
        shown = self.workspace.display(real)
        start = get_int(args, "startLine", 0, minimum=1)
        end = get_int(args, "endLine", start, minimum=1)
        if end < start:
            raise InvalidArgumentsError(f"endLine {end} is before startLine {start}")
        read = await read_prefix_async(real, shown, MAX_FILE_BYTES, self.workspace)
        lines = read.data.count(b"\n") + (0 if read.data.endswith(b"\n") or not read.data else 1)
        if not read.truncated and end > max(lines, 1):
            raise InvalidArgumentsError(f"{shown} has {lines} lines; lines {start}-{end} are not in it")
        severity = args.get("severity")
        if severity not in SEVERITIES:
            raise InvalidArgumentsError(f"'severity' must be one of: {', '.join(SEVERITIES)}")
        title = " ".join(get_str(args, "title", allow_empty=False).split())
        body = get_str(args, "body")
        patch = get_opt_str(args, "suggestedPatch") or None
        for name, value, cap in (
            ("title", title, MAX_TITLE_CHARS),
            ("body", body, MAX_BODY_CHARS),
            ("suggestedPatch", patch or "", MAX_PATCH_CHARS),
        ):
            if len(value) > cap:
                raise InvalidArgumentsError(f"'{name}' is longer than {cap} characters")
        if not title:
            raise InvalidArgumentsError("'title' must not be empty")
        finding_id = "finding-" + uuid.uuid4().hex[:16]
        finding = ReviewFinding(
            review.review_id,
            finding_id,
            call.turn,
            shown,
            start,
            end,
            cast(ReviewSeverity, severity),
            title,
            body,
            patch,
            call.call_id,
        )
        ctx.log_event(finding, ignorable=True)
        review.findings += 1
        return ToolOutcome.text(f"Recorded {finding_id}: {shown}:{start} {severity} {title}")
