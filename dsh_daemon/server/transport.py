"""The stdio read loop: LSP base-protocol framing that never leaves a request unanswered.

pygls' own loop answers malformed input with a `window/showMessage` and nothing else (the client
waits forever). This loop answers instead:
- a body that is not JSON: `-32700` (id null);
- JSON that is not a request/notification/response object, or a `jsonrpc` other than "2.0": `-32600`
  (with the id when there is one);
- a `Content-Length` over the frame cap (64 MiB): `-32700`, and nothing is read as its body;
- a body that does not start with `{` (or `[`): `-32700`;
- JSON nested deeper than 128 levels: `-32600` (a request with its own id);
- typed LSP params that fail to structure: `-32602` with the request's id;
- a request after `shutdown`: `-32600`;
- an answer (a message with an id and no string `method`) over the answer cap (8 MiB): never
  decoded; the daemon's request it answers fails at once (`AnswerTooLarge`), so a huge answer
  cannot hold the event loop, and with it every session, while it is decoded.
- a message that has both a `method` and a `result`/`error`: `-32600`;
- a request before `initialize` (any method but `initialize`): `-32002` (before its params are looked at);
- a notification method sent as a request (with an id), e.g. `$/cancelRequest`: `-32601`.
Headers are matched case-insensitively. The loop resynchronises after any framing mistake: a header
block without a usable Content-Length is skipped; junk (a CR-only header, garbage without a newline,
the tail of a body whose Content-Length was too small) is skipped up to the next `Content-Length:`;
a body whose Content-Length was too large is cut after its JSON value and the rest is read again as
the next frame's header; a length over the cap, or a body that does not start like a JSON-RPC message,
is skipped up to the next header without waiting for its bytes. A body that is already a complete
JSON object while fewer bytes than its length have come (and the client has gone quiet) is answered at
once: a valid body is one JSON value plus whitespace, so the missing bytes cannot change it. stdin is
read on its own thread, so busy worker threads can never starve the reader.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Callable
from typing import Any

from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.protocol import JsonRPCProtocol

from dsh_daemon.host.errors import lone_surrogate_at, shown
from dsh_daemon.host.preload import proceed, settle
from dsh_daemon.host.startup_gc import collection_paused, resume_collection
from dsh_daemon.model.jsondepth import (
    TooDeepError,
    UnusableNumberError,
    check_depth,
    loads_message,
    top_level_member,
)
from dsh_daemon.model.uris import uri_problem
from dsh_daemon.server import errors
from dsh_daemon.server.codecache import finish_start
from dsh_daemon.server.stdinreader import MARK as _MARK
from dsh_daemon.server.stdinreader import StdinReader as StdinReader
from dsh_daemon.server.stdout import flush_made

logger = logging.getLogger(__name__)

MAX_BODY_BYTES = 64 * 1024 * 1024
# An answer to one of the daemon's own requests (an edit applied, a document saved, diagnostics, a
# language feature, a permission): far below this; decoding one near the frame cap would hold the
# event loop, and every session with it, for seconds.
MAX_ANSWER_BYTES = 8 * 1024 * 1024
QUIET_S = 0.05  # a body still short of its length after this long without bytes is looked at
START_NOTIFICATIONS = frozenset({"initialized"})
_WHITESPACE = b" \t\r\n"
_CONTENT_LENGTH = re.compile(rb"^content-length:[ \t]*(\d+)[ \t]*$", re.IGNORECASE)


class AnswerTooLarge(Exception):
    """The client's answer to a request of the daemon's was over MAX_ANSWER_BYTES: refused unread."""

    def __init__(self, size: int) -> None:
        super().__init__(
            f"the answer is {size:,} bytes, over the cap of {MAX_ANSWER_BYTES:,} bytes for an answer"
        )


def _error(
    protocol: JsonRPCProtocol, msg_id: Any, code: int, message: str, data_code: str | None = None
) -> None:
    error: dict[str, Any] = {"code": code, "message": message}
    if data_code is not None:
        error["data"] = {"code": data_code}
    protocol._send_data({"jsonrpc": "2.0", "id": msg_id, "error": error})


async def read_loop(
    reader: StdinReader,
    protocol: JsonRPCProtocol,
    *,
    is_shut_down: Callable[[], bool],
    is_initialized: Callable[[], bool] = lambda: True,
    first_preloaded_only: frozenset[str] = frozenset(),
) -> None:
    """Read frames until EOF (or until a handler raises SystemExit, i.e. `exit`).
    `first_preloaded_only`: the requests whose handler needs only the preload's first modules."""
    started = False
    while True:
        length: int | None = None
        saw_header = False
        while True:
            line = await reader.readline()
            if not line:
                return
            stripped = line.strip()
            if not stripped:
                if saw_header:
                    break
                continue  # stray blank lines between frames
            match = _CONTENT_LENGTH.match(stripped)
            if match:
                length = int(match.group(1))
                saw_header = True
                continue
            resync = line.lower().rfind(_MARK)
            if resync > 0:
                # Junk in front of a header (a CR-only header, garbage without a newline, the tail of a
                # body whose Content-Length was too small): drop it, parse again from the header.
                logger.warning("%d bytes of junk before a Content-Length header: skipped", resync)
                reader.unread(line[resync:])
                length, saw_header = None, False
                continue
            saw_header = True  # another header (or junk): ignored
        if length is None:
            logger.warning("header block without Content-Length: skipped")
            _error(protocol, None, errors.INVALID_REQUEST, "Invalid Request: missing Content-Length header")
            continue
        if length > MAX_BODY_BYTES:
            # Nothing is read as its body (10^20 bytes would never come): the next header resyncs.
            logger.warning("Content-Length %d over the frame cap: skipped to the next header", length)
            _error(
                protocol,
                None,
                errors.PARSE_ERROR,
                f"Parse error: Content-Length {length} exceeds the frame cap of {MAX_BODY_BYTES} bytes",
            )
            continue
        body = await _read_body(reader, length)
        if body is None:
            return  # EOF inside a body
        if not body:
            logger.warning("a frame body that does not start with '{': skipped to the next header")
            _error(protocol, None, errors.PARSE_ERROR, "Parse error: the frame body is not a JSON object")
            continue
        body = _cut_overrun(body, reader)
        if len(body) > MAX_ANSWER_BYTES and _refused_as_too_large(protocol, body):
            continue
        method = dispatch(
            protocol,
            body,
            is_shut_down=is_shut_down,
            is_initialized=is_initialized,
            first_preloaded_only=first_preloaded_only,
        )
        loop = asyncio.get_running_loop()
        if not started:
            # The first frame is answered: once its reply (whose flush is already scheduled) has left,
            # the start's cached code is written.
            started = True
            loop.call_soon(finish_start)  # server/codecache.py
        if collection_paused() and not _start_frame(method, first_preloaded_only):
            # The start's collection pass (host/startup_gc.py), once its reply has left: not after
            # `initialize`, `initialized` or a first session request, which the client sends in a row
            # (and then waits for), nor while it waits for a reply to them.
            loop.call_soon(resume_collection)


