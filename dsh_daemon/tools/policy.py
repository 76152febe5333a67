"""Permission policy: per tool `allow`, `ask` or `deny`, as a pre-execute hook.

`ask` goes to the core, which consults the session's "always allowed" memory and then the approver
(the editor's `dsh/requestPermission`). A call that workspace confinement would refuse anyway is denied
here instead, so nobody is asked to approve something that cannot happen.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, TypeAlias, get_args

from dsh_daemon.agent.signal import AbortSignal
from dsh_daemon.agent.tools import Allow, Ask, Deny, PreExecuteDecision, ToolCall, ToolRegistry
from dsh_daemon.tools.base import ToolBase
from dsh_daemon.tools.errors import ToolError
from dsh_daemon.tools.workspace import Workspace

Mode: TypeAlias = Literal["allow", "ask", "deny"]
MODES: frozenset[str] = frozenset(get_args(Mode))

DEFAULT_MODES: Mapping[str, Mode] = {
    "read_file": "allow",
    "list_dir": "allow",
    "find_files": "allow",
    "grep": "allow",
    "edit_file": "ask",
    "write_file": "ask",
    "run_command": "ask",
}


def parse_modes(config: Mapping[str, object] | None) -> dict[str, Mode]:
    """Defaults overridden by `config` ({tool name: mode}); tools not named keep their default."""
    modes: dict[str, Mode] = dict(DEFAULT_MODES)
    for name, mode in (config or {}).items():
        if not isinstance(name, str) or mode not in MODES:
            raise ValueError(f"permission for {name!r} must be one of {sorted(MODES)}, not {mode!r}")
        modes[name] = mode  # type: ignore[assignment]
    return modes


class PermissionPolicy:
    def __init__(self, registry: ToolRegistry, workspace: Workspace, modes: Mapping[str, Mode]) -> None:
        self.registry = registry
        self.workspace = workspace
        self.modes = dict(modes)

    def mode(self, name: str) -> Mode | None:
        """None: no opinion (a tool this policy does not know about)."""
        return self.modes.get(name)

    async def __call__(self, call: ToolCall, signal: AbortSignal) -> PreExecuteDecision | None:
        mode = self.mode(call.name)
        if mode is None:
            return None
        if mode == "allow":
            return Allow()
        if mode == "deny":
            return Deny(f"{call.name} is disabled by the permission policy")
        tool = self.registry.get(call.name)
        args = call.args or {}
        if not isinstance(tool, ToolBase):
            return Ask(f"Run {call.name}")
        for path in tool.target_paths(args):
            try:
                self.workspace.resolve(path)
            except ToolError as exc:
                return Deny(str(exc))
        try:
            preview = await tool.permission_preview(args)
        except ToolError:
            preview = None  # the call will fail with a clear error of its own when it runs
        return Ask(tool.permission_title(args), preview, tool.permission_scope(args))
