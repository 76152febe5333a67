"""The agent's plan as the chat shows it: one line in the scrollback per update, a block above the
input line while a turn runs, and the whole of it on `/plan`."""

from __future__ import annotations

from dsh_daemon.chat.render import BOLD, CYAN, DIM, RESET, clip
from dsh_daemon.model.payloads import PlanStep, PlanUpdated
from dsh_daemon.model.plan import progress

MARKS = {"pending": "☐", "in_progress": "◐", "done": "☑"}
BLOCK_MAX_STEPS = 6  # the live block's steps; /plan shows them all


def summary_line(plan: PlanUpdated | None, width: int) -> str:
    """The scrollback's line for an update: `plan 1/3 · ☑ Read · ◐ Fix · ☐ Test`."""
    if plan is None or not plan.steps:
        return "plan cleared"
    marks = " · ".join(f"{MARKS[step.status]} {step.title}" for step in plan.steps)
    return clip(f"plan {progress(plan.steps)} · {marks}", max(20, width - 2))


def full_lines(plan: PlanUpdated | None, width: int) -> list[str]:
    """Every step, one a line, then the note (what `/plan` prints)."""
    if plan is None or not plan.steps:
        return ["no plan"]
    lines = [f"plan (turn {plan.turn}): {progress(plan.steps)}"]
    lines += [f"  {MARKS[step.status]} {clip(step.title, max(10, width - 6))}" for step in plan.steps]
    if plan.note:
        lines.append(f"  note: {clip(plan.note, max(10, width - 10))}")
    return lines


def block_lines(plan: PlanUpdated | None, width: int) -> list[str]:
    """The live block (ANSI): a header and at most BLOCK_MAX_STEPS steps around the one in progress."""
    if plan is None or not plan.steps:
        return []
    steps = plan.steps
    current = next((i for i, s in enumerate(steps) if s.status == "in_progress"), None)
    if current is None:
        current = next((i for i, s in enumerate(steps) if s.status == "pending"), len(steps) - 1)
    first = min(max(0, current - 1), max(0, len(steps) - BLOCK_MAX_STEPS))
    shown = steps[first : first + BLOCK_MAX_STEPS]
    lines = [f"{DIM}plan {progress(steps)}{RESET}"]
    if first:
        lines.append(f"{DIM}  … {first} earlier{RESET}")
    lines += [_block_step(step, width) for step in shown]
    later = len(steps) - first - len(shown)
    if later:
        lines.append(f"{DIM}  … {later} more (/plan){RESET}")
    return lines


def _block_step(step: PlanStep, width: int) -> str:
    text = f"{MARKS[step.status]} {clip(step.title, max(10, width - 6))}"
    if step.status == "in_progress":
        return f"  {BOLD}{CYAN}{text}{RESET}"
    return f"  {DIM}{text}{RESET}" if step.status == "done" else f"  {text}"
