"""One event vocabulary for the durable log and the live stream.

An `Event` is a value. Durable events carry `seq` (contiguous from 0 per session) and `time` (ms since
the epoch); live events carry neither. The server forwards both kinds unchanged as `dsh/event`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dsh_daemon.jsonvalue import FrozenDict

log = logging.getLogger(__name__)

# durable
INBOX_SPLICED = "agent/inbox/spliced"
TURN_START = "turn/start"
TURN_END = "turn/end"
STEP_START = "step/start"
STEP_END = "step/end"
USER_MESSAGE = "user/message"
REQUEST_HEADER = "request/header"
LLM_REQUEST = "llm/request"
ASSISTANT_CHUNK = "assistant/chunk"
ASSISTANT_MESSAGE = "assistant/message"
TOOL_CALL = "tool/call"
TOOL_RESULT = "tool/result"
LLM_RETRY = "llm/retry"
USAGE = "turn/usage"
SESSION_TITLE = "session/title"
CONTEXT_USAGE = "context/usage"
CONTEXT_COMPACTED = "context/compacted"

DURABLE_TYPES = frozenset(
    {
        INBOX_SPLICED,
        TURN_START,
        TURN_END,
        STEP_START,
        STEP_END,
        USER_MESSAGE,
        REQUEST_HEADER,
        LLM_REQUEST,
        ASSISTANT_CHUNK,
        ASSISTANT_MESSAGE,
        TOOL_CALL,
        TOOL_RESULT,
        LLM_RETRY,
        USAGE,
        SESSION_TITLE,
        CONTEXT_USAGE,
        CONTEXT_COMPACTED,
    }
)

# live only
STATUS = "agent/status"
INBOX_INSERTED = "agent/inbox/inserted"
INBOX_CLAIMED = "agent/inbox/claimed"
INBOX_DISCARDED = "agent/inbox/discarded"
ASSISTANT_DELTA = "assistant/delta"
TOOL_OUTPUT = "tool/output"
AGENT_ERROR = "agent/error"


@dataclass(frozen=True, slots=True)
class Event:
    type: str
    data: FrozenDict
    seq: int | None = None
    time: int | None = None
    ignorable: bool = False

    @property
    def durable(self) -> bool:
        return self.seq is not None

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, "data": self.data}
        if self.seq is not None:
            out["seq"] = self.seq
            out["time"] = self.time
        return out


Subscriber = Callable[[Event], None]


class EventBus:
    """Synchronous fan-out in subscription order. A failing subscriber is logged and cannot disturb
    the loop or the other subscribers."""

    def __init__(self) -> None:
        self._subscribers: list[Subscriber] = []

    def subscribe(self, subscriber: Subscriber) -> Callable[[], None]:
        self._subscribers.append(subscriber)

        def unsubscribe() -> None:
            if subscriber in self._subscribers:
                self._subscribers.remove(subscriber)

        return unsubscribe

    def publish(self, event: Event) -> None:
        for subscriber in tuple(self._subscribers):
            try:
                subscriber(event)
            except Exception:
                log.exception("event subscriber failed on %s", event.type)
