"""Output budgets: a text longer than its cap keeps its head and its tail, and the middle is replaced by
one marker that says how much was elided and how to get it (protocol.md §12).

Head and tail are cut at line boundaries when one is near (the model reads whole lines better), so a
result may be a little shorter than its cap; the marker itself comes on top of the cap.
"""

from __future__ import annotations

from dataclasses import dataclass

GENERIC_HINT = "ask for less (a narrower request) to see it"
SNAP = 0.2  # a cut moves to a line boundary within this share of its half


@dataclass(frozen=True, slots=True)
class Elided:
    text: str
    chars: int = 0  # characters elided (0: the text fit)
    lines: int = 0  # line breaks among them


def marker(chars: int, lines: int, hint: str) -> str:
    line_part = f" ({lines:,} lines)" if lines else ""
    return f"[… {chars:,} characters{line_part} elided here; {hint} …]"


def elide_middle(text: str, cap: int, hint: str = GENERIC_HINT) -> Elided:
    """`text` itself when it fits in `cap` characters, else its head and tail around a marker."""
    if cap <= 0 or len(text) <= cap:
        return Elided(text)
    half = cap // 2
    head_end = _snap_head(text, half)
    tail_start = _snap_tail(text, len(text) - (cap - half))
    middle = text[head_end:tail_start]
    lines = middle.count("\n")
    head, tail = text[:head_end], text[tail_start:]
    sep = "" if not head or head.endswith("\n") else "\n"
    return Elided(f"{head}{sep}{marker(len(middle), lines, hint)}\n{tail}", len(middle), lines)


def _snap_head(text: str, end: int) -> int:
    """The head ends just after a newline near `end`, if there is one."""
    newline = text.rfind("\n", max(0, end - int(end * SNAP)), end)
    return newline + 1 if newline >= 0 else end


def _snap_tail(text: str, start: int) -> int:
    """The tail starts just after a newline near `start`, if there is one."""
    size = len(text) - start
    newline = text.find("\n", start, start + int(size * SNAP))
    return newline + 1 if newline >= 0 else start
