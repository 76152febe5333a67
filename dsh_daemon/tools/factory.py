"""One call wires a session's tools: `build_tool_registry(workspace, documents, applier, config)`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from dsh_daemon.agent.hooks import Hooks
from dsh_daemon.agent.tools import ToolRegistry
from dsh_daemon.tools.command import RunCommandTool
from dsh_daemon.tools.documents import DocumentSource, NoDocuments
from dsh_daemon.tools.editing import EditFileTool, WriteFileTool
from dsh_daemon.tools.edits import DiskEditApplier, EditApplier
from dsh_daemon.tools.grep import GrepTool
from dsh_daemon.tools.limits import ToolLimits
from dsh_daemon.tools.listing import FindFilesTool, ListDirTool
from dsh_daemon.tools.notices import ChangedFilesNotice
from dsh_daemon.tools.policy import PermissionPolicy, parse_modes
from dsh_daemon.tools.read_file import ReadFileTool
from dsh_daemon.tools.tracking import ReadTracker
from dsh_daemon.tools.workspace import Workspace

CONFIG_KEYS = frozenset({"permissions", "limits", "shell", "ripgrep"})


class ToolKit(NamedTuple):
    registry: ToolRegistry
    hooks: Hooks  # only pre_execute / post_execute are filled; merge them into the session's Hooks


def build_tool_registry(
    workspace: Workspace,
    documents: DocumentSource | None = None,
    applier: EditApplier | None = None,
    config: Mapping[str, Any] | None = None,
) -> ToolKit:
    """The coding tools of one session.

    config keys: `permissions` {tool: "allow"|"ask"|"deny"} over the defaults (reads allow, edits and
    commands ask; denied tools are not offered to the model at all), `limits` (`ToolLimits` fields),
    `shell` (path; default bash, else /bin/sh), `ripgrep` (False forces the Python grep, a string is
    rg's path).
    """
    config = config or {}
    unknown = set(config) - CONFIG_KEYS
    if unknown:
        raise ValueError(f"unknown tool config keys: {sorted(unknown)}")
    limits = ToolLimits.from_config(config.get("limits"))
    modes = parse_modes(config.get("permissions"))
    documents = documents or NoDocuments()
    applier = applier or DiskEditApplier(workspace)
    tracker = ReadTracker(documents, max_files=limits.tracked_files, max_bytes=limits.whole_file_bytes)
    ripgrep = config.get("ripgrep", True)
    if not isinstance(ripgrep, bool | str):
        raise ValueError("config 'ripgrep' must be a boolean or a path")

    registry = ToolRegistry()
    tools = [
        ReadFileTool(workspace, documents, tracker, limits),
        ListDirTool(workspace, limits),
        FindFilesTool(workspace, limits),
        GrepTool(workspace, limits, rg=ripgrep),
        EditFileTool(workspace, documents, applier, tracker, limits),
        WriteFileTool(workspace, documents, applier, tracker, limits),
        RunCommandTool(workspace, limits, shell=config.get("shell")),
    ]
    for tool in tools:
        if modes.get(tool.spec.name) != "deny":  # a tool that can never run only costs the model tokens
            registry.add(tool)
    policy = PermissionPolicy(registry, workspace, modes)
    hooks = Hooks(pre_execute=[policy], post_execute=[ChangedFilesNotice(tracker, workspace)])
    return ToolKit(registry, hooks)
