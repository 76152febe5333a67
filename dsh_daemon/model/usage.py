"""A session's usage summed over its turns: the tokens and the cost of every durable `turn/usage`.

One fold for every place that says what a session has cost: `dsh/session/usage` (protocol.md §3),
ACP's `usage_update` (its `cost`: the session's sum, its subagents' added) and the terminal chat's `/cost`
and status line.
A turn's `costUsd` is there only when the model has a configured price; the sum's cost is null until
a priced turn is counted, and `unpriced_turns` says how many counted turns had none.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


def _count(usage: Mapping[str, Any], key: str) -> int:
    value = usage.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _cost(usage: Mapping[str, Any]) -> float | None:
    """`costUsd` when it is a number (absent: the model has no price)."""
    value = usage.get("costUsd")
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


@dataclass(frozen=True, slots=True)
class UsageTotals:
    turns: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float = 0.0
    priced_turns: int = 0

    @property
    def cost_known(self) -> bool:
        """Whether any counted turn had a price (else the cost is not known, not zero)."""
        return self.priced_turns > 0

    def plus(self, usage: Mapping[str, Any]) -> UsageTotals:
        """The totals with one more turn's `turn/usage` `usage` counted."""
        cost = _cost(usage)
        return UsageTotals(
            self.turns + 1,
            self.input_tokens + _count(usage, "inputTokens"),
            self.output_tokens + _count(usage, "outputTokens"),
            self.cache_read_tokens + _count(usage, "cacheReadTokens"),
            self.reasoning_tokens + _count(usage, "reasoningTokens"),
            self.cost_usd if cost is None else self.cost_usd + cost,
            self.priced_turns if cost is None else self.priced_turns + 1,
        )

    def added(self, other: UsageTotals) -> UsageTotals:
        """These totals and `other`'s together (a session's subagents' sums, `dsh/session/usage`)."""
        return UsageTotals(
            self.turns + other.turns,
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
            self.cost_usd + other.cost_usd,
            self.priced_turns + other.priced_turns,
        )

    def to_json(self) -> dict[str, Any]:
        """`dsh/session/usage`'s answer: `{turns, usage, costUsd, unpricedTurns}`."""
        usage: dict[str, int] = {"inputTokens": self.input_tokens, "outputTokens": self.output_tokens}
        if self.cache_read_tokens:
            usage["cacheReadTokens"] = self.cache_read_tokens
        if self.reasoning_tokens:
            usage["reasoningTokens"] = self.reasoning_tokens
        return {
            "turns": self.turns,
            "usage": usage,
            "costUsd": self.cost_usd if self.cost_known else None,
            "unpricedTurns": self.turns - self.priced_turns,
        }

    @classmethod
    def from_json(cls, answer: Mapping[str, Any]) -> UsageTotals:
        """The totals a `dsh/session/usage` answer says (a client's side of `to_json`)."""
        usage = answer.get("usage")
        usage = usage if isinstance(usage, Mapping) else {}
        turns = _count(answer, "turns")
        cost = _cost(answer)
        return cls(
            turns,
            _count(usage, "inputTokens"),
            _count(usage, "outputTokens"),
            _count(usage, "cacheReadTokens"),
            _count(usage, "reasoningTokens"),
            0.0 if cost is None else cost,
            0 if cost is None else turns - _count(answer, "unpricedTurns"),
        )


def summed(usages: Iterable[Mapping[str, Any]]) -> UsageTotals:
    """The totals of turns' `turn/usage` `usage` values, in log order."""
    totals = UsageTotals()
    for usage in usages:
        totals = totals.plus(usage)
    return totals
