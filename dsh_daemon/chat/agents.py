"""`/agents` in the terminal chat: the named agents of this folder or session (`.dsh/agents/NAME.md`,
protocol.md §12 "Subagents"; `dsh/agents/list`), and `/agents NAME TASK`, which sends the delegation
prompt (`model/named_agents.py`): an ordinary prompt asking the model to run that agent on TASK."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from dsh_daemon.chat.render import CYAN, DIM, clip, sanitize
from dsh_daemon.model.named_agents import delegation_prompt

if TYPE_CHECKING:
    from dsh_daemon.chat.core import Chat

USAGE_AGENTS = "/agents [NAME TASK] — the named agents (.dsh/agents); with NAME TASK, hand TASK to one"
TOOLSETS = {
    "explore": "read and search only",
    "edit": "read, search and edit files",
    "all": "every tool of the session, commands too",
}
DEFAULT_MAX_STEPS = 30  # run_subagent's default (protocol.md §12 "Subagents")


async def listed(chat: Chat) -> list[dict[str, Any]]:
    """The named agents: the session's, or before there is one, the folder's (read now)."""
    where = {"sessionId": chat.session_id} if chat.session_id else {"cwd": chat.cwd}
    result = await chat.rpc.request("dsh/agents/list", where)
    return list(result.get("agents") or [])


def agent_lines(agent: dict[str, Any], width: int) -> list[str]:
    """`NAME  description`, then its tool set and model, indented."""
    name = sanitize(str(agent.get("name", "?")))
    tools = str(agent.get("tools", "explore"))
    model = sanitize(str(agent["model"])) if agent.get("model") else "the session's"
    head = f"{name:<14} {clip(sanitize(str(agent.get('description', ''))), max(20, width - 18))}"
    what = f"tools: {tools} ({TOOLSETS.get(tools, tools)}) · model: {model}"
    return [head, " " * 15 + what]


async def agents(chat: Chat, arg: str, send: Callable[[str], Awaitable[None]]) -> None:
    found = await listed(chat)
    name, *rest = arg.split(None, 1) or [""]  # the task may start on the next line (Alt-Enter)
    task = rest[0] if rest else ""
    if not name:
        if not found:
            chat.note('[no named agents here: .dsh/agents/NAME.md defines one (README "Named agents")]')
            return
        for agent in found:
            head, what = agent_lines(agent, chat.view.width)
            chat.view.print(f"  {chat.paint(CYAN, head)}")
            chat.view.print(chat.paint(DIM, f"  {what}"))
        chat.note(
            f"[/agents NAME TASK hands TASK to one; each runs at most {DEFAULT_MAX_STEPS} model requests"
            " unless the model gives it more]"
        )
        return
    names = [str(agent.get("name")) for agent in found]
    if name not in names:
        known = ", ".join(names) or "none here"
        chat.error(f"[no named agent {name!r} (known: {known})]")
        return
    if not task.strip():
        chat.error(f"[/agents {name} needs a task: /agents {name} TASK]")
        return
    chat.note(f"[asking the model to hand this to the {name} agent]")
    await send(delegation_prompt(name, task))
