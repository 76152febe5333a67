"""Naming a session the way the chat shows it: a listing line, and what `--resume X` / `/resume X`
means (a full id, the 8-character id shown everywhere or any unique prefix, a title, a number)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from dsh_daemon.chat.render import clip


class NoSuchSession(LookupError):
    """What was asked for names no session, or more than one; the message says which, in one line."""


def describe(session: dict[str, Any], current: str = "", *, cwd: str | None = None) -> str:
    here = " (this one)" if session["sessionId"] == current else ""
    pending = f", {session['pending']} queued" if session.get("pending") else ""
    title = clip(session.get("title") or "(untitled)", 60)
    tree = session.get("worktree")
    where = f"  [{session.get('cwd')}]" if cwd is not None and session.get("cwd") != cwd and not tree else ""
    line = f"{session['sessionId'][:8]}  {title}  — {ago(session['updatedAt'])}{pending}{here}{where}"
    return line + (f"  {worktree_words(tree)}" if tree else "")


def worktree_words(tree: dict[str, Any]) -> str:
    """`⎇ BRANCH: 3 files changed, 1 commit ahead` (or `(removed)` once its folder is gone)."""
    if not tree.get("exists", True):
        return f"⎇ {tree.get('branch')} (worktree removed)"
    changed, ahead = tree.get("changedFiles"), tree.get("ahead")
    parts = []
    if changed is not None:
        parts.append("no changes" if changed == 0 else f"{changed} file{'s' if changed != 1 else ''} changed")
    if ahead:
        parts.append(f"{ahead} commit{'s' if ahead != 1 else ''} ahead")
    return f"⎇ {tree.get('branch')}" + (f": {', '.join(parts)}" if parts else "")


def find_session(sessions: list[dict[str, Any]], wanted: str) -> dict[str, Any]:
    """The one session `wanted` names, in this order: its full id, a unique id prefix, its title
    (whole, any case), a unique part of a title. Raises `NoSuchSession` with a one-line reason."""
    wanted = wanted.strip()
    if not wanted:
        raise NoSuchSession("give a session id (or its first characters) or a title")
    lowered = wanted.lower()
    tests: tuple[Callable[[dict[str, Any]], bool], ...] = (
        lambda s: bool(s["sessionId"] == wanted),
        lambda s: str(s["sessionId"]).lower().startswith(lowered),
        lambda s: str(s.get("title") or "").lower() == lowered,
        lambda s: lowered in str(s.get("title") or "").lower(),
    )
    for test in tests:
        found = [s for s in sessions if test(s)]
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            shown = ", ".join(
                f"{s['sessionId'][:8]} ({clip(s.get('title') or 'untitled', 30)})" for s in found[:4]
            )
            more = f" and {len(found) - 4} more" if len(found) > 4 else ""
            raise NoSuchSession(
                f"{wanted!r} matches {len(found)} sessions: {shown}{more}; give more of the id"
            )
    raise NoSuchSession(f"no session matches {wanted!r} (`dsh-daemon sessions` lists them)")


def ago(ms: int) -> str:
    seconds = max(0, time.time() - ms / 1000)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit} ago"
    return "just now"
