"""The tools' approver as a `dsh/requestPermission` request to the client.

An answer that is not one of the four outcomes, no answer within the timeout, a disconnect, or a
cancelled turn all resolve as `cancelled`; the client is told to drop a request it no longer needs
with `$/cancelRequest`.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Mapping

from lsprotocol import types
from pygls.protocol import JsonRPCProtocol

from dsh_daemon.agent.signal import AbortSignal
from dsh_daemon.agent.tools import PermissionOutcome, PermissionRequest

log = logging.getLogger(__name__)

OUTCOMES: tuple[PermissionOutcome, ...] = ("allow-once", "allow-always", "reject", "cancelled")


class ClientApprover:
    def __init__(self, protocol: JsonRPCProtocol, session_id: str, timeout_s: float) -> None:
        self._protocol = protocol
        self._session_id = session_id
        self._timeout_s = timeout_s

    async def request_permission(self, request: PermissionRequest, signal: AbortSignal) -> PermissionOutcome:
        msg_id = f"perm-{uuid.uuid4()}"
        params = {
            "sessionId": self._session_id,
            "callId": request.call.call_id,
            "tool": request.call.name,
            "title": request.title,
            "arguments": request.call.args if request.call.args is not None else request.call.arguments,
        }
        if request.preview is not None:
            params["preview"] = dict(request.preview)
        future = asyncio.wrap_future(
            self._protocol.send_request("dsh/requestPermission", params, msg_id=msg_id)
        )
        try:
            answer = await asyncio.wait_for(signal.race(future), self._timeout_s)
        except TimeoutError:
            self._protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=msg_id))
            return "cancelled"
        except Exception as exc:
            if signal.aborted:
                self._protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=msg_id))
                raise
            log.info("permission request failed: %s", exc)
            return "cancelled"
        outcome = answer.get("outcome") if isinstance(answer, Mapping) else getattr(answer, "outcome", None)
        return outcome if outcome in OUTCOMES else "cancelled"
