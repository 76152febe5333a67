"""Model history derived from the log. Every model request must equal a fresh derivation (D7).

`Derivation` folds events one at a time, so the loop can keep one up to date as it appends and a
checker can rebuild every request from scratch with the same code.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, overload

from dsh_daemon.agent import compaction
from dsh_daemon.model.events import (
    ASSISTANT_MESSAGE,
    CONTEXT_COMPACTED,
    CONTEXT_USAGE,
    CONVERSATION_CUT,
    LLM_REQUEST,
    REQUEST_HEADER,
    STEP_START,
    TOOL_RESULT,
    TURN_START,
    USER_MESSAGE,
    Event,
)
from dsh_daemon.model.jsonvalue import FrozenDict
from dsh_daemon.model.messages import AssistantMessage, Message, UserMessage
from dsh_daemon.model.payloads import (
    AssistantMessageLogged,
    ContextCompacted,
    ContextUsage,
    ConversationCut,
    LlmRequested,
    ToolResulted,
)
from dsh_daemon.model.provider import ModelRequest, ToolSpec


class TurnMark:
    """The history as it stood when a turn began, kept cheaply: the lists only grow until compaction
    or a cut replaces them (with new lists), so a list and its length at that moment are that state."""

    __slots__ = ("context_used", "cuts", "entries", "summary", "turn_starts")

    def __init__(
        self,
        entries: tuple[list[tuple[int, Message]], int],
        cuts: tuple[list[int], int],
        turn_starts: tuple[list[int], int],
        summary: Message | None,
        context_used: int | None,
    ) -> None:
        self.entries = entries
        self.cuts = cuts
        self.turn_starts = turn_starts
        self.summary = summary
        self.context_used = context_used

    @classmethod
    def of(cls, derivation: Derivation) -> TurnMark:
        d = derivation
        return cls(
            (d.entries, len(d.entries)),
            (d.cuts, len(d.cuts)),
            (d.turn_starts, len(d.turn_starts)),
            d.summary,
            d.context_used,
        )


class Derivation:
    """The history as the next request would carry it. Each message is kept with its position (the seq
    of the event that entered it) so compaction can cut it: after `context/compacted`, the history is
    the summary message (at position `keptFromSeq`) and every message at or after that seq. After
    `conversation/cut {beforeTurn}` it is the history as it stood when that turn began (a later
    compaction's summary included or not, as it was then)."""

    def __init__(self) -> None:
        self.entries: list[tuple[int, Message]] = []
        self.header: FrozenDict | None = None
        self.requests = LoggedRequests()
        self.context_used: int | None = None  # the last request's input tokens (`context/usage`)
        self.cuts: list[int] = []  # seqs of turn/start and step/start after the last kept tail began
        self.turn_starts: list[int] = []
        self.summary: Message | None = None  # the last compaction's summary message
        self.marks: dict[int, TurnMark] = {}  # turn -> the history when it began (the last such turn)
        # The messages of `_messages_of`'s first entries, kept for the next request: an entries list
        # only grows (a compaction or a cut starts a new one), so a request adds only the messages
        # entered since the last one (issue 40.4: listing 28,000 of them took 3 ms at each step).
        self._messages: list[Message] = []
        self._messages_of: list[tuple[int, Message]] | None = None

    @property
    def messages(self) -> list[Message]:
        return list(self._current_messages())

    def _current_messages(self) -> list[Message]:
        entries, known = self.entries, self._messages
        if self._messages_of is not entries or len(known) > len(entries):
            self._messages_of, known = entries, []
            self._messages = known
        if len(known) < len(entries):
            known.extend([message for _, message in entries[len(known) :]])
        return known

    def feed(self, event: Event) -> None:
        kind = event.type
        seq = -1 if event.seq is None else event.seq
        if kind == USER_MESSAGE:  # the payload is the message itself
            self.entries.append((seq, UserMessage.from_log(event.data)))
        elif kind == TOOL_RESULT:
            self.entries.append((seq, UserMessage.from_log(ToolResulted.of(event).message)))
        elif kind == ASSISTANT_MESSAGE:
            message = AssistantMessage.from_log(AssistantMessageLogged.of(event).message)
            if not message.is_empty:  # empty anchors are logged but never shown to the model
                self.entries.append((seq, message))
        elif kind == REQUEST_HEADER:
            # The header as logged (frozen), so a request rebuilds byte for byte from it.
            self.header = event.data["header"]
        elif kind == LLM_REQUEST:
            # Built when asked for: a resume derives thousands of requests and looks at one or two.
            header, entries, count = self.header, self.entries, len(self.entries)
            if header is None:
                raise ValueError("no request/header logged before the request")
            data = event.data if LlmRequested.of(event).purpose == compaction.PURPOSE else None
            self.requests.add(header, entries, count, data)
        elif kind == CONTEXT_USAGE:
            self.context_used = ContextUsage.of(event).used
        elif kind in (TURN_START, STEP_START):
            if kind == TURN_START:
                self.marks[int(event.data["turn"])] = TurnMark.of(self)
            self.cuts.append(seq)
            if kind == TURN_START:
                self.turn_starts.append(seq)
        elif kind == CONVERSATION_CUT:
            mark = self.marks.get(ConversationCut.of(event).before_turn)
            if mark is not None:  # (the host refuses a cut before a turn that never began)
                # New lists: the old ones stay as the requests logged before the cut saw them.
                self.entries = mark.entries[0][: mark.entries[1]]
                self.cuts = mark.cuts[0][: mark.cuts[1]]
                self.turn_starts = mark.turn_starts[0][: mark.turn_starts[1]]
                self.summary = mark.summary
                self.context_used = mark.context_used
        elif kind == CONTEXT_COMPACTED:
            compacted = ContextCompacted.of(event)
            kept = compacted.kept_from_seq
            self.summary = UserMessage.from_log(compacted.message)
            self.entries = [(kept, self.summary), *((p, m) for p, m in self.entries if p >= kept)]
            self.cuts = [c for c in self.cuts if c > kept]
            self.turn_starts = [t for t in self.turn_starts if t > kept]
            self.context_used = compacted.tokens_after

    def request(self) -> ModelRequest:
        if self.header is None:
            raise ValueError("no request/header logged before the request")
        return request_from_header(self.header, tuple(self._current_messages()))

    def compaction_request(self, data: FrozenDict) -> ModelRequest:
        if self.header is None:
            raise ValueError("no request/header logged before the compaction request")
        return _compaction_request(self.header, self.entries, data)


def _compaction_request(
    header: FrozenDict, entries: list[tuple[int, Message]], data: FrozenDict
) -> ModelRequest:
    kept = int(data["keptFromSeq"])
    return compaction.compaction_request(header, [m for p, m in entries if p < kept], data)


# A logged request as the derivation keeps it: (header, the entries list it saw, that list's length
# then, the `llm/request` data of a compaction request or None for a step request).
RequestSpec = tuple[FrozenDict, list[tuple[int, Message]], int, FrozenDict | None]


class LoggedRequests(Sequence[ModelRequest]):
    """The requests the log says were sent, each rebuilt on first access. A request is the history as
    it stood at its `llm/request`: the entries list is only appended to (compaction starts a new
    one), so a (list, length) pair is that history for good."""

    def __init__(self) -> None:
        self.specs: list[RequestSpec] = []
        self._built: dict[int, ModelRequest] = {}

    def add(
        self, header: FrozenDict, entries: list[tuple[int, Message]], count: int, data: FrozenDict | None
    ) -> None:
        self.specs.append((header, entries, count, data))

    def __len__(self) -> int:
        return len(self.specs)

    @overload
    def __getitem__(self, index: int) -> ModelRequest: ...
    @overload
    def __getitem__(self, index: slice) -> list[ModelRequest]: ...
    def __getitem__(self, index: int | slice) -> ModelRequest | list[ModelRequest]:
        if isinstance(index, slice):
            return [self[i] for i in range(len(self.specs))[index]]
        position = index + len(self.specs) if index < 0 else index
        if not 0 <= position < len(self.specs):
            raise IndexError(index)
        built = self._built.get(position)
        if built is None:
            header, entries, count, data = self.specs[position]
            if data is None:
                built = request_from_header(header, tuple(m for _, m in entries[:count]))
            else:
                built = _compaction_request(header, entries[:count], data)
            self._built[position] = built
        return built


def request_from_header(header: FrozenDict, messages: tuple[Message, ...]) -> ModelRequest:
    tools: Any = header.get("tools", ())
    return ModelRequest(
        config=header["config"],
        system=header.get("system"),
        tools=tuple(ToolSpec(t["name"], t["description"], t["parameters"]) for t in tools),
        messages=messages,
    )


def derive_messages(events: Iterable[Event]) -> list[Message]:
    derivation = Derivation()
    for event in events:
        derivation.feed(event)
    return derivation.messages


def rebuild_requests(events: Iterable[Event]) -> list[ModelRequest]:
    """Every model request the log says was sent (one per `llm/request`), rebuilt from the log alone."""
    derivation = Derivation()
    for event in events:
        derivation.feed(event)
    return list(derivation.requests)
