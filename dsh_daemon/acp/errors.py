"""JSON-RPC errors of the ACP front end: a standard code plus a typed `data.code`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
RESOURCE_NOT_FOUND = -32002  # ACP
REQUEST_CANCELLED = -32800  # ACP / LSP
REQUEST_FAILED = -32803  # a well-formed request that failed (as in the LSP front end)
SHOWN_CHARS = 200


def shown(value: object, limit: int = SHOWN_CHARS) -> str:
    """A client's value as an error may echo it: at most `limit` characters."""
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters)"


class AcpError(Exception):
    def __init__(self, code: int, message: str, data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            out["data"] = self.data
        return out


def invalid_params(message: str) -> AcpError:
    return AcpError(INVALID_PARAMS, message, {"code": "invalid_params"})


def outside_workspace(message: str, path: str) -> AcpError:
    return AcpError(INVALID_PARAMS, message, {"code": "outside_workspace", "path": shown(path)})


def unknown_session(session_id: str) -> AcpError:
    return AcpError(
        RESOURCE_NOT_FOUND,
        f"unknown session: {shown(session_id)}",
        {"code": "unknown_session", "sessionId": shown(session_id)},
    )


def unknown_message(message_id: str) -> AcpError:
    return AcpError(
        INVALID_PARAMS,
        f"no pending message with id {shown(repr(message_id))}",
        {"code": "unknown_message", "messageId": shown(message_id)},
    )


def duplicate_message_id(message_id: str) -> AcpError:
    return AcpError(
        INVALID_PARAMS,
        f"a message with id {shown(repr(message_id))} is already pending",
        {"code": "duplicate_message_id", "messageId": shown(message_id)},
    )


def session_busy(session_id: str, pid: int, host: str) -> AcpError:
    return AcpError(
        REQUEST_FAILED,
        f"session {session_id} is driven by another dsh-daemon (pid {pid} on {host})",
        {"code": "session_busy", "sessionId": session_id, "holderPid": pid, "holderHost": host},
    )


def session_unreadable(message: str) -> AcpError:
    return AcpError(REQUEST_FAILED, shown(message, 2000), {"code": "session_unreadable"})


def shutting_down() -> AcpError:
    return AcpError(REQUEST_FAILED, "dsh-daemon is shutting down", {"code": "shutting_down"})


def not_initialized() -> AcpError:
    return AcpError(-32002, "call initialize first", {"code": "not_initialized"})


def request_cancelled(message: str = "request cancelled") -> AcpError:
    return AcpError(REQUEST_CANCELLED, message, {"code": "request_cancelled"})


def turn_failed(error: Any) -> AcpError:
    """An error turn, as the error of the `session/prompt` it answers: the typed code in `data.code`."""
    code = str(error.get("code", "UNKNOWN")) if isinstance(error, Mapping) else "UNKNOWN"
    message = str(error.get("message", "")) if isinstance(error, Mapping) else ""
    return AcpError(INTERNAL_ERROR, shown(f"{code}: {message}", 2000), {"code": code, "message": message})


def internal_error(message: str) -> AcpError:
    return AcpError(INTERNAL_ERROR, shown(message, 2000), {"code": "internal_error"})
