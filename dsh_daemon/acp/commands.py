"""Slash commands (issue 24.10): dsh's queue, steering and session actions, reachable from Zed and
CodeCompanion, advertised with `available_commands_update` and run when a prompt starts with one.

A command is answered at once (`end_turn`) with a line saying what it did, as an
`agent_message_chunk`; what it queued or started runs as any prompt's turn would (its updates
stream into the chat). A prompt whose first word is not a known command is an ordinary prompt.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

COMMANDS: tuple[dict[str, Any], ...] = (
    {"name": "queue", "description": "Queue a prompt for after the current turn, without waiting for it",
     "input": {"hint": "prompt"}},
    {"name": "steer", "description": "Redirect the running turn at its next step (or start one)",
     "input": {"hint": "what to do instead"}},
    {"name": "inject", "description": "Add context the model reads at its next request; starts nothing",
     "input": {"hint": "context"}},
    {"name": "wake", "description": "Run the queued prompts now"},
    {"name": "drop", "description": "Remove every queued prompt and pending context"},
    {"name": "compact", "description": "Summarise the conversation to free context"},
    {"name": "rename", "description": "Rename this chat", "input": {"hint": "title"}},
    {"name": "model", "description": "Switch this chat's model", "input": {"hint": "model id"}},
)  # fmt: skip
NAMES = frozenset(c["name"] for c in COMMANDS)


@dataclass(frozen=True)
class SlashCommand:
    name: str
    argument: str  # the rest of the first text block, stripped
    rest: tuple[Mapping[str, Any], ...]  # the prompt's other blocks (context that travels with it)

    def prompt(self) -> list[Mapping[str, Any]]:
        """The prompt without the command word (for /queue, /steer, /inject)."""
        head: list[Mapping[str, Any]] = [{"type": "text", "text": self.argument}] if self.argument else []
        return [*head, *self.rest]


def parse(blocks: Any) -> SlashCommand | None:
    """The command a prompt starts with (`/name args…` in its first block, a text block), if any."""
    if not isinstance(blocks, Sequence) or isinstance(blocks, str) or not blocks:
        return None
    first = blocks[0]
    if not isinstance(first, Mapping) or first.get("type") != "text":
        return None
    if not isinstance(first.get("text"), str):
        return None
    text = first["text"].lstrip()
    if not text.startswith("/"):
        return None
    word, _, argument = text[1:].partition(" ")
    name = word.strip()
    if name not in NAMES:
        return None
    return SlashCommand(name, argument.strip(), tuple(b for b in blocks[1:] if isinstance(b, Mapping)))
