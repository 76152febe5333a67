"""One call wires a session's tools: `build_tool_registry(workspace, documents, applier, config)`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from dsh_daemon.agent.hooks import Hooks
from dsh_daemon.agent.tools import ToolRegistry
from dsh_daemon.tools.base import ToolBase
from dsh_daemon.tools.checkpoints import Checkpointer
from dsh_daemon.tools.command import RunCommandTool
from dsh_daemon.tools.config import ToolConfig
from dsh_daemon.tools.documents import DocumentSource, NoDocuments
from dsh_daemon.tools.editing import EditFileTool, WriteFileTool
from dsh_daemon.tools.editor import EditorServices, NoEditor
from dsh_daemon.tools.editor_tools import LANGUAGE_TOOLS, DiagnosticsTool
from dsh_daemon.tools.edits import DiskEditApplier, EditApplier
from dsh_daemon.tools.environment import DaemonSecrets
from dsh_daemon.tools.grep import GrepTool
from dsh_daemon.tools.listing import FindFilesTool, ListDirTool
from dsh_daemon.tools.notices import ChangedFilesNotice
from dsh_daemon.tools.plan import UpdatePlanTool
from dsh_daemon.tools.plan_approval import ProposePlanTool
from dsh_daemon.tools.policy import PermissionPolicy
from dsh_daemon.tools.process_tools import ProcessReadTool, ProcessStopTool, ProcessWriteTool
from dsh_daemon.tools.processes import BackgroundProcesses
from dsh_daemon.tools.read_file import ReadFileTool
from dsh_daemon.tools.sandboxing import CommandSandbox
from dsh_daemon.tools.tracking import ReadTracker
from dsh_daemon.tools.workspace import Workspace


class ToolKit(NamedTuple):
    registry: ToolRegistry
    hooks: Hooks  # only pre_execute / post_execute are filled; merge them into the session's Hooks
    files_seen: ReadTracker  # what the model has seen of each file (a rewind moves it back)
    sandbox: CommandSandbox  # where the session's commands run (closed with the session)
    processes: BackgroundProcesses  # the session's background processes (closed before the sandbox)


def build_tool_registry(
    workspace: Workspace,
    documents: DocumentSource | None = None,
    applier: EditApplier | None = None,
    config: ToolConfig | Mapping[str, Any] | None = None,
    registry: ToolRegistry | None = None,
    checkpoints: Checkpointer | None = None,
    editor: EditorServices | None = None,
    secrets: DaemonSecrets | None = None,
) -> ToolKit:
    """The coding tools of one session.

    config keys: `permissions` {tool: "allow"|"ask"|"deny"} over the defaults (reads allow, edits
    ask, commands "sandbox": allowed when confined; denied tools are not offered to the model at all),
    `sandbox` (`SandboxSettings`: the commands' confinement), `limits` (`ToolLimits` fields),
    `shell` (path; default bash, else /bin/sh), `ripgrep` (False forces the Python grep, a string is
    rg's path). `checkpoints`: where the edit and command tools record what they change (a rewind's
    source); None keeps nothing. `registry`: the one to fill (a subclass may offer tools that come
    and go, as MCP servers' do); by default a new `ToolRegistry`. `editor`: what the editor does
    beyond documents (unsaved documents named before a command; with diagnostics, new errors after
    each edit and the `diagnostics` tool; with language features, their tools). `secrets`: what the
    daemon holds that a command's environment must not (`tools/environment.py`).
    """
    parsed = config if isinstance(config, ToolConfig) else ToolConfig.parse(config)
    limits = parsed.limits
    modes = dict(parsed.permissions)
    documents = documents or NoDocuments()
    applier = applier or DiskEditApplier(workspace)
    tracker = ReadTracker(documents, max_files=limits.tracked_files, max_bytes=limits.whole_file_bytes)
    ripgrep = parsed.ripgrep
    editor = editor or NoEditor()
    sandbox = CommandSandbox(workspace, parsed.sandbox)
    processes = BackgroundProcesses(sandbox, limits)

    registry = registry if registry is not None else ToolRegistry()
    registry.result_max_chars = limits.result_max_chars
    tools: list[ToolBase] = [
        ReadFileTool(workspace, documents, tracker, limits),
        ListDirTool(workspace, limits),
        FindFilesTool(workspace, limits),
        GrepTool(workspace, limits, rg=ripgrep),
        UpdatePlanTool(),
        ProposePlanTool(),
        EditFileTool(workspace, documents, applier, tracker, limits, checkpoints, editor),
        WriteFileTool(workspace, documents, applier, tracker, limits, checkpoints, editor),
        RunCommandTool(
            workspace,
            limits,
            shell=parsed.shell,
            checkpoints=checkpoints,
            editor=editor,
            secrets=secrets,
            sandbox=sandbox,
            processes=processes,
        ),
        ProcessReadTool(processes, limits),
        ProcessWriteTool(processes),
        ProcessStopTool(processes, limits),
    ]
    if editor.diagnostics_supported:
        tools.append(DiagnosticsTool(workspace, editor))
    offered = editor.language_features
    tools += [tool(workspace, documents, editor) for tool in LANGUAGE_TOOLS if tool.feature in offered]
    for tool in tools:
        if modes.get(tool.spec.name) != "deny":  # a tool that can never run only costs the model tokens
            registry.add(tool)
    policy = PermissionPolicy(registry, workspace, modes)
    sandbox.session_mode = lambda: policy.session_mode  # plan mode runs commands read-only
    hooks = Hooks(pre_execute=[policy], post_execute=[ChangedFilesNotice(tracker, workspace)])
    return ToolKit(registry, hooks, tracker, sandbox, processes)
