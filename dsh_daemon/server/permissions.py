"""The tools' approver as a `dsh/requestPermission` request to the client.

An answer that is not one of the four outcomes, no answer within the timeout, a disconnect, or a
cancelled turn all resolve as `cancelled`; the client is told to drop a request it no longer needs
with `$/cancelRequest`.

Each open request is also announced as a live `permission/requested` event and listed by
`open_requests()` (the attach reply), so a client that lost its view of the request (a reloaded
webview) can still show it and answer it with `dsh/permissions/respond`; `permission/resolved` says
how it ended, whichever way it was answered.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Mapping
from typing import Any, cast

from lsprotocol import types
from pygls.protocol import JsonRPCProtocol

from dsh_daemon.host.errors import invalid_params
from dsh_daemon.host.port import AbortSignal, PermissionOutcome, PermissionReply, PermissionRequest
from dsh_daemon.model.payloads import PermissionRequested, PermissionResolved

logger = logging.getLogger(__name__)

OUTCOMES: tuple[PermissionOutcome, ...] = ("allow-once", "allow-always", "reject", "cancelled")

Announce = Callable[[str, dict[str, Any]], None]  # (live event type, data) to the session's client


class LspApprover:
    def __init__(
        self,
        protocol: JsonRPCProtocol,
        session_id: str,
        timeout_s: Callable[[], float],
        announce: Announce | None = None,
    ) -> None:
        """`timeout_s`: read at each request (a configuration change applies to the next one)."""
        self._protocol = protocol
        self._session_id = session_id
        self._timeout_s = timeout_s
        self._announce = announce or (lambda _type, _data: None)
        self._open: dict[str, tuple[dict[str, Any], asyncio.Future[Any]]] = {}

    def open_requests(self) -> list[dict[str, Any]]:
        """The `dsh/requestPermission` params of every request still waiting for an answer."""
        return [params for params, _ in self._open.values()]

    def respond(
        self,
        call_id: str,
        outcome: str,
        new_text: str | None = None,
        persist: bool | None = None,
        unsaved: str | None = None,
        mode: str | None = None,
        feedback: str | None = None,
    ) -> bool:
        """Answer an open request out of band (`dsh/permissions/respond`); False when none is open.
        A `new_text`, `persist`, `unsaved`, `mode` or `feedback` the request cannot take is refused
        (`invalid_params`), and the request stays open."""
        entry = self._open.get(call_id)
        if entry is None or entry[1].done():
            return False
        for name, value, check in (("mode", mode, mode_problem), ("feedback", feedback, feedback_problem)):
            problem = None if value is None else check(entry[0].get("preview"), outcome, value)
            if problem is not None:
                raise invalid_params(f"dsh/permissions/respond: '{name}' {problem}")
        if new_text is not None:
            problem = new_text_problem(entry[0].get("preview"), outcome)
            if problem is not None:
                raise invalid_params(f"dsh/permissions/respond: 'newText' {problem}")
        if persist:
            problem = persist_problem(entry[0].get("preview"), outcome)
            if problem is not None:
                raise invalid_params(f"dsh/permissions/respond: 'persist' {problem}")
        if unsaved is not None:
            problem = unsaved_problem(entry[0].get("preview"), outcome, unsaved)
            if problem is not None:
                raise invalid_params(f"dsh/permissions/respond: 'unsaved' {problem}")
        answer: dict[str, Any] = {"outcome": outcome}
        if unsaved is not None:
            answer["unsaved"] = unsaved
        if new_text is not None:
            answer["newText"] = new_text
        if persist:
            answer["persist"] = True
        if mode is not None:
            answer["mode"] = mode
        if feedback is not None:
            answer["feedback"] = feedback
        entry[1].set_result(answer)
        return True

    async def request_permission(
        self, request: PermissionRequest, signal: AbortSignal
    ) -> PermissionOutcome | PermissionReply:
        msg_id = f"perm-{uuid.uuid4()}"
        call_id = request.call.call_id
        call = request.call
        arguments = call.args if call.args is not None else call.arguments
        preview = dict(request.preview) if request.preview is not None else None
        asked = PermissionRequested(call_id, call.name, request.title, arguments, preview, request.subagent)
        params: dict[str, Any] = {"sessionId": self._session_id, **asked.data()}
        out_of_band: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._open[call_id] = (params, out_of_band)
        self._announce(asked.TYPE, asked.data())
        outcome: PermissionOutcome = "cancelled"
        try:
            reply = await self._ask(msg_id, params, out_of_band, signal)
            outcome = reply.outcome if isinstance(reply, PermissionReply) else reply
            return reply
        finally:
            self._open.pop(call_id, None)
            resolved = PermissionResolved(call_id, outcome)
            self._announce(resolved.TYPE, resolved.data())

    async def _ask(
        self, msg_id: str, params: dict[str, Any], out_of_band: asyncio.Future[Any], signal: AbortSignal
    ) -> PermissionOutcome | PermissionReply:
        future = asyncio.wrap_future(
            self._protocol.send_request("dsh/requestPermission", params, msg_id=msg_id)
        )
        either = asyncio.ensure_future(_first(future, out_of_band))
        answered_by_client = False
        try:
            # asyncio.timeout, not wait_for: no extra task whose AbortedError nobody would retrieve.
            async with asyncio.timeout(self._timeout_s()):
                answer = await signal.race(either)
            answered_by_client = future.done() and not future.cancelled()
        except TimeoutError:
            return "cancelled"
        except Exception as exc:
            if signal.aborted:
                raise
            answered_by_client = future.done()  # an error reply, or a lost client
            logger.info("permission request failed: %s", exc)
            return "cancelled"
        finally:
            out_of_band.cancel()
            either.cancel()
            if not future.done():
                future.cancel()
            if not answered_by_client:
                # Timed out, aborted (however the abort arrived) or answered out of band: the editor's
                # own prompt is no longer needed.
                self._protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=msg_id))
        outcome = answer.get("outcome") if isinstance(answer, Mapping) else getattr(answer, "outcome", None)
        if outcome not in OUTCOMES:
            return "cancelled"
        new_text = answer.get("newText") if isinstance(answer, Mapping) else None
        persist = answer.get("persist") if isinstance(answer, Mapping) else None
        unsaved = answer.get("unsaved") if isinstance(answer, Mapping) else None
        if unsaved is not None:
            problem = unsaved_problem(params.get("preview"), outcome, unsaved)
            if problem is not None:
                # Fail closed: writing the person's unsaved text they did not mean to write is worse
                # than asking again.
                logger.warning("permission answer refused: 'unsaved' %s", problem)
                return "cancelled"
        mode = answer.get("mode") if isinstance(answer, Mapping) else None
        feedback = answer.get("feedback") if isinstance(answer, Mapping) else None
        for name, value, check in (("mode", mode, mode_problem), ("feedback", feedback, feedback_problem)):
            problem = None if value is None else check(params.get("preview"), outcome, value)
            if problem is not None:
                # Fail closed: a plan run in a mode the person did not pick is worse than asking again.
                logger.warning("permission answer refused: '%s' %s", name, problem)
                return "cancelled"
        extras = (new_text, unsaved, mode, feedback)
        if all(extra is None for extra in extras) and persist in (None, False):
            return cast(PermissionOutcome, outcome)
        if new_text is not None:
            problem = new_text_problem(params.get("preview"), outcome)
            if problem is not None or not isinstance(new_text, str):
                # Fail closed: writing something other than what the person meant is worse than asking again.
                logger.warning("permission answer refused: 'newText' %s", problem or "must be a string")
                return "cancelled"
        if persist not in (None, False):
            problem = "must be true or false" if persist is not True else None
            problem = problem or persist_problem(params.get("preview"), outcome)
            if problem is not None:
                # Fail closed: keeping a widening the person did not mean to keep is worse than asking again.
                logger.warning("permission answer refused: 'persist' %s", problem)
                return "cancelled"
        kept = persist is True
        return PermissionReply(cast(PermissionOutcome, outcome), new_text, kept, unsaved, mode, feedback)


def new_text_problem(preview: Any, outcome: str) -> str | None:
    """Why an answer's `newText` cannot be taken (None: it can): only beside an allowing outcome, for
    a request previewing an edit whose whole before-text was shown (protocol.md §8)."""
    if outcome not in ("allow-once", "allow-always"):
        return "goes only with allow-once or allow-always"
    if not isinstance(preview, Mapping) or "diff" not in preview:
        return "needs a request that previews an edit"
    if preview.get("truncated"):
        return "cannot be taken for a preview cut by its cap (truncated)"
    return None


UNSAVED_CHOICES = ("both", "buffer-only")


def unsaved_problem(preview: Any, outcome: str, unsaved: Any) -> str | None:
    """Why an answer's `unsaved` cannot be taken (None: it can): "both" or "buffer-only", beside an
    allowing outcome, for a request whose edit overlaps the person's unsaved changes (protocol.md §8)."""
    if unsaved not in UNSAVED_CHOICES:
        return 'must be "both" or "buffer-only"'
    if outcome not in ("allow-once", "allow-always"):
        return "goes only with allow-once or allow-always"
    if not isinstance(preview, Mapping) or preview.get("unsaved") != "overlaps":
        return 'needs a request whose edit overlaps unsaved changes (preview.unsaved "overlaps")'
    return None


