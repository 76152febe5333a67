"""A permission question as a menu, and the rules that keep typed text from ever answering it.

The rules (what the terminal view does with each key while a question is open):

- The menu only takes keys while the input line is empty; otherwise every key, Enter included, edits
  or sends the input (a line sent meanwhile is a prompt like any other, queued behind the turn).
- Nothing is chosen when the question opens: Enter alone answers nothing. ↑/↓ or a digit choose an
  option (highlighted), and only Enter confirms it, so every answer takes two deliberate keys and
  "always" is never one keystroke away.
- Keys that come while the person is typing (within `SETTLE_S` of the question opening, or of their
  last keystroke or sent line) are typing: they go to the input, as do letters at any time.
- A digit while the menu listens chooses that option; a later digit replaces the choice (`3` then
  `1` chooses 1, it never joins into "31"). A digit followed by other text (`1 more thing`) was the
  start of a prompt: the digits move back into the input with what follows, and the choice is undone.
- A digit typed before the menu listens goes into the input, and the menu says so; Enter on an input
  line that is just an option's number chooses that option (another Enter confirms) rather than
  sending the digit to the model as a prompt.
- Esc and Ctrl-C answer `cancelled` (the turn stops, the queue stays), like everywhere else.
- A plan's approval (`preview.kind` "plan", protocol.md §3) offers approve and accept edits, approve
  and ask before edits, revise, cancel; there a line typed while the question is open is not a prompt
  but the person's words for the revision: it sends the plan back with them.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

SETTLE_S = 0.6

ALLOW_ONCE, ALLOW_ALWAYS, REJECT, CANCELLED = "allow-once", "allow-always", "reject", "cancelled"
# The chat's own name for "Always (saved to config)": on the wire `{outcome: allow-always, persist: true}`.
ALLOW_SAVED = "allow-always-saved"
# A plan's answers, by the chat's own names (on the wire: allow-once with a mode, reject with feedback).
APPROVE_EDITS, APPROVE_ASK, REVISE = "approve-accept-edits", "approve-ask", "revise"
LINE_ANSWERS = {  # a whole line answers (the plain view at a terminal); never a single letter for "always"
    "yes": ALLOW_ONCE,
    "y": ALLOW_ONCE,
    "once": ALLOW_ONCE,
    "always": ALLOW_ALWAYS,
    "save": ALLOW_SAVED,  # only where the question offers it
    "no": REJECT,
    "n": REJECT,
    "cancel": CANCELLED,
}
SAID = {
    ALLOW_ONCE: "allowed once",
    ALLOW_ALWAYS: "allowed always",
    ALLOW_SAVED: "allowed always, saved to config.json (every later session too)",
    REJECT: "rejected (the model is told; the turn goes on)",
    CANCELLED: "cancelled (the turn stops, the queue stays)",
    APPROVE_EDITS: "plan approved: accept edits (it runs now)",
    APPROVE_ASK: "plan approved: ask before edits (it runs now)",
    REVISE: "sent back to revise (the model is told; plan mode stays)",
}


@dataclass(frozen=True)
class Option:
    outcome: str
    label: str


def wire_answer(outcome: str, feedback: str = "") -> dict[str, Any]:
    """The `dsh/requestPermission` result for a chosen outcome (`feedback`: a revision's words)."""
    if outcome == ALLOW_SAVED:
        return {"outcome": ALLOW_ALWAYS, "persist": True}
    if outcome in (APPROVE_EDITS, APPROVE_ASK):
        return {"outcome": ALLOW_ONCE, "mode": "accept-edits" if outcome == APPROVE_EDITS else "ask"}
    if outcome == REVISE:
        return {"outcome": REJECT, "feedback": feedback} if feedback else {"outcome": REJECT}
    return {"outcome": outcome}


def is_plan(params: dict[str, Any]) -> bool:
    preview = params.get("preview")
    return isinstance(preview, dict) and preview.get("kind") == "plan"


PLAN_OPTIONS = (
    Option(APPROVE_EDITS, "Yes, approve and accept edits (the plan runs now)"),
    Option(APPROVE_ASK, "Yes, approve and ask before each edit"),
    Option(REVISE, "No, keep planning (or type what to change and press Enter)"),
    Option(CANCELLED, "Cancel the turn (the queue stays)"),
)


def options_for(params: dict[str, Any], *, persist_widening: bool = False) -> tuple[Option, ...]:
    """The menu of one question. An escalation (`preview.escalation`) offers once / this session /
    always saved to config.json (only where the daemon can persist a widening, flag `persistWidening`,
    and never for running unconfined: that is not saved) / reject; any other question once / always
    in this session / reject. Cancelling the turn is the last option of both."""
    if is_plan(params):
        return PLAN_OPTIONS
    tool = str(params.get("tool") or "this tool")
    preview = params.get("preview") or {}
    command = preview.get("command")
    escalation = preview.get("escalation")
    cancel = Option(CANCELLED, "Cancel the turn (the queue stays)")
    if isinstance(escalation, dict):
        if escalation.get("unconfined"):
            session = f"Yes, and run exactly `{command}` unconfined whenever it comes in this session"
        else:
            session = "Yes, for this session (every later command gets this widening)"
        options = [
            Option(ALLOW_ONCE, "Yes, once (this command only)"),
            Option(ALLOW_ALWAYS, session),
        ]
        if persist_widening and not escalation.get("unconfined"):
            options.append(Option(ALLOW_SAVED, "Always: save it to config.json (every later session too)"))
        options += [Option(REJECT, "No, run nothing (the model is told, the turn goes on)"), cancel]
        return tuple(options)
    always = (
        f"Yes, and always allow exactly `{command}` in this session"
        if tool == "run_command" and command
        else f"Yes, and always allow {tool} in this session"
    )
    return (
        Option(ALLOW_ONCE, "Yes, once"),
        Option(ALLOW_ALWAYS, always),
        Option(REJECT, "No (the model is told, the turn goes on)"),
        cancel,
    )


class Question:
    """One open `dsh/requestPermission`: its menu state and the future its answer resolves."""

    def __init__(
        self,
        params: dict[str, Any],
        answer: asyncio.Future[str],
        now: float,
        *,
        persist_widening: bool = False,
    ) -> None:
        self.params = params
        self.options = options_for(params, persist_widening=persist_widening)
        self.answer = answer
        self.selected: int | None = None
        self.from_digit = ""  # the digits typed while choosing, while they may still start a prompt
        self.quiet_since = now  # the menu takes keys once the person has not typed for SETTLE_S
        self.hint = ""  # a one-off line under the menu ("choose first")
        self.feedback = ""  # a plan sent back: the person's words for the model

    @property
    def plan(self) -> bool:
        return is_plan(self.params)

    def revise_with(self, line: str) -> bool:
        """A typed line while a plan's approval is open: the plan goes back with these words. False
        for any other question, or an empty line."""
        if not self.plan or not line.strip():
            return False
        self.feedback = line.strip()
        return self.resolve(REVISE)

    @property
    def title(self) -> str:
        return str(self.params.get("title") or self.params.get("tool") or "permission")

    def typed(self, now: float) -> None:
        """The person typed into the input or sent a line: menu keys wait until they stop."""
        self.quiet_since = now

    def settled(self, now: float) -> bool:
        return now - self.quiet_since >= SETTLE_S

    def choose(self, index: int) -> None:
        self.selected = index % len(self.options)
        self.hint = ""

    def move(self, step: int) -> None:
        self.from_digit = ""
        if self.selected is None:
            self.choose(0 if step > 0 else len(self.options) - 1)
        else:
            self.choose(self.selected + step)

    def digit(self, key: str) -> bool:
        """A digit on an empty input: choose that option (replacing an earlier digit's choice). False
        when it is no option's number."""
        if not self.is_option(key):
            return False
        self.choose(int(key) - 1)
        self.from_digit += key
        return True

    def is_option(self, text: str) -> bool:
        return text.isdigit() and len(text) == 1 and 1 <= int(text) <= len(self.options)

    def outcome_of_line(self, line: str) -> str | None:
        """A whole typed line as an answer (the plain view): an option's number, or one of
        `LINE_ANSWERS`' words for an outcome this question offers; None for any other line."""
        text = line.strip().lower()
        if self.is_option(text):
            return self.options[int(text) - 1].outcome
        outcome = LINE_ANSWERS.get(text)
        return outcome if any(option.outcome == outcome for option in self.options) else None

    def words(self) -> list[str]:
        """The words that answer this question (the plain view says them)."""
        offered = {option.outcome for option in self.options}
        return sorted((w for w, o in LINE_ANSWERS.items() if o in offered), key=len)

    @property
    def escalation(self) -> dict[str, Any] | None:
        escalation = (self.params.get("preview") or {}).get("escalation")
        return escalation if isinstance(escalation, dict) else None

    def take_back_digit(self) -> str:
        """Other text follows the digits: they were typing. Undo the choice; they go to the input."""
        digits, self.from_digit = self.from_digit, ""
        self.selected = None
        return digits

    def chosen_by_line(self, line: str) -> bool:
        """Enter on an input line that is only an option's number (typed before the menu listened):
        that option is chosen, and Enter again confirms it. False for any other line (a prompt)."""
        if not self.is_option(line.strip()):
            return False
        self.choose(int(line.strip()) - 1)
        self.from_digit = ""
        self.hint = f"{line.strip()} is chosen: Enter confirms it (↑/↓ or another digit changes it)"
        return True

    def confirm(self) -> str | None:
        """Enter: the chosen option's outcome, or None (and a hint) when nothing is chosen."""
        if self.selected is None:
            self.hint = f"choose with ↑/↓ or 1-{len(self.options)} first, then Enter"
            return None
        return self.options[self.selected].outcome

    def resolve(self, outcome: str) -> bool:
        if self.answer.done():
            return False
        self.answer.set_result(outcome)
        return True
