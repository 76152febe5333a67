"""ACP mode's JSON-RPC error codes: which numeric code each kind of wire error gets.

The errors themselves (kinds, messages, data, the 200-character echo rule) are the host's
(`host/errors.py`), shared with the LSP server; ACP differs only in its codes (an unknown session is
ACP's "resource not found", a cancelled request -32800).
"""

from __future__ import annotations

from typing import Any

from dsh_daemon.host.errors import Kind, WireError

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
RESOURCE_NOT_FOUND = -32002  # ACP
REQUEST_CANCELLED = -32800  # ACP / LSP
REQUEST_FAILED = -32803  # a well-formed request that failed (as in the LSP front end)
AUTH_REQUIRED = -32000  # ACP: "authentication required"

CODES: dict[Kind, int] = {
    "invalid_params": INVALID_PARAMS,
    "outside_workspace": INVALID_PARAMS,
    "unknown_session": RESOURCE_NOT_FOUND,
    "unknown_message": INVALID_PARAMS,
    "duplicate_message_id": INVALID_PARAMS,
    "session_busy": REQUEST_FAILED,
    "not_a_repository": REQUEST_FAILED,
    "session_unreadable": REQUEST_FAILED,
    "shutting_down": REQUEST_FAILED,
    "not_initialized": RESOURCE_NOT_FOUND,  # -32002, as LSP's "server not initialized"
    "request_cancelled": REQUEST_CANCELLED,
    "auth_required": AUTH_REQUIRED,
    "turn_failed": INTERNAL_ERROR,
    "internal_error": INTERNAL_ERROR,
}


def error_json(error: WireError) -> dict[str, Any]:
    """The `error` member of a JSON-RPC response."""
    return {"code": CODES[error.kind], "message": error.message, "data": error.wire_data()}


def plain_error_json(code: int, message: str) -> dict[str, Any]:
    """An error of the JSON-RPC layer itself (a malformed line, an unknown method): no `data`."""
    return {"code": code, "message": message}
