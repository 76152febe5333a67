"""Slash commands (issue 24.10): dsh's queue, steering and session actions, reachable from Zed and
CodeCompanion, advertised with `available_commands_update` and run when a prompt starts with one.

A command is answered at once (`end_turn`) with a line saying what it did, as an
`agent_message_chunk`; what it queued or started runs as any prompt's turn would (its updates
stream into the chat). A prompt whose first word is not a known command is an ordinary prompt.
"""

from __future__ import annotations

import os
from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

REWIND_USAGE = (
    "Usage: /rewind N [files|conversation] [force] — back to before turn N "
    "(its files and the conversation, by default)."
)

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
    {"name": "undo", "description": "Take back the file changes of the last turn (the conversation stays)",
     "input": {"hint": "force: overwrite files changed since"}},
    {"name": "rewind", "description": "Back to before turn N: files and conversation (alone: the turns)",
     "input": {"hint": "N [files|conversation] [force]"}},
    {"name": "review", "description": "Review the uncommitted changes (or vs a base branch, or a commit)",
     "input": {"hint": "[base BRANCH | commit SHA] [instructions]"}},
    {"name": "ps", "description": "List this chat's background processes"},
    {"name": "kill", "description": "Stop a background process", "input": {"hint": "process id (p1, or 1)"}},
)  # fmt: skip
NAMES = frozenset(c["name"] for c in COMMANDS)
# The commands that start or feed a model request: refused without an API key, as a prompt is.
NEED_THE_MODEL = frozenset({"queue", "steer", "wake", "compact", "review"})


@dataclass(frozen=True)
class SlashCommand:
    name: str
    argument: str  # the rest of the first text block, stripped
    rest: tuple[Mapping[str, Any], ...]  # the prompt's other blocks (context that travels with it)

    def prompt(self) -> list[Mapping[str, Any]]:
        """The prompt without the command word (for /queue, /steer, /inject)."""
        head: list[Mapping[str, Any]] = [{"type": "text", "text": self.argument}] if self.argument else []
        return [*head, *self.rest]


class EarlierTexts:
    """The text blocks of a session's recent prompts on this connection (bounded), so that `parse`
    can tell a re-sent block from one the person just typed."""

    KEEP = 32

    def __init__(self) -> None:
        self._texts: dict[str, None] = {}  # insertion-ordered set

    def __contains__(self, text: object) -> bool:
        return isinstance(text, str) and text.strip() in self._texts

    def remember(self, blocks: Any) -> None:
        if not isinstance(blocks, Sequence) or isinstance(blocks, str):
            return
        for block in blocks:
            if (
                isinstance(block, Mapping)
                and block.get("type") == "text"
                and isinstance(block.get("text"), str)
            ):
                self._texts.pop(block["text"].strip(), None)
                self._texts[block["text"].strip()] = None
        while len(self._texts) > self.KEEP:
            del self._texts[next(iter(self._texts))]


def parse(blocks: Any, *, repeats: Container[str] = ()) -> SlashCommand | None:
    """The command a prompt starts with (`/name args…` in the first text block the person typed),
    if any. Leading text blocks that repeat an earlier prompt's text (`repeats`) are skipped, and
    dropped with the command: a client may re-send a cancelled prompt ahead of the next one
    (CodeCompanion does), which put a command typed right after a cancel in block 1, where it went
    to the model. When every block is a repeat, the last one is read (the person typed the same
    command again)."""
    if not isinstance(blocks, Sequence) or isinstance(blocks, str) or not blocks:
        return None
    start = 0
    while (
        start < len(blocks) - 1
        and isinstance(blocks[start], Mapping)
        and blocks[start].get("type") == "text"
        and blocks[start].get("text") in repeats
    ):
        start += 1
    first = blocks[start]
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
    return SlashCommand(
        name, argument.strip(), tuple(b for b in blocks[start + 1 :] if isinstance(b, Mapping))
    )


@dataclass(frozen=True)
class RewindRequest:
    turn: int
    files: bool
    conversation: bool
    force: bool


def parse_rewind(argument: str) -> RewindRequest | None:
    """`N [files|conversation] [force]` (both files and conversation unless one is named)."""
    words = argument.split()
    if (
        not words
        or not words[0].lstrip("#").isdigit()
        or not set(words[1:]) <= {"files", "conversation", "force"}
    ):
        return None
    rest = set(words[1:])
    return RewindRequest(
        int(words[0].lstrip("#")),
        files="conversation" not in rest or "files" in rest,
        conversation="files" not in rest or "conversation" in rest,
        force="force" in rest,
    )


