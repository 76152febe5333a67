"""One turn: a run of the model loop from `turn/start` to `turn/end` (docs/design.md §2.3–2.5).

The driver (`agent/loop.py`) decides when a turn runs and claims its first batch; a `Turn` runs its
steps: the pre-step boundary (claim, hooks, entry), the model request built from the log
(`agent/requests.py`) and attempted with retries (`agent/attempts.py`), the stream, the tool batch
(`agent/toolrun.py`), and compaction when one is due (`agent/compacting.py`). It sees the agent
through its turn context (`agent/turncontext.py`) only; everything it knows of one turn lives on it
and ends with it.

Invariants kept here:
- A step's input is entered (`user/message`) before its request, and every request is rebuilt from the
  log (`TurnContext.derive`), never assembled on the side.
- Claimed input that no step entered goes back to the front of its lists on abort or failure.
- The turn always ends with a durable `turn/end` (and `turn/usage` when a request reported usage).
- A budget cap (`agent.budget`) ends the turn before the request that would pass it, never after.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from dsh_daemon.agent.assembler import Assembler
from dsh_daemon.agent.attempts import attempt_with_retries
from dsh_daemon.agent.compacting import Compacting, CompactionError
from dsh_daemon.agent.errors import StepError
from dsh_daemon.agent.hooks import (
    Enter,
    PreStepContext,
    PreStepDecision,
    Reject,
    RequestErrorContext,
    Retry,
    TurnStoppingContext,
    run_waterfall,
)
from dsh_daemon.agent.requests import aclose_stream, build_request, error_chain
from dsh_daemon.agent.signal import AbortedError, AbortSignal
from dsh_daemon.agent.toolrun import run_tool_batch
from dsh_daemon.agent.turnbudget import budget_stop
from dsh_daemon.agent.turncontext import TurnContext
from dsh_daemon.agent.turnstate import Claim, TurnState
from dsh_daemon.model import events as ev
from dsh_daemon.model.codec import structure
from dsh_daemon.model.jsonvalue import FrozenDict, freeze_json
from dsh_daemon.model.messages import AssistantMessage, UserMessage
from dsh_daemon.model.payloads import (
    AssistantDelta,
    AssistantMessageLogged,
    ContextUsage,
    LlmRequested,
    StepEnded,
    StepStarted,
    TurnEnded,
    TurnUsage,
    entry,
)
from dsh_daemon.model.provider import (
    CONTEXT_WINDOW_EXCEEDED,
    UNKNOWN,
    Finish,
    LlmFailure,
    ModelRequest,
    ProviderFailure,
    ToolCallDelta,
)
from dsh_daemon.model.wire import TurnEndReason

logger = logging.getLogger(__name__)

__all__ = ["Claim", "CompactionError", "StepError", "Turn", "TurnState"]


@dataclass
class StepOutcome:
    kind: Literal["completed", "tools", "max-tokens", "error", "overflow"]
    error: FrozenDict | None = None
    concluded: bool = False


class Turn:
    def __init__(self, ctx: TurnContext) -> None:
        self.ctx = ctx
        self.state: TurnState | None = None

    async def run(
        self, turn: int, claim: Claim, signal: AbortSignal, *, compaction_only: bool = False
    ) -> tuple[FrozenDict, bool]:
        """Run one turn to its `turn/end`; returns the reason and whether any step ran."""
        reason: dict[str, Any] = {
            "kind": "error",
            "error": {"code": UNKNOWN, "message": "turn did not finish"},
        }
        state = self.state = TurnState(turn, signal)
        try:
            if compaction_only:
                reason = await self._compaction_turn(state)
            else:
                reason = await self._turn_body(state, claim)
        except AbortedError as exc:
            reason = {"kind": "aborted", "cause": exc.cause}
        except Exception as exc:
            logger.exception("session %s: turn %d failed", self.ctx.session_id, turn)
            error = {"code": UNKNOWN, "message": error_chain(exc)}
            self.ctx.publish_error(turn, None, error)
            reason = {"kind": "error", "error": error}
        finally:
            if state.usage:
                self.ctx.log.append(*entry(TurnUsage(turn, state.usage)))
            ended = TurnEnded(turn, structure(reason, TurnEndReason))
            self.ctx.log.append(*entry(ended), commit=True)
        return freeze_json(reason), state.steps > 0

    async def _turn_body(self, state: TurnState, claim: Claim) -> dict[str, Any]:
        turn, signal = state.number, state.signal
        step = 0
        last: StepOutcome | None = None
        max_tokens = False
        first = True
        while True:
            if not first:
                # Check before claiming: an aborted turn must leave unclaimed input parked (D5, D6).
                signal.check()
                # Before the next request, not after it: a cap it would pass ends the turn here, with
                # what is still queued left parked (agent/turnbudget.py).
                stop = budget_stop(self.ctx.options.budget, state.steps, state.usage, state.last_usage)
                if stop is not None:
                    return {"kind": "budget", "budget": stop}
                try:
                    await Compacting(self.ctx, state).if_due()  # before the claim of the step it serves
                except CompactionError as exc:
                    self.ctx.publish_error(turn, None, exc.error)
                    return {"kind": "error", "error": exc.error}
                claim = Claim(tuple(self.ctx.inbox.claim_next_step()))
                self.ctx.announce_claims(claim.messages, turn)
            try:
                signal.check()
                if first:
                    # The first claim happened when the turn opened (inside the waking send, §2.4).
                    await Compacting(self.ctx, state).if_due()
                decision = await self._pre_step(claim.messages, turn, step + 1, signal)
                signal.check()
            except AbortedError:
                # Claimed but never entered: the abort must not make it vanish (docs/design.md).
                self.ctx.inbox.return_claimed_durably(
                    claim.next_step, claim.prompt, discard=signal.discard_unentered
                )
                raise
            except CompactionError as exc:
                # A failed compaction changes nothing: the claimed input goes back, parked.
                self.ctx.inbox.return_claimed_durably(claim.next_step, claim.prompt, discard=False)
                self.ctx.publish_error(turn, None, exc.error)
                return {"kind": "error", "error": exc.error}
            first = False
            if isinstance(decision, Reject):
                return {"kind": "blocked"}
            messages = decision.messages
            resume = last is not None and last.kind == "overflow"  # the compacted step runs again
            if not messages and not resume and (last is None or last.kind != "tools" or last.concluded):
                # Empty first boundary: a completed no-step turn. After a completed step: close.
                return {"kind": "max-tokens" if max_tokens else "completed"}
            step += 1
            state.steps = step
            self.ctx.log.append(*entry(StepStarted(turn, step)))
            try:
                for message in messages:
                    self.ctx.log.append(ev.USER_MESSAGE, message.to_json())
                signal.check()
                last = await self._run_step(turn, step, signal)
            finally:
                self.ctx.log.append(*entry(StepEnded(turn, step)))
            signal.check()
            if last.kind == "overflow":
                if state.overflow_compacted:  # compacting did not make it fit: give up
                    assert last.error is not None
                    self.ctx.publish_error(turn, step, last.error)
                    return {"kind": "error", "error": last.error}
                state.overflow = last.error  # the next boundary compacts, then the step is retried
                continue
            state.overflow_compacted = False
            if last.kind == "error":
                return {"kind": "error", "error": last.error}
            if last.kind == "max-tokens":
                max_tokens = True  # sticky for the rest of the turn
            if last.kind == "tools" and not last.concluded:
                continue
            if self.ctx.inbox.next_step:
                continue
            await run_serial(
                self.ctx.hooks.turn_stopping, TurnStoppingContext(self.ctx.control, turn, signal)
            )
            signal.check()
            if self.ctx.inbox.next_step:
                continue
            return {"kind": "max-tokens" if max_tokens else "completed"}

    async def _pre_step(
        self, claimed: tuple[UserMessage, ...], turn: int, step: int, signal: AbortSignal
    ) -> PreStepDecision:
        async def innermost() -> PreStepDecision:
            return Enter(claimed)

        ctx = PreStepContext(self.ctx.control, claimed, turn, step, signal)
        decision = await run_waterfall(self.ctx.hooks.pre_step, ctx, innermost)
        if isinstance(decision, Enter):
            for message in decision.messages:
                if not isinstance(message, UserMessage):
                    raise StepError("agent/pre-step entered something that is not a UserMessage")
            return decision
        if isinstance(decision, Reject):
            return decision
        raise StepError(f"agent/pre-step returned {decision!r}; expected Enter or Reject")

    async def _compaction_turn(self, state: TurnState) -> dict[str, Any]:
        """The body of a `compact()` turn: compact, claim nothing, run no step."""
        try:
            await Compacting(self.ctx, state).compact("manual")
        except CompactionError as exc:
            self.ctx.publish_error(state.number, None, exc.error)
            return {"kind": "error", "error": exc.error}
        return {"kind": "completed"}

    # ---- one step ------------------------------------------------------------------------------------

    async def _run_step(self, turn: int, step: int, signal: AbortSignal) -> StepOutcome:
        ctx = self.ctx

        async def start(attempt: int) -> ModelRequest:
            request = await build_request(ctx, turn, step, signal)
            signal.check()
            ctx.log.append(*entry(LlmRequested(turn, step, attempt)), commit=True)
            return request

        result = await attempt_with_retries(
            ctx,
            signal,
            turn,
            step,
            start=start,
            attempt=lambda request: self._stream_attempt(request, turn, step, signal),
            retry_after=lambda failure, retries: self._recover(turn, step, failure, retries, signal),
            # Not retried as it stands: the next boundary compacts first (docs/design.md §11).
            final=lambda failure: failure.code == CONTEXT_WINDOW_EXCEEDED,
        )
        if isinstance(result, LlmFailure):
            error = freeze_json(result.to_json())
            if result.code == CONTEXT_WINDOW_EXCEEDED:
                return StepOutcome("overflow", error)
            ctx.publish_error(turn, step, error)
            return StepOutcome("error", error)
        message, finish = result
        if finish.reason == "max-tokens":
            return StepOutcome("max-tokens")
        calls = message.tool_calls
        if not calls:
            return StepOutcome("completed")
        concluded = await run_tool_batch(ctx, calls, turn, step, signal)
        return StepOutcome("tools", concluded=concluded)

    async def _recover(
        self, turn: int, step: int, failure: LlmFailure, retries: int, signal: AbortSignal
    ) -> float | None:
        async def innermost() -> Retry | None:
            delay = self.ctx.options.retry.delay(failure, retries, self.ctx.rng)
            return None if delay is None else Retry(delay)

        ctx = RequestErrorContext(self.ctx.control, turn, step, failure, retries, signal)
        try:
            decision = await run_waterfall(self.ctx.hooks.request_error, ctx, innermost)
        except AbortedError:
            raise
        except Exception:
            logger.exception("session %s: request-error hook failed", self.ctx.session_id)
            return None
        signal.check()  # cancellation beats retry
        return decision.delay_s if isinstance(decision, Retry) else None

    async def _stream_attempt(
        self, request: ModelRequest, turn: int, step: int, signal: AbortSignal
    ) -> tuple[AssistantMessage, Finish] | LlmFailure:
        assert self.ctx.provider is not None
        assembler = Assembler()
        chunks = self.ctx.log.open_chunks(turn, step)
        stream = self.ctx.provider.stream(request)

        # Per block (text, reasoning, each tool call's arguments): how many UTF-16 code units came
        # before this delta in this attempt, so a client joining mid-step can merge live deltas with
        # the stored chunks.
        offsets: dict[object, int] = {}

        async def consume() -> Finish:
            # looked up once per attempt, not once per delta (neither changes while it streams)
            add_chunk, publish = self.ctx.log.add_chunk, self.ctx.bus.publish
            async for item in stream:
                if isinstance(item, Finish):
                    return item
                assembler.add(item)
                delta = item.to_json()
                if isinstance(item, ToolCallDelta):
                    if item.id is not None:
                        delta["id"] = assembler.call_id(item.index)  # clients see the daemon's id only
                    key: object = item.index
                    piece = item.arguments
                else:
                    key = delta["type"]
                    piece = delta["text"]
                frozen = FrozenDict(delta)  # one copy for the live event and the stored chunk
                add_chunk(chunks, frozen)
                offset = offsets.get(key, 0)
                units = len(piece) if piece.isascii() else len(piece.encode("utf-16-le")) // 2
                offsets[key] = offset + units
                publish(AssistantDelta.fast_event(turn, step, offset, frozen))
            raise ProviderFailure(LlmFailure("STREAM_CLOSED", "the provider stream ended without a finish"))

        consuming = asyncio.ensure_future(consume())
        try:
            # On a cancel the turn ends without waiting for the provider's connection to close: the
            # cancelled `consume` closes the stream as it unwinds (the stream's own `finally`).
            finish = await signal.race(consuming, settle=False)
        except AbortedError:
            self.ctx.log.close_chunks(chunks)
            prefix = assembler.prefix_blocks()
            if prefix:
                message = AssistantMessage.create(prefix, provider=request.provider, model=request.model)
                interrupted = AssistantMessageLogged(
                    turn, step, message.to_json(), tuple(chunks.seqs), interrupted=True
                )
                self.ctx.log.append(*entry(interrupted))
            raise
        except ProviderFailure as failure:
            self.ctx.log.close_chunks(chunks)
            return failure.failure
        except Exception as exc:  # an adapter bug is still a failed attempt, classified UNKNOWN
            self.ctx.log.close_chunks(chunks)
            logger.exception("session %s: provider raised", self.ctx.session_id)
            return LlmFailure(UNKNOWN, error_chain(exc))
        finally:
            if consuming.done():  # else it is unwinding, and closes the stream itself
                await aclose_stream(stream)
        self.ctx.log.close_chunks(chunks)
        blocks = assembler.blocks(drop_tool_calls=finish.reason == "max-tokens")
        message = AssistantMessage.create(blocks, provider=request.provider, model=request.model)
        logged = AssistantMessageLogged(
            turn, step, message.to_json(), tuple(chunks.seqs), finish.reason, finish.usage
        )
        if finish.usage is not None:
            assert self.state is not None
            self.state.add_usage(finish.usage)
        self.ctx.log.append(*entry(logged))
        if finish.usage is not None:
            self._log_context_usage(turn, step, request.model, finish.usage)
        return message, finish

    def _log_context_usage(self, turn: int, step: int, model: str, usage: Mapping[str, Any]) -> None:
        """Durable `context/usage`: the last request's input tokens (cache hits included) against the
        window, so a client can show a meter (live, and replayed on attach)."""
        used = sum(
            v
            for k in ("inputTokens", "cacheReadTokens")
            if isinstance(v := usage.get(k), int) and not isinstance(v, bool) and v >= 0
        )
        meter = ContextUsage(turn, step, used, self.ctx.context_window(model))
        # informational: a reader that does not know it loses nothing
        self.ctx.log.append(*entry(meter), ignorable=True)


async def run_serial(hooks: list[Any], ctx: Any) -> None:
    for hook in hooks:
        await hook(ctx)
