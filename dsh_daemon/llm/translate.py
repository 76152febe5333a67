"""Turns OpenAI-style `chat.completion.chunk` payloads into seam deltas (DeepSeek's streamed chunk format).

- `reasoning_content` / `content` deltas become reasoning / text deltas; empty ones (DeepSeek's first
  thinking chunk carries `reasoning_content: ""`) produce nothing, so they open no block.
- `tool_calls[]` fragments are keyed by `index`: id and name are passed when present (never
  concatenated: llama-cpp-python repeats them on every fragment), arguments are raw string pieces.
- `finish_reason` and `usage` are remembered (usage may ride on the finish chunk or come in a trailing
  `"choices": []` chunk; the latest wins) and turned into the one `Finish` only at `[DONE]`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from dsh_daemon.llm.config import ModelPrice
from dsh_daemon.llm.errors import classify_stream_error
from dsh_daemon.model.jsonvalue import FrozenDict
from dsh_daemon.model.provider import (
    EMPTY_RESPONSE,
    MALFORMED_RESPONSE,
    Delta,
    Finish,
    FinishReason,
    LlmFailure,
    ProviderFailure,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
)

_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "tool_calls": "tool-calls",
    "function_call": "tool-calls",  # the legacy spelling some OpenAI-compatible servers still send
    "length": "max-tokens",
}


class ChunkTranslator:
    def __init__(self, *, price: ModelPrice | None = None, secrets: Iterable[str] = ()) -> None:
        self._price = price
        self._secrets = tuple(secrets)
        self._finish_reason: str | None = None
        self._usage: Mapping[str, Any] | None = None
        self._opened = False  # any text, reasoning or tool-call block
        self._tool_calls = False

    def feed(self, payload: str) -> list[Delta]:
        """The deltas of one `data:` payload (not `[DONE]`)."""
        try:
            chunk = json.loads(payload)
        except (ValueError, RecursionError) as exc:
            raise _malformed(f"a stream event is not JSON: {exc}: {payload[:200]!r}") from None
        if not isinstance(chunk, dict):
            raise _malformed(f"a stream event is not an object: {payload[:200]!r}")
        if "error" in chunk and not chunk.get("choices"):
            raise ProviderFailure(classify_stream_error(chunk, secrets=self._secrets))
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self._usage = usage
        choices = chunk.get("choices")
        if not choices:
            return []
        if not isinstance(choices, list):
            raise _malformed(f"'choices' is not an array: {payload[:200]!r}")
        out: list[Delta] = []
        for choice in choices:
            if not isinstance(choice, dict):
                raise _malformed(f"a choice is not an object: {payload[:200]!r}")
            delta = choice.get("delta")
            if isinstance(delta, dict):
                self._delta(delta, out)
            reason = choice.get("finish_reason")
            if isinstance(reason, str) and reason:
                self._finish_reason = reason
        return out

    def _delta(self, delta: dict[str, Any], out: list[Delta]) -> None:
        reasoning = delta.get("reasoning_content")
        if isinstance(reasoning, str) and reasoning:
            out.append(ReasoningDelta(reasoning))
            self._opened = True
        content = delta.get("content")
        if isinstance(content, str) and content:
            out.append(TextDelta(content))
            self._opened = True
        calls = delta.get("tool_calls")
        if not isinstance(calls, list):
            return
        for position, call in enumerate(calls):
            if not isinstance(call, dict):
                raise _malformed(f"a tool call delta is not an object: {call!r}")
            index = call.get("index", position)
            if not isinstance(index, int) or isinstance(index, bool) or index < 0:
                raise _malformed(f"a tool call delta has a bad index: {call!r}")
            raw_function = call.get("function")
            function: dict[str, Any] = raw_function if isinstance(raw_function, dict) else {}
            call_id = call.get("id")
            name = function.get("name")
            arguments = function.get("arguments")
            out.append(
                ToolCallDelta(
                    index,
                    call_id if isinstance(call_id, str) and call_id else None,
                    name if isinstance(name, str) and name else None,
                    arguments if isinstance(arguments, str) else "",
                )
            )
            self._opened = True
            self._tool_calls = True

    def finish(self) -> Finish:
        """The `Finish` at `[DONE]`, or the failure an abnormal finish stands for."""
        reason = self._finish_reason
        if reason is None or reason == "stop":
            if not self._opened:
                raise ProviderFailure(LlmFailure(EMPTY_RESPONSE, "the model finished without any output"))
            # A server that ends a tool-calling turn with "stop" (some vLLM builds) still made calls.
            mapped: FinishReason = "tool-calls" if self._tool_calls else "stop"
        elif reason in _FINISH:
            mapped = _FINISH[reason]
        else:
            code = "".join(c if c.isalnum() else "_" for c in reason.upper())
            raise ProviderFailure(LlmFailure(code, f"the model stopped with finish_reason {reason!r}"))
        return Finish(mapped, map_usage(self._usage, self._price) if self._usage is not None else None)


def _malformed(message: str) -> ProviderFailure:
    return ProviderFailure(LlmFailure(MALFORMED_RESPONSE, message))


def map_usage(raw: Mapping[str, Any], price: ModelPrice | None) -> FrozenDict:
    """Disjoint counts from DeepSeek's usage: `prompt_tokens` includes cache hits, so input = prompt - hit.
    `costUsd` is present only when the model has a configured price."""
    prompt = _int(raw.get("prompt_tokens"))
    hit = raw.get("prompt_cache_hit_tokens")  # DeepSeek's field; OpenAI spells it in the details
    if not isinstance(hit, int):
        hit = _int(_get(raw, "prompt_tokens_details", "cached_tokens"))
    hit = min(_int(hit), prompt) if prompt else _int(hit)
    output = _int(raw.get("completion_tokens"))
    usage: dict[str, Any] = {
        "inputTokens": max(prompt - hit, 0),
        "cacheReadTokens": hit,
        "outputTokens": output,
        "reasoningTokens": _int(_get(raw, "completion_tokens_details", "reasoning_tokens")),
    }
    if price is not None:
        usage["costUsd"] = price.cost_usd(hit, max(prompt - hit, 0), output)
    return FrozenDict(usage)


def _get(raw: Mapping[str, Any], outer: str, inner: str) -> Any:
    value = raw.get(outer)
    return value.get(inner) if isinstance(value, Mapping) else None


MAX_TOKENS_COUNT = 2**53  # a count beyond any real usage is clamped, so cost arithmetic cannot overflow


def _int(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        return 0
    return min(value, MAX_TOKENS_COUNT)
