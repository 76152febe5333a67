"""Permission policy: per tool `allow`, `ask` or `deny`, as a pre-execute hook.

`ask` goes to the core, which consults the session's "always allowed" memory and then the approver
(the editor's `dsh/requestPermission`). `sandbox` (run_command's default) allows a command that runs
confined and asks for one that does not (`full-access`); a call that asks to widen the sandbox
(`escalate`) is always asked, whatever the tool's mode: nothing the model sends widens it without the
person. A call that cannot succeed (confinement refuses its path, its
target is not a regular file, its preview cannot be computed) fails at once with the tool's own error
code, so nobody is asked to approve something that cannot happen.
"""

from __future__ import annotations

from collections.abc import Mapping

from dsh_daemon.agent.signal import AbortSignal
from dsh_daemon.agent.tools import Allow, Ask, Deny, PreExecuteDecision, ToolCall, ToolRegistry
from dsh_daemon.tools.base import ToolBase
from dsh_daemon.tools.command import RunCommandTool
from dsh_daemon.tools.config import DEFAULT_MODES, MODES, Mode, parse_modes
from dsh_daemon.tools.errors import ToolError
from dsh_daemon.tools.plan_approval import PROPOSE_PLAN_TOOL, REVISE_NOTE
from dsh_daemon.tools.process_tools import ProcessWriteTool
from dsh_daemon.tools.workspace import Workspace

# What plan mode offers: the tools that only read (the editor's diagnostics and language features too),
# and update_plan and report_finding, which only record (a plan, a review's finding).
READ_ONLY_TOOLS = frozenset(
    {
        "update_plan",
        "report_finding",
        "skill",
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
EDIT_TOOLS = frozenset({"edit_file", "write_file"})  # what accept-edits allows without asking
PLAN_COMMAND = "run_command"  # offered in plan mode too: its commands run read-only there


class PermissionPolicy:
    def __init__(self, registry: ToolRegistry, workspace: Workspace, modes: Mapping[str, Mode]) -> None:
        self.registry = registry
        self.workspace = workspace
        self.modes = dict(modes)
        # The session's mode (protocol.md §3): "ask" is the configured policy as it stands;
        # "accept-edits" allows the edit tools the configuration would ask about; "plan" offers only
        # the read-only tools (the registry hides the others, and a call to one is refused).
        self.session_mode = "ask"
        registry.offered = self.offered

    def offered(self, name: str) -> bool:
        if name == PROPOSE_PLAN_TOOL:  # how plan mode ends: offered there only
            return self.session_mode == "plan"
        return self.session_mode != "plan" or name in READ_ONLY_TOOLS or name == PLAN_COMMAND

    def mode(self, name: str) -> Mode | None:
        """None: no opinion (a tool this policy does not know about)."""
        configured = self.modes.get(name)
        if not self.offered(name):
            return "deny"
        if self.session_mode == "accept-edits" and name in EDIT_TOOLS and configured == "ask":
            return "allow"
        return configured

    async def __call__(self, call: ToolCall, signal: AbortSignal) -> PreExecuteDecision | None:
        mode = self.mode(call.name)
        if mode is None:
            return None
        tool = self.registry.get(call.name)
        if mode in ("allow", "sandbox") and isinstance(tool, RunCommandTool):
            mode = self._command_mode(tool, call, mode)
        elif mode == "sandbox" and isinstance(tool, ProcessWriteTool):
            # What a process reads may be commands: a confined one's input is allowed, an unconfined
            # one's asked, as its command was.
            mode = "allow" if tool.confined(call.args or {}) else "ask"
        if call.name == PROPOSE_PLAN_TOOL and mode != "deny":
            # Always the person's answer, whatever the configuration says, and never remembered.
            mode = "ask"
        if mode == "allow":
            return Allow()
        if mode == "deny":
            if call.name == PROPOSE_PLAN_TOOL and not self.offered(call.name):
                return Deny(f"{call.name} is only available in plan mode", reason="plan-mode")
            if not self.offered(call.name):
                return Deny(
                    f"{call.name} is not available in plan mode: read and plan, do not change",
                    reason="plan-mode",
                )
            return Deny(f"{call.name} is disabled by the permission policy", reason="policy")
        args = call.args or {}
        if not isinstance(tool, ToolBase):
            return Ask(f"Run {call.name}")
        try:
            for path in tool.target_paths(args):
                self.workspace.resolve(path)
            preview = await tool.permission_preview(args)
        except ToolError as exc:
            # The call cannot succeed as it stands (a path outside the workspace, a FIFO, an edit whose
            # text is not in the file): nobody is asked, and it fails with the tool's own error code,
            # the same a read gets. The recorded refusal is its result: the body never runs.
            tool.refuse(call, exc)
            return Allow()
        if call.name == PROPOSE_PLAN_TOOL:
            return Ask(tool.permission_title(args), preview, rememberable=False, reject_note=REVISE_NOTE)
        return Ask(tool.permission_title(args), preview, tool.permission_scope(args))

    @staticmethod
    def _command_mode(tool: RunCommandTool, call: ToolCall, mode: Mode) -> Mode:
        """`allow` or `ask` for a command: a widening is always asked (in plan mode it is refused by
        the tool, unasked); under `sandbox`, a confined command is allowed and an unconfined one asked."""
        args = call.args or {}
        if args.get("escalate") is not None:
            plan = tool.sandbox.session_mode() == "plan"
            return "allow" if plan else "ask"
        if mode == "sandbox":
            return "allow" if tool.sandbox.confined else "ask"
        return mode


__all__ = ["DEFAULT_MODES", "MODES", "Mode", "PermissionPolicy", "parse_modes"]
