"""`initialize` answered before pygls and lsprotocol are imported (issue 40.2), as ACP mode does.

An editor spawns the daemon and sends `initialize` at once; importing pygls (lsprotocol's ~560 attrs
classes, cattrs) was most of the time it waited. So the first frame is read here, from the daemon's
own stdin reader, and when it is an `initialize` whose every part this module can vouch for, the
reply pygls would compute for this server (server/capabilities.py) is written before pygls is loaded.
pygls then handles the same message with its reply suppressed (`Daemon.adopt_early_initialize`), so
its state and the daemon's are what they would have been.

Invariants:
- Nothing is consumed unless it is answered here: a first frame that is not a plain, complete,
  well-formed `initialize` (junk, another method, a bad id, a URI the full path refuses, options
  `parse_options` refuses, a body still short of its length once the client goes quiet, ...) is left
  in the reader for the full read loop, which answers it exactly as before.
- The options are parsed here, once: the adopted `initialize` uses them.
- Client capabilities are vouched for only where the reply depends on them (the position encoding,
  `willSave*`); a capability section pygls cannot structure is dropped when pygls handles the
  message (all but the part the reply read), and the editor is told with a `window/showMessage`
  warning (the reply accepting it has left).
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from dsh_daemon.host.options import DaemonOptions, parse_options
from dsh_daemon.model.jsondepth import loads_message
from dsh_daemon.model.uris import uri_problem
from dsh_daemon.server.capabilities import initialize_result, position_encoding, text_document_sync
from dsh_daemon.server.settings import INIT_OPTIONS, Settings
from dsh_daemon.server.stdinreader import StdinReader
from dsh_daemon.server.stdout import CoalescingWriter

logger = logging.getLogger(__name__)

QUIET_S = 0.05  # a first frame still incomplete after this long without bytes goes to the full loop
MAX_HEADER_BYTES = 4096
MAX_EARLY_BODY = 1 << 20  # a larger initialize is read by the full loop
CONTENT_TYPE = "application/vscode-jsonrpc; charset=utf-8"  # what pygls writes
_HEADER = re.compile(
    rb"content-length:[ \t]*(\d+)[ \t]*\r\n(?:[a-z][a-z0-9-]*:[^\r\n]*\r\n)*\r\n", re.IGNORECASE
)
_PARAMS = frozenset(
    {
        "processId",
        "clientInfo",
        "locale",
        "rootPath",
        "rootUri",
        "capabilities",
        "initializationOptions",
        "trace",
        "workspaceFolders",
        "workDoneToken",
    }
)
_TRACE = (None, "off", "messages", "verbose")


@dataclass(frozen=True)
class EarlyInitialize:
    """An `initialize` answered here: the message (for pygls) and its options, parsed."""

    message: dict[str, Any]
    options: DaemonOptions


async def answer_initialize_early(
    reader: StdinReader, writer: CoalescingWriter, settings: Settings
) -> EarlyInitialize | None:
    """Answer the first frame when it is an `initialize` this module vouches for (the reply written
    and flushed on return); None, with nothing consumed, otherwise."""
    frame = await _first_frame(reader)
    if frame is None:
        return None
    size, body = frame
    vouched = _vouched(body, settings)
    if vouched is None:
        return None
    early, result = vouched
    reader.take(size)
    reply = json.dumps({"id": early.message["id"], "jsonrpc": "2.0", "result": result})
    header = f"Content-Length: {len(reply)}\r\nContent-Type: {CONTENT_TYPE}\r\n\r\n"
    writer.write((header + reply).encode())
    writer.flush()
    logger.info("initialize %r answered before the LSP machinery was loaded", early.message["id"])
    return early


async def _first_frame(reader: StdinReader) -> tuple[int, bytes] | None:
    """The first frame's size and body once all of it has come; None when it does not look like a
    plain frame, or stays incomplete while the client is quiet (the full loop's cases)."""
    while True:
        data = reader.buffered()
        match = _HEADER.match(data)
        if match is not None:
            length = int(match.group(1))
            if length > MAX_EARLY_BODY:
                return None
            end = match.end() + length
            if len(data) >= end:
                return end, data[match.end() : end]
        elif len(data) > MAX_HEADER_BYTES or b"\r\n\r\n" in data or not _header_start(data):
            return None
        if reader.eof:
            return None
        if not data:
            await reader.more(3600.0)
        elif not await reader.more(QUIET_S):
            return None


def _header_start(data: bytes) -> bool:
    """Whether `data` can still grow into a frame header (it starts like `Content-Length:`)."""
    head = data[:15].lower()
    return b"content-length:"[: len(head)] == head


def _vouched(body: bytes, settings: Settings) -> tuple[EarlyInitialize, dict[str, Any]] | None:
    """The message, its options and the reply's result; None when any part is one
    the full path might answer differently (an error, or a reply this module would not compute)."""
    try:
        data = loads_message(body)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(data, dict) or not set(data) <= {"jsonrpc", "id", "method", "params"}:
        return None
    msg_id = data.get("id")
    if data.get("jsonrpc") != "2.0" or data.get("method") != "initialize":
        return None
    if isinstance(msg_id, bool) or not isinstance(msg_id, int | str):
        return None
    params = data.get("params")
    if not isinstance(params, dict) or not _plain_params(params) or _has_lone_surrogate(data):
        return None
    encoding = position_encoding(params["capabilities"])
    sync = text_document_sync(params["capabilities"])
    if encoding is None or sync is None:
        return None
    try:
        options = parse_options(
            settings.state_dir,
            settings.env,
            settings.flags,
            params.get("initializationOptions"),
            what=INIT_OPTIONS,
        )
    except Exception:  # refused (or failing) options: the full path answers with the typed error
        return None
    return EarlyInitialize(data, options), initialize_result(encoding, sync)


def _plain_params(params: dict[str, Any]) -> bool:
    """Every member is of the type pygls structures without complaint, and every root is a local
    directory URI the full path accepts; `capabilities` is an object."""
    if not set(params) <= _PARAMS or not isinstance(params.get("capabilities"), dict):
        return False
    process_id = params.get("processId")
    if process_id is not None and (isinstance(process_id, bool) or not isinstance(process_id, int)):
        return False
    if not all(_str_or_none(params.get(name)) for name in ("locale", "rootPath", "workDoneToken")):
        return False
    if params.get("trace") not in _TRACE:
        return False
    info = params.get("clientInfo")
    if info is not None and not (
        isinstance(info, dict)
        and set(info) <= {"name", "version"}
        and isinstance(info.get("name"), str)
        and _str_or_none(info.get("version"))
    ):
        return False
    if not _root_ok(params.get("rootUri")):
        return False
    folders = params.get("workspaceFolders")
    if folders is None:
        return True
    return isinstance(folders, list) and all(
        isinstance(f, dict)
        and set(f) == {"uri", "name"}
        and isinstance(f["uri"], str)
        and isinstance(f["name"], str)
        and _root_ok(f["uri"])
        for f in folders
    )


def _str_or_none(value: Any) -> bool:
    return value is None or isinstance(value, str)


def _root_ok(uri: Any) -> bool:
    """A root the full path takes as it is: no URI problem, no `file:` host (server/roots.py)."""
    if uri is None:
        return True
    if not isinstance(uri, str) or uri_problem(uri) is not None:
        return False
    try:
        parts = urlsplit(uri)
    except ValueError:
        return False
    return not (parts.scheme.lower() == "file" and parts.netloc)


def _has_lone_surrogate(data: object) -> bool:
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False
