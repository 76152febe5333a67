"""The tools' approver as ACP `session/request_permission`.

The request shows the call as a `tool_call` (title, kind, locations, an edit's diff as `diff`
content, a command as text) with three options: allow once, allow always, reject once; a request to
widen the sandbox (not to run unconfined) has a fourth, "Always (saved to config)" (`allow_always`,
optionId `allow-always-persist`: the widening is saved to config.json, protocol.md §16). An escalation
shows the reason and the exact widening in words, and its allow-always is named for what it is, the
session. A plan's approval (`propose_plan`, preview kind `plan`) shows the plan as text with three
options: approve and accept edits, approve and ask before edits, keep planning (a rejection: ACP
carries no words with an answer, so the model asks what to change). A `cancelled`
outcome, an unknown option, no answer within the timeout or a lost client count as `cancelled`
(which cancels the turn, keeping the queue); when the turn is aborted while the request is open,
the client is sent `$/cancel_request` for it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

from dsh_daemon.acp.rpc import Connection
from dsh_daemon.acp.updates import Translator, diff_content, text_content
from dsh_daemon.host.port import AbortSignal, PermissionOutcome, PermissionReply, PermissionRequest

logger = logging.getLogger(__name__)

OPTIONS: tuple[dict[str, str], ...] = (
    {"optionId": "allow-once", "name": "Allow once", "kind": "allow_once"},
    {"optionId": "allow-always", "name": "Always allow", "kind": "allow_always"},
    {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
)
OUTCOMES: dict[str, PermissionOutcome] = {
    "allow-once": "allow-once",
    "allow-always": "allow-always",
    "reject": "reject",
}
KEEP = "allow-always-persist"
KEEP_OPTION = {"optionId": KEEP, "name": "Always (saved to config)", "kind": "allow_always"}
# An escalation's allow-always widens the session's sandbox (or, unconfined, allows this exact command
# unconfined for the session), never more: its name says so.
FOR_THE_SESSION = {"optionId": "allow-always", "name": "Allow for this session", "kind": "allow_always"}


PLAN_OPTIONS: tuple[dict[str, str], ...] = (
    {"optionId": "approve-accept-edits", "name": "Approve: accept edits", "kind": "allow_once"},
    {"optionId": "approve-ask", "name": "Approve: ask before edits", "kind": "allow_once"},
    {"optionId": "revise", "name": "Keep planning", "kind": "reject_once"},
)
PLAN_ANSWERS: dict[str, PermissionReply] = {
    "approve-accept-edits": PermissionReply("allow-once", mode="accept-edits"),
    "approve-ask": PermissionReply("allow-once", mode="ask"),
    "revise": PermissionReply("reject"),
}


def is_plan(preview: Mapping[str, Any] | None) -> bool:
    return isinstance(preview, Mapping) and preview.get("kind") == "plan"


def options_for(preview: Mapping[str, Any] | None) -> list[dict[str, str]]:
    """The options of a request: "Always (saved to config)" only where a widening can be kept (an
    escalation that is not to run unconfined, which is never saved); a plan's own three."""
    if is_plan(preview):
        return list(PLAN_OPTIONS)
    escalation = escalation_of(preview)
    if escalation is None:
        return list(OPTIONS)
    if escalation.get("unconfined") is True:
        return [OPTIONS[0], FOR_THE_SESSION, OPTIONS[2]]
    return [OPTIONS[0], FOR_THE_SESSION, KEEP_OPTION, OPTIONS[2]]


