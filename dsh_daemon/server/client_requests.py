"""Requests the daemon sends to its client on a tool's behalf (`workspace/applyEdit`,
`dsh/document/save`, `dsh/editor/*`): the one place that sends them (protocol.md §9, "Requests to
the editor").

Each request is bounded by a timeout, its answer is checked against the shape the method promises
(`server/editor_answers.py`) before anything reads it, and it ends at once, as a typed
`EditorUnavailable`, when the client answers with an error, with `null`, with the wrong shape, with
more than the answer cap (8 MiB, refused unread by the read loop), not at all, or when the
connection closes (`shutdown`, `exit`, stdin EOF, SIGTERM). The turn waiting for it
ends it too: its abort signal wins the race (`AbortedError`, which the tool layer turns into a
cancelled call). A request that ends without its answer is withdrawn with `$/cancelRequest`, and an
answer that comes later (a second one, or one for an id never asked) is dropped.

`dsh/requestPermission` is not sent here: it has its own timeout (`permissionTimeoutS`) and resolves
every failure as the outcome `cancelled` (server/permissions.py).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.protocol import JsonRPCProtocol

from dsh_daemon.host.port import AbortSignal, EditorUnavailable
from dsh_daemon.server.transport import AnswerTooLarge

logger = logging.getLogger(__name__)

# What an answer must look like: the field path of its first problem, or None when it is usable.
AnswerCheck = Callable[[Mapping[str, Any]], str | None]


class ClientRequests:
    """The connection's open requests to the client. `close()` ends every one of them at once and
    refuses new ones: a closing daemon waits for no editor."""

    def __init__(self, protocol: JsonRPCProtocol) -> None:
        self._protocol = protocol
        self._open: dict[str, asyncio.Future[Any]] = {}
        self._closed: str | None = None

    @property
    def open_count(self) -> int:
        return len(self._open)

    async def ask(
        self,
        method: str,
        params: Any,
        timeout_s: float,
        *,
        check: AnswerCheck | None = None,
        signal: AbortSignal | None = None,
    ) -> Mapping[str, Any]:
        """The client's answer to `method`, an object that passed `check`. Raises `EditorUnavailable`
        (no usable answer: the message says why, naming the field of a malformed one) or `AbortedError`
        (`signal` fired first)."""
        if self._closed is not None:
            raise EditorUnavailable(f"{method} was not sent: {self._closed}")
        msg_id = f"dsh-{uuid.uuid4()}"
        sent = self._protocol.send_request(method, params, msg_id=msg_id)
        # The answer stays raw JSON, checked below: pygls would structure a known method's result
        # itself and, failing on a malformed one, drop it without ever resolving the request.
        self._protocol._result_types.pop(msg_id, None)
        future = asyncio.wrap_future(sent)
        self._open[msg_id] = future
        answered = False
        try:
            async with asyncio.timeout(timeout_s):
                answer = await (future if signal is None else signal.race(future))
            answered = True
        except TimeoutError:
            raise EditorUnavailable(f"the editor did not answer {method} within {timeout_s:g} s") from None
        except JsonRpcException as exc:
            answered = True
            raise EditorUnavailable(f"the editor answered {method} with an error: {exc.message}") from None
        except AnswerTooLarge as exc:  # refused unread by the read loop (server/transport.py)
            answered = True
            raise EditorUnavailable(f"the editor's answer to {method} was refused: {exc}") from None
        except EditorUnavailable:  # ended by `close`
            raise
        finally:
            self._open.pop(msg_id, None)
            # A late answer finds no request: pygls drops it with a warning.
            self._protocol._request_futures.pop(msg_id, None)
            if not answered:
                self._withdraw(msg_id)
        if not isinstance(answer, Mapping):
            kind = "null" if answer is None else type(answer).__name__
            raise EditorUnavailable(f"the editor's answer to {method} is not an object (it is {kind})")
        problem = check(answer) if check is not None else None
        if problem is not None:
            raise EditorUnavailable(f"the editor's answer to {method} is malformed: {problem}")
        return answer

    def _withdraw(self, msg_id: str) -> None:
        try:
            self._protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=msg_id))
        except Exception as exc:  # the client may be gone already: nothing is waiting for this
            logger.debug("$/cancelRequest for %s not sent: %s", msg_id, exc)

    def close(self, reason: str) -> None:
        """End every open request now (`EditorUnavailable(reason)`) and refuse new ones."""
        if self._closed is None:
            self._closed = reason
        for future in list(self._open.values()):
            if not future.done():
                future.set_exception(EditorUnavailable(f"no answer from the editor: {reason}"))
