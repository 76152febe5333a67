"""A subagent in the scrollback: an indented block under its parent's `run_subagent` call, with the
child's tool calls as they happen and its summary when it ends (protocol.md §12 "Subagents")."""

from __future__ import annotations

import json
from typing import Any

from dsh_daemon.chat.render import clip, sanitize

BAR = "  │ "
SUMMARY_LINES = 8  # the rest: the call's result (/show)


def started_line(data: dict[str, Any]) -> str:
    return f"  ⧉ subagent “{sanitize(str(data.get('description', '')))}” ({data.get('tools', '?')}) started"


def child_event_lines(data: dict[str, Any], width: int) -> list[str]:
    """The lines of one of the child's events (`subagent/event`): its tool calls and how it ended;
    its streamed text stays out (the summary says what it found)."""
    event = data.get("event") or {}
    kind, inner = event.get("type"), event.get("data") or {}
    if kind == "tool/call":
        arguments = inner.get("arguments")
        shown = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
        return [BAR + clip(f"⚙ {inner.get('name', 'tool')} {shown}", width - len(BAR))]
    if kind == "tool/result" and inner.get("error"):
        return [BAR + clip(f"✗ {inner['error'].get('code', 'error')}", width - len(BAR))]
    return []


def finished_lines(data: dict[str, Any], width: int) -> list[str]:
    status = str(data.get("status", ""))
    summary = sanitize(str(data.get("summary", ""))).strip().splitlines()
    lines = [f"  ⧉ subagent {status}:"]
    lines += [BAR + clip(line, width - len(BAR)) for line in summary[:SUMMARY_LINES]]
    if len(summary) > SUMMARY_LINES:
        lines.append(f"{BAR}… ({len(summary) - SUMMARY_LINES} more lines in the call's result)")
    return lines
