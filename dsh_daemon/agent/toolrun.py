"""Runs one assistant message's tool calls (docs/design.md §2.3–2.5).

Invariants kept here:
- Parallel-safe neighbours run concurrently (pool cap); any other call is an exclusive barrier.
- Results are committed in model order, whatever order the bodies finish in.
- `tool/call` is committed (a forced checkpoint) before the body starts, so a crash mid-body is
  repaired as TOOL_OUTCOME_UNKNOWN rather than TOOL_NOT_STARTED.
- After an abort no new call starts; started ones are drained and committed; each unstarted call gets
  a synthetic `tool/call` and an `ABORTED_BEFORE_DISPATCH` error result.
- Context from a call (post-execute `additional_contexts`, `defer_context`) enters next-step as that
  call's result commits, in call order, so it reaches the model only after the whole batch (D3).
- A call's live output is also shared through the store (`session/liveoutput.py`) for windows in
  other processes; it is closed (its last row written) when the body ends, before its result is
  appended, so a follower sees all of it before the result.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dsh_daemon.agent.budget import GENERIC_HINT, elide_middle
from dsh_daemon.agent.signal import AbortedError, AbortSignal
from dsh_daemon.agent.tools import (
    Allow,
    Ask,
    Deny,
    PermissionOutcome,
    PermissionReply,
    PermissionRequest,
    PostExecuteDecision,
    Tool,
    ToolCall,
    ToolOutcome,
)
from dsh_daemon.agent.turncontext import TurnContext
from dsh_daemon.model.jsonvalue import FrozenDict, freeze_json
from dsh_daemon.model.messages import (
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    UserMessage,
    mint_message_id,
)
from dsh_daemon.model.payloads import Payload, ToolCalled, ToolOutput, ToolResulted, entry
from dsh_daemon.model.wire import ToolErrorInfo
from dsh_daemon.session.liveoutput import SharedOutput

logger = logging.getLogger(__name__)

ABORTED_BEFORE_DISPATCH = "ABORTED_BEFORE_DISPATCH"


@dataclass
class _RunningCall:
    """A `ToolContext` for one call."""

    agent: TurnContext
    call: ToolCall
    signal: AbortSignal
    deferred: list[UserMessage] = field(default_factory=list)
    concluded: bool = False
    approved_preview: Mapping[str, Any] | None = None
    accepted_text: str | None = None
    persist_approved: bool = False
    unsaved_choice: str | None = None
    approved_mode: str | None = None
    shared: SharedOutput | None = None  # for other processes' windows, made at the first output

    def emit_output(self, text: str) -> None:
        if text:
            call = self.call
            # Into the store before any client sees it: a call's first output is written at once,
            # so a window opened on seeing it follows the output from there on.
            if self.shared is None:
                log = self.agent.log
                self.shared = SharedOutput(
                    log.store,
                    log.session_id,
                    call.turn,
                    call.step,
                    call.call_id,
                    last_seq=lambda: log.next_seq - 1,
                    writable=lambda: log.lease_lost is None,
                    holder=log.lease_holder,
                )
            self.shared.add(text)
            self.agent.bus.publish(ToolOutput(call.turn, call.step, call.call_id, text).event())

    def close_output(self) -> None:
        """The body ended: the shared output's last row is written (before the result is appended)."""
        if self.shared is not None:
            self.shared.close()

    def defer_context(self, message: UserMessage) -> None:
        if not isinstance(message, UserMessage):
            raise TypeError("defer_context takes a UserMessage")
        self.deferred.append(message)

    def conclude_turn(self) -> None:
        self.concluded = True

    def log_event(self, payload: Payload, *, ignorable: bool = False) -> None:
        self.agent.log.append(*entry(payload), ignorable=ignorable)


@dataclass
class _Result:
    outcome: ToolOutcome
    contexts: tuple[UserMessage, ...] = ()
    call_seq: int | None = None
    concluded: bool = False


def _parse(arguments: str) -> Any:
    if not arguments.strip():
        return {}
    try:
        value = json.loads(arguments)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


