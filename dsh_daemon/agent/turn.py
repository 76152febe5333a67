"""One turn: a run of the model loop from `turn/start` to `turn/end` (docs/design.md §2.3–2.5, §11).

The driver (`agent/loop.py`) decides when a turn runs and claims its first batch; a `Turn` runs its
steps: the pre-step boundary (claim, hooks, entry), the model request built from the log, the stream,
the tool batch, recovery and compaction. Everything it knows of one turn lives on it and ends with it.

Invariants kept here:
- A step's input is entered (`user/message`) before its request, and every request is rebuilt from the
  log (`Agent.derive`), never assembled on the side.
- Claimed input that no step entered goes back to the front of its lists on abort or failure.
- The turn always ends with a durable `turn/end` (and `turn/usage` when a request reported usage).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from dsh_daemon.agent import compaction
from dsh_daemon.agent.assembler import Assembler
from dsh_daemon.agent.derive import Derivation
from dsh_daemon.agent.errors import AgentError
from dsh_daemon.agent.hooks import (
    Enter,
    PreStepContext,
    PreStepDecision,
    Reject,
    RequestConfig,
    RequestContext,
    RequestErrorContext,
    Retry,
    TurnStoppingContext,
    run_waterfall,
)
from dsh_daemon.agent.signal import AbortedError, AbortSignal
from dsh_daemon.agent.toolrun import run_tool_batch
from dsh_daemon.model import events as ev
from dsh_daemon.model.codec import structure
from dsh_daemon.model.inbox import InboxItem
from dsh_daemon.model.jsonvalue import FrozenDict, dumps, freeze_json
from dsh_daemon.model.messages import AssistantMessage, UserMessage
from dsh_daemon.model.payloads import (
    AssistantDelta,
    AssistantMessageLogged,
    ContextCompacted,
    ContextUsage,
    LlmRequested,
    LlmRetried,
    RequestHeaderLogged,
    StepEnded,
    StepStarted,
    TurnEnded,
    TurnUsage,
    entry,
)
from dsh_daemon.model.provider import (
    CONTEXT_WINDOW_EXCEEDED,
    EMPTY_RESPONSE,
    UNKNOWN,
    Finish,
    LlmFailure,
    ModelRequest,
    ProviderFailure,
    TextDelta,
    ToolCallDelta,
)
from dsh_daemon.model.wire import RequestHeader, TurnEndReason

if TYPE_CHECKING:
    from dsh_daemon.agent.loop import Agent

logger = logging.getLogger(__name__)


class StepError(AgentError, RuntimeError):
    """A step that cannot run as configured (no model, no provider, a hook returning nonsense)."""


@dataclass(frozen=True)
class Claim:
    """What one boundary took out of the inbox, by list, so an abort before entry can put it back."""

    next_step: tuple[InboxItem, ...] = ()
    prompt: InboxItem | None = None

    @property
    def messages(self) -> tuple[UserMessage, ...]:
        """The batch in entry order: each item's attachments just before its message, prompt last."""
        items = self.next_step if self.prompt is None else (*self.next_step, self.prompt)
        return tuple(m for item in items for m in item.messages)


@dataclass
class TurnState:
    """One turn's own state, created when it opens: nothing of it leaks into the next turn."""

    number: int
    signal: AbortSignal
    steps: int = 0
    usage: dict[str, int] = field(default_factory=dict)
    overflow: FrozenDict | None = None  # a CONTEXT_WINDOW_EXCEEDED the next boundary compacts for
    overflow_compacted: bool = False  # compacted for an overflow, no step succeeded since
    compacted: FrozenDict | None = None  # the `context/compacted` data this turn wrote, if any


class CompactionError(AgentError, RuntimeError):
    """A compaction that could not finish; nothing was changed (the turn ends with `error`)."""

    def __init__(self, error: Mapping[str, Any]) -> None:
        super().__init__(str(error.get("message", "")))
        self.error = freeze_json(error)


@dataclass
class StepOutcome:
    kind: Literal["completed", "tools", "max-tokens", "error", "overflow"]
    error: FrozenDict | None = None
    concluded: bool = False


