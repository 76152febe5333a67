"""A session's tools and hooks, built the same way for every front end.

A front end supplies what only it knows through its port (`host/port.py`): where documents come
from and where edits go (the editor's synced buffers and `workspace/applyEdit`, or ACP's `fs/*`),
who answers permission questions, where MCP status goes; and any hooks of its own (the LSP
server's ambient editor snapshot, ACP's buffer prefetch). Everything else (the coding tools, their
permission policy, MCP servers, the system prompt with the project's instructions) is wired here,
once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dsh_daemon.agent.hooks import Hooks, PreStepHook
from dsh_daemon.agent.system_prompt import PromptConfig, SystemPrompt
from dsh_daemon.agent.tools import PreExecuteHook
from dsh_daemon.host.options import DaemonOptions
from dsh_daemon.host.port import FrontEnd
from dsh_daemon.mcp.client import McpTools
from dsh_daemon.mcp.client import attach as attach_mcp
from dsh_daemon.mcp.config import HttpServer, ServerConfig, ServerSource, StdioServer, merge
from dsh_daemon.mcp.tools import McpToolRegistry
from dsh_daemon.tools.checkpoints import Checkpointer
from dsh_daemon.tools.factory import ToolKit, build_tool_registry
from dsh_daemon.tools.workspace import Workspace


@dataclass
class SessionTools:
    """One session's tools: the kit (registry + tool hooks), its workspace and its MCP servers."""

    kit: ToolKit
    workspace: Workspace
    mcp: McpTools | None

    def close_in_background(self, tasks: set[asyncio.Task[None]]) -> None:
        """Stop the MCP servers and the commands' sandbox (every process tree they started killed)
        without waiting; the task joins `tasks`."""
        mcp, sandbox = self.mcp, self.kit.sandbox

        async def close() -> None:
            try:
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
) -> SessionTools:
    """The coding tools over `workspace` (reading and editing through the front end, recording what
    they change in `checkpoints`), plus the configured MCP servers and the session's own."""
    documents = front_end.document_source(session_id, workspace)
    applier = front_end.edit_applier(session_id, workspace)
    editor = front_end.editor_services(session_id, workspace)
    kit = build_tool_registry(
        workspace,
        documents,
        applier,
        options.tools,
        McpToolRegistry(),
        checkpoints=checkpoints,
        editor=editor,
    )
    servers = merge(options.mcp_servers, session_servers or {})
    report = mcp_status or (lambda data: front_end.report_mcp_status(session_id, data))
    mcp = attach_mcp(kit, servers, report, str(workspace.cwd))
    kit.sandbox.secret_values = lambda: command_secrets(options, servers.values())
    return SessionTools(kit, workspace, mcp)


# Variables an MCP server's `env` commonly sets that are not secrets: their values are not scrubbed.
NOT_SECRET = frozenset({"PATH", "HOME", "USER", "LANG", "TERM", "SHELL", "TMPDIR", "PYTHONPATH", "NODE_PATH"})


def command_secrets(options: DaemonOptions, servers: Iterable[ServerConfig | None]) -> list[str]:
    """The values a command's environment must not carry (tools/secret_env.py): the provider's API
    key, MCP servers' `env` values and `headers` values (and a header's token after its scheme)."""
    values = [options.provider.api_key] if options.provider.api_key else []
    for server in servers:
        if isinstance(server, StdioServer):
            values += [value for name, value in server.env if name.upper() not in NOT_SECRET]
        elif isinstance(server, HttpServer):
            for _name, value in server.headers:
                values += [value, value.split()[-1]] if value.split() else [value]
    return values


def session_hooks(
    tools: SessionTools,
    prompt: PromptConfig,
    *,
    pre_step: Sequence[PreStepHook] = (),
    pre_execute: Sequence[PreExecuteHook] = (),
) -> Hooks:
    """The session's hooks: the tools' own (MCP servers started before a step's request, the
    permission policy, changed-file notices), then the front end's, and the system prompt."""
    registry = tools.kit.registry.tools
    shell = getattr(registry.get("run_command"), "shell", None)
    workspace = tools.workspace
    system = SystemPrompt(prompt, lambda: (workspace.cwd, workspace.roots), shell=shell)
    return Hooks(
        pre_step=[*tools.kit.hooks.pre_step, *pre_step],
        request=[system.hook],
        pre_execute=[*pre_execute, *tools.kit.hooks.pre_execute],
        post_execute=list(tools.kit.hooks.post_execute),
    )
