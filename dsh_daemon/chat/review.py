"""`/review` in the terminal chat: `/review [base BRANCH | commit SHA] [INSTRUCTIONS]` starts a
read-only review of the changes (`dsh/review/start`); each finding prints as it is reported
(`review/finding`): `file:line severity title`, its body indented below."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dsh_daemon.chat.render import sanitize

if TYPE_CHECKING:
    from dsh_daemon.chat.core import Chat

USAGE_REVIEW = "/review [base BRANCH|commit SHA] [INSTRUCTIONS] — review the uncommitted changes (read-only)"
SEVERITY_MARK = {"error": "✗", "warning": "⚠", "info": "ℹ"}


def review_params(arg: str) -> dict[str, Any]:
    """`dsh/review/start`'s params (less the session) for what followed `/review`."""
    words = arg.split(None, 2)
    params: dict[str, Any] = {}
    if len(words) >= 2 and words[0] in ("base", "commit"):
        params[words[0]] = words[1]
        rest = words[2] if len(words) > 2 else ""
    else:
        rest = arg.strip()
    if rest:
        params["instructions"] = rest
    return params


def typed(record: dict[str, Any]) -> str:
    """A review's message as the person typed it: `/review [base B|commit C] [instructions]`."""
    target = record.get("target") if isinstance(record.get("target"), dict) else {}
    parts = ["/review"]
    if target.get("kind") in ("base", "commit") and target.get("ref"):
        ref = str(target["ref"])
        parts += [str(target["kind"]), ref[:12] if target["kind"] == "commit" else ref]
    if record.get("instructions"):
        parts.append(str(record["instructions"]))
    return " ".join(parts)


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


async def start(chat: Chat, arg: str) -> None:
    params = {"sessionId": await chat.ensure_session(), **review_params(arg)}
    result = await chat.rpc.request("dsh/review/start", params)
    files = result.get("files") or []
    shown = ", ".join(files[:5]) + (f" and {len(files) - 5} more" if len(files) > 5 else "")
    cut = " (the diff was cut; the agent reads the rest)" if result.get("truncated") else ""
    chat.note(f"[review of {len(files)} file(s){': ' + shown if shown else ''}{cut}]")
