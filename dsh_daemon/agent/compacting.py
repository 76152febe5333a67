"""Compaction, as a turn runs it (docs/design.md §11): when one is due, and the summarising call.

`agent/compaction.py` holds the pure parts (where to cut, the transcript, the request); this module
holds the call: the request built the one way (`agent/requests.py`), attempted with the step's
retries (`agent/attempts.py`), and one durable `context/compacted` when it succeeded.

Invariants kept here:
- A compaction that fails changes nothing: no `context/compacted` (only its `llm/request` and
  `llm/retry` attempts are logged), and `CompactionError` says why.
- The summarising request is rebuilt from the log like any other (`Derivation.compaction_request`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from dsh_daemon.agent import compaction
from dsh_daemon.agent.attempts import attempt_with_retries
from dsh_daemon.agent.derive import Derivation
from dsh_daemon.agent.errors import AgentError, StepError
from dsh_daemon.agent.requests import aclose_stream, build_request, error_chain
from dsh_daemon.agent.signal import AbortedError
from dsh_daemon.agent.turncontext import TurnContext
from dsh_daemon.agent.turnstate import TurnState
from dsh_daemon.model.codec import structure
from dsh_daemon.model.jsonvalue import dumps, freeze_json
from dsh_daemon.model.payloads import ContextCompacted, LlmRequested, entry
from dsh_daemon.model.provider import (
    EMPTY_RESPONSE,
    UNKNOWN,
    Finish,
    LlmFailure,
    ModelRequest,
    ProviderFailure,
    TextDelta,
)

logger = logging.getLogger(__name__)


class CompactionError(AgentError, RuntimeError):
    """A compaction that could not finish; nothing was changed (the turn ends with `error`)."""

    def __init__(self, error: Mapping[str, Any]) -> None:
        super().__init__(str(error.get("message", "")))
        self.error = freeze_json(error)


class Compacting:
    """One turn's compactions."""

    def __init__(self, ctx: TurnContext, state: TurnState) -> None:
        self.ctx = ctx
        self.state = state

    def due(self) -> str | None:
        """Why the next boundary must compact first (`overflow`, `manual`, `ratio`), or None."""
        if self.state.overflow is not None:
            return "overflow"
        if self.ctx.compact_requested:
            return "manual"
        used, window = self.ctx.derive().context_used, self.ctx.context_window(self._model())
        provider = self.ctx.provider
        ratio = provider.compact_at_ratio if provider is not None else None
        if used is None or window is None or not isinstance(ratio, int | float) or isinstance(ratio, bool):
            return None
        return "ratio" if used >= ratio * window else None

    async def if_due(self) -> None:
        reason = self.due()
        if reason is not None:
            await self.compact(reason)

    def _model(self) -> str:
        header = self.ctx.derive().header
        model = header["config"].get("model") if header is not None else None
        return model if isinstance(model, str) and model else self.ctx.options.model

    async def compact(self, reason: str) -> None:
        """One compaction: a summarising model call, then a durable `context/compacted`. Raises
        `CompactionError` when it fails; returns quietly when there is nothing to compact (an
        overflow then ends the turn)."""
        ctx, state = self.ctx, self.state
        turn, signal, step = state.number, state.signal, state.steps + 1
        overflow, state.overflow = state.overflow, None
        ctx.compact_requested = False
        try:
            current = await build_request(ctx, turn, step, signal)  # logs a changed header first
        except StepError as exc:
            raise CompactionError({"code": "CONFIG", "message": f"compaction failed: {exc}"}) from None
        derivation = ctx.derive()
        assert derivation.header is not None
        window = ctx.context_window(current.model)
        chars_now = len(dumps(current.to_json()))
        per_token = _chars_per_token(derivation)
        budget = window * per_token if window is not None else chars_now
        cuts, end = list(derivation.cuts), ctx.log.next_seq
        if overflow is not None and cuts:
            end = cuts.pop()  # the step that overflowed keeps what it entered (the person's prompt)
        kept = compaction.choose_cut(
            derivation.entries,
            cuts,
            derivation.turn_starts,
            end,
            keep_turns=max(1, ctx.options.compact_keep_turns),
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
        summary = await self._summarise(step, data)
        after = [m for p, m in derivation.entries if p >= kept]
        message = compaction.summary_message(summary, ctx.log.next_seq)
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
        event = ctx.log.append(*entry(compacted), commit=True)
        state.compacted = event.data
        if overflow is not None:
            state.overflow_compacted = True

    async def _summarise(self, step: int, data: Mapping[str, Any]) -> str:
        """The compaction call (`x-dsh-purpose: compaction`), retried like a step's request (D8)."""
        ctx, turn, signal = self.ctx, self.state.number, self.state.signal

        async def start(attempt: int) -> ModelRequest:
            signal.check()
            requested = structure({"turn": turn, "step": step, "attempt": attempt, **data}, LlmRequested)
            ctx.log.append(*entry(requested), commit=True)
            return ctx.derive().requests[-1]

        async def retry_after(failure: LlmFailure, retries: int) -> float | None:
            delay = ctx.options.retry.delay(failure, retries, ctx.rng)
            signal.check()  # cancellation beats retry
            return delay

        result = await attempt_with_retries(
            ctx,
            signal,
            turn,
            step,
            start=start,
            attempt=self._attempt,
            retry_after=retry_after,
            purpose="compaction",
        )
        if isinstance(result, LlmFailure):
            raise CompactionError({**result.to_json(), "message": f"compaction failed: {result.message}"})
        return result

    async def _attempt(self, request: ModelRequest) -> str | LlmFailure:
        """One attempt: the reply's text (nothing is streamed to clients or logged as chunks)."""
        assert self.ctx.provider is not None
        stream = self.ctx.provider.stream(request)
        parts: list[str] = []

        async def consume() -> Finish:
            async for item in stream:
                if isinstance(item, Finish):
                    return item
                if isinstance(item, TextDelta):
                    parts.append(item.text)
            raise ProviderFailure(LlmFailure("STREAM_CLOSED", "the provider stream ended without a finish"))

        try:
            finish = await self.state.signal.race(consume())
        except ProviderFailure as failure:
            return failure.failure
        except AbortedError:
            raise
        except Exception as exc:
            logger.exception("session %s: provider raised during compaction", self.ctx.session_id)
            return LlmFailure(UNKNOWN, error_chain(exc))
        finally:
            await aclose_stream(stream)
        if finish.usage is not None:
            self.state.add_usage(finish.usage)
        summary = "".join(parts).strip()
        if finish.reason == "max-tokens" or not summary:
            why = "was cut at its token limit" if summary else "was empty"
            return LlmFailure(EMPTY_RESPONSE, f"the summary {why}")
        return summary


def _chars_per_token(derivation: Derivation) -> float:
    """Characters per token of this session's requests, from the last step request's usage."""
    used = derivation.context_used
    for request in reversed(derivation.requests):
        if request.config.get("purpose") is None:
            if used:
                return min(8.0, max(1.0, len(dumps(request.to_json())) / used))
            break
    return compaction.CHARS_PER_TOKEN