def persist_problem(preview: Any, outcome: str) -> str | None:
    """Why an answer's `persist: true` cannot be taken (None: it can): only beside `allow-always`, for
    a request that asks to widen the sandbox (protocol.md §8, §16). An escalation to `unconfined` takes
    it (it is kept for the session only: unconfined is never saved)."""
    if outcome != "allow-always":
        return "goes only with allow-always"
    if not isinstance(preview, Mapping) or not isinstance(preview.get("escalation"), Mapping):
        return "needs a request that asks to widen the sandbox (preview.escalation)"
    return None


PLAN_MODES = ("accept-edits", "ask")
MAX_FEEDBACK_CHARS = 20_000


def is_plan(preview: Any) -> bool:
    return isinstance(preview, Mapping) and preview.get("kind") == "plan"


def mode_problem(preview: Any, outcome: str, mode: Any) -> str | None:
    """Why an answer's `mode` cannot be taken (None: it can): "accept-edits" or "ask", beside an
    allowing outcome, for a plan's approval (preview.kind "plan", protocol.md §3)."""
    if mode not in PLAN_MODES:
        return 'must be "accept-edits" or "ask"'
    if outcome not in ("allow-once", "allow-always"):
        return "goes only with allow-once or allow-always"
    if not is_plan(preview):
        return 'needs a plan\'s request (preview.kind "plan")'
    return None


def feedback_problem(preview: Any, outcome: str, feedback: Any) -> str | None:
    """Why an answer's `feedback` cannot be taken (None: it can): a string, beside `reject`, for a
    plan's approval (the person's words for the model's revision)."""
    if not isinstance(feedback, str):
        return "must be a string"
    if len(feedback) > MAX_FEEDBACK_CHARS:
        return f"is longer than {MAX_FEEDBACK_CHARS} characters"
    if outcome != "reject":
        return "goes only with reject"
    if not is_plan(preview):
        return 'needs a plan\'s request (preview.kind "plan")'
    return None


async def _first(*futures: asyncio.Future[Any]) -> Any:
    """The result of whichever future completes first (its exception, if it failed)."""
    done, _ = await asyncio.wait(futures, return_when=asyncio.FIRST_COMPLETED)
    return next(iter(done)).result()
