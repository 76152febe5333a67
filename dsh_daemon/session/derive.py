"""Model history derived from the log. Every model request must equal a fresh derivation (D7).

`Derivation` folds events one at a time, so the loop can keep one up to date as it appends and a
checker can rebuild every request from scratch with the same code.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from dsh_daemon.agent.events import (
    ASSISTANT_MESSAGE,
    CONTEXT_USAGE,
    LLM_REQUEST,
    REQUEST_HEADER,
    TOOL_RESULT,
    USER_MESSAGE,
    Event,
)
from dsh_daemon.agent.messages import AssistantMessage, Message, UserMessage
from dsh_daemon.agent.provider import ModelRequest, ToolSpec
from dsh_daemon.jsonvalue import FrozenDict


class Derivation:
    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.header: FrozenDict | None = None
        self.requests: list[ModelRequest] = []
        self.context_used: int | None = None  # the last request's input tokens (`context/usage`)

    def feed(self, event: Event) -> None:
        kind = event.type
        if kind == USER_MESSAGE:
            self.messages.append(UserMessage.from_log(event.data))
        elif kind == TOOL_RESULT:
            self.messages.append(UserMessage.from_log(event.data["message"]))
        elif kind == ASSISTANT_MESSAGE:
            message = AssistantMessage.from_log(event.data["message"])
            if not message.is_empty:  # empty anchors are logged but never shown to the model
                self.messages.append(message)
        elif kind == REQUEST_HEADER:
            self.header = event.data["header"]
        elif kind == LLM_REQUEST:
            self.requests.append(self.request())
        elif kind == CONTEXT_USAGE:
            self.context_used = int(event.data["used"])

    def request(self) -> ModelRequest:
        if self.header is None:
            raise ValueError("no request/header logged before the request")
        return request_from_header(self.header, tuple(self.messages))


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
