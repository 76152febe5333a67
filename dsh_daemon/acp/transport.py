"""NDJSON transport: one JSON-RPC message per line, UTF-8, no embedded newlines.

Reading happens in a thread (stdin may be a pipe, a file or a terminal), line by line with a cap: a
line longer than `MAX_LINE_BYTES` is skipped whole and reported as an invalid request; a line nested
deeper than `MAX_DEPTH` is refused before it is decoded. Each line is
classified into a frozen value (`Request`, `Notification`, `Response`, `Malformed`); nothing here
knows any method.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
from dataclasses import dataclass
from typing import Any, BinaryIO, TypeAlias

from dsh_daemon.acp.errors import INVALID_REQUEST, PARSE_ERROR
from dsh_daemon.host.outbox import HeldMessages, Mergeable, ReadPosition, unread_probe
from dsh_daemon.model.jsondepth import (
    TooDeepError,
    UnusableNumberError,
    loads_message,
    top_level_member,
)

logger = logging.getLogger(__name__)

MAX_LINE_BYTES = 64 * 1024 * 1024
RequestId: TypeAlias = int | str
TOO_LONG = b"\x00too-long"  # what the reader hands over for a line past the cap


@dataclass(frozen=True)
class Request:
    id: RequestId
    method: str
    params: Any


@dataclass(frozen=True)
class Notification:
    method: str
    params: Any


@dataclass(frozen=True)
class Response:
    id: RequestId
    result: Any = None
    error: Any = None


@dataclass(frozen=True)
class Malformed:
    """A line that is not a JSON-RPC message: answered with `code` (id null unless it had a usable one)."""

    code: int
    message: str
    id: RequestId | None = None


Incoming: TypeAlias = Request | Notification | Response | Malformed


def _valid_id(value: Any) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)) or isinstance(value, str)


def decode(line: bytes) -> Incoming | None:
    """One line as a message; None for a blank line."""
    if not line.strip():
        return None
    if line == TOO_LONG:
        return Malformed(INVALID_REQUEST, f"line longer than {MAX_LINE_BYTES} bytes")
    try:
        # depth bounded before decoding: deep nesting would exhaust the stack (model/jsondepth.py)
        obj = loads_message(line, line.decode("utf-8"))
    except (TooDeepError, UnusableNumberError) as exc:
        return _unusable(line, exc)
    except (UnicodeDecodeError, ValueError) as exc:
        return Malformed(PARSE_ERROR, f"parse error: {exc}")
    if not isinstance(obj, dict):
        return Malformed(INVALID_REQUEST, "a message must be a JSON object (batches are not supported)")
    raw_id = obj.get("id")
    usable_id = raw_id if _valid_id(raw_id) else None
    if obj.get("jsonrpc") != "2.0":
        return Malformed(INVALID_REQUEST, "'jsonrpc' must be \"2.0\"", usable_id)
    if "id" in obj and raw_id is not None and not _valid_id(raw_id):
        return Malformed(INVALID_REQUEST, "'id' must be a string or an integer")
    method = obj.get("method")
    if method is not None:
        if not isinstance(method, str):
            return Malformed(INVALID_REQUEST, "'method' must be a string", usable_id)
        if "result" in obj or "error" in obj:
            return Malformed(
                INVALID_REQUEST, "a message cannot hold both 'method' and 'result'/'error'", usable_id
            )
        params = obj.get("params")
        if params is not None and not isinstance(params, dict | list):
            return Malformed(INVALID_REQUEST, "'params' must be an object or an array", usable_id)
        if "id" in obj and raw_id is not None:
            return Request(raw_id, method, params)
        return Notification(method, params)
    if usable_id is not None and ("result" in obj or "error" in obj):
        return Response(usable_id, obj.get("result"), obj.get("error"))
    return Malformed(INVALID_REQUEST, "neither a request, a notification nor a response", usable_id)


def _unusable(line: bytes, exc: ValueError) -> Malformed | None:
    """A line nested deeper than MAX_DEPTH, or holding a number Python will not decode: a request is
    refused with its own id (found without decoding the rest), a notification or a response is
    dropped, anything else answered id null."""
    raw_id = top_level_member(line, "id")
    method = top_level_member(line, "method")
    message = f"invalid request: {exc}"
    if isinstance(method, str) and _valid_id(raw_id):
        return Malformed(INVALID_REQUEST, message, raw_id)
    if isinstance(method, str) or _valid_id(raw_id):
        kind = "notification" if isinstance(method, str) else "response"
        logger.warning("a %s dropped: %s", kind, exc)
        return None
    return Malformed(INVALID_REQUEST, message)


def encode(message: dict[str, Any]) -> bytes:
    """One line. JSON escapes every newline inside strings, so the only newline is the terminator; a
    string holding a lone surrogate is written with ASCII escapes rather than failing."""
    text = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        data = json.dumps(message, ensure_ascii=True, separators=(",", ":")).encode("ascii")
    return data + b"\n"


class LineReader:
    """Lines of a binary stream, read in a daemon thread and handed to the event loop.

    The thread reads the file descriptor with `os.read`, never through a buffered file object: a
    daemon thread blocked inside `BufferedReader.readline` holds the reader's lock, and an
    interpreter that exits while it does aborts ("could not acquire lock ... at interpreter
    shutdown", SIGABRT). Each chunk is searched for newlines on its own, so reading stays linear in
    the line's size; a line longer than `max_line` is dropped as it arrives (`TOO_LONG`)."""

    def __init__(self, stream: BinaryIO, max_line: int = MAX_LINE_BYTES) -> None:
        self._fd = stream.fileno()
        self._max = max_line
        self._queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._loop = asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._run, name="acp-stdin", daemon=True)
        self._thread.start()

    def _put(self, item: bytes | None) -> None:
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, item)
        except RuntimeError:  # the loop is gone: nobody is listening any more
            pass

    def _run(self) -> None:
        pending: list[bytes] = []
        size = 0
        skipping = False  # inside a line already longer than the cap
        try:
            while True:
                try:
                    chunk = os.read(self._fd, 1 << 16)
                except InterruptedError:
                    continue
                if not chunk:
                    break
                start = 0
                while start < len(chunk):
                    at = chunk.find(b"\n", start)
                    stop = len(chunk) if at < 0 else at + 1
                    if not skipping:
                        pending.append(chunk[start:stop])
                        size += stop - start
                        if size - (at >= 0) > self._max:
                            pending, size, skipping = [], 0, True
                    if at >= 0:
                        if skipping:
                            self._put(TOO_LONG)
                        else:
                            self._put(b"".join(pending))
                        pending, size, skipping = [], 0, False
                    start = stop
            if pending and not skipping:
                self._put(b"".join(pending))  # a last line without its newline
        except OSError:
            pass
        finally:
            self._put(None)

    def stop(self) -> None:
        """End reading as if stdin had closed (SIGTERM, SIGINT)."""
        self._queue.put_nowait(None)

    async def next(self) -> bytes | None:
        """The next line (newline included), or None at end of input."""
        return await self._queue.get()


