"""A session's tools and hooks, built the same way for every front end.

A front end supplies what only it knows through its port (`host/port.py`): where documents come
from and where edits go (the editor's synced buffers and `workspace/applyEdit`, or ACP's `fs/*`),
who answers permission questions, where MCP status goes; and any hooks of its own (the LSP
server's ambient editor snapshot, ACP's buffer prefetch). Everything else (the coding tools, their
permission policy, MCP servers, the system prompt with the project's instructions, the person's
hooks) is wired here, once.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsh_daemon.agent.hooks import Hooks, PreStepHook
from dsh_daemon.agent.system_prompt import PromptConfig, SystemPrompt
from dsh_daemon.agent.tools import PreExecuteHook
from dsh_daemon.hooks.runner import HookRunner
from dsh_daemon.hooks.session import SessionHooks
from dsh_daemon.host.commands import CommandTurns
from dsh_daemon.host.options import DaemonOptions
from dsh_daemon.host.port import FrontEnd
from dsh_daemon.host.review import ReviewTurns
from dsh_daemon.mcp.client import McpTools
from dsh_daemon.mcp.client import attach as attach_mcp
from dsh_daemon.mcp.config import ServerConfig, ServerSource, StdioServer, merge
from dsh_daemon.mcp.tools import McpToolRegistry
from dsh_daemon.tools.checkpoints import Checkpointer
from dsh_daemon.tools.environment import DaemonSecrets, scrubbed_environment
from dsh_daemon.tools.factory import ToolKit, build_tool_registry
from dsh_daemon.tools.library import Found, SkillCatalogue, scan_commands
from dsh_daemon.tools.review import ReportFindingTool
from dsh_daemon.tools.skills import SkillTool
from dsh_daemon.tools.workspace import Workspace


@dataclass
class SessionTools:
    """One session's tools: the kit (registry + tool hooks), its workspace, its MCP servers and the
    person's hooks (run in the kit's sandbox)."""

    kit: ToolKit
    workspace: Workspace
    mcp: McpTools | None
    hooks: SessionHooks
    # Custom commands and skills (`tools/library.py`): the project's `.dsh/` and `$DSH_HOME`'s
    skills: SkillCatalogue | None = None
    home: Path | None = None
    commands: CommandTurns = field(default_factory=CommandTurns)
    reviews: ReviewTurns = field(default_factory=ReviewTurns)  # which turns are reviews (`host/review.py`)

    def custom_commands(self) -> Found:
        """The session's custom commands now (read again at every call: a send is rare)."""
        return scan_commands(self.workspace.cwd, self.home)

    def close_in_background(self, tasks: set[asyncio.Task[None]]) -> None:
        """Stop the hooks, the background processes, the MCP servers and the commands' sandbox (every
        process tree they started killed) without waiting; the task joins `tasks`."""
        mcp, sandbox, processes, hooks = self.mcp, self.kit.sandbox, self.kit.processes, self.hooks

        async def close() -> None:
            try:
                try:
                    try:
                        await hooks.aclose()
                    finally:
                        await processes.aclose()  # each stopped and followed to its end
                finally:
                    if mcp is not None:
                        await mcp.aclose()
            finally:
                await sandbox.aclose()

        task = asyncio.get_running_loop().create_task(close())
        tasks.add(task)
        task.add_done_callback(tasks.discard)


def wire_session_tools(
    front_end: FrontEnd,
    session_id: str,
    workspace: Workspace,
    options: DaemonOptions,
    session_servers: ServerSource | None,
    checkpoints: Checkpointer | None = None,
    mcp_status: Callable[[Mapping[str, Any]], None] | None = None,
    home: Path | None = None,
    *,
    with_mcp: bool = True,
) -> SessionTools:
    """The coding tools over `workspace` (reading and editing through the front end, recording what
    they change in `checkpoints`), plus (`with_mcp`) the configured MCP servers and the session's own,
    and the skills of the project and of `home` (`$DSH_HOME`)."""
    documents = front_end.document_source(session_id, workspace)
    applier = front_end.edit_applier(session_id, workspace)
    editor = front_end.editor_services(session_id, workspace)
    servers = merge(options.mcp_servers, session_servers or {}) if with_mcp else {}
    secrets = daemon_secrets(options, servers.values())
    kit = build_tool_registry(
        workspace,
        documents,
        applier,
        options.tools,
        McpToolRegistry(),
        checkpoints=checkpoints,
        editor=editor,
        secrets=secrets,
    )
    report = mcp_status or (lambda data: front_end.report_mcp_status(session_id, data))
    mcp = attach_mcp(kit, servers, report, str(workspace.cwd))
    # Hooks run as the session's commands do: in its sandbox, in its cwd, without the daemon's secrets.
    runner = HookRunner(
        kit.sandbox.spawn, lambda: workspace.cwd, lambda: scrubbed_environment(os.environ, secrets)
    )
    hooks = SessionHooks(
        session_id, runner, options.hooks, cwd=lambda: workspace.cwd, roots=lambda: tuple(workspace.roots)
    )
    skills = SkillCatalogue(lambda: workspace.cwd, home)
    if options.tools.permissions.get("skill") != "deny":
        kit.registry.add(SkillTool(skills))
    reviews = ReviewTurns()
    if options.tools.permissions.get("report_finding") != "deny":
        kit.registry.add(ReportFindingTool(workspace, reviews.active))  # offered in review turns only
    return SessionTools(kit, workspace, mcp, hooks, skills, home, CommandTurns(skills), reviews)


def daemon_secrets(options: DaemonOptions, servers: Iterable[ServerConfig]) -> DaemonSecrets:
    """What a command the agent runs must not see: the API key and the MCP servers' configured env
    values and headers (with the secret variable names, `tools/environment.py`)."""
    values: list[str | None] = [options.provider.api_key]
    for server in servers:
        pairs = server.env if isinstance(server, StdioServer) else server.headers
        values += [value for _, value in pairs]
    return DaemonSecrets.of(values)


def session_hooks(
    tools: SessionTools,
    prompt: PromptConfig,
    *,
    pre_step: Sequence[PreStepHook] = (),
    pre_execute: Sequence[PreExecuteHook] = (),
) -> Hooks:
    """The session's hooks: the tools' own (MCP servers started before a step's request, the
    permission policy, changed-file notices), then the front end's, and the system prompt; the
    person's hooks (`hooks/session.py`) around them: their pre-step sees the batch everything else
    entered, their preToolUse runs before anyone is asked, their postToolUse after the tools' own."""
    registry = tools.kit.registry.tools
    shell = getattr(registry.get("run_command"), "shell", None)
    workspace = tools.workspace
    skills = tools.skills.section if tools.skills is not None else None
    system = SystemPrompt(prompt, lambda: (workspace.cwd, workspace.roots), shell=shell, skills=skills)
    person = tools.hooks
    commands = tools.commands
    reviews = tools.reviews
    return Hooks(
        # The commands' hook sees what was entered (after the person's userPromptSubmit decided).
        pre_step=[person.pre_step, commands.pre_step, reviews.pre_step, *tools.kit.hooks.pre_step, *pre_step],
        request=[commands.request, reviews.request, system.hook],
        # A review completes once the person's stop hooks have let the turn end.
        turn_stopping=[person.turn_stopping, reviews.turn_stopping],
        pre_execute=[
            commands.pre_execute,
            reviews.pre_execute,
            person.pre_execute,
            *pre_execute,
            *tools.kit.hooks.pre_execute,
        ],
        post_execute=[*tools.kit.hooks.post_execute, person.post_execute],
        permission_request=[person.permission_request],
    )
