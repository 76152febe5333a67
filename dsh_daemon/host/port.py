"""The front-end port: what a front end (the LSP server, ACP mode) gives the session host, and the
vocabulary it needs to give it.

The host (`host/sessions.py`) owns every session's lifecycle, tools and agent; a front end decodes its
wire's params, implements this port and renders events. The host wires a session's tools, MCP
servers, hooks and approver through the port and calls back through it, so the shared layer never
imports a front end and neither front end imports the other, nor anything below the host: the types
a port implementation speaks (documents, edits, permission requests, abort signals, pre-step hooks)
are named here, once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from dsh_daemon.agent.hooks import Enter, PreStepContext, PreStepDecision, PreStepHook
from dsh_daemon.agent.signal import AbortedError, AbortSignal
from dsh_daemon.agent.tools import (
    Approver,
    PermissionOutcome,
    PermissionReply,
    PermissionRequest,
    PreExecuteDecision,
    PreExecuteHook,
    ToolCall,
)
from dsh_daemon.model.events import Event
from dsh_daemon.tools.documents import DocumentSource
from dsh_daemon.tools.editor import (
    LANGUAGE_FEATURES,
    EditorServices,
    EditorUnavailable,
    FileDiagnostics,
    LanguageFeature,
    NoEditor,
)
from dsh_daemon.tools.edits import ComputedEdit, DiskEditApplier, EditApplier
from dsh_daemon.tools.errors import EditConflictError, OutsideWorkspaceError, ToolError
from dsh_daemon.tools.safefile import read_whole
from dsh_daemon.tools.terminal import Terminal, TerminalExit, TerminalOutput, Terminals, TerminalUnavailable
from dsh_daemon.tools.textfiles import sha256_text
from dsh_daemon.tools.workspace import Workspace

__all__ = [
    "LANGUAGE_FEATURES",
    "AbortSignal",
    "AbortedError",
    "Approver",
    "ComputedEdit",
    "DiskEditApplier",
    "DocumentSource",
    "EditApplier",
    "EditConflictError",
    "EditorServices",
    "EditorUnavailable",
    "Enter",
    "FileDiagnostics",
    "FrontEnd",
    "FrontEndHooks",
    "LanguageFeature",
    "NoEditor",
    "OutsideWorkspaceError",
    "PermissionOutcome",
    "PermissionReply",
    "PermissionRequest",
    "PreExecuteDecision",
    "PreExecuteHook",
    "PreStepContext",
    "PreStepDecision",
    "PreStepHook",
    "Terminal",
    "TerminalExit",
    "TerminalOutput",
    "TerminalUnavailable",
    "Terminals",
    "ToolCall",
    "ToolError",
    "Workspace",
    "read_whole",
    "sha256_text",
]


@dataclass(frozen=True)
class FrontEndHooks:
    """A front end's own hooks for one session, run with the host's: `pre_step` after the tools' own
    (the LSP server's ambient editor snapshot), `pre_execute` before the permission policy (ACP's
    fetch of the editor's buffer, so a preview shows the editor's text)."""

    pre_step: Sequence[PreStepHook] = ()
    pre_execute: Sequence[PreExecuteHook] = ()


class FrontEnd(Protocol):
    def document_source(self, session_id: str, workspace: Workspace) -> DocumentSource:
        """Where the session's tools read files: the editor's unsaved buffers first, else disk."""
        ...

    def edit_applier(self, session_id: str, workspace: Workspace) -> EditApplier:
        """Where the session's edits go (the editor, so undo works; else disk)."""
        ...

    def editor_services(self, session_id: str, workspace: Workspace) -> EditorServices:
        """What the editor does for the tools beyond documents: unsaved documents, diagnostics,
        language features (`NoEditor()`: nothing)."""
        ...

    def new_approver(self, session_id: str) -> Approver:
        """Who answers the session's permission questions."""
        ...

    def session_hooks(self, session_id: str, workspace: Workspace) -> FrontEndHooks:
        """The front end's own hooks for the session (called once, when its agent is built)."""
        ...

    def report_mcp_status(self, session_id: str, data: Mapping[str, Any]) -> None:
        """An MCP server of the session started, failed or exited."""
        ...

    def observe(self, session_id: str, event: Event) -> None:
        """Every live event of a session this process drives, followed or not (turn progress, which
        request a turn answers)."""
        ...

    def deliver(self, session_id: str, event: Event, *, replayed: bool) -> None:
        """An event of a session this connection follows, to be rendered on its wire: live as it
        happens, or `replayed` from the log (an attach, a load, a read-only view catching up)."""
        ...

    def session_closed(self, session_id: str, *, deleted: bool) -> None:
        """The session is no longer driven here (released, closed, taken over, or `deleted`): drop
        what the front end keeps for it. The host's one cleanup path calls this, once per release."""
        ...
