"""One event vocabulary for the durable log and the live stream.

An `Event` is a value. Durable events carry `seq` (contiguous from 0 per session) and `time` (ms since
the epoch); live events carry neither. The server forwards both kinds unchanged as `dsh/event`.
"""

from __future__ import annotations

from collections.abc import Callable

from dsh_daemon.model.errors import ModelError
from dsh_daemon.model.jsonvalue import FrozenDict, loads

TYPE_CHECKING = False  # `typing` is not imported at run time: `dsh-daemon sessions` loads this module
if TYPE_CHECKING:
    from typing import Any

_UNPARSED: Any = FrozenDict({"__unparsed__": True})  # a sentinel only `Event.stored` uses


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
REWIND_FILES = "rewind/files"
CONVERSATION_CUT = "conversation/cut"
SESSION_MODE = "session/mode"  # written ignorable: an older daemon loads the log and skips it
SESSION_NOTICE = "session/notice"  # written ignorable, as session/mode
SESSION_SETTINGS = "session/settings"  # written ignorable, as session/mode
SANDBOX_WIDENED = "sandbox/widened"  # written ignorable: a widening the person granted
PLAN_UPDATED = "plan/updated"  # written ignorable, as session/mode
PROCESS_STARTED = "process/started"  # written ignorable: a background process (tools/processes.py)
PROCESS_EXITED = "process/exited"  # written ignorable, as process/started
TURN_REVIEW = "turn/review"  # written ignorable: the person kept or undid a turn's hunks (host/turndiff.py)
REVIEW_FINDING = "review/finding"  # written ignorable, as plan/updated: one finding of a review
REVIEW_COMPLETED = "review/completed"  # written ignorable: a review turn's end, its findings counted
REVIEW_DISMISSED = "review/dismissed"  # written ignorable: the person dismissed a finding
LOG_GAP = "log/gap"  # a seq a crashed driver may have sent but never stored (session/gaps.py)
SUBAGENT_STARTED = "subagent/started"  # written ignorable: a child session started (dsh_daemon/subagents)
SUBAGENT_FINISHED = "subagent/finished"  # written ignorable, as subagent/started

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
        REWIND_FILES,
        CONVERSATION_CUT,
        SESSION_MODE,
        SESSION_NOTICE,
        SESSION_SETTINGS,
        SANDBOX_WIDENED,
        PLAN_UPDATED,
        PROCESS_STARTED,
        PROCESS_EXITED,
        TURN_REVIEW,
        REVIEW_FINDING,
        REVIEW_COMPLETED,
        REVIEW_DISMISSED,
        LOG_GAP,
        SUBAGENT_STARTED,
        SUBAGENT_FINISHED,
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
# live, from the host and the front ends rather than the agent
SESSION_LEASE = "session/lease"  # who drives a session followed read-only
SESSION_HANDOVER = "session/handover"  # another process asks the driver here to let a session go
PERMISSION_REQUESTED = "permission/requested"
PERMISSION_RESOLVED = "permission/resolved"
MCP_STATUS = "mcp/status"
SANDBOX_STATUS = "sandbox/status"  # the session's commands: mode and level reached (when it changes)
HOOK_FAILED = "hook/failed"  # a configured hook failed (once per hook per session)
HOOKS_UNTRUSTED = "hooks/untrusted"  # the project's hooks wait for the person's trust
TURN_DIFF = "turn/diff"  # the files a turn changed so far (derived from the checkpoints)
SUBAGENT_EVENT = "subagent/event"  # one event of a child session, on its parent's stream


class UnreadableEventError(ModelError):
    """A stored event whose JSON cannot be read (found when its data is first used)."""


class Event:
    """`type`, `data` (a frozen JSON object), and for durable events `seq`, `time`, `ignorable`.

    An event loaded from the store may keep its data as the stored JSON text until `data` is first
    read (`Event.stored`): opening a long session parses only what derivation, the inbox and repair
    look at (not, say, every streamed chunk), which is most of the cost of a resume."""

    __slots__ = ("_data", "_raw", "ignorable", "seq", "time", "type")

    type: str
    seq: int | None
    time: int | None
    ignorable: bool
    _data: FrozenDict
    _raw: str | None

    def __init__(
        self,
        type: str,
        data: FrozenDict,
        seq: int | None = None,
        time: int | None = None,
        ignorable: bool = False,
    ) -> None:
        # the slots' own setters (below the class): one live event per streamed delta, and
        # object.__setattr__'s lookup by name cost half of making one
        _SET_TYPE(self, type)
        _SET_DATA(self, data)
        _SET_RAW(self, None)
        _SET_SEQ(self, seq)
        _SET_TIME(self, time)
        _SET_IGNORABLE(self, ignorable)

    @classmethod
    def stored(cls, type: str, raw: str, seq: int, time: int, ignorable: bool = False) -> Event:
        """An event read from the store whose data is parsed from `raw` on first use."""
        event = _new_event(cls)
        _SET_TYPE(event, type)
        _SET_DATA(event, _UNPARSED)
        _SET_RAW(event, raw)
        _SET_SEQ(event, seq)
        _SET_TIME(event, time)
        _SET_IGNORABLE(event, ignorable)
        return event

    @property
    def data(self) -> FrozenDict:
        if self._data is _UNPARSED:
            where = f"stored event {self.type!r} at seq {self.seq}"
            try:
                parsed = loads(self._raw or "")
            except ValueError as exc:
                raise UnreadableEventError(f"unreadable {where}: {exc}") from None
            if not isinstance(parsed, FrozenDict):
                raise UnreadableEventError(f"{where} is not a JSON object")
            object.__setattr__(self, "_data", parsed)
            object.__setattr__(self, "_raw", None)
        return self._data

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Event is immutable (cannot set {name!r})")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"Event is immutable (cannot delete {name!r})")

    def _key(self) -> tuple[object, ...]:
        return (self.type, self.data, self.seq, self.time, self.ignorable)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not Event:
            return NotImplemented
        assert isinstance(other, Event)
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (
            f"Event(type={self.type!r}, data={self.data!r}, seq={self.seq!r}, time={self.time!r}, "
            f"ignorable={self.ignorable!r})"
        )

    @property
    def durable(self) -> bool:
        return self.seq is not None


# The slots' own setters: how `Event.stored` fills a new event without going through `__setattr__`
# (which refuses) or `__init__` (a resume builds one event per stored row), and `__init__` fills one.
_new_event = object.__new__
_SLOTS: dict[str, Any] = {name: vars(Event)[name] for name in Event.__slots__}
_SET_TYPE = _SLOTS["type"].__set__
_SET_DATA = _SLOTS["_data"].__set__
_SET_RAW = _SLOTS["_raw"].__set__
_SET_SEQ = _SLOTS["seq"].__set__
_SET_TIME = _SLOTS["time"].__set__
_SET_IGNORABLE = _SLOTS["ignorable"].__set__

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
                # (logging is imported here, not with the module: `dsh-daemon sessions` reads the
                # event type names and nothing else of it)
                import logging

                logging.getLogger(__name__).exception("event subscriber failed on %s", event.type)