def _refused_as_too_large(protocol: JsonRPCProtocol, body: bytes) -> bool:
    """Whether `body` is an answer (an id, no string `method`: found without decoding the rest) over
    the answer cap, now refused: the request it answers fails with `AnswerTooLarge`; one that answers
    no open request is dropped."""
    if isinstance(top_level_member(body, "method"), str):
        return False  # a request or a notification: the frame cap bounds those
    msg_id = top_level_member(body, "id")
    if not isinstance(msg_id, str | int) or isinstance(msg_id, bool):
        return False  # not an answer the daemon could match: answered as what it is
    future = protocol._request_futures.pop(msg_id, None)
    protocol._result_types.pop(msg_id, None)
    logger.warning("an answer of %d bytes to %r over the answer cap: refused unread", len(body), msg_id)
    if future is not None and not future.done():
        future.set_exception(AnswerTooLarge(len(body)))
    return True


def _start_frame(method: str | None, first_preloaded_only: frozenset[str]) -> bool:
    """A frame a client sends in a row as it starts: the collection pass waits until after them."""
    return method == "initialize" or method in START_NOTIFICATIONS or method in first_preloaded_only


async def _read_body(reader: StdinReader, length: int) -> bytes | None:
    """The body of a frame of `length` bytes; b"" (nothing consumed) when it does not start like a
    JSON-RPC message, which is then junk to resync past; None at EOF. A body whose length is too large
    is cut after its JSON value (`_cut_overrun`), at once when the client has gone quiet with the
    value already complete."""
    if length == 0:
        return b"\x00"  # not JSON: answered as a parse error
    while True:  # the first byte that is not whitespace decides whether this is a body at all
        data = reader.buffered()
        head = data[:length]
        start = len(head) - len(head.lstrip(_WHITESPACE))
        if start < len(head) or len(data) >= length:
            break
        if reader.eof:
            return None
        await reader.more(3600.0)
    if start < length and data[start : start + 1] not in (b"{", b"["):
        return b""
    tried = 0
    size = len(data)
    while size < length:
        if reader.eof:
            return None
        if not await reader.more(QUIET_S) and size > tried and _worth_trying(size, tried):
            tried = size
            end = _complete_value_end(reader.buffered())
            if end is not None:
                logger.warning("a frame body complete %d bytes short of its Content-Length", length - end)
                return _cut_overrun(reader.take(end), reader)
        size = reader.buffered_size  # not a copy each time more arrives: a long body stays linear
    return _cut_overrun(reader.take(length), reader)