class Turn:
    def __init__(self, agent: Agent) -> None:
        self.agent = agent
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
            logger.exception("session %s: turn %d failed", self.agent.session_id, turn)
            error = {"code": UNKNOWN, "message": error_chain(exc)}
            self.agent.publish_error(turn, None, error)
            reason = {"kind": "error", "error": error}
        finally:
            if state.usage:
                self.agent.log.append(*entry(TurnUsage(turn, state.usage)))
            ended = TurnEnded(turn, structure(reason, TurnEndReason))
            self.agent.log.append(*entry(ended), commit=True)
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
                try:
                    await self._compact_if_due(state)  # before the claim of the step it serves
                except CompactionError as exc:
                    self.agent.publish_error(turn, None, exc.error)
                    return {"kind": "error", "error": exc.error}
                claim = Claim(tuple(self.agent.inbox.claim_next_step()))
                self.agent.announce_claims(claim.messages, turn)
            try:
                signal.check()
                if first:
                    # The first claim happened when the turn opened (inside the waking send, §2.4).
                    await self._compact_if_due(state)
                decision = await self._pre_step(claim.messages, turn, step + 1, signal)
                signal.check()
            except AbortedError:
                # Claimed but never entered: the abort must not make it vanish (docs/design.md).
                self.agent.inbox.return_claimed_durably(
                    claim.next_step, claim.prompt, discard=signal.discard_unentered
                )
                raise
            except CompactionError as exc:
                # A failed compaction changes nothing: the claimed input goes back, parked.
                self.agent.inbox.return_claimed_durably(claim.next_step, claim.prompt, discard=False)
                self.agent.publish_error(turn, None, exc.error)
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
            self.agent.log.append(*entry(StepStarted(turn, step)))
            try:
                for message in messages:
                    self.agent.log.append(ev.USER_MESSAGE, message.to_json())
                signal.check()
                last = await self._run_step(turn, step, signal)
            finally:
                self.agent.log.append(*entry(StepEnded(turn, step)))
            signal.check()
            if last.kind == "overflow":
                if state.overflow_compacted:  # compacting did not make it fit: give up
                    assert last.error is not None
                    self.agent.publish_error(turn, step, last.error)
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
            if self.agent.inbox.next_step:
                continue
            await run_serial(self.agent.hooks.turn_stopping, TurnStoppingContext(self.agent, turn, signal))
            signal.check()
            if self.agent.inbox.next_step:
                continue
            return {"kind": "max-tokens" if max_tokens else "completed"}

    async def _pre_step(
        self, claimed: tuple[UserMessage, ...], turn: int, step: int, signal: AbortSignal
    ) -> PreStepDecision:
        async def innermost() -> PreStepDecision:
            return Enter(claimed)

        ctx = PreStepContext(self.agent, claimed, turn, step, signal)
        decision = await run_waterfall(self.agent.hooks.pre_step, ctx, innermost)
        if isinstance(decision, Enter):
            for message in decision.messages:
                if not isinstance(message, UserMessage):
                    raise StepError("agent/pre-step entered something that is not a UserMessage")
            return decision
        if isinstance(decision, Reject):
            return decision
        raise StepError(f"agent/pre-step returned {decision!r}; expected Enter or Reject")

    # ---- compaction (docs/design.md §11) -------------------------------------------------------------

    async def _compaction_turn(self, state: TurnState) -> dict[str, Any]:
        """The body of a `compact()` turn: compact, claim nothing, run no step."""
        try:
            await self._compact(state, "manual")
        except CompactionError as exc:
            self.agent.publish_error(state.number, None, exc.error)
            return {"kind": "error", "error": exc.error}
        return {"kind": "completed"}

    def _compaction_due(self, state: TurnState) -> str | None:
        if state.overflow is not None:
            return "overflow"
        if self.agent.compact_requested:
            return "manual"
        derivation = self.agent.derive()
        used, window = derivation.context_used, self.agent.context_window(self._model())
        provider = self.agent.provider
        ratio = provider.compact_at_ratio if provider is not None else None
        if used is None or window is None or not isinstance(ratio, int | float) or isinstance(ratio, bool):
            return None
        return "ratio" if used >= ratio * window else None

    async def _compact_if_due(self, state: TurnState) -> None:
        reason = self._compaction_due(state)
        if reason is not None:
            await self._compact(state, reason)

    def _model(self) -> str:
        header = self.agent.derive().header
        model = header["config"].get("model") if header is not None else None
        return model if isinstance(model, str) and model else self.agent.options.model

    async def _compact(self, state: TurnState, reason: str) -> None:
        """One compaction: a summarising model call, then a durable `context/compacted`. Raises
        `CompactionError` (nothing written but the attempt's `llm/request` / `llm/retry`) when it fails;
        returns quietly when there is nothing to compact (an overflow then ends the turn)."""
        turn, signal, step = state.number, state.signal, state.steps + 1
        overflow, state.overflow = state.overflow, None
        self.agent.compact_requested = False
        try:
            current = await self._build_request(turn, step, signal)  # logs a changed header first
        except StepError as exc:
            raise CompactionError({"code": "CONFIG", "message": f"compaction failed: {exc}"}) from None
        derivation = self.agent.derive()
        assert derivation.header is not None
        window = self.agent.context_window(current.model)
        chars_now = len(dumps(current.to_json()))
        per_token = self._chars_per_token(derivation)
        budget = window * per_token if window is not None else chars_now
        cuts, end = list(derivation.cuts), self.agent.log.next_seq
        if overflow is not None and cuts:
            end = cuts.pop()  # the step that overflowed keeps what it entered (the person's prompt)
        kept = compaction.choose_cut(
            derivation.entries,
            cuts,
            derivation.turn_starts,
            end,
            keep_turns=max(1, self.agent.options.compact_keep_turns),
            tail_chars=int(budget * compaction.TAIL_SHARE),
            summary=derivation.summary,
        )
        if kept is None:
            if overflow is not None:
                raise CompactionError(overflow)  # nothing to compact: the overflow stands
            return
        max_tokens = compaction.SUMMARY_MAX_TOKENS
        if window is not None:
            max_tokens = max(256, min(max_tokens, window // 4))
        data = compaction.request_data(
            kept,
            transcript_chars=max(10_000, int(budget * compaction.TRANSCRIPT_SHARE)),
            max_tokens=max_tokens,
        )
        summary = await self._summarise(state, step, data)
        after = [m for p, m in derivation.entries if p >= kept]
        message = compaction.summary_message(summary, self.agent.log.next_seq)
        tail_request = ModelRequest(current.config, current.system, current.tools, (message, *after))
        compacted = ContextCompacted(
            turn=turn,
            reason=reason,  # type: ignore[arg-type]
            summary=summary,
            kept_from_seq=kept,
            tokens_before=round(chars_now / per_token),
            tokens_after=round(len(dumps(tail_request.to_json())) / per_token),
            message=message.to_json(),
        )
        event = self.agent.log.append(*entry(compacted), commit=True)
        state.compacted = event.data
        if overflow is not None:
            state.overflow_compacted = True

    def _chars_per_token(self, derivation: Derivation) -> float:
        """Characters per token of this session's requests, from the last step request's usage."""
        used = derivation.context_used
        for request in reversed(derivation.requests):
            if request.config.get("purpose") is None:
                if used:
                    return min(8.0, max(1.0, len(dumps(request.to_json())) / used))
                break
        return compaction.CHARS_PER_TOKEN

    async def _summarise(self, state: TurnState, step: int, data: Mapping[str, Any]) -> str:
        """The compaction call (`x-dsh-purpose: compaction`), retried like a step's request (D8)."""
        assert self.agent.provider is not None
        turn, signal = state.number, state.signal
        retries = 0
        while True:
            signal.check()
            requested = structure({"turn": turn, "step": step, "attempt": retries + 1, **data}, LlmRequested)
            self.agent.log.append(*entry(requested), commit=True)
            request = self.agent.derive().requests[-1]
            result = await self._summary_attempt(request, signal)
            if isinstance(result, str):
                return result
            delay = self.agent.options.retry.delay(result, retries, self.agent.rng)
            signal.check()
            if delay is None:
                raise CompactionError({**result.to_json(), "message": f"compaction failed: {result.message}"})
            retries += 1
            retried = LlmRetried(turn, step, retries, int(delay * 1000), result.to_json(), "compaction")
            self.agent.log.append(*entry(retried), commit=True)
            await signal.sleep(delay)

    async def _summary_attempt(self, request: ModelRequest, signal: AbortSignal) -> str | LlmFailure:
        """One attempt: the reply's text (nothing is streamed to clients or logged as chunks)."""
        assert self.agent.provider is not None
        stream = self.agent.provider.stream(request)
        parts: list[str] = []

        async def consume() -> Finish:
            async for item in stream:
                if isinstance(item, Finish):
                    return item
                if isinstance(item, TextDelta):
                    parts.append(item.text)
            raise ProviderFailure(LlmFailure("STREAM_CLOSED", "the provider stream ended without a finish"))

        try:
            finish = await signal.race(consume())
        except ProviderFailure as failure:
            return failure.failure
        except AbortedError:
            raise
        except Exception as exc:
            logger.exception("session %s: provider raised during compaction", self.agent.session_id)
            return LlmFailure(UNKNOWN, error_chain(exc))
        finally:
            await _aclose(stream)
        if finish.usage is not None:
            self._add_usage(finish.usage)
        summary = "".join(parts).strip()
        if finish.reason == "max-tokens" or not summary:
            why = "was cut at its token limit" if summary else "was empty"
            return LlmFailure(EMPTY_RESPONSE, f"the summary {why}")
        return summary

    # ---- one step ------------------------------------------------------------------------------------

    async def _run_step(self, turn: int, step: int, signal: AbortSignal) -> StepOutcome:
        retries = 0
        while True:
            request = await self._build_request(turn, step, signal)
            signal.check()
            self.agent.log.append(*entry(LlmRequested(turn, step, retries + 1)), commit=True)
            result = await self._stream_attempt(request, turn, step, signal)
            if isinstance(result, LlmFailure) and result.code == CONTEXT_WINDOW_EXCEEDED:
                # Not retried as it stands: the next boundary compacts first (docs/design.md §11).
                return StepOutcome("overflow", freeze_json(result.to_json()))
            if isinstance(result, LlmFailure):
                delay = await self._recover(turn, step, result, retries, signal)
                if delay is None:
                    error = freeze_json(result.to_json())
                    self.agent.publish_error(turn, step, error)
                    return StepOutcome("error", error)
                retries += 1
                retried = LlmRetried(turn, step, retries, int(delay * 1000), result.to_json())
                self.agent.log.append(*entry(retried), commit=True)
                await signal.sleep(delay)
                continue
            message, finish = result
            if finish.reason == "max-tokens":
                return StepOutcome("max-tokens")
            calls = message.tool_calls
            if not calls:
                return StepOutcome("completed")
            concluded = await run_tool_batch(self.agent, calls, turn, step, signal)
            return StepOutcome("tools", concluded=concluded)

    async def _recover(
        self, turn: int, step: int, failure: LlmFailure, retries: int, signal: AbortSignal
    ) -> float | None:
        async def innermost() -> Retry | None:
            delay = self.agent.options.retry.delay(failure, retries, self.agent.rng)
            return None if delay is None else Retry(delay)

        ctx = RequestErrorContext(self.agent, turn, step, failure, retries, signal)
        try:
            decision = await run_waterfall(self.agent.hooks.request_error, ctx, innermost)
        except AbortedError:
            raise
        except Exception:
            logger.exception("session %s: request-error hook failed", self.agent.session_id)
            return None
        signal.check()  # cancellation beats retry
        return decision.delay_s if isinstance(decision, Retry) else None

    async def _build_request(self, turn: int, step: int, signal: AbortSignal) -> ModelRequest:
        base = self._base_request_config()

        async def innermost() -> RequestConfig:
            return base

        config = await run_waterfall(
            self.agent.hooks.request, RequestContext(self.agent, turn, step, signal, base), innermost
        )
        signal.check()
        if not config.config.get("provider") or not config.config.get("model"):
            raise StepError("no model configured: set a provider and a model (e.g. DSH_MODEL)")
        if self.agent.provider is None:
            raise StepError("no provider configured")
        draft = ModelRequest(config.config, config.system, config.tools, ())
        header = draft.header_json()
        derivation = self.agent.derive()
        if not self.agent.header_logged or derivation.header != header:
            reason = "change" if self.agent.header_logged else ("resume" if derivation.header else "initial")
            logged = RequestHeaderLogged(structure(header, RequestHeader), reason)  # type: ignore[arg-type]
            self.agent.log.append(*entry(logged))
            self.agent.header_logged = True
            derivation = self.agent.derive()
        return derivation.request()

    def _base_request_config(self) -> RequestConfig:
        provider_name = self.agent.provider.name if self.agent.provider is not None else ""
        model = self.agent.options.model
        config: dict[str, Any] = {"provider": provider_name, "model": model}
        if self.agent.provider is not None and model:
            config.update(self.agent.provider.default_config(model))
        config.update(self.agent.options.config)
        if self.agent.options.max_tokens is not None:
            config["maxTokens"] = self.agent.options.max_tokens
        return RequestConfig(freeze_json(config), self.agent.options.system, self.agent.tools.specs())

    async def _stream_attempt(
        self, request: ModelRequest, turn: int, step: int, signal: AbortSignal
    ) -> tuple[AssistantMessage, Finish] | LlmFailure:
        assert self.agent.provider is not None
        assembler = Assembler()
        chunks = self.agent.log.open_chunks(turn, step)
        stream = self.agent.provider.stream(request)

        # Per block (text, reasoning, each tool call's arguments): how many UTF-16 code units came
        # before this delta in this attempt, so a client joining mid-step can merge live deltas with
        # the stored chunks.
        offsets: dict[object, int] = {}

        async def consume() -> Finish:
            async for item in stream:
                if isinstance(item, Finish):
                    return item
                assembler.add(item)
                delta = item.to_json()
                self.agent.log.add_chunk(chunks, delta)
                key = item.index if isinstance(item, ToolCallDelta) else delta["type"]
                piece = item.arguments if isinstance(item, ToolCallDelta) else delta["text"]
                offset = offsets.get(key, 0)
                offsets[key] = offset + len(piece.encode("utf-16-le")) // 2
                self.agent.bus.publish(AssistantDelta.fast_event(turn, step, offset, FrozenDict(delta)))
            raise ProviderFailure(LlmFailure("STREAM_CLOSED", "the provider stream ended without a finish"))

        try:
            finish = await signal.race(consume())
        except AbortedError:
            self.agent.log.close_chunks(chunks)
            prefix = assembler.prefix_blocks()
            if prefix:
                message = AssistantMessage.create(prefix, provider=request.provider, model=request.model)
                interrupted = AssistantMessageLogged(
                    turn, step, message.to_json(), tuple(chunks.seqs), interrupted=True
                )
                self.agent.log.append(*entry(interrupted))
            raise
        except ProviderFailure as failure:
            self.agent.log.close_chunks(chunks)
            return failure.failure
        except Exception as exc:  # an adapter bug is still a failed attempt, classified UNKNOWN
            self.agent.log.close_chunks(chunks)
            logger.exception("session %s: provider raised", self.agent.session_id)
            return LlmFailure(UNKNOWN, error_chain(exc))
        finally:
            await _aclose(stream)
        self.agent.log.close_chunks(chunks)
        blocks = assembler.blocks(drop_tool_calls=finish.reason == "max-tokens")
        message = AssistantMessage.create(blocks, provider=request.provider, model=request.model)
        logged = AssistantMessageLogged(
            turn, step, message.to_json(), tuple(chunks.seqs), finish.reason, finish.usage
        )
        if finish.usage is not None:
            self._add_usage(finish.usage)
        self.agent.log.append(*entry(logged))
        if finish.usage is not None:
            self._log_context_usage(turn, step, request.model, finish.usage)
        return message, finish

    def _add_usage(self, usage: Mapping[str, Any]) -> None:
        """Sum a request's usage into the open turn's `turn/usage`."""
        summed = self.state.usage if self.state is not None else {}
        for key, value in usage.items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                summed[key] = summed.get(key, 0) + value  # type: ignore[assignment]

    def _log_context_usage(self, turn: int, step: int, model: str, usage: Mapping[str, Any]) -> None:
        """Durable `context/usage`: the last request's input tokens (cache hits included) against the
        window, so a client can show a meter (live, and replayed on attach)."""
        used = sum(
            v
            for k in ("inputTokens", "cacheReadTokens")
            if isinstance(v := usage.get(k), int) and not isinstance(v, bool) and v >= 0
        )
        meter = ContextUsage(turn, step, used, self.agent.context_window(model))
        # informational: a reader that does not know it loses nothing
        self.agent.log.append(*entry(meter), ignorable=True)


async def run_serial(hooks: list[Any], ctx: Any) -> None:
    for hook in hooks:
        await hook(ctx)


async def _aclose(stream: Any) -> None:
    close = getattr(stream, "aclose", None)
    if close is not None:
        try:
            await close()
        except Exception:
            logger.debug("provider stream aclose failed", exc_info=True)


def error_chain(exc: BaseException) -> str:
    parts: list[str] = []
    current: BaseException | None = exc
    while current is not None and len(parts) < 5:
        parts.append(f"{type(current).__name__}: {current}")
        current = current.__cause__ or current.__context__
    return " <- ".join(parts)