async def run_tool_batch(
    agent: TurnContext, blocks: tuple[ToolCallBlock, ...], turn: int, step: int, signal: AbortSignal
) -> bool:
    """Run the batch; returns whether a call concluded the turn. Raises AbortedError after draining."""
    calls = [ToolCall(b.id, b.name, b.arguments, _parse(b.arguments), turn, step) for b in blocks]
    semaphore = asyncio.Semaphore(max(1, agent.options.tool_concurrency))
    pending: list[asyncio.Task[_Result] | _Result] = []
    concluded = False

    async def commit_ready(until: int) -> None:
        nonlocal concluded
        while pending and len(committed) < until:
            head = pending[0]
            result = head if isinstance(head, _Result) else await _drain(head)
            pending.pop(0)
            call = calls[len(committed)]
            _commit_result(agent, call, result)
            committed.append(call.call_id)
            concluded = concluded or result.concluded

    committed: list[str] = []
    try:
        for index, call in enumerate(calls):
            tool = agent.tools.get(call.name)
            exclusive = tool is None or not tool.parallel_safe
            if exclusive:
                # A barrier: everything before it commits first, then it runs alone.
                await commit_ready(index)
            if signal.aborted:
                pending.append(_aborted_before_dispatch(agent, call))
            else:
                task = asyncio.get_running_loop().create_task(_run_one(agent, call, tool, signal, semaphore))
                pending.append(task)
                if exclusive:
                    await commit_ready(index + 1)
        await commit_ready(len(calls))
    finally:
        # Whatever escaped (a failed write, say), no tool body may outlive its turn.
        started = [t for t in pending if isinstance(t, asyncio.Task) and not t.done()]
        for task in started:
            task.cancel()
        if started:
            await asyncio.gather(*started, return_exceptions=True)
    signal.check()
    return concluded


async def _drain(task: asyncio.Task[_Result]) -> _Result:
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        if task.cancelled():
            return _Result(ToolOutcome.error("Error: tool call was cancelled", "CANCELLED"))
        raise
    except Exception as exc:  # _run_one turns failures into results; this is the last line of defence
        logger.exception("tool call task failed")
        text = f"Error: tool call failed: {type(exc).__name__}: {exc}"
        return _Result(ToolOutcome.error(text, "TOOL_ERROR"))


def _aborted_before_dispatch(agent: TurnContext, call: ToolCall) -> _Result:
    event = agent.log.append(*_called(call, synthetic=True))
    return _Result(
        ToolOutcome.error("Error: tool call aborted before dispatch", ABORTED_BEFORE_DISPATCH),
        call_seq=event.seq,
    )


def _called(call: ToolCall, *, synthetic: bool = False) -> tuple[str, dict[str, Any]]:
    """The `tool/call` entry (`synthetic`: the call never ran)."""
    return entry(ToolCalled(call.turn, call.step, call.call_id, call.name, call.arguments, synthetic or None))


async def _run_one(
    agent: TurnContext, call: ToolCall, tool: Tool | None, signal: AbortSignal, semaphore: asyncio.Semaphore
) -> _Result:
    """One call, start to outcome. Never raises: every failure becomes the call's error result, so
    each call of the assistant message gets exactly one `tool/result`."""
    logged: list[int] = []  # the seq of this call's tool/call once appended
    try:
        return await _run_one_unguarded(agent, call, tool, signal, semaphore, logged)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        logger.exception("tool call %s failed outside its body", call.call_id)
        if not logged:
            try:
                logged.append(agent.log.append(*_called(call, synthetic=True)).seq or 0)
            except Exception:
                logger.exception("could not log the synthetic tool/call")
        code = "CHECKPOINT_FAILED" if isinstance(exc, OSError | sqlite3.Error) else "HOOK_ERROR"
        outcome = ToolOutcome.error(f"Error: {call.name} could not run: {type(exc).__name__}: {exc}", code)
        return _Result(outcome, call_seq=logged[0] if logged else None)


