"""Running a named agent (`.dsh/agents/NAME.md`, protocol.md §12 "Subagents") from a client: the
prompt a client sends for the person, which asks the session's model to start that agent with
`run_subagent {agent: NAME}`. One text for every client (the terminal chat, ACP's `/agent-NAME`;
the Neovim plugin and the VS Code extension write the same words), so the model reads one request
whichever client the person used."""

from __future__ import annotations

import re

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")


def delegation_prompt(name: str, task: str) -> str:
    """The prompt that hands `task` to the named agent `name`."""
    # The task comes first: a session's title is its first prompt's start, and a transcript shows it.
    return (
        f'Agent {name}: {task.strip()}\n\n(Hand this task to the named agent "{name}": call run_subagent '
        f'with agent "{name}" and the task above as its prompt, then tell me what it reports.)'
    )
