"""`run_subagent`: the parent's model starts a child agent and gets its final summary as the result.

The call holds one of the daemon's subagent slots while its child runs (`slots.py`); several calls of
one batch run at once, up to that bound. The child itself is the host's (`Launcher`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dsh_daemon.agent.tools import ToolContext, ToolOutcome
from dsh_daemon.model.provider import ToolSpec
from dsh_daemon.subagents.briefing import brief
from dsh_daemon.subagents.definitions import AgentDefinition
from dsh_daemon.subagents.slots import SubagentSlots
from dsh_daemon.subagents.task import Launcher, SubagentTask
from dsh_daemon.subagents.toolsets import TOOL_NAME, TOOLSETS
from dsh_daemon.tools.base import ToolBase, get_int, get_opt_str, get_str, make_spec
from dsh_daemon.tools.errors import InvalidArgumentsError
from dsh_daemon.tools.workspace import Workspace

DEFAULT_MAX_STEPS = 30
MAX_STEPS = 200
MAX_DESCRIPTION_CHARS = 80

DESCRIPTION = (
    "Start a subagent: a separate agent with its own fresh context that works on one self-contained "
    "task and returns a summary of what it found or did. It does not see this conversation: give it "
    "everything it needs in 'prompt' and name the files it should start from in 'files'. 'tools' "
    "sets what it may do: 'explore' (read and search only, the default), 'edit' (also edit files), "
    "'all' (also run commands). Several run at once when called in the same step. Use it for broad "
    "searches or independent pieces of work whose details need not fill this context."
)


def tool_spec(definitions: Mapping[str, AgentDefinition]) -> ToolSpec:
    """The tool as the model sees it: with the session's named agents, if it has any."""
    description = DESCRIPTION
    properties = dict(PROPERTIES)
    if definitions:
        named = "; ".join(f"'{d.name}': {d.description}" for d in definitions.values())
        description += (
            f" Named agents (give 'agent' to run one with its own instructions and tools): {named}."
        )
        properties["agent"] = {"type": "string", "enum": list(definitions), "description": "A named agent."}
    return make_spec(TOOL_NAME, description, properties, ["description", "prompt"])


PROPERTIES: dict[str, Any] = {
    "description": {"type": "string", "description": "A few words saying what the subagent does."},
    "prompt": {"type": "string", "description": "The whole task, as the subagent's first message."},
    "tools": {"type": "string", "enum": list(TOOLSETS), "description": "Its tool set."},
    "files": {
        "type": "array",
        "items": {"type": "string"},
        "description": "Files it starts with (their text is given to it).",
    },
    "max_steps": {
        "type": "integer",
        "description": f"Its model requests at most (default {DEFAULT_MAX_STEPS}).",
    },
}


class RunSubagentTool(ToolBase):
    parallel_safe = True

    def __init__(
        self,
        launcher: Launcher,
        slots: SubagentSlots,
        workspace: Workspace,
        definitions: Mapping[str, AgentDefinition] | None = None,
    ) -> None:
        self.launcher = launcher
        self.slots = slots
        self.workspace = workspace
        self.definitions = dict(definitions or {})
        self.spec = tool_spec(self.definitions)

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        task = await self.task(args)
        async with self.slots.held(ctx.signal):
            result = await self.launcher.run_child(task, ctx)
        meta = {"childId": result.child_id, "status": result.status}
        if result.status == "completed":
            return ToolOutcome.text(result.summary, meta=meta)
        code = "CANCELLED" if result.status == "cancelled" else "SUBAGENT_STOPPED"
        return ToolOutcome.error(result.summary, code, meta=meta)

    async def task(self, args: Mapping[str, Any]) -> SubagentTask:
        description = " ".join(get_str(args, "description", allow_empty=False).split())
        if len(description) > MAX_DESCRIPTION_CHARS:
            description = description[: MAX_DESCRIPTION_CHARS - 1] + "…"
        prompt = get_str(args, "prompt", allow_empty=False)
        tools = get_opt_str(args, "tools") or "explore"
        toolset = next((t for t in TOOLSETS if t == tools), None)
        if toolset is None:
            raise InvalidArgumentsError(f"'tools' must be one of {', '.join(TOOLSETS)}")
        files = args.get("files") or []
        if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
            raise InvalidArgumentsError("'files' must be a list of paths")
        max_steps = min(get_int(args, "max_steps", DEFAULT_MAX_STEPS, minimum=1), MAX_STEPS)
        name = get_opt_str(args, "agent")
        if name is None:
            return SubagentTask(description, await brief(prompt, files, self.workspace), toolset, max_steps)
        definition = self.definitions.get(name)
        if definition is None:
            known = ", ".join(self.definitions) or "none in .dsh/agents"
            raise InvalidArgumentsError(f"no agent named {name!r} (known: {known})")
        # The definition says what its agent may do; its instructions come before the parent's prompt.
        briefing = await brief(prompt, files, self.workspace)
        if definition.prompt:
            briefing = f"{definition.prompt}\n\n{briefing}"
        return SubagentTask(description, briefing, definition.tools, max_steps, name, definition.model)

    def permission_title(self, args: Mapping[str, Any]) -> str:
        return f"Start a subagent: {args.get('description', '')}"