class LineWriter:
    """Writes whole lines to a binary stream; a lost client turns every later write into a no-op.

    Live text chunks and command output come through `send_mergeable`: while the client has not
    read what was written before, they are held and merged (`host/outbox.py`); any other message
    first releases them, so nothing overtakes a held chunk."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self.closed = False
        try:
            probe = unread_probe(stream.fileno())
        except (OSError, ValueError, AttributeError):  # no descriptor (a test's stream)
            probe = None
        self.position = ReadPosition(probe)
        self.held = HeldMessages(self._write_streamed, self.position.behind)

    def write(self, message: dict[str, Any]) -> None:
        if self.closed:
            return
        if self.held.pending:
            self._write_streamed(self.held.release())  # held chunks first: nothing overtakes them
        self._write(encode(message))

    def send_mergeable(self, message: Mergeable) -> None:
        if self.closed:
            return
        if not self.held.offer(message):
            self._write_streamed(message.encode())

    def flush_held(self) -> None:
        """Held messages leave now (the process is about to end)."""
        if self.held.pending:
            self._write_streamed(self.held.release())

    def _write_streamed(self, data: bytes) -> None:
        self._write(data)
        end = self.position.written
        try:  # it counts once this pass of the loop is over: the messages one pass makes all leave
            asyncio.get_running_loop().call_soon(self._set_mark, end)
        except RuntimeError:
            self._set_mark(end)

    def _set_mark(self, end: int) -> None:
        self.position.mark = max(self.position.mark, end)

    def _write(self, data: bytes) -> None:
        if self.closed:
            return
        try:
            self._stream.write(data)
            self._stream.flush()
            self.position.written += len(data)
        except (BrokenPipeError, OSError, ValueError):
            self.closed = True


class MergeableUpdate:
    """A live `session/update` that may merge with the next one: consecutive `agent_message_chunk`s
    (or `agent_thought_chunk`s) of a session join their texts; consecutive live-output
    `tool_call_update`s of one call keep only the later (its `content` replaces the earlier's)."""

    __slots__ = ("_key", "_pieces", "_update", "session_id")

    def __init__(self, session_id: str, update: dict[str, Any]) -> None:
        self.session_id = session_id
        self._update = update
        self._pieces: list[str] = []
        kind = update.get("sessionUpdate")
        if kind == "tool_call_update":
            self._key: tuple[Any, ...] | None = (kind, update.get("toolCallId"), tuple(update))
        elif kind in ("agent_message_chunk", "agent_thought_chunk") and _text_of(update) is not None:
            self._key = (kind,)
        else:
            self._key = None  # held in its turn, never merged

    def absorb(self, later: Mergeable) -> bool:
        if (
            not isinstance(later, MergeableUpdate)
            or self._key is None
            or later._key != self._key
            or later.session_id != self.session_id
        ):
            return False
        if self._key[0] == "tool_call_update":
            self._update, self._pieces = later._update, []
        else:
            self._pieces.append(_text_of(later._update) or "")
            self._pieces.extend(later._pieces)
        return True

    def encode(self) -> bytes:
        update = self._update
        if self._pieces:
            text = (_text_of(update) or "") + "".join(self._pieces)
            update = {**update, "content": {**update["content"], "text": text}}
        params = {"sessionId": self.session_id, "update": update}
        return encode({"jsonrpc": "2.0", "method": "session/update", "params": params})


def _text_of(update: dict[str, Any]) -> str | None:
    content = update.get("content")
    if isinstance(content, dict) and content.get("type") == "text" and set(content) == {"type", "text"}:
        text = content.get("text")
        return text if isinstance(text, str) else None
    return None
