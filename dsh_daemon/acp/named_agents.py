"""Named agents (`.dsh/agents/NAME.md`, protocol.md §12 "Subagents") as ACP slash commands: each one
advertised as `/agent-NAME` beside the built-in and custom commands, so Zed and CodeCompanion list
them; a prompt that starts with `/agent-NAME TASK` is sent as the delegation prompt
(`model/named_agents.py`), an ordinary prompt that asks the model to run that agent on TASK."""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from typing import Any

from dsh_daemon.host import errors
from dsh_daemon.model.named_agents import delegation_prompt

PREFIX = "agent-"


def advertised(agents: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The `availableCommands` entries of the session's named agents."""
    entries: list[dict[str, Any]] = []
    for agent in agents:
        what = f"Run the {agent['name']} agent: {agent['description']} (tools: {agent['tools']})"
        entries.append({"name": PREFIX + str(agent["name"]), "description": what, "input": {"hint": "task"}})
    return entries


def delegated(
    blocks: Any, names: Callable[[], Container[str]], *, repeats: Container[str] = ()
) -> list[Any] | None:
    """The prompt's blocks with `/agent-NAME TASK` (the first text the person typed, NAME one of
    `names()`, asked only then) made the delegation prompt; None when the prompt does not start so.
    Leading blocks that repeat an earlier prompt's text are dropped, as the built-in commands drop
    them (`commands.parse`). A `/agent-NAME` without a task is refused: nothing to hand over."""
    if not isinstance(blocks, Sequence) or isinstance(blocks, str) or not blocks:
        return None
    start = 0
    while start < len(blocks) - 1 and _text(blocks[start]) in repeats:
        start += 1
    text = _text(blocks[start])
    if text is None or not text.lstrip().startswith("/" + PREFIX):
        return None
    word, *rest = text.lstrip()[1:].split(None, 1)  # the task may start on the next line
    name, task = word.removeprefix(PREFIX), rest[0] if rest else ""
    if name not in names():
        return None
    if not task.strip():
        raise errors.invalid_params(f"/{PREFIX}{name} needs a task after it")
    first = {"type": "text", "text": delegation_prompt(name, task)}
    return [first, *blocks[start + 1 :]]


def _text(block: Any) -> str | None:
    if isinstance(block, Mapping) and block.get("type") == "text" and isinstance(block.get("text"), str):
        return str(block["text"])
    return None
