"""Directory walking and glob matching shared by find_files and grep's Python fallback.

The walk never follows symlinks (so it cannot wander out of the workspace), visits entries in name
order (deterministic results, the order `rg --sort path` uses) and skips tool-noise directories.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from functools import cache, lru_cache
from pathlib import Path
from typing import cast

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


MAX_GLOB_ALTERNATIVES = 256
_STAR = object()  # a `*` token: any run of characters within one path segment
_GLOBSTAR = object()  # a whole `**` segment: zero or more path segments


@lru_cache(maxsize=64)
def compile_glob(pattern: str) -> GlobMatcher:
    """A glob over '/'-separated relative paths: `*` and `?` stay within one segment, a `**` segment
    spans segments, `[...]` and `{a,b}` work; a pattern without '/' matches the name at any depth.

    Matching never backtracks exponentially (a regex translation did: `*a*a*a*a*b` against a long
    name froze the event loop, since `re` holds the GIL): each segment is matched by the linear
    wildcard algorithm, and `**` by a memoised walk over the segments."""
    text = pattern.strip()
    if not text:
        raise InvalidArgumentsError("glob pattern must not be empty")
    text = text.removeprefix("./").lstrip("/")
    if "/" not in text:
        text = f"**/{text}"
    alternatives = _expand_braces(text)
    if len(alternatives) > MAX_GLOB_ALTERNATIVES:
        raise InvalidArgumentsError(f"glob pattern {pattern!r} expands to too many alternatives")
    return GlobMatcher(tuple(_segments(alt) for alt in alternatives))


class GlobMatcher:
    def __init__(self, alternatives: tuple[tuple[object, ...], ...]) -> None:
        self._alternatives = alternatives

    def match(self, path: str) -> bool:
        parts = path.split("/")
        return any(_match_path(segments, parts) for segments in self._alternatives)


def _expand_braces(text: str) -> list[str]:
    start = text.find("{")
    while start >= 0:
        end = _matching_brace(text, start)
        if end < 0:
            return [text]  # an unclosed brace is a literal character
        options = _split_top(text[start + 1 : end])
        if len(options) > 1:
            out: list[str] = []
            for option in options:
                out.extend(_expand_braces(text[:start] + option + text[end + 1 :]))
                if len(out) > MAX_GLOB_ALTERNATIVES:
                    break
            return out
        start = text.find("{", start + 1)
    return [text]


def _segments(glob: str) -> tuple[object, ...]:
    return tuple(_GLOBSTAR if part == "**" else _tokens(part) for part in glob.split("/"))


def _tokens(segment: str) -> tuple[object, ...]:
    tokens: list[object] = []
    i = 0
    while i < len(segment):
        char = segment[i]
        if char == "*":
            if not tokens or tokens[-1] is not _STAR:
                tokens.append(_STAR)
            i += 1
        elif char == "?":
            tokens.append(None)  # any one character
            i += 1
        elif char == "[" and segment.find("]", i + 2) >= 0:
            end = segment.find("]", i + 2)
            tokens.append(_char_class(segment[i + 1 : end]))
            i = end + 1
        else:
            tokens.append(char)
            i += 1
    return tuple(tokens)


def _char_class(body: str) -> tuple[bool, frozenset[str], tuple[tuple[str, str], ...]]:
    negated = body[:1] in ("!", "^")
    if negated:
        body = body[1:]
    chars: set[str] = set()
    ranges: list[tuple[str, str]] = []
    i = 0
    while i < len(body):
        if i + 2 < len(body) and body[i + 1] == "-":
            ranges.append((body[i], body[i + 2]))
            i += 3
        else:
            chars.add(body[i])
            i += 1
    return negated, frozenset(chars), tuple(ranges)


def _token_matches(token: object, char: str) -> bool:
    if token is None:
        return True
    if isinstance(token, str):
        return token == char
    negated, chars, ranges = cast("tuple[bool, frozenset[str], tuple[tuple[str, str], ...]]", token)
    inside = char in chars or any(low <= char <= high for low, high in ranges)
    return inside != negated


def _match_segment(tokens: tuple[object, ...], text: str) -> bool:
    """Linear wildcard matching: on a mismatch, only the most recent `*` is widened by one."""
    t = s = 0
    star_t, star_s = -1, 0
    while s < len(text):
        if t < len(tokens) and tokens[t] is _STAR:
            star_t, star_s = t, s
            t += 1
        elif t < len(tokens) and _token_matches(tokens[t], text[s]):
            t += 1
            s += 1
        elif star_t >= 0:
            t, star_s = star_t + 1, star_s + 1
            s = star_s
        else:
            return False
    while t < len(tokens) and tokens[t] is _STAR:
        t += 1
    return t == len(tokens)


def _match_path(segments: tuple[object, ...], parts: list[str]) -> bool:
    @cache
    def at(i: int, j: int) -> bool:
        if i == len(segments):
            return j == len(parts)
        if segments[i] is _GLOBSTAR:
            return at(i + 1, j) or (j < len(parts) and at(i, j + 1))
        return j < len(parts) and _match_segment(segments[i], parts[j]) and at(i + 1, j + 1)  # type: ignore[arg-type]

    return at(0, 0)


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
