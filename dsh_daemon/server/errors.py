"""Typed JSON-RPC errors: a standard code plus `data.code`, so clients can branch without parsing text."""

from __future__ import annotations

from typing import Any

from pygls.exceptions import JsonRpcException

INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
PARSE_ERROR = -32700
METHOD_NOT_FOUND = -32601
SERVER_NOT_INITIALIZED = -32002
REQUEST_FAILED = -32803  # LSP: a syntactically correct request that failed
SHOWN_CHARS = 200  # a client's value echoed in an error is cut to this many characters


def shown(value: object, limit: int = SHOWN_CHARS) -> str:
    """A client's value as an error may echo it: at most `limit` characters (never 100 KB back)."""
    text = value if isinstance(value, str) else repr(value)
    if len(text) <= limit:
        return text
    suffix = f"… ({len(text)} characters)"
    return text[: max(0, limit - len(suffix))] + suffix


class DshError(JsonRpcException):
    def __init__(self, message: str, *, code: int, data_code: str, **extra: Any) -> None:
        super().__init__(message=message, code=code, data={"code": data_code, **extra})


def invalid_params(message: str) -> DshError:
    return DshError(message, code=INVALID_PARAMS, data_code="invalid_params")


def outside_workspace(message: str, path: str) -> DshError:
    return DshError(message, code=INVALID_PARAMS, data_code="outside_workspace", path=shown(path))


def unknown_session(session_id: str) -> DshError:
    return DshError(
        f"unknown session: {shown(session_id)}",
        code=INVALID_PARAMS,
        data_code="unknown_session",
        sessionId=shown(session_id),
    )


def unknown_message(message_id: str) -> DshError:
    return DshError(
        f"no pending message with id {shown(repr(message_id))}",
        code=INVALID_PARAMS,
        data_code="unknown_message",
        messageId=shown(message_id),
    )


def duplicate_message_id(message_id: str) -> DshError:
    return DshError(
        f"a message with id {shown(repr(message_id))} is already pending",
        code=INVALID_PARAMS,
        data_code="duplicate_message_id",
        messageId=shown(message_id),
    )


def session_busy(session_id: str, pid: int, host: str) -> DshError:
    return DshError(
        f"session {session_id} is driven by another dsh-daemon (pid {pid} on {host}); "
        "it can be read, not driven",
        code=REQUEST_FAILED,
        data_code="session_busy",
        sessionId=shown(session_id),
        holderPid=pid,
        holderHost=host,
    )


def session_busy_because(session_id: str, message: str, **extra: Any) -> DshError:
    """`session_busy` with its own message: why this request cannot act on the session now."""
    return DshError(
        f"session {shown(session_id)}: {message}",
        code=REQUEST_FAILED,
        data_code="session_busy",
        sessionId=shown(session_id),
        **extra,
    )


def shutting_down() -> DshError:
    return DshError("dsh-daemon is shutting down", code=REQUEST_FAILED, data_code="shutting_down")


def not_initialized() -> DshError:
    return DshError(
        "the server is not initialized yet", code=SERVER_NOT_INITIALIZED, data_code="not_initialized"
    )


def session_unreadable(message: str) -> DshError:
    return DshError(shown(message, 2000), code=REQUEST_FAILED, data_code="session_unreadable")


def internal_error(message: str) -> DshError:
    return DshError(shown(message, 2000), code=INTERNAL_ERROR, data_code="internal_error")


def wire_error(exc: BaseException) -> DshError | None:
    """The one mapping from the layers' exceptions to typed wire errors (§11); None for anything that
    is not a known family (the caller reports it as `internal_error`, logged: a daemon bug). Imports
    stay inside: this module is loaded before `initialize` and must stay light."""
    from dsh_daemon.agent.errors import AgentError
    from dsh_daemon.agent.inbox import DuplicateMessageIdError, UnknownMessageError
    from dsh_daemon.agent.loop import AgentDisposedError
    from dsh_daemon.host.errors import HostError
    from dsh_daemon.host.manager import SessionRunningError
    from dsh_daemon.model.errors import ModelError
    from dsh_daemon.model.events import UnreadableEventError
    from dsh_daemon.session.lease import SessionBusyError
    from dsh_daemon.session.store import LeaseLostError, StoreError, UnknownSessionError

    if isinstance(exc, DshError):
        return exc
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
        return invalid_params(str(exc))
    return None
