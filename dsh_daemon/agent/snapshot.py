"""A derived-state snapshot: what folding a session's log up to one seq produced (the model history
with everything `Derivation` keeps, the pending inbox, the last turn number), stored so that a resume
of a long session folds only the events after it (issue 20.3, docs/design.md §6.7).

Invariants kept here and by its writer (`host/manager.py`) and reader (`Agent(snapshot=...)`):
- A snapshot is a cache, never a source of truth: the state it holds is exactly what folding events
  0..`upto` gives, so deleting it, or ignoring it because it is stale, corrupt or of another format,
  changes nothing but speed. `SNAPSHOT_FORMAT` names the encoding *and* the derivation rules: bump it
  whenever `Derivation`, the inbox projection or this encoding changes meaning, and every stored
  snapshot is ignored (rebuilt from the log) from then on.
- It is taken only at a turn end (no turn open, so repair never needs what lies before it) and only
  when every event through `upto` is on disk: a crash before or after writing it leaves either no
  snapshot or one that is older than the log, which the reader extends with the events after `upto`.
- Decoding either gives the whole state or raises `SnapshotError`; a half-read snapshot is never used.
  Any failure is that error, whatever the text holds (issue 32.4): nesting past the parser's
  recursion limit, a string holding a lone surrogate (which no logged value holds, and no request
  could send), a value of the wrong type.
- Whether a stored row is this session's and was folded from its log is the store's check (its seal,
  `session/seal.py`); this module trusts nothing it decodes beyond its shape.
"""

from __future__ import annotations

import asyncio
import gc
import json
import time
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from dsh_daemon.agent.derive import Derivation, RequestSpec, TurnMark
from dsh_daemon.model.inbox import TARGETS, InboxItem
from dsh_daemon.model.jsonvalue import FrozenDict, freeze_json
from dsh_daemon.model.messages import (
    AssistantMessage,
    ContentBlock,
    Message,
    OtherBlock,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    UserMessage,
)

SNAPSHOT_FORMAT = 2  # 2: a tool call block keeps the provider's id beside the daemon's
T = TypeVar("T")
# What an encode does between two points where it may pause (`SnapshotCodec.encode_steps`).
Steps = Generator[None, None, T]


class SnapshotError(ValueError):
    """A stored snapshot that cannot be used (unreadable, another format, inconsistent)."""


@dataclass(frozen=True)
class DerivedSnapshot:
    """The state after folding events 0..`upto` of a session's log."""

    upto: int
    turn: int
    inbox: Mapping[str, Sequence[InboxItem]]
    derivation: Derivation

    def encode(self) -> str:
        """This snapshot alone (a session keeps a `SnapshotCodec`, which encodes only what is new)."""
        return SnapshotCodec().encode(self)

    @staticmethod
    def decode(text: str) -> DerivedSnapshot:
        return SnapshotCodec().decode(text)


@dataclass(frozen=True)
class SnapshotView:
    """A derived state as it stood at one turn end, for the snapshot writer's thread to encode while the
    event loop goes on folding events into the same `Derivation` (issue 40.4: encoding on the loop held
    it up to a second at a long session's turn end). Taking one copies no history: every list a
    derivation holds is only appended to (a compaction or a cut starts new lists), and messages,
    headers and turn marks are never changed, so a list and its length at that moment are that state
    for good. Only the turn marks' table and the logged requests' (an entry per turn or request) are
    copied, and the inbox turned into JSON: the table as a dict (one block copied, where a tuple of
    its items made an object per turn and, at 14,000 turns, tipped the collector into a pass at the
    turn end, issue 40.4), with the collector paused meanwhile."""

    upto: int
    turn: int
    inbox: dict[str, list[Any]]
    entries: tuple[list[tuple[int, Message]], int]
    cuts: tuple[list[int], int]
    turn_starts: tuple[list[int], int]
    header: FrozenDict | None
    summary: Message | None
    context_used: int | None
    marks: dict[int, TurnMark]
    requests: tuple[RequestSpec, ...]

    @classmethod
    def of(cls, snapshot: DerivedSnapshot) -> SnapshotView:
        """Taken where the derivation is changed (the event loop), before it changes again."""
        d = snapshot.derivation
        with _NoCollection():
            return cls._of(snapshot, d)

    @classmethod
    def _of(cls, snapshot: DerivedSnapshot, d: Derivation) -> SnapshotView:
        return cls(
            upto=snapshot.upto,
            turn=snapshot.turn,
            inbox={t: [item.to_json() for item in snapshot.inbox.get(t, ())] for t in TARGETS},
            entries=(d.entries, len(d.entries)),
            cuts=(d.cuts, len(d.cuts)),
            turn_starts=(d.turn_starts, len(d.turn_starts)),
            header=d.header,
            summary=d.summary,
            context_used=d.context_used,
            marks=dict(d.marks),
            requests=tuple(d.requests.specs),
        )


