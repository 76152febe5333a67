"""Hunks of a turn's change to a file, and taking some of them back by a three-way reverse apply
(protocol.md §15 "A turn's diff"). Pure: lines in, lines out.

A hunk is one maximal changed region between the file's text before the turn and after it (one
non-equal opcode of `difflib.SequenceMatcher`; two of them are always separated by unchanged lines).
Its number is its position in the file (1, 2, …): both texts are stored, so the numbering is the
same whenever it is computed, whatever the file holds now.

Undoing hunk k against the file's current text: the after-lines of hunk k are located in the current
text through the matching blocks of after → current. When every one of them is still there, in one
run (and, for a hunk that only deleted lines, both neighbours of the deletion are still adjacent),
they are replaced by the hunk's before-lines; everything else the current text holds (other hunks,
the person's later edits elsewhere) is left exactly as it is. Otherwise the hunk is a conflict and
nothing is written for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

CONTEXT = 3  # lines of context in a hunk's text, as `diff -u`
NO_NEWLINE = "\n\\ No newline at end of file\n"


@dataclass(frozen=True, slots=True)
class Hunk:
    index: int  # 1-based position in the file
    old_start: int  # 0-based, in the before lines
    old_end: int
    new_start: int  # 0-based, in the after lines
    new_end: int
    text: str  # unified-diff text, `@@` line first


@dataclass(frozen=True, slots=True)
class Undone:
    lines: list[str]  # the current text with the undone hunks taken back
    undone: tuple[int, ...]
    conflicts: tuple[tuple[int, str], ...]  # (hunk index, why)


def split_lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def hunks(before: Sequence[str], after: Sequence[str]) -> list[Hunk]:
    import difflib  # on first use: a turn that changed no file never loads it (issue 40, RSS)

    opcodes = difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes()
    out: list[Hunk] = []
    for position, (tag, i1, i2, j1, j2) in enumerate(opcodes):
        if tag == "equal":
            continue
        above = _equal_length(opcodes, position - 1)
        below = _equal_length(opcodes, position + 1)
        text = _hunk_text(before, after, i1, i2, j1, j2, min(CONTEXT, above), min(CONTEXT, below))
        out.append(Hunk(len(out) + 1, i1, i2, j1, j2, text))
    return out


def _equal_length(opcodes: Sequence[tuple[str, int, int, int, int]], position: int) -> int:
    if not 0 <= position < len(opcodes) or opcodes[position][0] != "equal":
        return 0
    _, i1, i2, _, _ = opcodes[position]
    return i2 - i1


def _hunk_text(
    before: Sequence[str], after: Sequence[str], i1: int, i2: int, j1: int, j2: int, above: int, below: int
) -> str:
    old = (i1 - above, i2 + below)
    new = (j1 - above, j2 + below)
    lines = [f"@@ -{_range(*old)} +{_range(*new)} @@\n"]
    lines += [" " + line for line in before[i1 - above : i1]]
    lines += ["-" + line for line in before[i1:i2]]
    lines += ["+" + line for line in after[j1:j2]]
    lines += [" " + line for line in before[i2 : i2 + below]]
    return "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
    )


def _range(start: int, stop: int) -> str:
    """A unified diff's `start,length` (difflib's convention: an empty range names the line before)."""
    length = stop - start
    if length == 1:
        return str(start + 1)
    return f"{start if length == 0 else start + 1},{length}"


def undo(
    before: Sequence[str], after: Sequence[str], current: Sequence[str], chosen: Sequence[Hunk]
) -> Undone:
    """Take back `chosen` (hunks of before → after) in `current`, three-way."""
    mapping: dict[int, int] = {}
    import difflib

    matcher = difflib.SequenceMatcher(None, after, current, autojunk=False)
    for a, c, size in matcher.get_matching_blocks():
        for k in range(size):
            mapping[a + k] = c + k
    edits: list[tuple[int, int, Sequence[str]]] = []
    done: list[int] = []
    conflicts: list[tuple[int, str]] = []
    for hunk in chosen:
        span = _located(hunk, mapping, len(after), len(current))
        if span is None:
            conflicts.append((hunk.index, "its lines changed since the turn: nothing was written for it"))
            continue
        edits.append((span[0], span[1], before[hunk.old_start : hunk.old_end]))
        done.append(hunk.index)
    lines = list(current)
    for start, stop, replacement in sorted(edits, key=lambda e: e[0], reverse=True):
        lines[start:stop] = replacement
    return Undone(lines, tuple(done), tuple(conflicts))


def _located(hunk: Hunk, mapping: dict[int, int], after_len: int, current_len: int) -> tuple[int, int] | None:
    """Where the hunk's after-lines are in the current text, as a slice; None: not intact."""
    first, last = hunk.new_start, hunk.new_end - 1
    if hunk.new_end > hunk.new_start:
        if any(k not in mapping for k in range(first, last + 1)):
            return None
        if mapping[last] - mapping[first] != last - first:
            return None  # the person put lines in between
        return mapping[first], mapping[last] + 1
    # A hunk that only deleted lines: both neighbours of the gap must still be there, adjacent.
    above, below = hunk.new_start - 1, hunk.new_start
    has_above, has_below = above >= 0, below < after_len
    if (has_above and above not in mapping) or (has_below and below not in mapping):
        return None
    if has_above and has_below and mapping[below] != mapping[above] + 1:
        return None
    if has_above:
        at = mapping[above] + 1
    elif has_below:
        at = mapping[below]
    elif current_len == 0:
        at = 0  # the turn emptied the file and it is still empty
    else:
        return None
    return at, at
