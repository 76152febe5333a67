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
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, BinaryIO

from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.protocol import JsonRPCProtocol

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 64 * 1024 * 1024
_CONTENT_LENGTH = re.compile(rb"^content-length:\s*(\d+)\s*$", re.IGNORECASE)


class StdinReader:
    def __init__(self, stdin: BinaryIO) -> None:
        self._stdin = stdin
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dsh-stdin")

    async def readline(self) -> bytes:
        return await asyncio.get_running_loop().run_in_executor(self._executor, self._stdin.readline)

    async def read(self, n: int) -> bytes:
        return await asyncio.get_running_loop().run_in_executor(self._executor, self._stdin.read, n)

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


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
        body = await reader.read(length) if length else b""
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