class _NoCollection:
    """Tens of thousands of new objects and not one cycle among them: a cyclic collection triggered
    every few hundred allocations would only walk them again and again."""

    def __enter__(self) -> None:
        self.collecting = gc.isenabled()
        gc.disable()

    def __exit__(self, *_: object) -> None:
        if self.collecting:
            gc.enable()


# ---- encoding ----------------------------------------------------------------------------------------
# Lists and messages are shared between the current history, the turn marks and the logged requests
# (a compaction's new list holds the same message objects as the old one): each distinct object is
# written once, and referred to by its index. The codec of a session remembers what it encoded (or
# decoded), and the history only grows between compactions, so the next snapshot encodes only the
# messages, list items, marks and requests that are new; what it writes is still the whole state.


_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
_GROWING = frozenset({"sources", "messages", "headers", "datas", "requests"})  # lists that only grow
_NESTED = frozenset({"lists", "ints"})  # lists of lists: each inner list only grows, more are added
# Items turned into JSON (or messages encoded) between two points where an encode may pause.
_CHUNK = 16
_MARKS = 256  # turn marks looked at (one a turn: most known already)


class _ArrayText:
    """The JSON text of one list that only grows: the items appended since the last call are dumped
    (a few dozen a step), the ones before are already text. `json.dumps([a, b])` is `"[" + dumps(a)
    + "," + dumps(b) + "]"` with these separators, so the pieces, comma-joined in brackets, are what
    dumping the whole list gives. They stay pieces: the snapshot's text is joined once, at its end
    (a long session's tables are megabytes, and each whole-table copy held the loop 10-15 ms)."""

    __slots__ = ("done", "pieces")

    def __init__(self, body: str = "", done: int = 0) -> None:
        self.pieces: list[str] = [body] if body else []  # each the text of some items, no brackets
        self.done = done

    def of(self, items: Sequence[Any]) -> Steps[list[str]]:
        """The pieces once brought up to `items` (the list itself: not to be changed)."""
        if len(items) < self.done:  # (never expected: then the text starts over rather than lie)
            self.pieces, self.done = [], 0
        if len(items) > self.done:
            new: list[str] = []
            for at in range(self.done, len(items), _CHUNK):
                new.append(_dumps(items[at : at + _CHUNK])[1:-1])
                yield
            self.pieces.extend(new)
            self.done = len(items)
        return self.pieces


def _array(out: list[str], items: list[str]) -> None:
    """`"[" + ",".join(items) + "]"`, appended to `out` as fragments (nothing copied yet)."""
    out.append("[")
    for at, item in enumerate(items):
        if at:
            out.append(",")
        out.append(item)
    out.append("]")


