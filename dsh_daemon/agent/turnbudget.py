"""Budget caps (`agent.budget`, protocol.md §7): what one turn may spend, checked before each model
request after its first, so a turn stops *before* the request that would pass a cap, not after.

Each cap counts within one turn (a headless `dsh-daemon exec` run is one turn; an editor's session
gets the cap again on its next prompt):

- `steps`: model requests (steps) the turn may make;
- `tokens`: tokens it may use (input, cache reads and output of its requests, summed);
- `costUsd`: what it may cost, by the configured prices (`turn/usage` `costUsd`).

The next request is not known before it is made; it is assumed to use at least what the previous
request used (a turn's context only grows), so the turn stops when what it used plus the previous
request's share would pass a cap. A `costUsd` cap on a model without a price stops the turn after its
first request: its cost cannot be counted, and the cap is not let pass unmetered.

Light on purpose: it is parsed with the rest of `agent` while `initialize` is answered.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

KEYS = {"costUsd": "cost_usd", "tokens": "tokens", "steps": "steps"}
TOKEN_KEYS = ("inputTokens", "cacheReadTokens", "outputTokens")


class BudgetConfigError(ValueError):
    """An `agent.budget` that is not an object of positive caps; the message names the key."""


@dataclass(frozen=True, slots=True)
class TurnBudget:
    cost_usd: float | None = None
    tokens: int | None = None
    steps: int | None = None

    def json(self) -> dict[str, Any]:
        return {key: value for key, attr in KEYS.items() if (value := getattr(self, attr)) is not None}


def parse_budget(value: Any, where: str) -> TurnBudget | None:
    """`agent.budget` checked: None (no caps) for null or `{}`."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise BudgetConfigError(f"{where} must be an object of caps ({', '.join(KEYS)}) or null")
    caps: dict[str, Any] = {}
    for key, cap in value.items():
        attr = KEYS.get(key)
        if attr is None:
            raise BudgetConfigError(f"{where}: unknown cap {key!r} (known: {', '.join(KEYS)})")
        if cap is None:
            continue
        if attr == "cost_usd":
            ok = isinstance(cap, int | float) and not isinstance(cap, bool) and 0 < cap < float("inf")
            if not ok:
                raise BudgetConfigError(f"{where}.{key} must be a positive number of US dollars")
        elif not isinstance(cap, int) or isinstance(cap, bool) or cap <= 0:
            raise BudgetConfigError(f"{where}.{key} must be a positive integer")
        caps[attr] = cap
    return TurnBudget(**caps) if caps else None


def _number(usage: Mapping[str, Any], key: str) -> float | None:
    value = usage.get(key)
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def _tokens(usage: Mapping[str, Any]) -> float:
    return sum(_number(usage, key) or 0 for key in TOKEN_KEYS)


def budget_stop(
    budget: TurnBudget | None, steps: int, used: Mapping[str, Any], last: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """The `budget` of a `turn/end` reason when the next request would pass a cap, else None.
    `steps`: the requests the turn made; `used`: its usage summed; `last`: the previous request's."""
    if budget is None or steps == 0:
        return None
    if budget.steps is not None and steps >= budget.steps:
        return {"limit": "steps", "cap": budget.steps, "used": steps}
    if budget.tokens is not None:
        spent = _tokens(used)
        if spent + _tokens(last or {}) > budget.tokens:
            return {"limit": "tokens", "cap": budget.tokens, "used": spent}
    if budget.cost_usd is not None:
        cost, previous = _number(used, "costUsd"), _number(last or {}, "costUsd")
        if cost is None or previous is None:  # unpriced: not to be run unmetered
            return {"limit": "costUsd", "cap": budget.cost_usd, "used": cost}
        if cost + previous > budget.cost_usd:
            return {"limit": "costUsd", "cap": budget.cost_usd, "used": cost}
    return None
