"""What one turn holds while it runs: the input its boundary claimed, and its own state."""

from __future__ import annotations

from dataclasses import dataclass, field

from dsh_daemon.agent.signal import AbortSignal
from dsh_daemon.model.inbox import InboxItem
from dsh_daemon.model.jsonvalue import FrozenDict
from dsh_daemon.model.messages import UserMessage


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
    last_usage: FrozenDict | None = None  # the last request's: what the next one is assumed to use
    overflow: FrozenDict | None = None  # a CONTEXT_WINDOW_EXCEEDED the next boundary compacts for
    overflow_compacted: bool = False  # compacted for an overflow, no step succeeded since
    compacted: FrozenDict | None = None  # the `context/compacted` data this turn wrote, if any

    def add_usage(self, usage: FrozenDict) -> None:
        """Sum a request's usage into the turn's `turn/usage`."""
        self.last_usage = usage
        for key, value in usage.items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                self.usage[key] = self.usage.get(key, 0) + value  # type: ignore[assignment]