class SnapshotCodec:
    """Encodes one session's snapshots, each building on what the previous encode (or the decode it
    was resumed from) already turned into JSON values. Once resumed, it is used by one thread at a
    time (the snapshot writer's), each encode from a `SnapshotView` taken on the event loop."""

    def __init__(self) -> None:
        self.broken = False  # an encode failed half-way: what it holds may be half-updated
        self.keep: list[object] = []  # the objects whose id() is a key below stay alive meanwhile
        self.messages: list[Any] = []
        self.message_index: dict[int, int] = {}
        self.sources: list[Any] = []
        self.source_index: dict[object, int] = {}
        self.headers: list[Any] = []
        self.header_index: dict[int, int] = {}
        self.lists: list[list[Any]] = []  # each entry list, encoded (flat position, message pairs)
        self.entry_lists: list[list[tuple[int, Message]]] = []  # ... and itself
        self.list_index: dict[int, int] = {}
        self.list_done: list[int] = []  # per list, how many of its pairs are encoded
        self.ints: list[list[int]] = []  # the derivation's own lists (they only grow) ...
        self.int_done: list[int] = []  # ... and, per list, how many of its items the last encode wrote
        self.int_index: dict[int, int] = {}
        self.datas: list[Any] = []
        self.requests: list[int] = []
        self.requests_done = 0
        self.marks: dict[int, tuple[int, list[Any]]] = {}  # turn -> (id of its mark, encoded)
        # ... and the same tables as JSON text, kept up to date by `encode`
        self._texts = {key: _ArrayText() for key in _GROWING}
        self._nested_texts: dict[str, list[_ArrayText]] = {key: [] for key in _NESTED}
        self.mark_texts: dict[int, tuple[int, str]] = {}

    # ---- encode ------------------------------------------------------------------------------------

    def encode(self, snapshot: DerivedSnapshot | SnapshotView) -> str:
        """The whole snapshot's text: `json.dumps` of `_encode`'s value, byte for byte, but the growing
        tables are turned into text only for what was appended since the last encode. (Dumping the
        whole value took ~0.1 s for a 100k-event session at every turn end that writes a snapshot.)
        A `DerivedSnapshot` is viewed first, so must not change meanwhile."""
        with _NoCollection():
            return _finish(self.encode_steps(snapshot))

    def encode_steps(self, snapshot: DerivedSnapshot | SnapshotView) -> Steps[str]:
        """`encode`, pausing (a bare `yield`) every few dozen messages or table items, so that an event
        loop can run it in slices between its other work (issue 40.4). A view stays what it was while
        its derivation goes on changing, so the slices may be spread over many loop iterations; a
        codec runs one encode at a time, and one whose encode failed (or was abandoned) refuses."""
        view = snapshot if isinstance(snapshot, SnapshotView) else SnapshotView.of(snapshot)
        if self.broken:
            raise SnapshotError("an earlier encode failed half-way: a new codec must start over")
        self.broken = True  # until this encode has finished
        value = yield from self._encode_steps(view)
        text = yield from self._text(value, view.marks)
        self.broken = False
        return text

    def _text(self, value: dict[str, Any], marks: Mapping[int, TurnMark]) -> Steps[str]:
        out = ["{"]
        for index, (key, item) in enumerate(value.items()):
            if index:
                out.append(",")
            out.append(_dumps(key) + ":")
            if key in _NESTED:
                texts = self._nested_texts[key]
                texts.extend(_ArrayText() for _ in range(len(item) - len(texts)))
                out.append("[")
                for at, (known, inner) in enumerate(zip(texts, item, strict=False)):
                    if at:
                        out.append(",")
                    _array(out, (yield from known.of(inner)))
                out.append("]")
            elif key in _GROWING:
                _array(out, (yield from self._texts[key].of(item)))
            elif key == "marks":
                # Joined _MARKS at a time, a step each: one turn a mark, and putting all of them
                # into the text in one step held the loop 2-4 ms at 14,000 turns (issue 40.4).
                out.append("[")
                turns = list(marks)
                for at in range(0, len(turns), _MARKS):
                    if at:
                        out.append(",")
                        yield
                    out.append(",".join([self._mark_text(turn) for turn in turns[at : at + _MARKS]]))
                out.append("]")
            else:
                out.append(_dumps(item))
        out.append("}")
        yield  # (the one copy of the whole text, below, in a step of its own)
        return "".join(out)

    def _mark_text(self, turn: int) -> str:
        """A turn mark's nine items, as text (a mark is re-encoded only when its turn's mark changed)."""
        mark_id, encoded = self.marks[turn]
        known = self.mark_texts.get(turn)
        if known is None or known[0] != mark_id:
            known = self.mark_texts[turn] = (mark_id, _dumps(encoded)[1:-1])
        return known[1]

    def _encode(self, view: SnapshotView) -> dict[str, Any]:
        """The snapshot's value (what `encode` writes as text), the codec brought up to date."""
        return _finish(self._encode_steps(view))

    def _encode_steps(self, view: SnapshotView) -> Steps[dict[str, Any]]:
        # How many items of each list (by index) this state refers to: a list is encoded that far
        # (never less than before: an older prefix is still that list's), not to its length now,
        # which the event loop may have grown since the view was taken.
        lists_needed: dict[int, int] = {}
        ints_needed: dict[int, int] = {}

        def entries(ref: tuple[list[tuple[int, Message]], int]) -> int:
            index = self.entry_list(ref[0])
            lists_needed[index] = max(lists_needed.get(index, 0), ref[1])
            return index

        def ints(ref: tuple[list[int], int]) -> int:
            index = self.int_list(ref[0])
            ints_needed[index] = max(ints_needed.get(index, 0), ref[1])
            return index

        now = [
            entries(view.entries),
            ints(view.cuts),
            ints(view.turn_starts),
            self.header(view.header),
            self.message(view.summary),
            view.context_used,
        ]
        marks: list[Any] = []
        for at, (turn, mark) in enumerate(view.marks.items()):
            if at % _MARKS == _MARKS - 1:
                yield
            known = self.marks.get(turn)
            if known is None or known[0] != id(mark):
                encoded = [
                    turn,
                    entries(mark.entries),
                    mark.entries[1],
                    ints(mark.cuts),
                    mark.cuts[1],
                    ints(mark.turn_starts),
                    mark.turn_starts[1],
                    self.message(mark.summary),
                    mark.context_used,
                ]
                self.keep.append(mark)
                known = self.marks[turn] = (id(mark), encoded)
            marks += known[1]
        for header, listed, count, data in view.requests[self.requests_done :]:
            index = -1
            if data is not None:
                index = len(self.datas)
                self.datas.append(data)
            self.requests += [self.header(header), entries((listed, count)), count, index]
        self.requests_done = len(view.requests)
        for index, needed in lists_needed.items():
            yield from self._extend(index, needed)
        for index, needed in ints_needed.items():
            self.int_done[index] = max(self.int_done[index], needed)
        return {
            "format": SNAPSHOT_FORMAT,
            "upto": view.upto,
            "turn": view.turn,
            "inbox": view.inbox,
            "sources": self.sources,
            "messages": self.messages,
            "headers": self.headers,
            "lists": self.lists,
            "ints": [values[:done] for values, done in zip(self.ints, self.int_done, strict=True)],
            "datas": self.datas,
            "now": now,
            "marks": marks,
            "requests": self.requests,
        }

    def header(self, header: FrozenDict | None) -> int:
        if header is None:
            return -1
        index = self.header_index.get(id(header))
        if index is None:
            index = self.header_index[id(header)] = len(self.headers)
            self.headers.append(header)
            self.keep.append(header)
        return index

    def entry_list(self, entries: list[tuple[int, Message]]) -> int:
        index = self.list_index.get(id(entries))
        if index is None:
            index = self.list_index[id(entries)] = len(self.lists)
            self.lists.append([])
            self.list_done.append(0)
            self.entry_lists.append(entries)
        return index

    def _extend(self, index: int, needed: int) -> Steps[None]:
        """Encode a list's pairs up to `needed`, from where the last encode stopped (lists only grow)."""
        flat, entries, message = self.lists[index], self.entry_lists[index], self.message
        while self.list_done[index] < needed:
            done = self.list_done[index]
            upto = min(needed, done + _CHUNK)
            for position, item in entries[done:upto]:
                flat += (position, message(item))
            self.list_done[index] = upto
            yield

    def int_list(self, values: list[int]) -> int:
        index = self.int_index.get(id(values))
        if index is None:
            index = self.int_index[id(values)] = len(self.ints)
            self.ints.append(values)  # the list itself: it only grows, and is written up to int_done
            self.int_done.append(0)
            self.keep.append(values)
        return index

    def message(self, message: Message | None) -> int:
        if message is None:
            return -1
        index = self.message_index.get(id(message))
        if index is None:
            index = self.message_index[id(message)] = len(self.messages)
            role = "u" if isinstance(message, UserMessage) else "a"
            self.messages.append(
                [message.id, role, self.source(message.source), *(_block(b) for b in message.content)]
            )
            self.keep.append(message)
        return index

    def source(self, source: FrozenDict) -> int:
        key = _source_key(source)
        index = self.source_index.get(key)
        if index is None:
            index = self.source_index[key] = len(self.sources)
            self.sources.append(source)
        return index

    # ---- decode ------------------------------------------------------------------------------------

    def decode(self, text: str) -> DerivedSnapshot:
        """The snapshot `text` holds (`SnapshotError` when it cannot be used); this codec then
        continues from it."""
        with _NoCollection():
            try:
                _check_text(text)
                parsed = _parse_with_texts(text)
                data: Any = parsed[0] if parsed is not None else json.loads(text)
                if not isinstance(data, dict) or data.get("format") != SNAPSHOT_FORMAT:
                    found = data.get("format") if isinstance(data, dict) else None
                    raise SnapshotError(f"snapshot format {found!r}, this build reads {SNAPSHOT_FORMAT}")
                snapshot = _decode_into(self, data)
                if parsed is not None:
                    self._adopt_texts(data, parsed[1], parsed[2])
                return snapshot
            except SnapshotError:
                raise
            except Exception as exc:  # RecursionError included: whatever shape the text takes
                raise SnapshotError(f"unreadable snapshot: {type(exc).__name__}: {exc}") from None

    def _adopt_texts(self, data: dict[str, Any], texts: dict[str, str], nested: dict[str, list[str]]) -> None:
        """Take the stored text of the growing tables as already dumped, so that the first snapshot
        after a resume turns into JSON only what is new, as every later one does. The text is the
        stored snapshot's own and `_decode_into` made each table equal to its decoded value, so it is
        that table's JSON (a writer with other spacing would still give the same value)."""
        for key, body in texts.items():
            if key in _GROWING and isinstance(data[key], list):
                self._texts[key] = _ArrayText(body, len(data[key]))
        for key, bodies in nested.items():
            table = self.lists if key == "lists" else self.ints
            adopted = []
            for body, inner in zip(bodies, table, strict=True):
                adopted.append(_ArrayText(body, len(inner)))
            self._nested_texts[key] = adopted
        # A mark's nine items are numbers (or null), so the marks' text splits at its commas.
        marks = texts.get("marks")
        parts = marks.split(",") if marks else []
        if len(parts) == 9 * len(self.marks):
            for at, (turn, (mark_id, _)) in enumerate(self.marks.items()):
                self.mark_texts[turn] = (mark_id, ",".join(parts[at * 9 : at * 9 + 9]))


