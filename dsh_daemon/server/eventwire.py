"""The `dsh/event` notification, framed and written directly.

Events are most of what the daemon sends (one per streamed delta), and their params are already
JSON values (frozen dicts and tuples): encoding them once with `json.dumps` and writing the frame
skips pygls' per-message conversion (message-type lookup, cattrs unstructuring, a `default=` hook
called for every value), which cost more than the rest of a delta's path. Frames go through the
protocol's own writer, so they interleave with pygls' replies in exactly the order they were made.

`assistant/delta` (text, reasoning, a tool call's arguments) and `tool/output` go to the writer as
mergeable messages: while the client has not read what came before, consecutive ones of the same
block are merged into one notification (`host/outbox.py`). A merged `assistant/delta` carries the
first one's `offset` and the joined text, so offsets stay exact: only deltas whose offsets are
contiguous are merged, and the next notification's offset is this one's plus its text's length.
When nothing would hold it (the client keeps up, no window), a text or reasoning delta's frame is
filled into the message's fixed shape, encoding only its two strings: the same bytes as the general
encoder, without a held message made and read once per delta.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from json.encoder import encode_basestring
from typing import Any

from pygls.protocol import JsonRPCProtocol

from dsh_daemon.model.events import ASSISTANT_DELTA, TOOL_OUTPUT
from dsh_daemon.server.stdout import CoalescingWriter

logger = logging.getLogger(__name__)

_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_ASCII_ENCODER = json.JSONEncoder(ensure_ascii=True, separators=(",", ":"), allow_nan=False)
# The members a delta may have to be merged: a tool call's first delta (with its id and name) starts
# its block, so it may take the deltas after it but is never merged into one before it.
_TEXT_DELTA = frozenset({"type", "text"})
_ARGUMENTS_DELTA = frozenset({"type", "index", "arguments"})
_FIRST_ARGUMENTS_DELTA = frozenset({"type", "index", "id", "name", "arguments"})
_OUTPUT = frozenset({"turn", "step", "callId", "text"})
_DELTA_DATA = frozenset({"turn", "step", "offset", "delta"})


def send_event(protocol: JsonRPCProtocol, params: Mapping[str, Any]) -> None:
    """Write one `dsh/event` notification; falls back to pygls for anything unusual."""
    writer = protocol.writer
    if writer is None:
        return
    if isinstance(writer, CoalescingWriter):
        if params.get("type") == ASSISTANT_DELTA and not writer.held.would_hold():
            frame = _text_delta_frame(params)
            if frame is not None:  # the common case: written as it comes, no held message made
                writer.write_streamed(frame)
                return
        message = _mergeable(params)
        if message is not None:
            writer.send_mergeable(message)
            return
    try:
        body = _ENCODER.encode({"jsonrpc": "2.0", "method": "dsh/event", "params": params}).encode("utf-8")
    except (TypeError, ValueError):  # not plain JSON after all (or a lone surrogate): the slow, safe way
        protocol.notify("dsh/event", params)
        return
    writer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)


def _utf16_units(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-16-le")) // 2


def _frame(params: Mapping[str, Any]) -> bytes:
    message = {"jsonrpc": "2.0", "method": "dsh/event", "params": params}
    try:
        body = _ENCODER.encode(message).encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: escaped, as the slow path would
        body = _ASCII_ENCODER.encode(message).encode("ascii")
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def _text_delta_frame(params: Mapping[str, Any]) -> bytes | None:
    """The frame `_frame` makes of a live text or reasoning `assistant/delta` as `deliver` builds it,
    filled into the message's fixed shape with only the two strings encoded; None for anything else
    (a tool-call delta, a stored event, a lone surrogate): those take the general way."""
    data = params.get("data")
    session = params.get("sessionId")
    if len(params) != 3 or not isinstance(data, Mapping) or type(session) is not str or len(data) != 4:
        return None
    turn, step, offset, delta = data.get("turn"), data.get("step"), data.get("offset"), data.get("delta")
    if type(turn) is not int or type(step) is not int or type(offset) is not int:
        return None
    if not isinstance(delta, Mapping) or len(delta) != 2:
        return None
    kind, text = delta.get("type"), delta.get("text")
    if (kind != "text" and kind != "reasoning") or type(text) is not str:
        return None
    try:
        body = (
            f'{{"jsonrpc":"2.0","method":"dsh/event","params":{{"sessionId":{encode_basestring(session)},'
            f'"type":"assistant/delta","data":{{"turn":{turn},"step":{step},"offset":{offset},'
            f'"delta":{{"type":"{kind}","text":{encode_basestring(text)}}}}}}}}}'
        ).encode()
    except UnicodeEncodeError:  # a lone surrogate: `_frame` escapes it
        return None
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


class _HeldText:
    """Consecutive `assistant/delta`s of one block, or `tool/output`s of one call, as one event:
    the first one's members with the pieces' texts joined."""

    __slots__ = ("_end", "_first", "_key", "_params", "_pieces", "_text_key")

    def __init__(
        self, params: Mapping[str, Any], key: tuple[Any, ...], text_key: str, end: int, *, first: bool = False
    ) -> None:
        self._params = params
        self._first = first  # it starts its block: never merged into a held one
        self._key = key
        self._text_key = text_key  # the member of the delta (or of data) that holds the text
        self._pieces: list[str] = []
        self._end = end  # where the next delta of the block starts (-1: not counted, tool output)

    def absorb(self, later: Any) -> bool:
        if not isinstance(later, _HeldText) or later._first or later._key != self._key:
            return False
        if later._start != self._end:
            return False
        self._pieces.append(later._text)
        self._pieces.extend(later._pieces)
        self._end = later._end
        return True

    @property
    def _start(self) -> int:
        if self._end < 0:
            return -1
        return int(self._params["data"]["offset"])

    @property
    def _text(self) -> str:
        data = self._params["data"]
        inner = data["delta"] if "delta" in data else data
        return str(inner[self._text_key])

    def encode(self) -> bytes:
        if not self._pieces:
            return _frame(self._params)
        text = self._text + "".join(self._pieces)
        data = dict(self._params["data"])
        if "delta" in data:
            data["delta"] = {**data["delta"], self._text_key: text}
        else:
            data[self._text_key] = text
        return _frame({**self._params, "data": data})


def _mergeable(params: Mapping[str, Any]) -> _HeldText | None:
    """`params` as a mergeable message, when it is a live delta or a piece of command output."""
    kind = params.get("type")
    data = params.get("data")
    if "seq" in params or not isinstance(data, Mapping):
        return None
    session = params.get("sessionId")
    if kind == ASSISTANT_DELTA:
        delta = data.get("delta")
        offset = data.get("offset")
        if not isinstance(delta, Mapping) or not isinstance(offset, int) or data.keys() != _DELTA_DATA:
            return None
        members = delta.keys()
        first = False
        if members == _TEXT_DELTA and delta["type"] in ("text", "reasoning"):
            text_key, block = "text", delta["type"]
        elif _ARGUMENTS_DELTA <= members <= _FIRST_ARGUMENTS_DELTA and delta["type"] == "tool-call":
            text_key, block = "arguments", ("tool-call", delta["index"])
            first = members != _ARGUMENTS_DELTA
        else:
            return None
        text = delta[text_key]
        if not isinstance(text, str):
            return None
        key = (session, ASSISTANT_DELTA, data["turn"], data["step"], block)
        return _HeldText(params, key, text_key, offset + _utf16_units(text), first=first)
    if kind == TOOL_OUTPUT and data.keys() == _OUTPUT and isinstance(data["text"], str):
        key = (session, TOOL_OUTPUT, data["turn"], data["step"], data["callId"])
        return _HeldText(params, key, "text", -1)
    return None
