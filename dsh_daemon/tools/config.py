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

Mode: TypeAlias = Literal["allow", "ask", "deny"]
MODES: frozenset[str] = frozenset(get_args(Mode))

DEFAULT_MODES: Mapping[str, Mode] = MappingProxyType(
    {
        "read_file": "allow",
        "list_dir": "allow",
        "find_files": "allow",
        "grep": "allow",
        "edit_file": "ask",
        "write_file": "ask",
        "run_command": "ask",
    }
)
CONFIG_KEYS = frozenset({"permissions", "limits", "shell", "ripgrep"})


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
        if not isinstance(name, str) or mode not in MODES:
            choices = ", ".join(sorted(MODES))
            where = f"tools.permissions.{_shown(name)}"
            raise ToolConfigError(f"{where} must be one of {choices}, not {_shown(mode)}")
        modes[name] = mode
    return modes


@dataclass(frozen=True, slots=True)
class ToolConfig:
    permissions: Mapping[str, Mode] = field(default_factory=lambda: MappingProxyType(dict(DEFAULT_MODES)))
    limits: ToolLimits = field(default_factory=ToolLimits)
    shell: str | None = None  # default: bash, else /bin/sh
    ripgrep: bool | str = True  # False: the Python grep; a string: rg's path

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
        return cls(MappingProxyType(parse_modes(raw.get("permissions"))), limits, shell, ripgrep)


def _shown(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
