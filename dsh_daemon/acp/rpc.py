"""JSON-RPC over the NDJSON transport: dispatch in arrival order, answers, outgoing requests.

A request handler runs synchronously while its line is dispatched (so requests take effect in the
order they arrived, pipelined or not) and returns either the result or an awaitable of it; an
awaitable is finished in its own task and answered when it resolves. Every request gets exactly one
answer: a client's mistake or a refusal as its typed error (`host/errors.py: wire_error`), anything
else as `-32603` (logged, no traceback on the wire). A request holding a lone UTF-16 surrogate in any
string is refused before its handler runs (`-32602`, naming the field); such a notification is
dropped. Malformed lines are answered `-32700` / `-32600` and reading goes on.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from dsh_daemon.acp.errors import METHOD_NOT_FOUND, error_json, plain_error_json
from dsh_daemon.acp.transport import (
    LineReader,
    LineWriter,
    Malformed,
    MergeableUpdate,
    Notification,
    Request,
    RequestId,
    Response,
    decode,
)
from dsh_daemon.host.errors import (
    WireError,
    internal_error,
    invalid_params,
    lone_surrogate_at,
    request_cancelled,
    wire_error,
)
from dsh_daemon.host.preload import proceed, settle

logger = logging.getLogger(__name__)

RequestHandler = Callable[[Any, RequestId], Any]
NotificationHandler = Callable[[Any], None]


class ClientRequestError(Exception):
    """The client answered one of our requests with an error."""

    def __init__(self, error: Any) -> None:
        message = error.get("message") if isinstance(error, dict) else None
        super().__init__(str(message or error))
        self.error = error


class Connection:
    def __init__(self, writer: LineWriter) -> None:
        self._writer = writer
        self.requests: dict[str, RequestHandler] = {}
        self.notifications: dict[str, NotificationHandler] = {}
        self._ids = itertools.count(1)
        self._outgoing: dict[RequestId, asyncio.Future[Any]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        # Requests whose handler needs only the preload's first modules (it imports nothing else).
        self.first_preloaded_only: frozenset[str] = frozenset()

    # ---- registration --------------------------------------------------------------------------------

    def request(self, method: str) -> Callable[[RequestHandler], RequestHandler]:
        def register(handler: RequestHandler) -> RequestHandler:
            self.requests[method] = handler
            return handler

        return register

    def notification(self, method: str) -> Callable[[NotificationHandler], NotificationHandler]:
        def register(handler: NotificationHandler) -> NotificationHandler:
            self.notifications[method] = handler
            return handler

        return register

    # ---- outgoing ------------------------------------------------------------------------------------

    def notify(self, method: str, params: Any) -> None:
        self._writer.write({"jsonrpc": "2.0", "method": method, "params": params})

    def set_delta_window(self, window_s: float) -> None:
        """The client's `deltaCoalesceMs`: how long a live chunk waits for the next ones."""
        self._writer.held.window_s = window_s

    def send_update_mergeable(self, session_id: str, update: dict[str, Any]) -> None:
        """A live `session/update` that may be merged with the next while the client is behind."""
        self._writer.send_mergeable(MergeableUpdate(session_id, update))

    def send_request(self, method: str, params: Any) -> tuple[RequestId, asyncio.Future[Any]]:
        """Send a request to the client; the future resolves with its result (or ClientRequestError)."""
        request_id = f"dsh-{next(self._ids)}"
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._outgoing[request_id] = future
        future.add_done_callback(lambda _f: self._outgoing.pop(request_id, None))
        self._writer.write({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        if self._writer.closed and not future.done():
            future.set_exception(ConnectionError("the client went away"))
        return request_id, future

    def cancel_outgoing(self, request_id: RequestId) -> None:
        """Tell the client we no longer need an answer (`$/cancel_request`)."""
        future = self._outgoing.pop(request_id, None)
        if future is not None and not future.done():
            future.cancel()
        self.notify("$/cancel_request", {"requestId": request_id})

    def respond(self, request_id: RequestId | None, result: Any) -> None:
        self._writer.write({"jsonrpc": "2.0", "id": request_id, "result": result})

    def respond_error(self, request_id: RequestId | None, error: WireError) -> None:
        self._writer.write({"jsonrpc": "2.0", "id": request_id, "error": error_json(error)})

    def _respond_plain_error(self, request_id: RequestId | None, code: int, message: str) -> None:
        self._writer.write({"jsonrpc": "2.0", "id": request_id, "error": plain_error_json(code, message)})

    def _respond_failure(self, message: Request, exc: Exception) -> None:
        """A handler's failure as its typed error; a daemon bug as `internal_error`, logged."""
        if not isinstance(exc, WireError):
            # `wire_error` imports the layers' error classes: never beside the preload (a request
            # answered with the preload's first modules may fail here while it runs).
            settle()
        error = wire_error(exc)
        if error is None:
            logger.exception("request %s failed", message.method)
            error = internal_error(f"{type(exc).__name__}: {exc}")
        self.respond_error(message.id, error)

    # ---- incoming ------------------------------------------------------------------------------------

    async def serve(self, reader: LineReader) -> None:
        """Dispatch every line until the input ends, then fail what still waits for the client."""
        try:
            while True:
                line = await reader.next()
                if line is None:
                    return
                self.dispatch(line)
        finally:
            for future in list(self._outgoing.values()):
                if not future.done():
                    future.set_exception(ConnectionError("the client went away"))

    def dispatch(self, line: bytes) -> None:
        message = decode(line)
        if message is None:
            return
        # No import of ours while the session machinery is being preloaded (`host/preload.py`).
        first_only = isinstance(message, Request) and message.method in self.first_preloaded_only
        settle(first_only=first_only)
        if isinstance(message, Malformed):
            logger.info("malformed line: %s", message.message)
            self._respond_plain_error(message.id, message.code, message.message)
        elif isinstance(message, Response):
            self._on_response(message)
        elif isinstance(message, Notification):
            self._on_notification(message)
        else:
            self._on_request(message)
        if first_only:
            proceed()  # answered: the preload goes on with the rest

    def _on_response(self, message: Response) -> None:
        future = self._outgoing.pop(message.id, None)
        if future is None or future.done():
            logger.info("dropped a response to %r, which nothing waits for", message.id)
            return
        if message.error is not None:
            future.set_exception(ClientRequestError(message.error))
        else:
            future.set_result(message.result)

    def _on_notification(self, message: Notification) -> None:
        handler = self.notifications.get(message.method)
        if handler is None:
            logger.info("ignored notification %s", message.method)
            return
        where = lone_surrogate_at(message.params, "params")
        if where is not None:
            logger.warning("notification %s dropped: %s holds a lone UTF-16 surrogate", message.method, where)
            return
        try:
            handler(message.params)
        except Exception as exc:
            error = wire_error(exc)
            if error is None:
                logger.exception("notification %s failed", message.method)
            else:
                logger.info("notification %s refused: %s", message.method, error.message)

    def _on_request(self, message: Request) -> None:
        handler = self.requests.get(message.method)
        if handler is None:
            self._respond_plain_error(message.id, METHOD_NOT_FOUND, f"method not found: {message.method}")
            return
        where = lone_surrogate_at(message.params, "params")
        if where is not None:
            # JSON escapes can spell UTF-16 halves that no UTF-8 store, file or pipe can hold: refused
            # here once, naming the field, instead of failing wherever the string would travel next.
            problem = f"{message.method}: '{where.removeprefix('params.')}' holds a lone UTF-16 surrogate"
            self.respond_error(message.id, invalid_params(problem))
            return
        try:
            result = handler(message.params, message.id)
        except Exception as exc:
            self._respond_failure(message, exc)
            return
        if inspect.isawaitable(result):
            task = asyncio.get_running_loop().create_task(self._finish(message, result))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        else:
            self.respond(message.id, result)

    async def _finish(self, message: Request, pending: Awaitable[Any]) -> None:
        try:
            result = await pending
        except asyncio.CancelledError:
            self.respond_error(message.id, request_cancelled())
            raise
        except Exception as exc:
            self._respond_failure(message, exc)
        else:
            self.respond(message.id, result)

    async def drain(self) -> None:
        """Wait for the answers still being worked on (shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
