"""One model request, attempted until it succeeds or may not be retried (D8), for a step's request
and for a compaction's summary alike.

Each attempt is a durable `llm/request` first (so the log says which requests were sent, and each
rebuilds from it); a failed one that may be retried is a durable `llm/retry` and a wait the abort
signal can cut short. Failed partial output is never committed (the attempt does not return it).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Literal, TypeVar

from dsh_daemon.agent.signal import AbortSignal
from dsh_daemon.agent.turncontext import TurnContext
from dsh_daemon.model.payloads import LlmRetried, entry
from dsh_daemon.model.provider import LlmFailure, ModelRequest

T = TypeVar("T")


async def attempt_with_retries(
    ctx: TurnContext,
    signal: AbortSignal,
    turn: int,
    step: int,
    *,
    start: Callable[[int], Awaitable[ModelRequest]],
    attempt: Callable[[ModelRequest], Awaitable[T | LlmFailure]],
    retry_after: Callable[[LlmFailure, int], Awaitable[float | None]],
    final: Callable[[LlmFailure], bool] = lambda _: False,
    purpose: Literal["compaction"] | None = None,
) -> T | LlmFailure:
    """`start(n)` logs attempt n's `llm/request` and gives the request; `attempt` sends it;
    `retry_after(failure, retries so far)` says how long to wait before the next (None: give up);
    a failure `final` accepts is returned as it is (an overflow: the next boundary compacts)."""
    retries = 0
    while True:
        request = await start(retries + 1)
        result = await attempt(request)
        if not isinstance(result, LlmFailure) or final(result):
            return result
        delay = await retry_after(result, retries)
        if delay is None:
            return result
        retries += 1
        retried = LlmRetried(turn, step, retries, int(delay * 1000), result.to_json(), purpose)
        ctx.log.append(*entry(retried), commit=True)
        await signal.sleep(delay)
