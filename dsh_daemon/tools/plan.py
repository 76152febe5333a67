"""update_plan: the agent's plan as an ordered checklist, each change a durable `plan/updated`.

It only records (no file, no command), so it is always allowed and offered in plan mode too. The
whole plan is sent every time: a client shows the latest one, and a rewind takes back what the cut
turns wrote (`model/plan.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from dsh_daemon.agent.tools import ToolContext, ToolOutcome
from dsh_daemon.model.payloads import PlanStatus, PlanStep, PlanUpdated
from dsh_daemon.model.plan import progress
from dsh_daemon.tools.base import ToolBase, get_opt_str, make_spec
from dsh_daemon.tools.errors import InvalidArgumentsError

PLAN_TOOL = "update_plan"
MAX_STEPS = 50
MAX_TITLE_CHARS = 300
MAX_NOTE_CHARS = 2000
STATUSES: tuple[PlanStatus, ...] = ("pending", "in_progress", "done")


def parse_steps(args: Mapping[str, Any]) -> tuple[PlanStep, ...]:
    """The steps of an `update_plan` call; InvalidArgumentsError naming what is wrong."""
    steps = args.get("steps")
    if not isinstance(steps, list):
        raise InvalidArgumentsError("'steps' must be an array of {title, status}")
    if len(steps) > MAX_STEPS:
        raise InvalidArgumentsError(f"'steps' has {len(steps)} items; at most {MAX_STEPS}")
    parsed: list[PlanStep] = []
    for index, step in enumerate(steps):
        where = f"steps[{index}]"
        if not isinstance(step, dict):
            raise InvalidArgumentsError(f"{where} must be an object {{title, status}}")
        extra = sorted(set(step) - {"title", "status"})
        if extra:
            raise InvalidArgumentsError(f"{where} has unknown field(s): {', '.join(extra)}")
        title = step.get("title")
        if not isinstance(title, str) or not title.strip():
            raise InvalidArgumentsError(f"{where}.title must be a non-empty string")
        if len(title) > MAX_TITLE_CHARS:
            raise InvalidArgumentsError(f"{where}.title is longer than {MAX_TITLE_CHARS} characters")
        status = step.get("status")
        if status not in STATUSES:
            raise InvalidArgumentsError(f"{where}.status must be one of: {', '.join(STATUSES)}")
        parsed.append(PlanStep(" ".join(title.split()), cast(PlanStatus, status)))
    running = [i for i, step in enumerate(parsed) if step.status == "in_progress"]
    if len(running) > 1:
        raise InvalidArgumentsError(
            f"at most one step may be in_progress (steps {', '.join(map(str, running))} are)"
        )
    return tuple(parsed)


class UpdatePlanTool(ToolBase):
    spec = make_spec(
        PLAN_TOOL,
        "Record your plan for multi-step work as an ordered checklist the person sees. Send the whole "
        "plan each time (it replaces the previous one); mark a step in_progress when you start it and "
        "done when it is finished; at most one step in_progress. An empty list clears the plan.",
        {
            "steps": {
                "type": "array",
                "maxItems": MAX_STEPS,
                "items": {
                    "type": "object",
                    "properties": {
                        "title": {"type": "string", "description": "The step, in a few words."},
                        "status": {"type": "string", "enum": list(STATUSES)},
                    },
                    "required": ["title", "status"],
                    "additionalProperties": False,
                },
            },
            "note": {"type": "string", "description": "Optional: why the plan changed, in a sentence."},
        },
        ["steps"],
    )
    # Alone in its batch position: plan updates land in the log in the order the model made them.
    parallel_safe = False

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        steps = parse_steps(args)
        note = get_opt_str(args, "note")
        if note is not None and len(note) > MAX_NOTE_CHARS:
            raise InvalidArgumentsError(f"'note' is longer than {MAX_NOTE_CHARS} characters")
        call = ctx.call
        ctx.log_event(PlanUpdated(call.turn, steps, note or None, call.call_id), ignorable=True)
        if not steps:
            return ToolOutcome.text("Plan cleared.")
        return ToolOutcome.text(f"Plan updated: {progress(steps)}.")
