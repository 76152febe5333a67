"""A session's events as the in-memory log holds them: the older part read from the store only when
something asks for it.

A resume from a derived-state snapshot (`agent/snapshot.py`) needs only the events after the snapshot;
building an object per stored row of a long session's prefix was most of the cost of opening it
(issue 20.3). So the events before `base` stay on disk until first read (attach replay from an old
seq, a transcript page, a fork, a rewind), then are loaded once, checked like any load, and kept.

Invariant: the prefix is immutable — the log is append-only and this process holds the lease — so
reading it late gives exactly the rows it would have read at open; seqs stay contiguous from 0 across
the prefix and the in-memory tail, and appends (and an undone append) touch the tail only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import overload

from dsh_daemon.model.events import Event


class LogEvents(Sequence[Event]):
    def __init__(
        self,
        tail: list[Event] | None = None,
        *,
        base: int = 0,
        load_prefix: Callable[[], list[Event]] | None = None,
        last_stored: Callable[[str, int], Event | None] | None = None,
        read_backward: Callable[[int], Iterator[Event]] | None = None,
    ) -> None:
        """`tail`: the events from seq `base` on; `load_prefix()` returns the events with seq < `base`
        (required when `base` > 0); `last_stored(type, below)`: the last stored event of a type with
        seq < `below`, read without loading the prefix (None: load it and scan); `read_backward(seq)`:
        the stored events from `seq` down to 0, newest first, read lazily (a transcript page reads
        the newest turns only)."""
        if base and load_prefix is None:
            raise ValueError("a log that starts after seq 0 needs a way to read its prefix")
        self._tail: list[Event] = [] if tail is None else tail
        self._base = base
        self._prefix: list[Event] | None = [] if base == 0 else None
        self._load_prefix = load_prefix
        self._last_stored = last_stored
        self._read_backward = read_backward

    @property
    def base(self) -> int:
        """The seq of the first event held in memory from the start (0: all of them are)."""
        return self._base

    @property
    def prefix_loaded(self) -> bool:
        return self._prefix is not None

    def prefix(self) -> list[Event]:
        if self._prefix is None:
            assert self._load_prefix is not None
            events = self._load_prefix()
            if len(events) != self._base or (events and events[-1].seq != self._base - 1):
                raise ValueError(f"the log's first {self._base} events read back as {len(events)}")
            self._prefix = events
        return self._prefix

    def tail(self) -> list[Event]:
        """The events from `base` on (the list itself: do not change it)."""
        return self._tail

    # ---- the list a log appends to -------------------------------------------------------------------

    def append(self, event: Event) -> None:
        self._tail.append(event)

    def pop(self) -> Event:
        if not self._tail:
            raise IndexError("only events appended in this process can be taken back")
        return self._tail.pop()

    # ---- reading -------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return self._base + len(self._tail)

    @overload
    def __getitem__(self, index: int) -> Event: ...
    @overload
    def __getitem__(self, index: slice) -> list[Event]: ...
    def __getitem__(self, index: int | slice) -> Event | list[Event]:
        size = len(self)
        if isinstance(index, slice):
            start, stop, step = index.indices(size)
            if step == 1 and start >= self._base:
                return self._tail[start - self._base : max(start, stop) - self._base]
            return [*self.prefix(), *self._tail][index]
        position = index + size if index < 0 else index
        if not 0 <= position < size:
            raise IndexError(index)
        if position >= self._base:
            return self._tail[position - self._base]
        return self.prefix()[position]

    def __iter__(self) -> Iterator[Event]:
        if self._base:
            yield from self.prefix()
        yield from self._tail

    def __reversed__(self) -> Iterator[Event]:
        yield from reversed(self._tail)
        if not self._base:
            return
        if self._prefix is None and self._read_backward is not None:
            yield from self._read_backward(self._base - 1)
        else:
            yield from reversed(self.prefix())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LogEvents | list | tuple):
            return len(self) == len(other) and list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def last_of(self, *types: str) -> Event | None:
        """The newest event of one of `types`, reading the prefix only as far as needed."""
        for event in reversed(self._tail):
            if event.type in types:
                return event
        if not self._base:
            return None
        if self._prefix is None and self._last_stored is not None:
            found = [e for e in (self._last_stored(t, self._base) for t in types) if e is not None]
            return max(found, key=lambda e: e.seq or 0, default=None)
        for event in reversed(self.prefix()):
            if event.type in types:
                return event
        return None


def last_of(events: Sequence[Event], *types: str) -> Event | None:
    """The newest event of one of `types` in `events` (a `LogEvents` reads its prefix only if needed)."""
    if isinstance(events, LogEvents):
        return events.last_of(*types)
    return next((e for e in reversed(events) if e.type in types), None)