def _worth_trying(size: int, tried: int) -> bool:
    """Looking at a long body again only once it has grown by half keeps the looking linear."""
    return size <= 1 << 20 or size >= tried * 3 // 2


def _complete_value_end(data: bytes) -> int | None:
    """Where the JSON value at the start of `data` ends (trailing whitespace included); None while
    it is incomplete. A body is one value plus whitespace, so a complete value at the start is the
    whole message whatever follows it (the next frame, when the length was too large)."""
    text = data.decode("utf-8", "surrogateescape")
    start = len(text) - len(text.lstrip())
    try:
        check_depth(data)
        _, end = json.JSONDecoder().raw_decode(text, start)
    except ValueError:
        return None
    end += len(text[end:]) - len(text[end:].lstrip())
    return len(text[:end].encode("utf-8", "surrogateescape"))


def _cut_overrun(body: bytes, reader: StdinReader) -> bytes:
    """A Content-Length too large swallows the start of the next frame: when the body is not JSON as a
    whole but starts with a complete JSON object, keep that object and put the rest back."""
    stripped = body.rstrip()
    if not stripped.startswith(b"{") or stripped.endswith(b"}"):
        return body  # nothing to cut (or an ordinary parse error, reported as such)
    text = body.decode("utf-8", "surrogateescape")
    start = len(text) - len(text.lstrip())
    try:
        check_depth(body)
        _, end = json.JSONDecoder().raw_decode(text, start)
    except ValueError:  # TooDeepError included: `dispatch` refuses it
        return body
    rest = text[end:].encode("utf-8", "surrogateescape")
    logger.warning("body longer than its JSON value (%d bytes over): read again as the next frame", len(rest))
    reader.unread(rest)
    return text[:end].encode("utf-8", "surrogateescape")


def _has_lone_surrogate(data: object) -> bool:
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


DSH_NOTIFICATIONS = frozenset({"dsh/context/didChange"})
MESSAGE_MEMBERS = ("jsonrpc", "id", "method", "params", "result", "error")


def _notification_method(method: str) -> bool:
    """A method that is a notification by definition (`$/cancelRequest`, `initialized`, `exit`, ...,
    and the daemon's own `dsh/context/didChange`)."""
    from lsprotocol.types import METHOD_TO_TYPES

    if method in DSH_NOTIFICATIONS:
        return True
    entry = METHOD_TO_TYPES.get(method)
    return entry is not None and entry[1] is None


def dispatch(
    protocol: JsonRPCProtocol,
    body: bytes,
    *,
    is_shut_down: Callable[[], bool],
    is_initialized: Callable[[], bool] = lambda: True,
    first_preloaded_only: frozenset[str] = frozenset(),
) -> str | None:
    """Handle one frame's body; its method (None: a response, or no message at all). No import of
    ours runs beside the preload of the session machinery (`host/preload.py`): a request named in
    `first_preloaded_only` waits for the preload's first modules (its handler imports nothing else)
    and is answered at once, before the preload goes on; anything else waits for the whole preload,
    and a reply already made leaves before that wait."""
    try:
        # depth bounded before decoding: deep nesting would exhaust the stack (model/jsondepth.py)
        data = loads_message(body)
    except (TooDeepError, UnusableNumberError) as exc:
        settle()
        _refuse_unusable(protocol, body, exc)
        return None
    except (ValueError, UnicodeDecodeError) as exc:
        settle()
        _error(protocol, None, errors.PARSE_ERROR, f"Parse error: {exc}")
        return None
    method = data.get("method") if isinstance(data, dict) else None
    first_only = (
        isinstance(data, dict)
        and data.get("id") is not None
        and isinstance(method, str)
        and method in first_preloaded_only
    )
    settle(first_only=first_only, before_wait=lambda: flush_made(protocol))
    try:
        _dispatch(protocol, data, body, is_shut_down=is_shut_down, is_initialized=is_initialized)
    finally:
        if first_only:
            flush_made(protocol)  # its answer leaves before the preload takes the interpreter again
            proceed()
    return method if isinstance(method, str) else None


