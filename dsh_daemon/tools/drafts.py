"""The person's unsaved changes (their draft) and the agent's edit of the same file, kept apart
(issue 37, protocol.md §9): the buffer gets the agent's change on top of the draft, the file on disk
gets the saved text plus only the agent's change, so commands see the edit and nothing of the draft.

Line based and conservative: the two are apart only when every line the agent changes lies in a
stretch the person left as saved, an insertion included, never where the person's own change begins
or ends. Anything else overlaps, and the person decides (write both, or the buffer only).
"""

from __future__ import annotations

# The agent's change as (draft lines from, to) -> replacement lines.
_Hunk = tuple[int, int, list[str]]


def saved_with_edit(saved: str, draft: str, edited: str) -> str | None:
    """The text on disk after the agent's change `draft` -> `edited`, applied to `saved` (the file as
    the person last saved it) instead of to their draft; None when the change overlaps the draft."""
    from difflib import SequenceMatcher  # on first use (issue 40, RSS)

    saved_lines = saved.splitlines(keepends=True)
    draft_lines = draft.splitlines(keepends=True)
    edited_lines = edited.splitlines(keepends=True)
    person = SequenceMatcher(None, saved_lines, draft_lines, autojunk=False).get_opcodes()
    agent = SequenceMatcher(None, draft_lines, edited_lines, autojunk=False).get_opcodes()
    hunks: list[_Hunk] = [(i1, i2, edited_lines[j1:j2]) for tag, i1, i2, j1, j2 in agent if tag != "equal"]
    kept = [(k1, j1, j2) for tag, k1, _k2, j1, j2 in person if tag == "equal"]
    changed = [(j1, j2) for tag, _k1, _k2, j1, j2 in person if tag != "equal"]
    out = list(saved_lines)
    for a1, a2, replacement in reversed(hunks):
        if any(_touch(a1, a2, b1, b2) for b1, b2 in changed):
            return None
        start = _saved_line(kept, a1, a2)
        if start is None:
            return None
        out[start : start + (a2 - a1)] = replacement
    return "".join(out)


def _touch(a1: int, a2: int, b1: int, b2: int) -> bool:
    """Two draft-line ranges share a line, or one is a point (an insertion, a deletion) on the other."""
    if max(a1, b1) < min(a2, b2):
        return True
    return (a1 == a2 or b1 == b2) and a1 <= b2 and b1 <= a2


def _saved_line(kept: list[tuple[int, int, int]], a1: int, a2: int) -> int | None:
    """Where draft lines [a1, a2) begin in the saved text: they must lie in one unchanged stretch."""
    for k1, j1, j2 in kept:
        if j1 <= a1 and a2 <= j2:
            return k1 + (a1 - j1)
    return None
