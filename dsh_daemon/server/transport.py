"""The stdio read loop: LSP base-protocol framing that never leaves a request unanswered.

pygls' own loop answers malformed input with a `window/showMessage` and nothing else (tooling.md
§1.3). This loop answers instead:
- a body that is not JSON: `-32700` (id null);
- JSON that is not a request/notification/response object, or a `jsonrpc` other than "2.0": `-32600`
  (with the id when there is one);
- a body over the size cap: read and dropped, `-32600`;
- typed LSP params that fail to structure: `-32602` with the request's id;
- a request after `shutdown`: `-32600`.
Headers are matched case-insensitively; a header block without a usable Content-Length is skipped
and the loop resynchronises on the next header. stdin is read on its own thread, so busy worker
threads can never starve the reader.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import threading
from collections.abc import Callable
from typing import Any, BinaryIO

from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.protocol import JsonRPCProtocol

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 64 * 1024 * 1024
MAX_HEADER_LINE = 1 << 20
_CONTENT_LENGTH = re.compile(rb"^content-length:\s*(\d+)\s*$", re.IGNORECASE)


class StdinReader:
    """stdin, read on a daemon thread of its own (never a pool a busy handler could fill, and never
    one that keeps the process alive) and fed into an asyncio stream. `stop()` ends it like an EOF."""

    def __init__(self, stdin: BinaryIO) -> None:
        self._loop = asyncio.get_running_loop()
        self._stream = asyncio.StreamReader(limit=MAX_HEADER_LINE)
        self._fd = stdin.fileno()
        threading.Thread(target=self._pump, name="dsh-stdin", daemon=True).start()

    def _pump(self) -> None:
        while True:
            try:
                chunk = os.read(self._fd, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                self._loop.call_soon_threadsafe(self._stream.feed_eof)
                return
            self._loop.call_soon_threadsafe(self._stream.feed_data, chunk)

    async def readline(self) -> bytes:
        try:
            return await self._stream.readline()
        except ValueError:  # a "line" longer than any header: consumed, and skipped as junk
            return b"x-overlong-line\r\n"

    async def read(self, n: int) -> bytes:
        return await self._stream.read(n)

    async def readexactly(self, n: int) -> bytes:
        try:
            return await self._stream.readexactly(n)
        except asyncio.IncompleteReadError as exc:
            return exc.partial

    def stop(self) -> None:
        if not self._stream.at_eof():
            self._stream.feed_eof()

    def close(self) -> None:
        self.stop()


def _error(
    protocol: JsonRPCProtocol, msg_id: Any, code: int, message: str, data_code: str | None = None
) -> None:
    error: dict[str, Any] = {"code": code, "message": message}
    if data_code is not None:
        error["data"] = {"code": data_code}
    protocol._send_data({"jsonrpc": "2.0", "id": msg_id, "error": error})


async def read_loop(
    reader: StdinReader, protocol: JsonRPCProtocol, *, is_shut_down: Callable[[], bool]
) -> None:
    """Read frames until EOF (or until a handler raises SystemExit, i.e. `exit`)."""
    while True:
        length: int | None = None
        saw_header = False
        while True:
            line = await reader.readline()
            if not line:
                return
            if line in (b"\r\n", b"\n"):
                if saw_header:
                    break
                continue  # stray blank lines between frames
            saw_header = True
            match = _CONTENT_LENGTH.match(line.strip())
            if match:
                length = int(match.group(1))
        if length is None:
            log.warning("header block without Content-Length: skipped")
            _error(protocol, None, -32600, "Invalid Request: missing Content-Length header")
            continue
        if length > MAX_BODY_BYTES:
            remaining = length
            while remaining > 0:
                chunk = await reader.read(min(remaining, 1 << 20))
                if not chunk:
                    return
                remaining -= len(chunk)
            _error(
                protocol, None, -32600, f"Invalid Request: body of {length} bytes exceeds {MAX_BODY_BYTES}"
            )
            continue
        body = await reader.readexactly(length) if length else b""
        if len(body) < length:
            return  # EOF inside a body
        dispatch(protocol, body, is_shut_down=is_shut_down)


def _has_lone_surrogate(data: object) -> bool:
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def dispatch(protocol: JsonRPCProtocol, body: bytes, *, is_shut_down: Callable[[], bool]) -> None:
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        _error(protocol, None, -32700, f"Parse error: {exc}")
        return
    except RecursionError:
        _error(protocol, None, -32700, "Parse error: JSON nested too deeply")
        return
    if not isinstance(data, dict):
        _error(
            protocol,
            None,
            -32600,
            "Invalid Request: a message must be a JSON object (batches are not supported)",
        )
        return
    if b"\\u" in body and _has_lone_surrogate(data):
        # JSON escapes can spell UTF-16 halves that no UTF-8 store, file or pipe can hold; refuse them
        # here once, instead of failing wherever the string would travel next.
        if data.get("id") is not None and "method" in data:
            _error(
                protocol,
                data["id"],
                -32602,
                "Invalid params: a string holds a lone UTF-16 surrogate",
                "invalid_params",
            )
        else:
            log.warning("message with a lone surrogate dropped")
        return
    msg_id = data.get("id")
    if msg_id is not None and (not isinstance(msg_id, str | int) or isinstance(msg_id, bool)):
        _error(protocol, None, -32600, "Invalid Request: 'id' must be a string or an integer")
        return
    if data.get("jsonrpc") != "2.0":
        _error(protocol, msg_id, -32600, "Invalid Request: 'jsonrpc' must be \"2.0\"")
        return
    method = data.get("method")
    is_response = "method" not in data and ("result" in data or "error" in data)
    if not is_response:
        if not isinstance(method, str) or not method:
            _error(protocol, msg_id, -32600, "Invalid Request: 'method' must be a non-empty string")
            return
        if "params" in data and not isinstance(data["params"], dict | list | type(None)):
            if msg_id is not None:
                _error(
                    protocol,
                    msg_id,
                    -32602,
                    "Invalid params: 'params' must be an object or an array",
                    "invalid_params",
                )
            return
        if msg_id is not None and is_shut_down() and method != "exit":
            _error(protocol, msg_id, -32600, f"Invalid Request: {method} after shutdown")
            return
    elif msg_id is None:
        log.warning("response without an id: dropped")
        return
    if method == "initialized" and data.get("params") is None:
        data["params"] = {}  # some clients leave out its (empty) params; LSP types require them
    try:
        message = protocol.structure_message(data)
    except JsonRpcInvalidParams:
        if msg_id is not None and not is_response:
            _error(protocol, msg_id, -32602, f"Invalid params for {method}", "invalid_params")
        return
    except JsonRpcException as exc:
        if msg_id is not None and not is_response:
            _error(protocol, msg_id, exc.code, f"{exc.message} ({method})")
        return
    try:
        protocol.handle_message(message)
    except SystemExit:
        raise
    except Exception:
        log.exception("handling %s failed", method)
        if msg_id is not None and not is_response:
            _error(protocol, msg_id, -32603, f"Internal error while handling {method}")
