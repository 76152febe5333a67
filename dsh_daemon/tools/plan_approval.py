"""propose_plan: plan mode ends in a plan the person approves (protocol.md §3 "Plan approval").

Offered only in plan mode. Every call is asked (whatever `tools.permissions` says: the approval is the
person's, never remembered) with a permission request of kind `plan` whose preview is the plan's
text. Approving runs the body, which hands the plan and the chosen mode to the session
(`approve`, set by the host): the mode switch and the plan queued as the next prompt land on disk in
one commit, and the turn ends, so the plan runs at once with no retyping. Rejecting ("Revise") gives
the model the person's feedback as the call's error result, and the session stays in plan mode.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from dsh_daemon.agent.tools import ToolContext, ToolOutcome
from dsh_daemon.tools.base import ToolBase, get_str, make_spec
from dsh_daemon.tools.errors import InvalidArgumentsError, ToolError

PROPOSE_PLAN_TOOL = "propose_plan"
MAX_PLAN_CHARS = 20_000
APPROVED_MODES = ("accept-edits", "ask")  # what an approval may switch to; "ask" when none is said
REVISE_NOTE = (
    "You are still in plan mode: change the plan as they asked (read more if you need to), then call "
    "propose_plan again with the whole revised plan. If they did not say what to change, ask them and "
    "end your turn."
)

# (plan text, chosen mode, the call's id): switches the mode and queues the plan, durably, at once.
ApprovePlan = Callable[[str, str, str], None]


class NoSessionError(ToolError):
    code = "NOT_AVAILABLE"


def plan_text(args: Mapping[str, Any]) -> str:
    """The plan of a call, trimmed; InvalidArgumentsError naming what is wrong."""
    plan = get_str(args, "plan").strip()
    if not plan:
        raise InvalidArgumentsError("'plan' must not be empty")
    if len(plan) > MAX_PLAN_CHARS:
        raise InvalidArgumentsError(f"'plan' is longer than {MAX_PLAN_CHARS} characters")
    return plan


class ProposePlanTool(ToolBase):
    spec = make_spec(
        PROPOSE_PLAN_TOOL,
        "Plan mode only: propose your finished plan to the person for approval. Call it once you have "
        "read what you need and the plan is ready; write the whole plan (markdown: the steps, the files "
        "to change, how to check the result). If they approve, the session leaves plan mode and the "
        "plan comes back to you as the next prompt to carry out; if they ask for changes, you get "
        "their words and stay in plan mode.",
        {"plan": {"type": "string", "description": "The whole plan, in markdown."}},
        ["plan"],
    )
    # Alone in its batch position: what follows it runs in the mode the person chose.
    parallel_safe = False

    def __init__(self) -> None:
        self.approve: ApprovePlan | None = None

    def permission_title(self, args: Mapping[str, Any]) -> str:
        return "Approve the plan?"

    async def permission_preview(self, args: Mapping[str, Any]) -> Mapping[str, Any] | None:
        return {"kind": "plan", "plan": plan_text(args)}

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        plan = plan_text(args)
        if self.approve is None:
            raise NoSessionError("no session to switch out of plan mode")
        # A permission hook's "allow" carries no mode: the plan runs in ask mode, which asks before edits.
        chosen = ctx.approved_mode
        mode = chosen if chosen is not None and chosen in APPROVED_MODES else "ask"
        self.approve(plan, mode, ctx.call.call_id)
        ctx.conclude_turn()
        shown = "accept edits" if mode == "accept-edits" else "ask"
        return ToolOutcome.text(
            f"The person approved the plan. The session is now in {shown} mode; the plan comes next "
            "as their prompt: carry it out then.",
            meta={"mode": mode},
        )
