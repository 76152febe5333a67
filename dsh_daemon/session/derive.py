"""Model history derived from the log. Every model request must equal a fresh derivation (D7).

`Derivation` folds events one at a time, so the loop can keep one up to date as it appends and a
checker can rebuild every request from scratch with the same code.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from dsh_daemon.agent import compaction
from dsh_daemon.agent.events import (
    ASSISTANT_MESSAGE,
    CONTEXT_COMPACTED,
    CONTEXT_USAGE,
    LLM_REQUEST,
    REQUEST_HEADER,
    STEP_START,
    TOOL_RESULT,
    TURN_START,
    USER_MESSAGE,
    Event,
)
from dsh_daemon.agent.messages import AssistantMessage, Message, UserMessage
from dsh_daemon.agent.provider import ModelRequest, ToolSpec
from dsh_daemon.jsonvalue import FrozenDict


class Derivation:
    """The history as the next request would carry it. Each message is kept with its position (the seq
    of the event that entered it) so compaction can cut it: after `context/compacted`, the history is
    the summary message (at position `keptFromSeq`) and every message at or after that seq."""

    def __init__(self) -> None:
        self.entries: list[tuple[int, Message]] = []
        self.header: FrozenDict | None = None
        self.requests: list[ModelRequest] = []
        self.context_used: int | None = None  # the last request's input tokens (`context/usage`)
        self.cuts: list[int] = []  # seqs of turn/start and step/start after the last kept tail began
        self.turn_starts: list[int] = []
        self.summary: Message | None = None  # the last compaction's summary message

    @property
    def messages(self) -> list[Message]:
        return [message for _, message in self.entries]

    def feed(self, event: Event) -> None:
        kind = event.type
        seq = -1 if event.seq is None else event.seq
        if kind == USER_MESSAGE:
            self.entries.append((seq, UserMessage.from_log(event.data)))
        elif kind == TOOL_RESULT:
            self.entries.append((seq, UserMessage.from_log(event.data["message"])))
        elif kind == ASSISTANT_MESSAGE:
            message = AssistantMessage.from_log(event.data["message"])
            if not message.is_empty:  # empty anchors are logged but never shown to the model
                self.entries.append((seq, message))
        elif kind == REQUEST_HEADER:
            self.header = event.data["header"]
        elif kind == LLM_REQUEST:
            if event.data.get("purpose") == compaction.PURPOSE:
                self.requests.append(self.compaction_request(event.data))
            else:
                self.requests.append(self.request())
        elif kind == CONTEXT_USAGE:
            self.context_used = int(event.data["used"])
        elif kind in (TURN_START, STEP_START):
            self.cuts.append(seq)
            if kind == TURN_START:
                self.turn_starts.append(seq)
        elif kind == CONTEXT_COMPACTED:
            kept = int(event.data["keptFromSeq"])
            self.summary = UserMessage.from_log(event.data["message"])
            self.entries = [(kept, self.summary), *((p, m) for p, m in self.entries if p >= kept)]
            self.cuts = [c for c in self.cuts if c > kept]
            self.turn_starts = [t for t in self.turn_starts if t > kept]
            self.context_used = int(event.data["tokensAfter"])

    def request(self) -> ModelRequest:
        if self.header is None:
            raise ValueError("no request/header logged before the request")
        return request_from_header(self.header, tuple(self.messages))

    def compaction_request(self, data: FrozenDict) -> ModelRequest:
        if self.header is None:
            raise ValueError("no request/header logged before the compaction request")
        kept = int(data["keptFromSeq"])
        before = [m for p, m in self.entries if p < kept]
        return compaction.compaction_request(self.header, before, data)


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
    return derivation.requests
