"""A deterministic scripted provider for tests and benchmarks.

Each request consumes the next script entry: a list of steps (deltas, a `Finish`, `Fail`, `Hang`,
`Sleep`, `Call`). When the script is exhausted, `default` (a short text reply) is used. Every request
is recorded, so tests can compare them with what the log rebuilds.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from dsh_daemon.model.jsonvalue import FrozenDict
from dsh_daemon.model.provider import (
    Finish,
    FinishReason,
    LlmFailure,
    ModelRequest,
    ProviderFailure,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
)


@dataclass(frozen=True)
class Fail:
    failure: LlmFailure


@dataclass(frozen=True)
class Hang:
    """Block until the consumer cancels (the stream is closed from outside)."""


@dataclass(frozen=True)
class Sleep:
    seconds: float


@dataclass(frozen=True)
class Call:
    """Run a callback at this point of the stream (e.g. to cancel or send mid-stream)."""

    fn: Callable[[], Any]


ScriptStep: TypeAlias = StreamEvent | Fail | Hang | Sleep | Call
Script: TypeAlias = Sequence[ScriptStep]


def usage(input_tokens: int = 10, output_tokens: int = 5) -> FrozenDict:
    return FrozenDict({"inputTokens": input_tokens, "outputTokens": output_tokens})


def reply(
    text: str = "ok",
    *,
    reasoning: str | None = None,
    tool_calls: Sequence[tuple[str, str, str]] = (),
    finish: FinishReason | None = None,
    chunk: int = 0,
    use: FrozenDict | None = None,
) -> list[ScriptStep]:
    """A scripted reply: optional reasoning, text (split into `chunk`-sized deltas), tool calls
    given as (id, name, arguments-json), then a finish (tool-calls when there are calls)."""
    steps: list[ScriptStep] = []
    if reasoning:
        steps.append(ReasoningDelta(reasoning))
    if text:
        size = chunk or len(text)
        steps.extend(TextDelta(text[i : i + size]) for i in range(0, len(text), size))
    for index, (call_id, name, arguments) in enumerate(tool_calls):
        steps.append(ToolCallDelta(index, call_id, name, ""))
        if arguments:
            steps.append(ToolCallDelta(index, None, None, arguments))
    steps.append(Finish(finish or ("tool-calls" if tool_calls else "stop"), use or usage()))
    return steps


class ScriptedProvider:
    name = "scripted"

    def __init__(
        self,
        script: Sequence[Script] = (),
        *,
        default: Script | None = None,
        context_window: int | None = None,
        compact_at_ratio: float | None = 0.85,
    ) -> None:
        self.script: list[Script] = list(script)
        self.window = context_window
        self.compact_at_ratio = compact_at_ratio
        self.default: Script = default if default is not None else reply("ok")
        self.requests: list[ModelRequest] = []
        self.closed = 0  # streams closed (finished, failed or cancelled)

    def push(self, *entries: Script) -> None:
        self.script.extend(entries)

    def default_config(self, model: str) -> Mapping[str, Any]:
        return {}

    def context_window(self, model: str) -> int | None:
        return self.window

    def reconfigure(self, config: Any) -> None:
        return None

    async def aclose(self) -> None:
        return None

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        self.requests.append(request)
        entry = self.script.pop(0) if self.script else self.default
        return self._play(entry)

    async def _play(self, entry: Script) -> AsyncIterator[StreamEvent]:
        try:
            for step in entry:
                if isinstance(step, Fail):
                    raise ProviderFailure(step.failure)
                if isinstance(step, Hang):
                    await asyncio.Event().wait()
                elif isinstance(step, Sleep):
                    await asyncio.sleep(step.seconds)
                elif isinstance(step, Call):
                    result = step.fn()
                    if asyncio.iscoroutine(result):
                        await result
                else:
                    yield step
                    if isinstance(step, Finish):
                        return
        finally:
            self.closed += 1