async def _run_one_unguarded(
    agent: TurnContext,
    call: ToolCall,
    tool: Tool | None,
    signal: AbortSignal,
    semaphore: asyncio.Semaphore,
    logged: list[int],
) -> _Result:
    async with semaphore:
        if signal.aborted:
            return _aborted_before_dispatch(agent, call)
        if tool is None:
            event = agent.log.append(*_called(call, synthetic=True))
            known = ", ".join(sorted(agent.tools.tools)) or "none"
            return _Result(
                ToolOutcome.error(f"Error: unknown tool {call.name!r} (available: {known})", "UNKNOWN_TOOL"),
                call_seq=event.seq,
            )
        if call.args is None:
            event = agent.log.append(*_called(call, synthetic=True))
            return _Result(
                ToolOutcome.error(
                    f"Error: the arguments of {call.name} are not a JSON object: {call.arguments[:200]}",
                    "INVALID_ARGUMENTS",
                ),
                call_seq=event.seq,
            )
        approved: list[Mapping[str, Any]] = []
        accepted: list[str] = []
        persist: list[bool] = []
        unsaved: list[str] = []
        modes: list[str] = []
        try:
            denial = await _permission(agent, call, signal, approved, accepted, persist, unsaved, modes)
        except AbortedError:
            return _aborted_before_dispatch(agent, call)
        if denial is not None:
            event = agent.log.append(*_called(call, synthetic=True))
            return _Result(denial, call_seq=event.seq)
        # Checkpoint: the intent to run is durable before the body can touch the world (fail closed:
        # if it cannot be written, the body does not run).
        event = agent.log.append(*_called(call))
        logged.append(event.seq or 0)
        agent.log.commit()
        context = _RunningCall(
            agent,
            call,
            signal,
            approved_preview=approved[-1] if approved else None,
            accepted_text=accepted[-1] if accepted else None,
            persist_approved=persist[-1] if persist else False,
            unsaved_choice=unsaved[-1] if unsaved else None,
            approved_mode=modes[-1] if modes else None,
        )
        try:
            outcome = await tool.execute(call.args, context)
            if not isinstance(outcome, ToolOutcome):
                raise TypeError(f"tool {call.name} returned {type(outcome).__name__}, not ToolOutcome")
            _check_outcome(outcome)
        except AbortedError:
            outcome = ToolOutcome.error("Error: tool call was cancelled", "CANCELLED")
        except asyncio.CancelledError:
            outcome = ToolOutcome.error("Error: tool call was cancelled", "CANCELLED")
        except Exception as exc:
            logger.info("tool %s failed: %s", call.name, exc, exc_info=True)
            outcome = ToolOutcome.error(f"Error: {type(exc).__name__}: {exc}", "TOOL_ERROR")
        context.close_output()
        contexts = list(context.deferred)
        for hook in agent.hooks.post_execute:
            try:
                decision = await hook(call, outcome)
            except Exception as exc:
                logger.exception("post-execute hook failed")
                outcome = ToolOutcome.error(f"Error: post-execute hook failed: {exc}", "HOOK_ERROR")
                continue
            if isinstance(decision, PostExecuteDecision):
                if decision.outcome is not None:
                    outcome = decision.outcome
                contexts.extend(decision.additional_contexts)
        try:
            _check_outcome(outcome)
        except Exception as exc:
            outcome = ToolOutcome.error(f"Error: {call.name} produced an invalid result: {exc}", "TOOL_ERROR")
        hint = getattr(tool, "truncation_hint", None)
        outcome = within_budget(outcome, agent.tools.result_max_chars, hint or GENERIC_HINT)
        return _Result(outcome, tuple(contexts), event.seq, context.concluded)


def within_budget(outcome: ToolOutcome, cap: int, hint: str) -> ToolOutcome:
    """The outcome with its text capped at `cap` characters: head and tail kept, the middle elided
    with a marker (protocol.md §12), so one result cannot fill the context window."""
    texts = [b for b in outcome.content if isinstance(b, TextBlock)]
    if sum(len(b.text) for b in texts) <= cap:
        return outcome
    elided = elide_middle("".join(b.text for b in texts), cap, hint)
    first = outcome.content.index(texts[0])
    rest = tuple(b for b in outcome.content if not isinstance(b, TextBlock))
    content = (*rest[:first], TextBlock(elided.text), *rest[first:])
    return dataclasses.replace(outcome, content=content)


def _check_outcome(outcome: ToolOutcome) -> None:
    """Validate now (lossless JSON), so an odd value fails this call rather than the commit."""
    freeze_json({"content": [b.to_json() for b in outcome.content], "meta": outcome.meta})


