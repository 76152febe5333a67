"""The LSP front end's JSON-RPC error codes: which numeric code each kind of wire error gets.

The errors themselves (kinds, messages, data, the 200-character echo rule) are the host's
(`host/errors.py`), shared with ACP mode; here they only become pygls' `JsonRpcException`.
"""

from __future__ import annotations

from pygls.exceptions import JsonRpcException

from dsh_daemon.host.errors import Kind, WireError

INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
PARSE_ERROR = -32700
METHOD_NOT_FOUND = -32601
SERVER_NOT_INITIALIZED = -32002
REQUEST_FAILED = -32803  # LSP: a syntactically correct request that failed
REQUEST_CANCELLED = -32800

CODES: dict[Kind, int] = {
    "invalid_params": INVALID_PARAMS,
    "outside_workspace": INVALID_PARAMS,
    "unknown_session": INVALID_PARAMS,
    "unknown_message": INVALID_PARAMS,
    "duplicate_message_id": INVALID_PARAMS,
    "session_busy": REQUEST_FAILED,
    "not_a_repository": REQUEST_FAILED,
    "session_unreadable": REQUEST_FAILED,
    "shutting_down": REQUEST_FAILED,
    "not_initialized": SERVER_NOT_INITIALIZED,
    "request_cancelled": REQUEST_CANCELLED,
    "auth_required": REQUEST_FAILED,  # not raised on the LSP wire: a turn fails with AUTH / CONFIG there
    "turn_failed": INTERNAL_ERROR,
    "internal_error": INTERNAL_ERROR,
}


class DshError(JsonRpcException):
    """A wire error as pygls sends it."""

    def __init__(self, error: WireError) -> None:
        super().__init__(message=error.message, code=CODES[error.kind], data=error.wire_data())
        self.error = error


def lsp_error(error: WireError) -> DshError:
    return DshError(error)
