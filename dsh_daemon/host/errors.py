"""The host layer's errors, and the one table of wire errors both front ends answer with.

A request that fails leaves a front end as a `WireError`: a `kind` (what the wire calls `data.code`:
`invalid_params`, `unknown_session`, `session_busy`, …), a message, and the data that goes with it.
Each front end only picks the numeric JSON-RPC code of each kind (`server/errors.py`,
`acp/errors.py`); the words, the data and the rule that a client's value is echoed at most
`SHOWN_CHARS` characters long are written here, once.

`wire_error(exc)` is the one mapping from the layers' exception families to these kinds (protocol.md
§11); anything it does not know is a daemon bug, answered `internal_error` and logged by the caller.
Light imports only: the LSP server loads this before `initialize`.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, Literal, TypeAlias

Kind: TypeAlias = Literal[
    "invalid_params",
    "outside_workspace",
    "unknown_session",
    "unknown_message",
    "duplicate_message_id",
    "session_busy",
    "not_a_repository",
    "session_unreadable",
    "shutting_down",
    "not_initialized",
    "request_cancelled",
    "auth_required",
    "turn_failed",
    "internal_error",
]
SHOWN_CHARS = 200  # a client's value echoed in an error is cut to this many characters, marker included
LONG_TEXT_CHARS = 2000  # a message built from a daemon-side failure (an unreadable log, a bug)


class HostError(Exception):
    """Something the session host refuses; subclasses say what."""


def shown(value: object, limit: int = SHOWN_CHARS) -> str:
    """A client's value as an error may echo it: at most `limit` characters (never 100 KB back)."""
    text = value if isinstance(value, str) else repr(value)
    if len(text) <= limit:
        return text
    suffix = f"… ({len(text)} characters)"
    return text[: max(0, limit - len(suffix))] + suffix


class WireError(Exception):
    """A request's failure as a front end answers it: `kind` (the wire's `data.code`), a message, and
    `data` beside the code (a turn's error carries its own `code`, which wins)."""

    def __init__(self, kind: Kind, message: str, /, **data: Any) -> None:
        super().__init__(message)
        self.kind: Kind = kind
        self.message = message
        self.data = data

    def wire_data(self) -> dict[str, Any]:
        return {"code": self.kind, **self.data}


def invalid_params(message: str) -> WireError:
    return WireError("invalid_params", message)


def outside_workspace(message: str, path: str) -> WireError:
    return WireError("outside_workspace", message, path=shown(path))


def unknown_session(session_id: str) -> WireError:
    return WireError("unknown_session", f"unknown session: {shown(session_id)}", sessionId=shown(session_id))


def unknown_message(message_id: str) -> WireError:
    return WireError(
        "unknown_message",
        f"no pending message with id {shown(repr(message_id))}",
        messageId=shown(message_id),
    )


def duplicate_message_id(message_id: str) -> WireError:
    return WireError(
        "duplicate_message_id",
        f"a message with id {shown(repr(message_id))} is already pending",
        messageId=shown(message_id),
    )


def session_busy(session_id: str, pid: int, host: str) -> WireError:
    return WireError(
        "session_busy",
        f"session {shown(session_id)} is driven by another dsh-daemon (pid {pid} on {host}); "
        "it can be read, not driven",
        sessionId=shown(session_id),
        holderPid=pid,
        holderHost=host,
    )


def session_busy_silent_holder(session_id: str, pid: int, host: str, silent_ms: int) -> WireError:
    """A holder that keeps the lease (its pid lives on this host) but does not heartbeat: no handover
    will come, so the request is refused now rather than kept for one."""
    return WireError(
        "session_busy",
        f"session {shown(session_id)} is held by process {pid} on {host}, which lives but has not "
        f"answered as a dsh-daemon for {silent_ms // 1000} s: it will not hand the session over "
        "(end that process to free the session)",
        sessionId=shown(session_id),
        holderPid=pid,
        holderHost=host,
        reason="silent",
    )


def session_busy_because(session_id: str, message: str, **extra: Any) -> WireError:
    """`session_busy` with its own message: why this request cannot act on the session now."""
    return WireError(
        "session_busy", f"session {shown(session_id)}: {message}", sessionId=shown(session_id), **extra
    )


def session_unreadable(message: str) -> WireError:
    return WireError("session_unreadable", shown(message, LONG_TEXT_CHARS))


def shutting_down() -> WireError:
    return WireError("shutting_down", "dsh-daemon is shutting down")


def not_initialized() -> WireError:
    return WireError("not_initialized", "the server is not initialized yet")


def request_cancelled(message: str = "request cancelled") -> WireError:
    return WireError("request_cancelled", message)