def _dispatch(
    protocol: JsonRPCProtocol,
    data: Any,
    body: bytes,
    *,
    is_shut_down: Callable[[], bool],
    is_initialized: Callable[[], bool],
) -> None:
    if not isinstance(data, dict):
        _error(
            protocol,
            None,
            errors.INVALID_REQUEST,
            "Invalid Request: a message must be a JSON object (batches are not supported)",
        )
        return
    msg_id = data.get("id")
    if msg_id is not None and (not isinstance(msg_id, str | int) or isinstance(msg_id, bool)):
        _error(protocol, None, errors.INVALID_REQUEST, "Invalid Request: 'id' must be a string or an integer")
        return
    if "id" in data and msg_id is None and "method" in data:
        _error(protocol, None, errors.INVALID_REQUEST, "Invalid Request: a request's 'id' cannot be null")
        return
    if any(key not in MESSAGE_MEMBERS for key in data):
        # Members JSON-RPC does not define are ignored (pygls would fail on them as an internal error).
        data = {key: data[key] for key in MESSAGE_MEMBERS if key in data}
    if data.get("jsonrpc") != "2.0":
        _error(protocol, msg_id, errors.INVALID_REQUEST, "Invalid Request: 'jsonrpc' must be \"2.0\"")
        return
    method = data.get("method")
    has_answer = "result" in data or "error" in data
    if "method" in data and has_answer:
        if msg_id is not None:
            _error(
                protocol,
                msg_id,
                errors.INVALID_REQUEST,
                "Invalid Request: a message cannot be a request and a response",
            )
        else:
            logger.warning("notification with a result or error member: dropped")
        return
    is_response = has_answer
    is_request = not is_response and msg_id is not None
    if not is_response:
        if not isinstance(method, str) or not method:
            _error(
                protocol,
                msg_id,
                errors.INVALID_REQUEST,
                "Invalid Request: 'method' must be a non-empty string",
            )
            return
        if is_request and method == "initialize" and is_initialized():
            _error(
                protocol, msg_id, errors.INVALID_REQUEST, "Invalid Request: the server is already initialized"
            )
            return
        if is_request and not is_initialized() and method != "initialize":
            # LSP: every request before `initialize` is refused the same way, whatever its params.
            _error(
                protocol,
                msg_id,
                errors.SERVER_NOT_INITIALIZED,
                "the server is not initialized yet",
                "not_initialized",
            )
            return
        if "params" in data and not isinstance(data["params"], dict | list | type(None)):
            if is_request:
                _error(
                    protocol,
                    msg_id,
                    errors.INVALID_PARAMS,
                    "Invalid params: 'params' must be an object or an array",
                    "invalid_params",
                )
            return
        if is_request and _notification_method(method):
            _error(
                protocol,
                msg_id,
                errors.METHOD_NOT_FOUND,
                f"Method not found: {method} is a notification (send it without an id)",
            )
            return
        if is_request and method == "workspace/executeCommand" and _unknown_command(protocol, data):
            return
        if is_request and is_shut_down() and method != "exit":
            _error(protocol, msg_id, errors.INVALID_REQUEST, f"Invalid Request: {method} after shutdown")
            return
    elif msg_id is None:
        logger.warning("response without an id: dropped")
        return
    if b"\\u" in body and _has_lone_surrogate(data):
        # JSON escapes can spell UTF-16 halves that no UTF-8 store, file or pipe can hold; refuse them
        # here once, instead of failing wherever the string would travel next.
        where = lone_surrogate_at(data.get("params"), "params") or "params"
        if is_request:
            _error(
                protocol,
                msg_id,
                errors.INVALID_PARAMS,
                f"Invalid params: '{where.removeprefix('params.')}' holds a lone UTF-16 surrogate",
                "invalid_params",
            )
        else:
            logger.warning("message with a lone surrogate dropped (%s)", where)
        return
    bad_uri = _bad_uri(data.get("params")) if isinstance(method, str) else None
    if bad_uri is not None:
        # pygls takes these URIs apart itself (a text document's path, a workspace folder's) and would
        # raise inside its own handler: the client's mistake is answered here, naming the field.
        if is_request:
            _error(
                protocol,
                msg_id,
                errors.INVALID_PARAMS,
                f"Invalid params: '{where}' is not a URI",
                "invalid_params",
            )
        else:
            logger.warning("%s dropped: '%s' is not a URI", method, bad_uri)
        return
    if method == "initialized" and data.get("params") is None:
        data["params"] = {}  # some clients leave out its (empty) params; LSP types require them
    try:
        message = protocol.structure_message(data)
    except JsonRpcInvalidParams:
        if is_request:
            _error(protocol, msg_id, errors.INVALID_PARAMS, f"Invalid params for {method}", "invalid_params")
        else:
            logger.warning("message with invalid params dropped (%s)", method or "response")
        return
    except JsonRpcException as exc:
        if is_request:
            _error(protocol, msg_id, exc.code, f"{exc.message} ({method})")
        else:
            logger.warning("message dropped: %s (%s)", exc.message, method or "response")
        return
    try:
        protocol.handle_message(message)
    except SystemExit:
        raise
    except Exception as exc:
        if is_response:  # e.g. a late answer to a request the daemon gave up on: the client's timing
            logger.warning("response %r dropped: %s", msg_id, exc)
            return
        logger.exception("handling %s failed", method)
        if is_request:
            _error(protocol, msg_id, errors.INTERNAL_ERROR, f"Internal error while handling {method}")


