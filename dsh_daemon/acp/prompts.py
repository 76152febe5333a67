"""Which turn answers which `session/prompt`.

A prompt is a followup: queued durably, then claimed by exactly one turn (`agent/inbox/claimed`
names the turn), and answered when that turn ends. A prompt claimed but put back (the turn was
aborted before entering it: `agent/inbox/inserted` again) waits for a later turn. A prompt discarded
while pending (an inbox edit, a clearing cancel, `$/cancel_request`) is answered at once: `cancelled`,
or `-32800` when the client cancelled that very request.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from dsh_daemon.acp.transport import RequestId
from dsh_daemon.host.errors import WireError, request_cancelled, turn_failed
from dsh_daemon.model import events as ev
from dsh_daemon.model.events import Event
from dsh_daemon.model.payloads import InboxClaimed, InboxDiscarded, InboxInserted, TurnEnded, TurnUsage
from dsh_daemon.model.wire import TurnEndReason

STOP_REASONS = {
    "completed": "end_turn",
    "max-tokens": "max_tokens",
    "aborted": "cancelled",
    "interrupted": "cancelled",
    "blocked": "refusal",
    "budget": "max_turn_requests",  # agent.budget stopped the turn: ACP's nearest stop reason
}


def answer_for(reason: TurnEndReason, usage: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A turn's end reason as a `session/prompt` result (an error turn raises its typed error), with
    the turn's token usage (`turn/usage`) as ACP's `usage` when the provider reported any."""
    if reason.kind == "error":
        raise turn_failed(reason.error)
    answer: dict[str, Any] = {"stopReason": STOP_REASONS.get(reason.kind, "end_turn")}
    if usage is not None:
        answer["usage"] = acp_usage(usage)
    return answer


def acp_usage(usage: Mapping[str, Any]) -> dict[str, int]:
    """dsh's `Usage` (protocol.md §7) as ACP's: input and output tokens, their sum, and the cache
    reads and reasoning tokens where the provider counted them."""

    def count(key: str) -> int | None:
        value = usage.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None

    inputs, outputs = count("inputTokens") or 0, count("outputTokens") or 0
    out = {"inputTokens": inputs, "outputTokens": outputs, "totalTokens": inputs + outputs}
    if (cached := count("cacheReadTokens")) is not None:
        out["cachedReadTokens"] = cached
    if (thought := count("reasoningTokens")) is not None:
        out["thoughtTokens"] = thought
    return out


@dataclass
class PendingPrompt:
    request_id: RequestId
    message_id: str
    future: asyncio.Future[dict[str, Any]]
    turn: int | None = None  # the turn that claimed it
    revoked: bool = False  # the client sent `$/cancel_request` for it


class PromptBook:
    def __init__(self) -> None:
        self._by_message: dict[str, PendingPrompt] = {}
        self._moving: set[str] = set()  # ids an inbox move takes out and puts back: not discarded
        self._usage: dict[int, Mapping[str, Any]] = {}  # turn -> its `turn/usage`, until it ends

    @contextlib.contextmanager
    def moving(self, message_id: str) -> Iterator[None]:
        self._moving.add(message_id)
        try:
            yield
        finally:
            self._moving.discard(message_id)

    def add(self, request_id: RequestId, message_id: str) -> asyncio.Future[dict[str, Any]]:
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._by_message[message_id] = PendingPrompt(request_id, message_id, future)
        return future

    def find(self, request_id: RequestId) -> PendingPrompt | None:
        return next((p for p in self._by_message.values() if p.request_id == request_id), None)

    def rebind(self, old_id: str, new_id: str) -> None:
        """The pending prompt follows its message when an inbox edit replaces it."""
        prompt = self._by_message.pop(old_id, None)
        if prompt is not None:
            prompt.message_id = new_id
            self._by_message[new_id] = prompt

    def drop(self, message_id: str) -> None:
        """Forget a prompt that was never queued (its send failed)."""
        prompt = self._by_message.pop(message_id, None)
        if prompt is not None and not prompt.future.done():
            prompt.future.cancel()

    def _settle(self, prompt: PendingPrompt, result: dict[str, Any] | WireError) -> None:
        self._by_message.pop(prompt.message_id, None)
        if prompt.future.done():
            return
        if isinstance(result, WireError):
            prompt.future.set_exception(result)
        else:
            prompt.future.set_result(result)

    def on_event(self, event: Event) -> None:
        if event.type == ev.INBOX_CLAIMED:
            claimed = InboxClaimed.of(event)
            prompt = self._by_message.get(_message_id(claimed.message))
            if prompt is not None:
                prompt.turn = claimed.turn
        elif event.type == ev.INBOX_INSERTED:
            inserted = InboxInserted.of(event).message
            prompt = self._by_message.get(_message_id(inserted))
            if prompt is not None:
                prompt.turn = None  # claimed, then put back: a later turn answers it
            elif isinstance(inserted.get("source", {}).get("approvedPlan"), Mapping):
                self._follow_the_plan(_message_id(inserted))
        elif event.type == ev.INBOX_DISCARDED:
            prompt = self._by_message.get(_message_id(InboxDiscarded.of(event).message))
            if prompt is not None and prompt.turn is None and prompt.message_id not in self._moving:
                self._settle(prompt, request_cancelled() if prompt.revoked else {"stopReason": "cancelled"})
        elif event.type == ev.USAGE:
            used = TurnUsage.of(event)
            self._usage[used.turn] = used.usage
        elif event.type == ev.TURN_END:
            ended = TurnEnded.of(event)
            usage = self._usage.pop(ended.turn, None)
            for prompt in [p for p in self._by_message.values() if p.turn == ended.turn]:
                try:
                    result: dict[str, Any] | WireError = answer_for(ended.reason, usage)
                except WireError as exc:
                    result = exc
                self._settle(prompt, result)

    def _follow_the_plan(self, plan_id: str) -> None:
        """A plan approved in a running turn is queued as the next prompt: the `session/prompt` that
        turn answers waits for the plan's turn instead, so the plan runs inside it (clients drop
        updates outside a prompt, and a permission asked there could not be answered)."""
        running = [p for p in self._by_message.values() if p.turn is not None]
        if len(running) == 1 and plan_id not in self._by_message:
            self.rebind(running[0].message_id, plan_id)
            running[0].turn = None

    def fail(self, error: WireError) -> None:
        """Every prompt still waiting is answered with `error`."""
        for prompt in list(self._by_message.values()):
            self._settle(prompt, error)

    def close(self) -> None:
        """The session closed: every prompt still waiting is answered `cancelled`."""
        for prompt in list(self._by_message.values()):
            self._settle(prompt, {"stopReason": "cancelled"})


def _message_id(message: Mapping[str, Any]) -> str:
    return str(message.get("id", ""))
