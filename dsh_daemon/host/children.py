"""Subagents' child sessions (dsh_daemon/subagents): each one a real session in the store, linked to
its parent (`parentId`), driven here for the one turn its parent's `run_subagent` call waits on.

What a child gets and keeps:
- its own context: the parent's prompt and chosen files as its first message, not the parent's history;
- the parent's tool set narrowed (`subagents/toolsets.py`), never `run_subagent`, no MCP servers
  unless its set is `all`; the parent's workspace, mode and configured sandbox rules;
- a step budget (the configured `agent.budget` capped further);
- its permission questions asked through the parent's approver, naming the child
  (`subagent {childId, callId, description}` and the title);
- its events forwarded live to the parent's stream as `subagent/event`; the parent's log records
  `subagent/started` and `subagent/finished` around it;
- the parent's cancel cancels it (cause `parent`); it is closed here once its turn ends.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import TYPE_CHECKING

from dsh_daemon.agent.signal import AbortedError, AbortSignal
from dsh_daemon.agent.tools import (
    Approver,
    PermissionOutcome,
    PermissionReply,
    PermissionRequest,
    ToolContext,
)
from dsh_daemon.model.events import TURN_END, Event
from dsh_daemon.model.messages import UserMessage
from dsh_daemon.model.payloads import SubagentEvent, SubagentFinished, SubagentStarted
from dsh_daemon.model.wire import SubagentOrigin
from dsh_daemon.subagents.summary import child_result
from dsh_daemon.subagents.task import SubagentResult, SubagentTask

if TYPE_CHECKING:
    from dsh_daemon.host.hosted import HostedSession
    from dsh_daemon.host.sessions import SessionHost

logger = logging.getLogger(__name__)

CANCEL_SETTLE_S = 10.0  # how long a cancelled child's turn may take to end before the parent goes on


class ChildApprover:
    """A child's permission questions, asked through its parent's approver (the person sees them in
    the parent's clients), each naming the child."""

    def __init__(self, parent: HostedSession, origin: SubagentOrigin) -> None:
        self.parent = parent
        self.origin = origin

    async def request_permission(
        self, request: PermissionRequest, signal: AbortSignal
    ) -> PermissionOutcome | PermissionReply:
        approver: Approver | None = self.parent.approver
        if approver is None:
            return "cancelled"
        named = dataclasses.replace(
            request, title=f"Subagent “{self.origin.description}”: {request.title}", subagent=self.origin
        )
        return await approver.request_permission(named, signal)


class ChildSessions:
    """The `Launcher` of one parent session's `run_subagent` calls."""

    def __init__(self, host: SessionHost, parent_id: str) -> None:
        self.host = host
        self.parent_id = parent_id

    async def run_child(self, task: SubagentTask, ctx: ToolContext) -> SubagentResult:
        parent = self.host.sessions[self.parent_id]
        call_id = ctx.call.call_id
        child = self.host.create_child(parent, task, ctx.call)
        child_id = child.session_id
        origin = SubagentOrigin(child_id, call_id, task.description)
        child.agent.approver = ChildApprover(parent, origin)
        ctx.log_event(
            SubagentStarted(call_id, child_id, task.description, task.tools, task.max_steps, task.agent),
            ignorable=True,
        )
        # On disk before the child runs: a crash from here on finds it in the parent's open turn, and
        # the parent's repair closes it (`subagent/finished {interrupted}`).
        parent.agent.log.commit()
        ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def forward(event: Event) -> None:
            wrapped: dict[str, object] = {"type": event.type, "data": event.data}
            if event.seq is not None:
                wrapped["seq"] = event.seq
            parent.agent.bus.publish(SubagentEvent(call_id, child_id, wrapped).event())
            if event.type == TURN_END and not ended.done():
                ended.set_result(None)

        unsubscribe = child.agent.subscribe(forward)
        try:
            child.send(UserMessage.create(task.prompt), "next-turn", True)
            try:
                await ctx.signal.race(asyncio.shield(ended))
            except AbortedError:
                # A person's (or a hook's) cancel of the parent is the child's `parent` cause; the
                # daemon stopping or letting the parent go is the child's own cause too.
                cause = ctx.signal.cause
                child.agent.cancel("parent" if cause in ("user", "hook", None) else cause)
                try:
                    async with asyncio.timeout(CANCEL_SETTLE_S):
                        await asyncio.shield(ended)
                except TimeoutError:
                    logger.warning("subagent %s did not stop within %ss", child_id, CANCEL_SETTLE_S)
            status, summary = child_result(child.agent.log.events)
            if ctx.signal.aborted and status == "completed":
                status = "cancelled"  # its last step finished as the parent was cancelled
        finally:
            unsubscribe()
            await self.host.close_session(child_id)
        try:
            ctx.log_event(SubagentFinished(call_id, child_id, status, summary), ignorable=True)
        except Exception:  # the parent's log going away (a shutdown) must not hide the result
            logger.exception("session %s: subagent/finished could not be logged", self.parent_id)
        contexts = await self._subagent_stop(parent, origin, status, summary)
        return SubagentResult(child_id, status, "\n\n".join([summary, *contexts]))

    async def _subagent_stop(
        self, parent: HostedSession, origin: SubagentOrigin, status: str, summary: str
    ) -> list[str]:
        """The person's `subagentStop` hooks (the parent's), told the child ended; what they add
        (`additionalContext`) follows the summary in the call's result."""
        hooks = parent.tools.hooks
        if not hooks.settings.for_event("subagentStop"):
            return []
        answers = await hooks.fire(
            "subagentStop",
            childId=origin.child_id,
            callId=origin.call_id,
            description=origin.description,
            status=status,
            summary=summary,
        )
        return [f"[hook {hook.label}] {answer.context}" for hook, answer in answers if answer.context]
