"""The front-end port: what a front end (the LSP server, ACP mode) gives the host for each session.

The host wires a session's tools, MCP servers, hooks and approver through this port and nothing
else, so the shared layer never imports a front end and neither front end imports the other. Events
need no port: a front end subscribes to the agent's bus (`Agent.subscribe`) and renders them its way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from dsh_daemon.agent.tools import Approver
from dsh_daemon.tools.documents import DocumentSource
from dsh_daemon.tools.edits import EditApplier
from dsh_daemon.tools.workspace import Workspace


class FrontEnd(Protocol):
    def document_source(self, session_id: str, workspace: Workspace) -> DocumentSource:
        """Where the session's tools read files: the editor's unsaved buffers first, else disk."""
        ...

    def edit_applier(self, session_id: str, workspace: Workspace) -> EditApplier:
        """Where the session's edits go (the editor, so undo works; else disk)."""
        ...

    def new_approver(self, session_id: str) -> Approver:
        """Who answers the session's permission questions."""
        ...

    def report_mcp_status(self, session_id: str, data: Mapping[str, Any]) -> None:
        """An MCP server of the session started, failed or exited."""
        ...
