"""The tools' configuration (`initializationOptions.tools`), parsed once into a frozen value.

Light on purpose (no agent imports): the server parses it while answering `initialize`, so a bad
value is refused there, where the editor shows it, instead of failing the first session later.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, TypeAlias, get_args

from dsh_daemon.tools.limits import ToolLimits

# "sandbox": allow when the command runs confined, ask when it does not (`run_command` only).
Mode: TypeAlias = Literal["allow", "ask", "deny", "sandbox"]
MODES: frozenset[str] = frozenset({"allow", "ask", "deny"})
SANDBOX_MODE_TOOLS = frozenset({"run_command", "process_write"})  # the tools that take the "sandbox" mode
SandboxMode: TypeAlias = Literal["read-only", "workspace-write", "full-access"]
SANDBOX_MODES: tuple[SandboxMode, ...] = get_args(SandboxMode)
DEFAULT_SANDBOX_MODE: SandboxMode = "workspace-write"

DEFAULT_MODES: Mapping[str, Mode] = MappingProxyType(
    {
        "read_file": "allow",
        "list_dir": "allow",
        "find_files": "allow",
        "grep": "allow",
        "update_plan": "allow",  # it only records the plan
        "propose_plan": "ask",  # always asked: the person approves the plan (tools/plan_approval.py)
        "skill": "allow",  # it reads a skill (tools/library.py), nothing else
        "report_finding": "allow",  # it only records a review's finding (tools/review.py)
        "edit_file": "ask",
        "write_file": "ask",
        "run_command": "sandbox",
        "process_read": "allow",  # reads what the agent's own background process wrote
        "process_stop": "allow",  # stops what the agent started
        "process_write": "sandbox",  # input to a process is like a command: asked when it is unconfined
    }
)
CONFIG_KEYS = frozenset({"permissions", "limits", "shell", "ripgrep", "sandbox"})
SANDBOX_KEYS = frozenset({"mode", "network", "writable"})


class ToolConfigError(ValueError):
    """A `tools` setting of the wrong type or value, named in the message."""


def parse_modes(config: Any) -> dict[str, Mode]:
    """Defaults overridden by `config` ({tool name: mode}); tools not named keep their default."""
    if config is None:
        return dict(DEFAULT_MODES)
    if not isinstance(config, Mapping):
        raise ToolConfigError(f"tools.permissions must be an object {{toolName: mode}}, not {_shown(config)}")
    modes: dict[str, Mode] = dict(DEFAULT_MODES)
    for name, mode in config.items():
        allowed = MODES | {"sandbox"} if name in SANDBOX_MODE_TOOLS else MODES
        if not isinstance(name, str) or mode not in allowed:
            choices = ", ".join(sorted(allowed))
            where = f"tools.permissions.{_shown(name)}"
            raise ToolConfigError(f"{where} must be one of {choices}, not {_shown(mode)}")
        modes[name] = mode
    return modes


@dataclass(frozen=True, slots=True)
class SandboxSettings:
    """`tools.sandbox`: how commands are confined (docs/design.md "Sandbox"). A bare string is the mode."""

    mode: SandboxMode = DEFAULT_SANDBOX_MODE
    network_allow: tuple[str, ...] = ()  # domains reachable through the daemon's proxy
    writable: tuple[str, ...] = ()  # absolute paths writable besides the roots (caches, widenings)

    @classmethod
    def parse(cls, raw: Any) -> SandboxSettings:
        if raw is None:
            return cls()
        if isinstance(raw, str):
            raw = {"mode": raw}
        if not isinstance(raw, Mapping):
            raise ToolConfigError(f"tools.sandbox must be a mode or an object, not {_shown(raw)}")
        unknown = set(raw) - SANDBOX_KEYS
        if unknown:
            known = ", ".join(sorted(SANDBOX_KEYS))
            raise ToolConfigError(
                f"unknown tools.sandbox settings {sorted(map(_shown, unknown))} (known: {known})"
            )
        mode = raw.get("mode", DEFAULT_SANDBOX_MODE)
        if mode is None:
            mode = DEFAULT_SANDBOX_MODE
        if mode not in SANDBOX_MODES:
            raise ToolConfigError(
                f"tools.sandbox.mode must be one of {', '.join(SANDBOX_MODES)}, not {_shown(mode)}"
            )
        network = raw.get("network")
        allow: Any = ()
        if network is not None:
            if not isinstance(network, Mapping) or set(network) - {"allow"}:
                raise ToolConfigError(
                    f'tools.sandbox.network must be {{"allow": [domains]}}, not {_shown(network)}'
                )
            allow = network.get("allow") or ()
        domains = _strings(allow, "tools.sandbox.network.allow", "a list of domain names")
        for domain in domains:
            if not check_domain(domain):
                raise ToolConfigError(f"tools.sandbox.network.allow: {_shown(domain)} is not a domain name")
        writable = _strings(raw.get("writable") or (), "tools.sandbox.writable", "a list of absolute paths")
        for path in writable:
            if not path.startswith("/") or "\0" in path:
                raise ToolConfigError(f"tools.sandbox.writable: {_shown(path)} is not an absolute path")
        return cls(mode, tuple(d.lower() for d in domains), tuple(writable))

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "network": {"allow": list(self.network_allow)},
            "writable": list(self.writable),
        }


def check_domain(domain: str) -> bool:
    """A host name (`*.` allowed in front: every subdomain), as the allowlist takes it."""
    name = domain[2:] if domain.startswith("*.") else domain
    labels = name.split(".")
    return 0 < len(name) <= 253 and all(
        0 < len(label) <= 63 and label.replace("-", "").isalnum() and label.isascii() for label in labels
    )


def _strings(value: Any, where: str, what: str) -> tuple[str, ...]:
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) and v for v in value):
        raise ToolConfigError(f"{where} must be {what}, not {_shown(value)}")
    return tuple(value)


@dataclass(frozen=True, slots=True)
class ToolConfig:
    permissions: Mapping[str, Mode] = field(default_factory=lambda: MappingProxyType(dict(DEFAULT_MODES)))
    limits: ToolLimits = field(default_factory=ToolLimits)
    shell: str | None = None  # default: bash, else /bin/sh
    ripgrep: bool | str = True  # False: the Python grep; a string: rg's path
    sandbox: SandboxSettings = field(default_factory=SandboxSettings)

    @classmethod
    def parse(cls, raw: Any) -> ToolConfig:
        if raw is None:
            return cls()
        if not isinstance(raw, Mapping):
            raise ToolConfigError(f"tools must be an object, not {_shown(raw)}")
        unknown = set(raw) - CONFIG_KEYS
        if unknown:
            known = ", ".join(sorted(CONFIG_KEYS))
            raise ToolConfigError(f"unknown tools settings {sorted(map(_shown, unknown))} (known: {known})")
        limits_raw = raw.get("limits")
        if limits_raw is not None and not isinstance(limits_raw, Mapping):
            raise ToolConfigError(f"tools.limits must be an object, not {_shown(limits_raw)}")
        try:
            limits = ToolLimits.from_config(limits_raw)
        except ValueError as exc:
            raise ToolConfigError(f"tools.limits: {exc}") from None
        shell = raw.get("shell")
        if shell is not None and (not isinstance(shell, str) or not shell or "\0" in shell):
            raise ToolConfigError(f"tools.shell must be a path (a non-empty string), not {_shown(shell)}")
        ripgrep = raw.get("ripgrep", True)
        if ripgrep is None:
            ripgrep = True
        if not isinstance(ripgrep, bool | str) or ripgrep == "":
            raise ToolConfigError(f"tools.ripgrep must be a boolean or a path, not {_shown(ripgrep)}")
        sandbox = SandboxSettings.parse(raw.get("sandbox"))
        return cls(MappingProxyType(parse_modes(raw.get("permissions"))), limits, shell, ripgrep, sandbox)


def _shown(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
