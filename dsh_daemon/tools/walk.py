"""Directory walking and glob matching shared by find_files and grep's Python fallback.

The walk never follows symlinks (so it cannot wander out of the workspace), visits entries in name
order (deterministic results, the order `rg --sort path` uses) and skips tool-noise directories.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

from dsh_daemon.tools.errors import InvalidArgumentsError

IGNORED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "node_modules",
        "__pycache__",
        ".venv",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".tox",
    }
)


def walk_files(base: Path, stop: threading.Event | None = None) -> Iterator[tuple[Path, str]]:
    """(path, path relative to `base` with '/') of every regular file below `base`, symlinks skipped."""

    def visit(directory: Path, prefix: str) -> Iterator[tuple[Path, str]]:
        try:
            with os.scandir(directory) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError:
            return  # unreadable directories are skipped, as rg does
        for entry in entries:
            if stop is not None and stop.is_set():
                return
            if entry.is_symlink():
                continue
            rel = f"{prefix}{entry.name}"
            if entry.is_dir(follow_symlinks=False):
                if entry.name not in IGNORED_DIRS:
                    yield from visit(Path(entry.path), f"{rel}/")
            elif entry.is_file(follow_symlinks=False):
                yield Path(entry.path), rel

    if base.is_file():
        yield base, base.name
    else:
        yield from visit(base, "")


@lru_cache(maxsize=64)
def compile_glob(pattern: str) -> re.Pattern[str]:
    """A glob as a regex over '/'-separated relative paths: `*` and `?` stay within one segment, `**`
    spans segments, `[...]` and `{a,b}` work; a pattern without '/' matches the name at any depth."""
    text = pattern.strip()
    if not text:
        raise InvalidArgumentsError("glob pattern must not be empty")
    text = text.removeprefix("./").lstrip("/")
    if "/" not in text:
        text = f"**/{text}"
    try:
        return re.compile(_translate(text) + r"\Z", re.DOTALL)
    except re.error as exc:
        raise InvalidArgumentsError(f"invalid glob pattern {pattern!r}: {exc}") from None


def _translate(glob: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(glob):
        char = glob[i]
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif char == "*":
            out.append("[^/]*")
            i += 1
        elif char == "?":
            out.append("[^/]")
            i += 1
        elif char == "[":
            end = glob.find("]", i + 2)
            if end < 0:
                out.append(re.escape(char))
                i += 1
                continue
            body = glob[i + 1 : end]
            if body.startswith("!"):
                body = "^" + body[1:]
            out.append(f"[{body.replace(chr(92), chr(92) * 2)}]")
            i = end + 1
        elif char == "{":
            end = _matching_brace(glob, i)
            if end < 0:
                out.append(re.escape(char))
                i += 1
                continue
            options = _split_top(glob[i + 1 : end])
            out.append("(?:" + "|".join(_translate(option) for option in options) + ")")
            i = end + 1
        else:
            out.append(re.escape(char))
            i += 1
    return "".join(out)


def _matching_brace(text: str, start: int) -> int:
    depth = 0
    for index in range(start, len(text)):
        if text[index] == "{":
            depth += 1
        elif text[index] == "}":
            depth -= 1
            if depth == 0:
                return index
    return -1


def _split_top(text: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for char in text:
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
            continue
        depth += char == "{"
        depth -= char == "}"
        current.append(char)
    parts.append("".join(current))
    return parts