def _bad_uri(params: Any) -> str | None:
    """The first URI pygls would split itself (`textDocument.uri`, `rootUri`, workspace folders) that
    is no URI, as a field path; None when there is none."""
    if not isinstance(params, dict):
        return None
    candidates: list[tuple[str, Any]] = [("rootUri", params.get("rootUri"))]
    document = params.get("textDocument")
    if isinstance(document, dict):
        candidates.append(("textDocument.uri", document.get("uri")))
    folders = params.get("workspaceFolders")
    event = params.get("event")
    lists = [("workspaceFolders", folders)]
    if isinstance(event, dict):
        lists += [("event.added", event.get("added")), ("event.removed", event.get("removed"))]
    for name, items in lists:
        if isinstance(items, list):
            candidates += [
                (f"{name}[{i}].uri", f.get("uri")) for i, f in enumerate(items) if isinstance(f, dict)
            ]
    for where, uri in candidates:
        if isinstance(uri, str) and uri_problem(uri) is not None:
            return where
    return None


def _unknown_command(protocol: JsonRPCProtocol, data: dict[str, Any]) -> bool:
    """`workspace/executeCommand` of a command nobody registered (the daemon registers none): a typed
    `-32602` here, instead of pygls' answer that logs a traceback for a client's mistake."""
    params = data.get("params")
    command = params.get("command") if isinstance(params, dict) else None
    if isinstance(command, str) and command in protocol.fm.commands:
        return False
    _error(
        protocol,
        data["id"],
        errors.INVALID_PARAMS,
        f"Invalid params: unknown command {shown(repr(command), 100)} (dsh-daemon offers no commands)",
        "invalid_params",
    )
    return True


def _refuse_unusable(protocol: JsonRPCProtocol, body: bytes, exc: ValueError) -> None:
    """A request nested deeper than MAX_DEPTH, or holding a number Python will not decode, is refused
    with its own id (found without decoding the rest); a notification or a response is dropped;
    anything else is answered with id null."""
    msg_id = top_level_member(body, "id")
    method = top_level_member(body, "method")
    usable_id = isinstance(msg_id, str | int) and not isinstance(msg_id, bool)
    if isinstance(method, str) and usable_id:
        _error(protocol, msg_id, errors.INVALID_REQUEST, f"Invalid Request: {exc}")
    elif isinstance(method, str) or usable_id:
        kind = "notification" if isinstance(method, str) else "response"
        logger.warning("a %s dropped: %s", kind, exc)
    else:
        _error(protocol, None, errors.INVALID_REQUEST, f"Invalid Request: {exc}")


class _QuietDeserializeErrors(logging.Filter):
    """pygls logs a full traceback for every message it cannot structure; `dispatch` answers those
    (a client's mistake, not a fault) and logs one line instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Unable to deserialize message")


logging.getLogger("pygls.protocol.json_rpc").addFilter(_QuietDeserializeErrors())