def preview_content(preview: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    if not preview:
        return []
    if is_plan(preview):
        return [text_content(str(preview.get("plan", "")))]
    if isinstance(preview.get("diff"), str):
        return [diff_content(str(preview.get("path", "")), preview["diff"])]
    if isinstance(preview.get("command"), str):
        cwd = preview.get("cwd")
        text = f"$ {preview['command']}" + (f"\n(in {cwd})" if cwd else "")
        escalation = escalation_of(preview)
        if escalation is not None:
            text = f"{widening_words(escalation, preview.get('sandbox'))}\n\n{text}"
        return [text_content(text)]
    return []


def escalation_of(preview: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    escalation = preview.get("escalation") if isinstance(preview, Mapping) else None
    return escalation if isinstance(escalation, Mapping) else None


def widening_words(escalation: Mapping[str, Any], mode: Any) -> str:
    """The reason and the exact widening, one line each, and what each answer covers: what the person
    must see to decide."""
    unconfined = escalation.get("unconfined") is True
    lines = [f"The agent asks to widen the sandbox ({mode or 'confined'}) for this command."]
    lines.append(f"Reason: {escalation.get('reason', '')}")
    writable = [str(p) for p in escalation.get("writable") or ()]
    network = [str(d) for d in escalation.get("network") or ()]
    if writable:
        lines.append("Writable: " + ", ".join(writable))
    if network:
        lines.append("Network: " + ", ".join(network))
    if unconfined:
        lines.append("Unconfined: no sandbox at all for this command (your whole account)")
    covers = "this exact command unconfined" if unconfined else "every later command"
    lines.append(f"Allow once: this command only. Allow for this session: {covers} in this session.")
    if not unconfined:
        lines.append("Always (saved to config): every later session too (config.json).")
    return "\n".join(lines)


class AcpApprover:
    def __init__(
        self,
        connection: Connection,
        session_id: str,
        translator: Translator,
        timeout_s: Callable[[], float],
    ) -> None:
        """`timeout_s`: read at each request (a configuration change applies to the next one)."""
        self._connection = connection
        self._session_id = session_id
        self._translator = translator
        self._timeout_s = timeout_s

    async def request_permission(
        self, request: PermissionRequest, signal: AbortSignal
    ) -> PermissionOutcome | PermissionReply:
        call = request.call
        arguments: Any = call.args if call.args is not None else call.arguments
        content = preview_content(request.preview)
        translator = self._translator
        tool_call = translator.announce(call.call_id, call.name, arguments, status="pending", content=content)
        if request.subagent is not None and request.title:
            tool_call["title"] = request.title  # a child's call: its card says whose it is
        translator.send(tool_call)  # the client knows the call before it is asked about it
        tool_call = {k: v for k, v in tool_call.items() if k != "sessionUpdate"}
        tool_call["title"] = request.title or tool_call.get("title", call.name)
        options = options_for(request.preview)
        params = {"sessionId": self._session_id, "toolCall": tool_call, "options": options}
        request_id, future = self._connection.send_request("session/request_permission", params)
        answered = False
        try:
            async with asyncio.timeout(self._timeout_s()):  # no extra task (see server/permissions.py)
                answer = await signal.race(asyncio.shield(future))
            answered = True
        except TimeoutError:
            return "cancelled"
        except Exception as exc:
            if signal.aborted:
                raise
            answered = future.done()  # an error reply, or a lost client: nothing left to withdraw
            logger.info("permission request failed: %s", exc)
            return "cancelled"
        finally:
            # However the wait ended without an answer — a timeout, the turn's abort signal, or the
            # task itself cancelled (`session/cancel` cancels the tool run's approver task: a
            # CancelledError, which no `except Exception` sees) — the client's dialog is withdrawn.
            if not answered:
                self._connection.cancel_outgoing(request_id)
        outcome = answer.get("outcome") if isinstance(answer, Mapping) else None
        if isinstance(outcome, Mapping) and outcome.get("outcome") == "selected":
            chosen = str(outcome.get("optionId"))
            if is_plan(request.preview):  # only a plan's own options count for it
                return PLAN_ANSWERS.get(chosen, "cancelled")
            if chosen == KEEP and KEEP_OPTION in options:  # offered: an option not offered is unknown
                return PermissionReply("allow-always", persist=True)
            return OUTCOMES.get(chosen, "cancelled")
        return "cancelled"
