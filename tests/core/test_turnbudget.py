"""`agent.budget` (agent/turnbudget.py): parsed strictly, and a turn stops before the request that
would pass a cap (the next request is assumed to use what the previous one did)."""

from __future__ import annotations

import pytest

from dsh_daemon.agent.system_prompt import PromptConfigError, load_prompt_config
from dsh_daemon.agent.turnbudget import BudgetConfigError, TurnBudget, budget_stop, parse_budget

STEP = {"inputTokens": 100, "cacheReadTokens": 20, "outputTokens": 30, "costUsd": 0.01}


def test_parse_accepts_positive_caps_and_refuses_the_rest() -> None:
    assert parse_budget({"costUsd": 0.5, "tokens": 1000, "steps": 3}, "b") == TurnBudget(0.5, 1000, 3)
    assert parse_budget(None, "b") is None and parse_budget({}, "b") is None
    for bad in (
        {"steps": 0},
        {"steps": 1.5},
        {"tokens": True},
        {"costUsd": -1},
        {"costUsd": "1"},
        {"turns": 2},
        3,
    ):
        with pytest.raises(BudgetConfigError):
            parse_budget(bad, "agent.budget")


def test_a_bad_budget_is_refused_naming_the_key(tmp_path: object) -> None:
    with pytest.raises(PromptConfigError, match=r"initializationOptions: agent\.budget\.steps"):
        load_prompt_config(str(tmp_path), {"agent": {"budget": {"steps": 0}}})
    config = load_prompt_config(str(tmp_path), {"agent": {"budget": {"steps": 2}}})
    assert config.budget == TurnBudget(steps=2)


def test_steps_cap_stops_once_that_many_requests_were_made() -> None:
    budget = TurnBudget(steps=2)
    assert budget_stop(budget, 0, {}, None) is None  # the first request always runs
    assert budget_stop(budget, 1, STEP, STEP) is None
    assert budget_stop(budget, 2, STEP, STEP) == {"limit": "steps", "cap": 2, "used": 2}
    assert budget_stop(None, 99, STEP, STEP) is None


def test_tokens_and_cost_stop_before_the_request_that_would_pass_them() -> None:
    two = {k: v * 2 for k, v in STEP.items()}
    assert budget_stop(TurnBudget(tokens=450), 2, two, STEP) is None  # 300 + 150 fits in 450
    assert budget_stop(TurnBudget(tokens=449), 2, two, STEP) == {"limit": "tokens", "cap": 449, "used": 300}
    assert budget_stop(TurnBudget(cost_usd=0.031), 2, two, STEP) is None
    assert budget_stop(TurnBudget(cost_usd=0.029), 2, two, STEP) == {
        "limit": "costUsd", "cap": 0.029, "used": 0.02,
    }  # fmt: skip


def test_a_cost_cap_does_not_let_an_unpriced_model_run_unmetered() -> None:
    unpriced = {"inputTokens": 10, "outputTokens": 5}
    stop = budget_stop(TurnBudget(cost_usd=1.0), 1, unpriced, unpriced)
    assert stop == {"limit": "costUsd", "cap": 1.0, "used": None}
