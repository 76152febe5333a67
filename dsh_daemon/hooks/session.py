"""One session's configured hooks, and the points of the agent where each event fires.

- `sessionStart`: started when the session is opened here (`start`); its context enters with the
  first step's batch (the first boundary waits for it, within the hooks' timeouts).
- `userPromptSubmit`: for each person's prompt (`source.kind == "user"`) a step enters; a block
  replaces the prompt with a `hook` message saying so and why (the prompt never reaches the model),
  context follows the prompt.
- `preToolUse` (matcher: the tool's name): before the permission policy; a block refuses the call
  (`DENIED`, the reason in the result the model reads).
- `permissionRequest`: when the person would be asked; `permission: "deny"` from any hook refuses,
  otherwise `"allow"` runs the call once; no answer leaves the question to the person. A request to
  widen the sandbox is never answered by a hook: only the person widens it.
- `postToolUse`: after the call; context enters after the batch's results, like a tool's own.
- `stop`: when a turn would close; a block injects the reason and the turn goes on, at most
  MAX_STOP_CONTINUATIONS times per turn (then it closes whatever the hooks say).
- `subagentStop`: a subagent ended (fired by `host/children.py` in the parent), its context after the summary.

Context and reasons reach the model as UserMessages of source `{kind: "hook", event, hook}`, logged as
any `user/message` (so a rebuilt history has them). A hook that fails is as if it said nothing, and is
reported once per hook per session (`report`); it never fails or holds a turn beyond its timeout.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Literal

from dsh_daemon.agent.hooks import (
    Enter,
    PreStepContext,
    PreStepDecision,
    TurnStoppingContext,
)
from dsh_daemon.agent.signal import AbortSignal
from dsh_daemon.agent.tools import (
    Allow,
    Deny,
    PermissionRequest,
    PostExecuteDecision,
    ToolCall,
    ToolOutcome,
)
from dsh_daemon.hooks.runner import HookAnswer, HookFailure, HookRunner, hook_document
from dsh_daemon.model.hooks import HookCommand, HookEvent, HookSettings
from dsh_daemon.model.messages import TextBlock, UserMessage
from dsh_daemon.model.payloads import HooksUntrusted

logger = logging.getLogger(__name__)

MAX_STOP_CONTINUATIONS = 3
MAX_RESULT_CHARS = 16_000  # of a tool result's text in a postToolUse document

Report = Callable[[HookCommand, str], None]


def hook_message(hook: HookCommand, text: str) -> UserMessage:
    return UserMessage.create(text, {"kind": "hook", "event": hook.event, "hook": hook.label})


class SessionHooks:
    """The session's hooks: the person's (`user`: config.json and the editor's options) and the
    project's once trusted (`project`), run by `runner`; failures go to `report` once per hook."""

    def __init__(
        self,
        session_id: str,
        runner: HookRunner,
        user: HookSettings,
        *,
        cwd: Callable[[], Path],
        roots: Callable[[], tuple[Path, ...]],
    ) -> None:
        self.session_id = session_id
        self.runner = runner
        self.user = user
        self.project = HookSettings()
        self.untrusted: HooksUntrusted | None = None  # the project's hooks waiting for the person's trust
        self.report: Report = lambda _hook, _reason: None
        self._cwd = cwd
        self._roots = roots
        self._reported: set[HookCommand] = set()
        self._started: asyncio.Task[tuple[UserMessage, ...]] | None = None
        self._start_entered = False
        self._stops: dict[int, int] = {}  # turn -> continuations asked so far

    @property
    def settings(self) -> HookSettings:
        return self.user + self.project

    # ---- running ---------------------------------------------------------------------------------

    async def fire(
        self, event: HookEvent, tool_name: str | None = None, /, **fields: Any
    ) -> list[tuple[HookCommand, HookAnswer]]:
        """Every hook of `event` (for the tool `tool_name`) run at once; their answers in configuration
        order (a failed hook is reported and left out). `fields` join the document on stdin."""
        hooks = self.settings.for_event(event, tool_name)
        if not hooks:
            return []
        document = hook_document(self.session_id, self._cwd(), self._roots(), event, **fields)
        results = await asyncio.gather(*(self.runner.run(h, {**document, "hook": h.label}) for h in hooks))
        answers = []
        for hook, result in zip(hooks, results, strict=True):
            if isinstance(result, HookFailure):
                self._failed(hook, result.reason)
            else:
                answers.append((hook, result))
        return answers

    def _failed(self, hook: HookCommand, reason: str) -> None:
        logger.warning("session %s: %s hook %r failed: %s", self.session_id, hook.event, hook.label, reason)
        if hook in self._reported:
            return
        self._reported.add(hook)
        try:
            self.report(hook, reason)
        except Exception:  # a report must never break the turn
            logger.exception("the hook failure could not be reported")

    # ---- sessionStart ------------------------------------------------------------------------------

    def start(self, source: Literal["startup", "resume"]) -> None:
        """Run the sessionStart hooks now (in the background); their context waits for the first step."""
        if self._started is None and self.settings.for_event("sessionStart"):
            self._started = asyncio.get_running_loop().create_task(self._session_start(source))

    async def _session_start(self, source: str) -> tuple[UserMessage, ...]:
        answers = await self.fire("sessionStart", source=source)
        return tuple(hook_message(h, a.context) for h, a in answers if a.context)

    async def aclose(self) -> None:
        task, self._started = self._started, None
        if task is not None and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    # ---- the agent's hooks -----------------------------------------------------------------------------

    async def pre_step(
        self, ctx: PreStepContext, next_: Callable[[], Awaitable[PreStepDecision]]
    ) -> PreStepDecision:
        decision = await next_()
        if not isinstance(decision, Enter):
            return decision
        entered: list[UserMessage] = []
        if self._started is not None and not self._start_entered:
            entered += await ctx.signal.race(asyncio.shield(self._started))
            self._start_entered = True  # not before: an aborted boundary leaves it for the next
        for message in decision.messages:
            if message.source.get("kind") != "user" or not self.settings.for_event("userPromptSubmit"):
                entered.append(message)
                continue
            answers = await ctx.signal.race(self.fire("userPromptSubmit", prompt=message.text, turn=ctx.turn))
            blocked = next(((h, a) for h, a in answers if a.block), None)
            if blocked is None:
                entered.append(message)
            else:
                hook, answer = blocked
                text = f"The person's prompt was blocked by the hook {hook.label} and not sent"
                said = f"{text}: {answer.reason}" if answer.reason else f"{text}."
                entered.append(hook_message(hook, said))
            entered += [hook_message(h, a.context) for h, a in answers if a.context]
        return Enter(tuple(entered))

    async def pre_execute(self, call: ToolCall, signal: AbortSignal) -> Deny | None:
        if not self.settings.for_event("preToolUse", call.name):
            return None
        answers = await signal.race(self.fire("preToolUse", call.name, tool=_tool(call)))
        for hook, answer in answers:
            if answer.block or answer.permission == "deny":
                because = f": {answer.reason}" if answer.reason else ""
                return Deny(f"the hook {hook.label} blocked this call{because}", reason="hook")
        return None

    async def permission_request(
        self, request: PermissionRequest, signal: AbortSignal
    ) -> Allow | Deny | None:
        call = request.call
        if not self.settings.for_event("permissionRequest", call.name):
            return None
        if request.preview is not None and "escalation" in request.preview:
            return None  # only the person widens the sandbox (protocol.md "Sandbox")
        permission = {"title": request.title, "preview": dict(request.preview) if request.preview else None}
        answers = await signal.race(
            self.fire("permissionRequest", call.name, tool=_tool(call), permission=permission)
        )
        for hook, answer in answers:
            if answer.permission == "deny" or answer.block:
                because = f": {answer.reason}" if answer.reason else ""
                return Deny(f"the hook {hook.label} denied this call{because}", reason="hook")
        if any(answer.permission == "allow" for _, answer in answers):
            return Allow()
        return None

    async def post_execute(self, call: ToolCall, outcome: ToolOutcome) -> PostExecuteDecision | None:
        if not self.settings.for_event("postToolUse", call.name):
            return None
        text = "".join(b.text for b in outcome.content if isinstance(b, TextBlock))
        result = {
            "isError": outcome.is_error,
            "errorCode": outcome.error_code,
            "text": text[:MAX_RESULT_CHARS],
        }
        answers = await self.fire("postToolUse", call.name, tool=_tool(call), result=result)
        contexts = tuple(hook_message(h, a.context) for h, a in answers if a.context)
        return PostExecuteDecision(additional_contexts=contexts) if contexts else None

    async def turn_stopping(self, ctx: TurnStoppingContext) -> None:
        if not self.settings.for_event("stop"):
            return
        asked = self._stops.get(ctx.turn, 0)
        if asked >= MAX_STOP_CONTINUATIONS:
            logger.info("session %s: turn %d closes after %d continuations", self.session_id, ctx.turn, asked)
            return
        answers = await ctx.signal.race(self.fire("stop", turn=ctx.turn, stopHookActive=asked > 0))
        blocked = next(((h, a) for h, a in answers if a.block), None)
        if blocked is None:
            return
        hook, answer = blocked
        self._stops = {ctx.turn: asked + 1}  # earlier turns' counts are done with
        reason = answer.reason or "(no reason given)"
        ctx.agent.inject(hook_message(hook, f"The hook {hook.label} asks you not to stop yet: {reason}"))


def _tool(call: ToolCall) -> Mapping[str, Any]:
    return {
        "callId": call.call_id,
        "name": call.name,
        "arguments": dict(call.args) if call.args is not None else call.arguments,
        "turn": call.turn,
        "step": call.step,
    }