def auth_required(variable: str, message: str) -> WireError:
    """No API key where the provider needs one: said before any turn runs, naming the variable."""
    return WireError("auth_required", message, variable=variable)


def turn_failed(error: Any) -> WireError:
    """A turn that ended `error`, as the error of the request it answers: the turn's typed code
    (`AUTH`, `RATE_LIMIT`, …) in `data.code`, its message beside it."""
    code = str(error.get("code", "UNKNOWN")) if isinstance(error, Mapping) else "UNKNOWN"
    message = str(error.get("message", "")) if isinstance(error, Mapping) else ""
    return WireError("turn_failed", shown(f"{code}: {message}", LONG_TEXT_CHARS), code=code, message=message)


def internal_error(message: str) -> WireError:
    return WireError("internal_error", shown(message, LONG_TEXT_CHARS))


# The modules `wire_error` takes the layers' error classes from (ModelError's own is always loaded).
_FAMILY_MODULES = (
    "dsh_daemon.agent.errors",
    "dsh_daemon.agent.inbox",
    "dsh_daemon.agent.loop",
    "dsh_daemon.host.manager",
    "dsh_daemon.model.events",
    "dsh_daemon.session.lease",
    "dsh_daemon.session.store",
)


def wire_error(exc: BaseException) -> WireError | None:
    """The one mapping from the layers' exceptions to wire errors (protocol.md §11); None for anything
    that is not a known family (the caller answers `internal_error` and logs it: a daemon bug).
    Imports stay inside: this module is loaded before `initialize` and must stay light."""
    if isinstance(exc, WireError):
        return exc
    if not any(name in sys.modules for name in _FAMILY_MODULES):
        # None of the layers' error classes exists yet, so `exc` is none of them (an option refused
        # in the `initialize` reply): importing them would load what `initialize` must not wait for.
        from dsh_daemon.model.errors import ModelError

        return (
            invalid_params(shown(str(exc), LONG_TEXT_CHARS))
            if isinstance(exc, ModelError | HostError)
            else None
        )
    from dsh_daemon.agent.errors import AgentError
    from dsh_daemon.agent.inbox import DuplicateMessageIdError, UnknownMessageError
    from dsh_daemon.agent.loop import AgentDisposedError
    from dsh_daemon.host.manager import SessionRunningError
    from dsh_daemon.model.errors import ModelError
    from dsh_daemon.model.events import UnreadableEventError
    from dsh_daemon.session.lease import SessionBusyError
    from dsh_daemon.session.store import LeaseLostError, StoreError, UnknownSessionError

    # the session layer: which session, who drives it, whether its log can be read
    if isinstance(exc, UnknownSessionError):
        return unknown_session(exc.session_id)
    if isinstance(exc, SessionBusyError):
        return session_busy(exc.session_id, exc.pid, exc.host)
    if isinstance(exc, LeaseLostError):
        host, _, rest = exc.holder.partition(":")
        pid = rest.split(":", 1)[0]
        return session_busy(exc.session_id, int(pid) if pid.isdigit() else 0, host)
    if isinstance(exc, StoreError | UnreadableEventError):
        return session_unreadable(str(exc))
    # the agent core: refused sends and edits
    if isinstance(exc, DuplicateMessageIdError):
        return duplicate_message_id(exc.message_id)
    if isinstance(exc, UnknownMessageError):
        return unknown_message(exc.message_id)
    if isinstance(exc, AgentDisposedError):
        return shutting_down()
    if isinstance(exc, SessionRunningError):
        return session_busy_because(
            exc.session_id,
            "a turn is running in this dsh-daemon; cancel it or wait, then try again",
            reason="running",
        )
    # a value or a setting the client gave that is not what it must be
    if isinstance(exc, ModelError | HostError | AgentError):
        return invalid_params(shown(str(exc), LONG_TEXT_CHARS))
    return None


def lone_surrogate_at(value: Any, path: str) -> str | None:
    """Where (`path`, then `.key` / `[index]`) a string or key of a JSON value holds a lone UTF-16
    surrogate: JSON escapes can spell one, but no UTF-8 store, file or pipe can hold it. None: none."""
    if isinstance(value, str):
        return path if _has_surrogate(value) else None
    if isinstance(value, Mapping):
        for key, item in value.items():
            where = f"{path}.{_printable(key)}" if isinstance(key, str) else path
            if isinstance(key, str) and _has_surrogate(key):
                return where
            found = lone_surrogate_at(item, where)
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = lone_surrogate_at(item, f"{path}[{index}]")
            if found is not None:
                return found
    return None


def _printable(key: str) -> str:
    """A key as a path may show it: short, and with a lone surrogate spelled as an escape."""
    return shown(key.encode("utf-8", "backslashreplace").decode("utf-8"), 60)


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False