async def _permission(
    agent: TurnContext,
    call: ToolCall,
    signal: AbortSignal,
    approved: list[Mapping[str, Any]],
    accepted: list[str],
    persist: list[bool],
    unsaved: list[str],
    modes: list[str],
) -> ToolOutcome | None:
    """Run pre-execute hooks; None means go ahead, otherwise the error outcome to record. A preview the
    person approved is appended to `approved`, so the tool can refuse to do anything else; the text
    they accepted instead of an edit's proposal, to `accepted` (the tool writes exactly that); whether
    they chose to keep an "allow always" in their configuration, to `persist`; the mode they chose
    with a plan's approval, to `modes`."""
    for hook in agent.hooks.pre_execute:
        decision = await signal.race(hook(call, signal))
        if decision is None or isinstance(decision, Allow):
            continue
        if isinstance(decision, Deny):
            return _denied(decision)
        if isinstance(decision, Ask):
            scope = decision.scope or call.name
            if scope in agent.always_allowed:
                continue
            request = PermissionRequest(call, decision.title, decision.preview)
            answer = await _hook_answer(agent, request, signal)
            if isinstance(answer, Allow):
                continue  # once: a hook's answer is never remembered as the person's
            if isinstance(answer, Deny):
                return _denied(answer)
            if agent.approver is None:
                return _denied(
                    Deny(
                        f"running {call.name} needs the user's permission and no client can ask",
                        reason="no-client",
                    )
                )
            reply = await signal.race(agent.approver.request_permission(request, signal))
            outcome = reply.outcome if isinstance(reply, PermissionReply) else reply
            if outcome in ("allow-always", "allow-once") and decision.preview is not None:
                approved.append(decision.preview)
                if isinstance(reply, PermissionReply) and reply.new_text is not None:
                    accepted.append(reply.new_text)
                if isinstance(reply, PermissionReply) and reply.unsaved is not None:
                    unsaved.append(reply.unsaved)
                if isinstance(reply, PermissionReply) and reply.mode is not None:
                    modes.append(reply.mode)
                kept = isinstance(reply, PermissionReply) and reply.persist
                persist.append(outcome == "allow-always" and kept)
            if outcome == "allow-always" and decision.rememberable:
                agent.always_allowed.add(scope)
            elif outcome in ("allow-once", "allow-always"):
                continue
            elif outcome == "reject":
                return ToolOutcome.error(_rejection(call, decision, reply), "REJECTED")
            else:  # cancelled: the whole turn is cancelled, queued work kept
                agent.cancel("user", keep_inbox=True)
                signal.check()
                return ToolOutcome.error("Error: permission request cancelled", "CANCELLED")
    return None


def _denied(decision: Deny) -> ToolOutcome:
    """A refused call's result: the words for the model, and who refused it as data for clients."""
    meta = {"denied": decision.reason} if decision.reason is not None else None
    return ToolOutcome.error(f"Error: {decision.message}", "DENIED", meta=meta)


def _rejection(call: ToolCall, decision: Ask, reply: PermissionOutcome | PermissionReply) -> str:
    """What the model is told of a rejection: the person's words (a plan to revise), then the note."""
    text = f"Error: the user rejected running {call.name}"
    feedback = reply.feedback if isinstance(reply, PermissionReply) else None
    if feedback:
        text += f". They said:\n{feedback}"
    if decision.reject_note:
        text += f"\n{decision.reject_note}"
    return text


async def _hook_answer(
    agent: TurnContext, request: PermissionRequest, signal: AbortSignal
) -> Allow | Deny | None:
    """The first answer a permission hook gives (None: none answered; the approver is asked)."""
    for hook in agent.hooks.permission_request:
        answer = await signal.race(hook(request, signal))
        if isinstance(answer, Allow | Deny):
            return answer
    return None


def _commit_result(agent: TurnContext, call: ToolCall, result: _Result) -> None:
    outcome = result.outcome
    message = UserMessage(
        mint_message_id(),
        (ToolResultBlock(call.call_id, outcome.content, outcome.is_error),),
        FrozenDict({"kind": "tool", "callId": call.call_id}),
    )
    error = ToolErrorInfo(call.name, outcome.error_code or "TOOL_ERROR") if outcome.is_error else None
    seqs = None if result.call_seq is None else (result.call_seq,)
    resulted = ToolResulted(
        call.turn, call.step, call.call_id, call.name, message.to_json(), error, outcome.meta, seqs
    )
    agent.log.append(*entry(resulted))
    for context in result.contexts:
        try:
            agent.inbox.append("next-step", context)
        except Exception:  # e.g. the same context twice: the result stands, the duplicate is dropped
            logger.warning("tool context %s for %s not queued", context.id, call.call_id, exc_info=True)
