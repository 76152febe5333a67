"""JSON from outside (a client's frame, an MCP server's line) decoded with its nesting bounded first.

Python's JSON decoder recurses once per level of nesting; a line of a few thousand `[` can exhaust
the C stack before `RecursionError` is raised (a "Fatal Python error" that ends the process), and
every recursive step after decoding (structuring, freezing, re-encoding) is exposed the same way. So
the depth is measured *before* decoding, without recursion and at C speed, a slice at a time:
escapes are removed (`\\\\`, then `\\"`), the text is split at the remaining quotes (every other
piece is inside a string), the brackets outside strings become +1/-1, matched `[]`/`{}` pairs are
removed a few passes (ordinary messages vanish entirely), and the running sum of what is left gives
the depth. A message nested deeper than `MAX_DEPTH` is refused; `top_level_member` still finds its
`id` and `method`, so a request is answered with its own id.

Invariant: nothing decoded by `loads_bounded` is nested deeper than its limit, which stays well below
`freeze_json`'s (200) and Python's recursion limit.
"""

from __future__ import annotations

import json
import re
import sys
from array import array
from collections.abc import Iterator
from itertools import accumulate
from typing import Any

MAX_DEPTH = 128
SLICE = 1 << 20  # bytes scanned at a time (bounds the scan's memory; a deep message stops early)
PAIR_PASSES = 4
MEMBER_TRIES = 64  # occurrences of a key `top_level_member` looks at

_BRACKETS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[{]}")
_PAIR = b"\x01\xff"
_BACKSLASH = 0x5C
_STRING = rb'"[^"\\]*(?:\\.[^"\\]*)*"'
_NUMBER = rb"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"
_SCALAR = re.compile(rb"\s*:\s*(" + _STRING + rb"|" + _NUMBER + rb"|true|false|null)", re.DOTALL)


class TooDeepError(ValueError):
    """JSON nested deeper than the limit (refused before it was decoded)."""

    def __init__(self, depth: int, limit: int) -> None:
        super().__init__(f"JSON nested deeper than {limit} levels")
        self.depth = depth  # at least this deep (the scan stops once past the limit)
        self.limit = limit


class UnusableNumberError(ValueError):
    """Valid JSON that Python refuses to decode: an integer of more digits than
    `sys.get_int_max_str_digits()` (4300), a guard against quadratic int parsing."""

    def __init__(self) -> None:
        super().__init__(f"a number has more than {sys.get_int_max_str_digits()} digits")


def _slices(data: bytes, end: int, pos: int = 0, inside: bool = False) -> Iterator[tuple[bytes, bool]]:
    """The brackets outside strings of `data[pos:end]` (as +1/-1 bytes), a slice at a time, each
    with whether the scan is inside a string after it. `pos` must not split an escape."""
    while pos < end:
        cut = min(end, pos + SLICE)
        while cut < end and data[cut - 1] == _BACKSLASH:
            cut += 1  # never split an escape between two slices
        piece = data[pos:cut]
        if b"\\" in piece:
            piece = piece.replace(b"\\\\", b"").replace(b'\\"', b"")
        parts = piece.split(b'"')
        outside = b"".join(parts[1::2] if inside else parts[0::2])
        if len(parts) % 2 == 0:
            inside = not inside
        yield outside.translate(_BRACKETS, _NOT_BRACKETS), inside
        pos = cut


def _reduced(brackets: bytes) -> tuple[bytes, int]:
    """`brackets` without matched pairs, removed innermost first for at most PAIR_PASSES passes, and
    how many passes removed any: the deepest level of `brackets` is at most that many above the
    deepest level of what is left."""
    for passes in range(PAIR_PASSES):
        shorter = brackets.replace(_PAIR, b"")
        if len(shorter) == len(brackets):
            return brackets, passes
        brackets = shorter
    return brackets, PAIR_PASSES


def nesting_depth(data: bytes, stop_above: int | None = None) -> int:
    """How deep the arrays and objects of `data` nest (brackets inside strings do not count). With
    `stop_above`, the scan stops once the depth is known to pass it (the answer is then at least
    that deep). Invalid JSON gets a number too (an unterminated string's brackets count)."""
    depth = deepest = 0
    for brackets, _ in _slices(data, len(data)):
        if not brackets:
            continue
        reduced, passes = _reduced(brackets) if stop_above is not None else (brackets, 0)
        peak = max(accumulate(array("b", reduced), initial=depth))
        if stop_above is not None and peak <= stop_above < peak + passes:
            peak = max(accumulate(array("b", brackets), initial=depth))  # too close to call
        deepest = max(deepest, peak)
        depth += brackets.count(b"\x01") - brackets.count(b"\xff")
        if stop_above is not None and deepest > stop_above:
            break
    return deepest


def check_depth(data: bytes, limit: int = MAX_DEPTH) -> None:
    """Raise `TooDeepError` when `data` nests deeper than `limit`. Free for ordinary messages: with
    no more openers than the limit, the depth cannot exceed it and nothing is scanned."""
    if data.count(b"[") + data.count(b"{") <= limit:
        return
    depth = nesting_depth(data, limit)
    if depth > limit:
        raise TooDeepError(depth, limit)


def loads_bounded(data: bytes | str, limit: int = MAX_DEPTH) -> Any:
    """`json.loads` for text from outside: `TooDeepError` (a ValueError) before decoding anything
    nested deeper than `limit`; ValueError / UnicodeDecodeError for what is not JSON."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    check_depth(raw, limit)
    return json.loads(data)


def loads_message(data: bytes, text: str | None = None) -> Any:
    """A client's message decoded: `TooDeepError` before decoding anything nested deeper than
    `MAX_DEPTH`, `UnusableNumberError` for an integer Python will not convert (both ValueErrors whose
    request can still be answered with its own id, `top_level_member`); any other ValueError
    (UnicodeDecodeError included) for what is not JSON. `text`: `data` already decoded."""
    check_depth(data)
    try:
        return json.loads(data if text is None else text)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise
    except ValueError:  # json's only other failure: int() refusing a number's digits
        raise UnusableNumberError() from None


def top_level_member(data: bytes, key: str) -> Any:
    """The scalar value of member `key` of the top-level JSON object in `data`, however deep the
    rest of it nests (`...` when there is none: not an object, no such member, or not a scalar).
    Linear: the nesting state is carried from one occurrence of the key to the next, and at most
    `MEMBER_TRIES` occurrences are looked at."""
    if not data.lstrip().startswith(b"{"):
        return ...
    pattern = re.compile(re.escape(json.dumps(key).encode()))
    pos, depth, inside = 0, 0, False
    for tries, match in enumerate(pattern.finditer(data)):
        if tries >= MEMBER_TRIES:
            break  # a key repeated that often inside the message: not worth walking any further
        at = before = match.start()
        while before > 0 and data[before - 1] == _BACKSLASH:
            before -= 1
        if (at - before) % 2:
            continue  # an escaped quote: inside a string (the state is not moved into an escape)
        for brackets, inside_after in _slices(data, at, pos, inside):
            depth += brackets.count(b"\x01") - brackets.count(b"\xff")
            inside = inside_after
        pos = at
        if inside or depth != 1:
            continue  # inside a string, or a member of a nested object
        value = _SCALAR.match(data, match.end())
        if value is None:
            return ...
        try:
            return json.loads(value.group(1))
        except ValueError:
            return ...
    return ...
