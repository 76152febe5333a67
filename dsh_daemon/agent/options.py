"""What an agent runs with: the model, the request settings, the retry policy, the tool pool, the
context window, how much history compaction keeps (docs/design.md §11) and a turn's budget."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dsh_daemon.agent import compaction
from dsh_daemon.agent.retry import RetryPolicy
from dsh_daemon.agent.turnbudget import TurnBudget


@dataclass
class AgentOptions:
    model: str = ""
    system: str | None = None
    max_tokens: int | None = None
    config: Mapping[str, Any] = field(default_factory=dict)  # thinking, reasoningEffort, temperature...
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    tool_concurrency: int = 10
    context_window: int | None = None  # tokens; None: the provider's `context_window(model)`
    compact_keep_turns: int = compaction.KEEP_TURNS  # the kept tail when compacting (docs/design.md §11)
    budget: TurnBudget | None = None  # what one turn may spend (`agent.budget`, agent/turnbudget.py)

    def __post_init__(self) -> None:
        if self.max_tokens is not None and (
            not isinstance(self.max_tokens, int) or isinstance(self.max_tokens, bool) or self.max_tokens <= 0
        ):
            raise ValueError("max_tokens must be a positive integer")
