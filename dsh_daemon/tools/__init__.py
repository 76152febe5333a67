"""Coding tools (read, list, find, grep, edit, write, run) confined to a session's workspace, with a
permission policy the editor answers. Wire a session with `build_tool_registry`."""

from dsh_daemon.tools.documents import DocumentSource, NoDocuments, StaticDocuments
from dsh_daemon.tools.edits import ComputedEdit, DiskEditApplier, EditApplier, compute_edit
from dsh_daemon.tools.errors import EditConflictError, OutsideWorkspaceError, ToolError
from dsh_daemon.tools.factory import ToolKit, build_tool_registry
from dsh_daemon.tools.limits import ToolLimits
from dsh_daemon.tools.policy import DEFAULT_MODES, PermissionPolicy
from dsh_daemon.tools.workspace import Workspace

__all__ = [
    "DEFAULT_MODES",
    "ComputedEdit",
    "DiskEditApplier",
    "DocumentSource",
    "EditApplier",
    "EditConflictError",
    "NoDocuments",
    "OutsideWorkspaceError",
    "PermissionPolicy",
    "StaticDocuments",
    "ToolError",
    "ToolKit",
    "ToolLimits",
    "Workspace",
    "build_tool_registry",
    "compute_edit",
]