def shown_path(path: str, cwd: str) -> str:
    try:
        relative = os.path.relpath(path, cwd)
    except ValueError:
        return path
    return path if relative.startswith("..") else relative


def _paths(paths: Sequence[str], cwd: str, limit: int = 8) -> str:
    names = [shown_path(p, cwd) for p in paths[:limit]]
    more = f" and {len(paths) - limit} more" if len(paths) > limit else ""
    return ", ".join(names) + more


def rewind_said(result: Mapping[str, Any], cwd: str, *, turn: int, retry: str, conversation: bool) -> str:
    """A rewind's answer in plain words: what was restored, deleted, left alone and why."""
    conflicts = [c.get("path") or "?" for c in result.get("conflicts") or []]
    if conflicts:
        return (
            f"Nothing was rewound: {len(conflicts)} file{'s' if len(conflicts) != 1 else ''} changed since "
            f"the agent changed {'them' if len(conflicts) != 1 else 'it'}: {_paths(conflicts, cwd)}. "
            f"`{retry} force` overwrites {'them' if len(conflicts) != 1 else 'it'}."
        )
    lines = []
    restored, deleted = list(result.get("restored") or []), list(result.get("deleted") or [])
    if restored:
        lines.append(f"Restored {_paths(restored, cwd)}.")
    if deleted:
        lines.append(
            f"Deleted {_paths(deleted, cwd)} (the agent had created {'them' if len(deleted) > 1 else 'it'})."
        )
    for problem in result.get("notRestorable") or []:
        where = f"{shown_path(problem['path'], cwd)}: " if problem.get("path") else ""
        at = f" (turn {problem['turn']})" if problem.get("turn") else ""
        lines.append(f"Not restored{at}: {where}{problem.get('reason', '')}.")
    if conversation and "cutSeq" in result:
        lines.append(
            f"The conversation is back to before turn {turn}: the model no longer sees turn {turn} or later "
            "(they stay on screen)."
        )
    if result.get("wroteNoFile"):
        lines.insert(0, "No file was written: the files still hold what the agent's changes left.")
    elif not restored and not deleted and not result.get("notRestorable"):
        lines.insert(0, "No file to restore.")
    return "\n".join(lines)


def turns_said(page: Mapping[str, Any], checkpoints: Mapping[str, Any], cwd: str) -> str:
    """The recent turns by number, each with its prompt and the files it changed."""
    changed = {
        int(t["turn"]): [f["path"] for f in t.get("files") or []] for t in checkpoints.get("turns") or []
    }
    lines = []
    for turn in reversed(page.get("turns") or []):
        prompt = next(
            (
                item.get("text", "")
                for item in turn.get("items", ())
                if item.get("type") == "message" and (item.get("source") or {}).get("kind") == "user"
            ),
            "",
        )
        files = changed.get(int(turn["turn"])) or []
        touched = f" — {_paths(files, cwd, 3)}" if files else ""
        lines.append(f"{turn['turn']}. {' '.join(prompt.split())[:60]}{touched}")
    if not lines:
        return "No turn yet: nothing to rewind."
    return "\n".join(["Turns:", *lines, REWIND_USAGE])


def process_id_of(argument: str) -> str | None:
    """`p3` or `3` as a process id (`/kill`); None for anything else."""
    text = argument.strip()
    digits = text[1:] if text.startswith("p") else text
    return f"p{int(digits)}" if digits.isascii() and digits.isdigit() and len(digits) <= 9 else None


def processes_said(processes: Sequence[Mapping[str, Any]]) -> str:
    """`/ps`: a line per background process of the session, oldest first."""
    if not processes:
        return "No background processes in this chat."
    lines = []
    for process in processes:
        if process.get("running"):
            how = f"running (pid {process.get('pid')})"
        elif process.get("stoppedBy") is not None:
            how = f"stopped ({process.get('stoppedBy')})"
        elif process.get("exitCode") is not None:
            how = f"exited with code {process.get('exitCode')}"
        elif process.get("signal") is not None:
            how = f"ended by signal {process.get('signal')}"
        else:
            how = "ended"
        lines.append(f"- {process.get('processId')} `{process.get('command')}`: {how}")
    return "Background processes:\n" + "\n".join(lines)
