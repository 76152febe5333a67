"""The table a run prints, per task and in total, and the totals' JSONL record."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bench.tasks.runner import TaskResult

COLUMNS = ("task", "pass", "status", "steps", "tools", "in tok", "out tok", "cost $", "wall s")


def _cost(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def row(result: TaskResult) -> tuple[str, ...]:
    return (
        result.task,
        "PASS" if result.passed else "fail",
        result.status,
        str(result.steps),
        str(result.tool_calls),
        f"{result.input_tokens:,}",
        f"{result.output_tokens:,}",
        _cost(result.cost_usd),
        f"{result.wall_s:.1f}",
    )


def totals(results: Sequence[TaskResult]) -> dict[str, Any]:
    passed = sum(r.passed for r in results)
    costs = [r.cost_usd for r in results if r.cost_usd is not None]
    return {
        "type": "total",
        "tasks": len(results),
        "passed": passed,
        "passRate": passed / len(results) if results else 0.0,
        "steps": sum(r.steps for r in results),
        "toolCalls": sum(r.tool_calls for r in results),
        "inputTokens": sum(r.input_tokens for r in results),
        "outputTokens": sum(r.output_tokens for r in results),
        "costUsd": sum(costs) if costs else None,
        "wallS": round(sum(r.wall_s for r in results), 3),
    }


def table(results: Sequence[TaskResult]) -> str:
    total = totals(results)
    rows = [COLUMNS, *(row(r) for r in results)]
    rows.append(
        (
            "total",
            f"{total['passed']}/{total['tasks']} ({total['passRate']:.0%})",
            "",
            str(total["steps"]),
            str(total["toolCalls"]),
            f"{total['inputTokens']:,}",
            f"{total['outputTokens']:,}",
            _cost(total["costUsd"]),
            f"{total['wallS']:.1f}",
        )
    )
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    lines = [
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in rows
    ]
    lines.insert(1, "-" * len(lines[0]))
    lines.insert(len(lines) - 1, "-" * len(lines[0]))
    return "\n".join(lines)
