"""`initialize` answered before pygls and lsprotocol are imported (issue 40.2), as ACP mode does.

An editor spawns the daemon and sends `initialize` at once; importing pygls (lsprotocol's ~560 attrs
classes, cattrs) was most of the time it waited. So the first frame is read here, from the daemon's
own stdin reader, and when it is an `initialize` whose every part this module can vouch for, the
reply pygls would compute for this server (server/capabilities.py) is written before pygls is loaded.
pygls then handles the same message with its reply suppressed (`Daemon.adopt_early_initialize`), so
its state and the daemon's are what they would have been.

The same for what an editor sends the moment that reply arrives: a plain `initialized` and a plain
first `dsh/session/new` (`answer_session_new_early`) are answered from the store alone, as
`Daemon.new_early` answers them, before pygls loads; pygls then takes `initialized` and the daemon
wires the session (`Daemon.adopt_early_sessions`). Otherwise the client's first session request would
wait for the pygls import that the early `initialize` reply moved behind it.

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
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from dsh_daemon.host.options import DaemonOptions, parse_options
from dsh_daemon.model.jsondepth import loads_message
from dsh_daemon.model.uris import uri_problem
from dsh_daemon.server.capabilities import initialize_result, position_encoding, text_document_sync
from dsh_daemon.server.settings import INIT_OPTIONS, Settings
from dsh_daemon.server.stdinreader import StdinReader
from dsh_daemon.server.stdout import CoalescingWriter

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from dsh_daemon.host.early import EarlySessions

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


async def _first_frame(
    reader: StdinReader, at: int = 0, quiet_s: float = QUIET_S
) -> tuple[int, bytes] | None:
    """The size and body of the frame `at` bytes into what is buffered, once all of it has come; None
    when it does not look like a plain frame, or stays incomplete while the client is quiet for
    `quiet_s` (the full loop's cases)."""
    while True:
        data = reader.buffered()[at:]
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
        if not data and at == 0:
            await reader.more(3600.0)
        elif not await reader.more(quiet_s):
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


# ---- the first session, answered before pygls too ---------------------------------------------------

SESSION_NEW = "dsh/session/new"
NEXT_FRAME_S = 0.1  # how long the client may take to send `initialized` and a first session request


@dataclass(frozen=True)
class EarlySession:
    """`initialized` and a first `dsh/session/new` answered here (`Daemon.new_early`'s reply): the
    `initialized` body, for pygls, and the sessions created (to be wired by the daemon)."""

    initialized: bytes
    sessions: EarlySessions


async def answer_session_new_early(
    reader: StdinReader, writer: CoalescingWriter, settings: Settings, early: EarlyInitialize
) -> EarlySession | None:
    """When the next frames are a plain `initialized` and a plain first `dsh/session/new` (what an
    editor sends the moment `initialize` is answered), the session is created from the store alone and
    answered, as `Daemon.new_early` would answer it; None, with nothing consumed, otherwise (then the
    full path answers them). Both frames are taken: the caller hands `initialized` to pygls."""
    first = await _first_frame(reader, 0, NEXT_FRAME_S)
    if first is None or not _plain_initialized(first[1]):
        return None
    second = await _first_frame(reader, first[0], NEXT_FRAME_S)
    if second is None:
        return None
    request = _plain_session_new(second[1])
    if request is None:
        return None
    msg_id, cwd, servers = request
    try:
        resolved = _session_cwd(early.message["params"], cwd)
        from dsh_daemon.host.options import parse_session_servers

        source = parse_session_servers(servers, f"{SESSION_NEW}: mcpServers")
    except Exception:  # a client's mistake: the full path answers it with its typed error
        return None
    from dsh_daemon.host.early import EarlySessions

    sessions = EarlySessions(settings.state_dir)
    try:
        session_id = sessions.create_durably(resolved, (), source).session_id
    except Exception:
        sessions.close()
        return None  # the full path tries again and reports what fails
    reader.take(first[0] + second[0])
    reply = json.dumps({"id": msg_id, "jsonrpc": "2.0", "result": {"sessionId": session_id}})
    writer.write(f"Content-Length: {len(reply)}\r\nContent-Type: {CONTENT_TYPE}\r\n\r\n{reply}".encode())
    writer.flush()
    logger.info(
        "session %s: created before the session machinery, wired after its reply"
        " (answered before the LSP machinery was loaded)",
        session_id,
    )
    return EarlySession(first[1], sessions)


def _plain_initialized(body: bytes) -> bool:
    try:
        data = loads_message(body)
    except (ValueError, UnicodeDecodeError):
        return False
    return (
        isinstance(data, dict)
        and set(data) <= {"jsonrpc", "method", "params"}
        and data.get("jsonrpc") == "2.0"
        and data.get("method") == "initialized"
        and data.get("params") in (None, {})
    )


def _plain_session_new(body: bytes) -> tuple[int | str, str | None, Any] | None:
    """The id, cwd and servers of a `dsh/session/new` that `server/params.py: plain_session_new`
    takes as plain; None for anything else."""
    from dsh_daemon.server.params import plain_session_new

    try:
        data = loads_message(body)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(data, dict) or not set(data) <= {"jsonrpc", "id", "method", "params"}:
        return None
    msg_id = data.get("id")
    if data.get("jsonrpc") != "2.0" or data.get("method") != SESSION_NEW or _has_lone_surrogate(data):
        return None
    if isinstance(msg_id, bool) or not isinstance(msg_id, int | str):
        return None
    plain = plain_session_new(data.get("params"))
    if plain is None:
        return None
    return msg_id, plain[0], plain[1]


def _session_cwd(params: dict[str, Any], cwd: str | None) -> str:
    """`server/app.py: _session_cwd`, from the `initialize` params pygls' workspace is built from:
    the client's cwd made absolute against the first folder (else the root, else this process's
    directory), and inside the workspace; a `WireError` when not."""
    from pygls.uris import to_fs_path  # plain string work: no pygls machinery

    from dsh_daemon.host.errors import invalid_params, outside_workspace, shown
    from dsh_daemon.host.paths import checked_path

    if params.get("rootPath") is not None and params.get("rootUri") is None:
        raise ValueError("a root given as a path only: left to pygls' workspace")
    uris = [f["uri"] for f in params.get("workspaceFolders") or []] + [params.get("rootUri")]
    roots = [path for path in (to_fs_path(uri) for uri in uris if uri) if path]
    default = roots[0] if roots else os.getcwd()
    path = (
        os.path.normpath(os.path.join(default, os.path.expanduser(checked_path(cwd, SESSION_NEW, "cwd"))))
        if cwd
        else default
    )
    if not roots:
        return path
    try:
        real = Path(os.path.realpath(path))
        inside = any(real.is_relative_to(os.path.realpath(root)) for root in roots)
    except (OSError, ValueError) as exc:
        raise invalid_params(f"{SESSION_NEW}: 'cwd' cannot be used: {shown(str(exc))}") from exc
    if not inside:
        raise outside_workspace(f"{SESSION_NEW}: cwd outside the workspace folders", path)
    return path