# How long an encode runs on the event loop before it lets the loop's other work go on.
SLICE_S = 0.002  # (4 ms, with a preempted step, made 20-50 ms stalls at a load of 12)


async def encode_in_slices(codec: SnapshotCodec, snapshot: SnapshotView) -> str:
    """`codec.encode(snapshot)`, run on the event loop in slices of `SLICE_S` (at least a step each),
    other work between them (issue 40.4: a long session's first snapshot held the loop up to a second
    at its turn end)."""
    steps = codec.encode_steps(snapshot)
    try:
        while True:
            until = time.perf_counter() + SLICE_S
            with _NoCollection():
                try:
                    next(steps)
                    while time.perf_counter() < until:
                        next(steps)
                except StopIteration as done:
                    return done.value  # type: ignore[no-any-return]
            await asyncio.sleep(0)
    finally:
        steps.close()


def _finish(steps: Steps[T]) -> T:
    """Run an encode's steps through, without pausing."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]


def _check_text(text: str) -> None:
    """Refuse, before parsing, a lone surrogate, which `encode` never writes and a model request
    would fail on at every turn. (Nesting is not measured first: counting it without recursion costs
    about what the parse does, and the parser bounds its own recursion, raising `RecursionError`,
    which `decode` turns into `SnapshotError` like any other failure; only a sealed row is decoded.)"""
    if type(text) is not str:
        raise SnapshotError(f"a snapshot that is not text ({type(text).__name__})")
    found = _surrogate_escape(text)
    if found is not None:
        raise SnapshotError(f"a UTF-16 surrogate escape ({found}) in the snapshot")


def _surrogate_escape(text: str) -> str | None:
    """The first `\\uD800`-`\\uDFFF` escape of a JSON text (one with an even run of backslashes before
    it: an escaped backslash is no escape), found at C speed. `encode` writes every character as
    itself (ensure_ascii off), so only a lone surrogate, which no logged value holds, would be one."""
    for marker in ("\\ud", "\\uD"):
        at = text.find(marker)
        while at != -1:
            start = at
            while start > 0 and text[start - 1] == "\\":
                start -= 1
            if (at - start) % 2 == 0 and text[at + 3 : at + 4] in _HIGH_NIBBLES:
                return text[at : at + 6]
            at = text.find(marker, at + 1)
    return None


_HIGH_NIBBLES = frozenset("89abcdefABCDEF")


def _parse_with_texts(text: str) -> tuple[dict[str, Any], dict[str, str], dict[str, list[str]]] | None:
    """The snapshot's value, as `json.loads` gives it, with the text of each growing table's items
    (between its brackets) and of each nested list's; `None` when the text is not the compact form this
    codec writes (then it is parsed the plain way and nothing is adopted). One pass of the C scanner,
    as `json.loads` makes."""
    try:
        if text[:1] != "{":
            return None
        values: dict[str, Any] = {}
        texts: dict[str, str] = {}
        nested: dict[str, list[str]] = {}
        pos = 1
        while text[pos] != "}":
            if text[pos] != '"':
                return None
            key, pos = _raw_decode(text, pos)
            if text[pos] != ":":
                return None
            pos += 1
            if key in _NESTED and text[pos] == "[":
                inner_values: list[Any] = []
                bodies: list[str] = []
                pos += 1
                while text[pos] != "]":
                    start = pos
                    item, pos = _raw_decode(text, pos)
                    if not isinstance(item, list):
                        return None
                    inner_values.append(item)
                    bodies.append(text[start + 1 : pos - 1])
                    if text[pos] == ",":
                        pos += 1
                pos += 1
                values[key], nested[key] = inner_values, bodies
            else:
                start = pos
                values[key], pos = _raw_decode(text, pos)
                if (key in _GROWING or key == "marks") and isinstance(values[key], list):
                    texts[key] = text[start + 1 : pos - 1]
            if text[pos] == ",":
                pos += 1
            elif text[pos] != "}":
                return None
        if pos + 1 != len(text):
            return None
        return values, texts, nested
    except (IndexError, ValueError):
        return None


_raw_decode = json.JSONDecoder().raw_decode


def _block(block: ContentBlock) -> Any:
    """A text block is its string; the others are arrays tagged by their first item."""
    if isinstance(block, TextBlock):
        return block.text
    if isinstance(block, ReasoningBlock):
        return ["r", block.text]
    if isinstance(block, ToolCallBlock):
        if block.provider_id is None:
            return ["c", block.id, block.name, block.arguments]
        return ["c", block.id, block.name, block.arguments, block.provider_id]
    if isinstance(block, ToolResultBlock):
        return ["t", block.tool_call_id, int(block.is_error), [_block(b) for b in block.content]]
    return ["o", block.data]


# ---- decoding ----------------------------------------------------------------------------------------


# Messages and blocks are made without their dataclass `__init__` (which sets each frozen field
# through `object.__setattr__`): a long session's history is tens of thousands of them, and the
# values were checked when they were logged. Each setter is the slot's own descriptor.
_new = object.__new__
_SET_TEXT = vars(TextBlock)["text"].__set__
_SET_ID = {cls: vars(cls)["id"].__set__ for cls in (UserMessage, AssistantMessage)}
_SET_CONTENT = {cls: vars(cls)["content"].__set__ for cls in (UserMessage, AssistantMessage)}
_SET_SOURCE = {cls: vars(cls)["source"].__set__ for cls in (UserMessage, AssistantMessage)}


def _text_block(text: str) -> TextBlock:
    block: TextBlock = _new(TextBlock)
    _SET_TEXT(block, text)
    return block


def _message(
    cls: type[Message], message_id: str, content: tuple[ContentBlock, ...], source: FrozenDict
) -> Any:
    message = _new(cls)
    _SET_ID[cls](message, message_id)
    _SET_CONTENT[cls](message, content)
    _SET_SOURCE[cls](message, source)
    return message


def _unblock(raw: Any) -> ContentBlock:
    if type(raw) is str:
        return _text_block(raw)
    tag = raw[0]
    if tag == "r":
        return ReasoningBlock(_str(raw[1]))
    if tag == "c":
        provider_id = _str(raw[4]) if len(raw) > 4 else None
        return ToolCallBlock(_str(raw[1]), _str(raw[2]), _str(raw[3]), provider_id)
    if tag == "t":
        return ToolResultBlock(_str(raw[1]), tuple(_unblock(b) for b in raw[3]), bool(raw[2]))
    if tag == "o":
        data = freeze_json(raw[1])
        if not isinstance(data, FrozenDict):
            raise SnapshotError("an opaque content block that is not an object")
        return OtherBlock(data)
    raise SnapshotError(f"unknown content block tag {tag!r}")


def _str(value: Any) -> str:
    if type(value) is not str:
        raise SnapshotError(f"expected a string, found {type(value).__name__}")
    return value


def _frozen(value: Any) -> FrozenDict:
    frozen = freeze_json(value)
    if not isinstance(frozen, FrozenDict):
        raise SnapshotError("expected an object")
    return frozen


def _source_key(source: FrozenDict) -> object:
    try:
        key: object = tuple(sorted(source.items()))
        hash(key)
    except TypeError:
        key = json.dumps(source, sort_keys=True)
    return key


def _decode_into(codec: SnapshotCodec, data: dict[str, Any]) -> DerivedSnapshot:
    sources = [_frozen(s) for s in data["sources"]]
    messages: list[Message] = []
    add = messages.append
    roles: dict[str, type[Message]] = {"u": UserMessage, "a": AssistantMessage}
    for row in data["messages"]:
        message_id, role, source = row[0], roles[row[1]], _ref(sources, row[2])
        if type(message_id) is not str:
            raise SnapshotError("a message id that is not a string")
        add(_message(role, message_id, tuple([_unblock(b) for b in row[3:]]), source))
    headers = [_frozen(h) for h in data["headers"]]
    lists: list[list[tuple[int, Message]]] = []
    for flat in data["lists"]:
        positions, indexes = flat[0::2], flat[1::2]
        if len(positions) != len(indexes) or not all(type(p) is int for p in positions):
            raise SnapshotError("an entry list that is not (position, message) pairs")
        if indexes and (min(indexes) < 0 or max(indexes) >= len(messages)):
            raise SnapshotError("an entry list refers to a message the snapshot does not hold")
        lists.append(list(zip(positions, map(messages.__getitem__, indexes), strict=True)))
    ints = [[_int(v) for v in values] for values in data["ints"]]
    datas = [_frozen(d) for d in data["datas"]]

    def message(index: int) -> Message | None:
        return None if index == -1 else _ref(messages, index)

    derivation = Derivation()
    entries, cuts, turn_starts, header, summary, context_used = data["now"]
    derivation.entries = _ref(lists, entries)
    derivation.cuts = _ref(ints, cuts)
    derivation.turn_starts = _ref(ints, turn_starts)
    derivation.header = None if header == -1 else _ref(headers, header)
    derivation.summary = message(summary)
    derivation.context_used = _optional_int(context_used)
    marks = data["marks"]
    for at in range(0, len(marks), 9):
        turn, e, en, c, cn, t, tn, s, used = marks[at : at + 9]
        derivation.marks[_int(turn)] = TurnMark(
            (_ref(lists, e), _int(en)),
            (_ref(ints, c), _int(cn)),
            (_ref(ints, t), _int(tn)),
            message(s),
            _optional_int(used),
        )
    specs = data["requests"]
    for at in range(0, len(specs), 4):
        h, e, count, d = specs[at : at + 4]
        derivation.requests.add(
            _ref(headers, h), _ref(lists, e), _int(count), None if d == -1 else _ref(datas, d)
        )
    inbox: dict[str, list[InboxItem]] = {
        target: [InboxItem.from_json(item) for item in data["inbox"][target]] for target in TARGETS
    }
    snapshot = DerivedSnapshot(_int(data["upto"]), _int(data["turn"]), inbox, derivation)
    # The codec goes on from here: what was decoded is what it would have encoded.
    codec.sources = list(data["sources"])
    codec.source_index = {_source_key(s): i for i, s in enumerate(sources)}
    codec.messages = list(data["messages"])
    codec.message_index = {id(m): i for i, m in enumerate(messages)}
    codec.headers = list(data["headers"])
    codec.header_index = {id(h): i for i, h in enumerate(headers)}
    codec.lists = [list(flat) for flat in data["lists"]]
    codec.list_index = {id(entries): i for i, entries in enumerate(lists)}
    codec.list_done = [len(entries) for entries in lists]
    codec.ints = ints
    codec.int_done = [len(values) for values in ints]
    codec.int_index = {id(values): i for i, values in enumerate(ints)}
    codec.datas = list(data["datas"])
    codec.requests = list(specs)
    codec.requests_done = len(derivation.requests)
    codec.marks = {
        turn: (id(mark), list(marks[at * 9 : at * 9 + 9]))
        for at, (turn, mark) in enumerate(derivation.marks.items())
    }
    codec.entry_lists = lists
    codec._texts = {key: _ArrayText() for key in _GROWING}  # the first encode dumps the tables again
    codec._nested_texts = {key: [] for key in _NESTED}
    codec.mark_texts = {}
    codec.keep = [*messages, *headers, *ints, *derivation.marks.values()]
    return snapshot


def _ref(table: list[T], index: Any) -> T:
    """`table[index]` for an index the snapshot itself holds (a negative one is corruption)."""
    if type(index) is not int or not 0 <= index < len(table):
        raise SnapshotError(f"a reference ({index!r}) to nothing the snapshot holds")
    return table[index]


def _int(value: Any) -> int:
    if type(value) is not int:
        raise SnapshotError(f"expected an integer, found {type(value).__name__}")
    return value


def _optional_int(value: Any) -> int | None:
    if value is None:
        return None
    if type(value) is not int:
        raise SnapshotError(f"expected an integer, found {type(value).__name__}")
    return value
