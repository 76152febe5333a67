"""The tool sets a parent may give a child, and the gate that holds the child to its set.

A set is a name the model picks (`explore`, `edit`, `all`); what each holds is decided here, not by
the model, so a child never gets a tool the parent's set does not name, and never `run_subagent`
(one level of children: a child cannot start children of its own)."""

from __future__ import annotations

from collections.abc import Callable

from dsh_daemon.agent.signal import AbortSignal
from dsh_daemon.agent.tools import Deny, PreExecuteDecision, ToolCall, ToolRegistry
from dsh_daemon.model.payloads import SubagentTools

TOOL_NAME = "run_subagent"
PARENT_ONLY = frozenset({TOOL_NAME, "propose_plan"})  # a child neither starts children nor ends plan mode
TOOLSETS: tuple[SubagentTools, ...] = ("explore", "edit", "all")
EXPLORE_TOOLS = frozenset(
    {
        "read_file",
        "list_dir",
        "find_files",
        "grep",
        "diagnostics",
        "definition",
        "references",
        "symbols",
        "hover",
    }
)
EDIT_TOOLS = EXPLORE_TOOLS | {"edit_file", "write_file"}


def allows(toolset: SubagentTools, name: str) -> bool:
    """Whether a child given `toolset` may call the tool `name` (`all`: every tool but this one)."""
    if name in PARENT_ONLY:
        return False
    if toolset == "explore":
        return name in EXPLORE_TOOLS
    if toolset == "edit":
        return name in EDIT_TOOLS
    return True


class ToolsetGate:
    """A pre-execute hook that refuses any call outside the child's set (a tool the model names
    though it was not offered, or an MCP tool that appeared later)."""

    def __init__(self, toolset: SubagentTools) -> None:
        self.toolset = toolset

    async def __call__(self, call: ToolCall, signal: AbortSignal) -> PreExecuteDecision | None:
        if allows(self.toolset, call.name):
            return None
        return Deny(f"{call.name} is not in this subagent's tool set ({self.toolset})", reason="toolset")


def narrow_registry(registry: ToolRegistry, toolset: SubagentTools) -> None:
    """Offer the model only the set's tools, whatever else (a session mode) narrows them further."""
    before: Callable[[str], bool] | None = registry.offered

    def offered(name: str) -> bool:
        return allows(toolset, name) and (before is None or before(name))

    registry.offered = offered
