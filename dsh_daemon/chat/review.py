"""`/review` in the terminal chat: `/review [base BRANCH | commit SHA] [INSTRUCTIONS]` starts a
read-only review of the changes (`dsh/review/start`); each finding prints as it is reported
(`review/finding`): `file:line severity title`, its body indented below."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dsh_daemon.chat.render import sanitize
from dsh_daemon.model.payloads import ReviewFinding
from dsh_daemon.model.review import parse_review_arguments, typed_review

if TYPE_CHECKING:
    from dsh_daemon.chat.core import Chat

USAGE_REVIEW = "/review [base BRANCH|commit SHA] [INSTRUCTIONS] — review the uncommitted changes (read-only)"
SEVERITY_MARK = {"error": "✗", "warning": "⚠", "info": "ℹ"}


typed = typed_review  # a review's message as the person typed it


def finding_lines(data: dict[str, Any]) -> list[str]:
    """`path:line severity title`, then the body (and whether a fix is suggested) indented."""
    start, end = data.get("startLine", "?"), data.get("endLine")
    where = f"{data.get('path', '?')}:{start}" + (f"-{end}" if end not in (None, start) else "")
    severity = str(data.get("severity", "info"))
    head = f"{SEVERITY_MARK.get(severity, '•')} {where} {severity} {data.get('title', '')}"
    lines = [sanitize(head)]
    lines += ["    " + sanitize(line) for line in str(data.get("body", "")).strip().splitlines()]
    if data.get("suggestedPatch"):
        lines.append("    (a fix is suggested: dsh/review/list has its patch)")
    return lines


def dismissed_line(finding: ReviewFinding | None) -> str:
    """A dismissal (`review/dismissed`, from any client): the finding it takes off the list."""
    if finding is None:  # reported before the turns this chat holds
        return "[a finding was dismissed]"
    return f"[dismissed: {finding.path}:{finding.start_line} {finding.title}]"


async def start(chat: Chat, arg: str) -> None:
    params = {"sessionId": await chat.ensure_session(), **parse_review_arguments(arg)}
    result = await chat.rpc.request("dsh/review/start", params)
    files = result.get("files") or []
    shown = ", ".join(files[:5]) + (f" and {len(files) - 5} more" if len(files) > 5 else "")
    cut = " (the diff was cut; the agent reads the rest)" if result.get("truncated") else ""
    chat.note(f"[review of {len(files)} file(s){': ' + shown if shown else ''}{cut}]")
