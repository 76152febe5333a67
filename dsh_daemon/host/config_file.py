"""`$DSH_HOME/config.json` as the lowest layer of the daemon's configuration, each entry checked alone.

The file takes every key `initializationOptions` (ACP: `_meta.dsh`) takes, with the same meaning:
provider keys (flat, or inside `provider`, which wins over flat ones), `tools`, `permissionTimeoutS`,
`agent`, `mcpServers`, `hooks`. Precedence (README "Configuration"): provider keys are the lowest source under
the environment, the flags and the editor's options; `tools` and `agent` are merged key by key under
the editor's (an editor's `tools.permissions` entry wins for that tool only, the file's others stay);
`mcpServers` by name (`null` removes one); `permissionTimeoutS` is replaced; `hooks` run before the
editor's (both sets run).

The editor's options are refused whole at `initialize`, where the editor shows the reply. A mistake in
the file must not keep the daemon from starting for a person who never sees that reply (the terminal
chat, an ACP agent panel), nor be silently dropped: each entry is checked on its own, and a bad or
unknown one is left out and named in `problems`, which every front end shows (LSP: a
`window/showMessage` warning, which the terminal chat prints as a line; ACP: `_dsh/notice` and a
message in each session it opens) and logs.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsh_daemon.agent.system_prompt import PromptConfigError, check_prompt_setting
from dsh_daemon.host.errors import shown
from dsh_daemon.llm.config import ConfigError, camel_key, check_provider_setting, is_provider_key
from dsh_daemon.mcp.config import McpConfigError, ServerConfig, parse_servers
from dsh_daemon.model.configfile import CONFIG_FILE, ConfigFileError, read_config_file
from dsh_daemon.model.hooks import HookSettings, parse_hooks_leniently
from dsh_daemon.tools.config import ToolConfig, ToolConfigError, parse_modes
from dsh_daemon.tools.limits import ToolLimits

logger = logging.getLogger(__name__)

SECTIONS = ("tools", "permissionTimeoutS", "agent", "mcpServers", "hooks")
IGNORED = "; ignored"


class TimeoutSettingError(ValueError):
    """`permissionTimeoutS` that is not a positive, finite number of seconds."""


def check_permission_timeout(value: Any) -> float:
    """`permissionTimeoutS` as seconds; `TimeoutSettingError` naming the key otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise TimeoutSettingError(
            f"permissionTimeoutS must be a positive number of seconds, not {shown(repr(value), 80)}"
        )
    if value <= 0:
        raise TimeoutSettingError(f"permissionTimeoutS must be positive, not {value}")
    return float(value)


@dataclass(frozen=True)
class FileLayer:
    """What config.json holds that can be used, in `initializationOptions`' shape, and what not."""

    path: Path
    provider: Mapping[str, Any] = field(default_factory=dict)  # camelCase provider settings
    tools: Mapping[str, Any] | None = None
    permission_timeout_s: float | None = None
    agent: Mapping[str, Any] = field(default_factory=dict)
    mcp_servers: Mapping[str, ServerConfig | None] = field(default_factory=dict)
    hooks: HookSettings = field(default_factory=HookSettings)
    problems: tuple[str, ...] = ()  # each names the file and the key, and ends "; ignored"


def read_file_layer(state_dir: str | Path) -> FileLayer:
    """config.json, each entry checked alone: the usable ones, and a problem for every other one."""
    path = Path(state_dir) / CONFIG_FILE
    try:
        data = read_config_file(state_dir)
    except ConfigFileError as exc:
        return FileLayer(path, problems=(f"{exc}; the whole file is ignored",))
    problems: list[str] = []
    provider: dict[str, Any] = {}

    def provider_entry(key: str, value: Any, where: str) -> None:
        try:
            check_provider_setting(key, value, where)
        except ConfigError as exc:
            problems.append(f"{exc}{IGNORED}")
        else:
            provider[camel_key(key)] = value

    for key, value in data.items():
        if key == "provider" or key in SECTIONS:
            continue
        if is_provider_key(key):
            provider_entry(key, value, str(path))
        else:
            problems.append(
                f"{path}: unknown key {shown(repr(key), 80)} (known: provider keys such as model and "
                f"baseUrl, provider, {', '.join(SECTIONS)}){IGNORED}"
            )
    section = data.get("provider")
    if isinstance(section, Mapping):
        for key, value in section.items():
            provider_entry(str(key), value, f"{path}: provider")
    elif section is not None:
        problems.append(f"{path}: provider must be an object, not {shown(repr(section), 80)}{IGNORED}")

    timeout = None
    if data.get("permissionTimeoutS") is not None:
        try:
            timeout = check_permission_timeout(data["permissionTimeoutS"])
        except TimeoutSettingError as exc:
            problems.append(f"{path}: {exc}{IGNORED}")
    hooks, hook_problems = parse_hooks_leniently(data.get("hooks"), f"{path}: hooks")
    problems += [f"{problem}{IGNORED}" for problem in hook_problems]
    return FileLayer(
        path,
        hooks=hooks,
        provider=provider,
        tools=_tools(data.get("tools"), path, problems),
        permission_timeout_s=timeout,
        agent=_agent(data.get("agent"), path, problems),
        mcp_servers=_servers(data.get("mcpServers"), path, problems),
        problems=tuple(problems),
    )


def _tools(raw: Any, path: Path, problems: list[str]) -> Mapping[str, Any] | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        problems.append(f"{path}: tools must be an object, not {shown(repr(raw), 80)}{IGNORED}")
        return None
    clean: dict[str, Any] = {}
    for key, value in raw.items():
        if key == "permissions" and isinstance(value, Mapping):
            modes: dict[str, Any] = {}
            for name, mode in value.items():
                try:
                    parse_modes({name: mode})
                except ToolConfigError as exc:
                    problems.append(f"{path}: {exc}{IGNORED}")
                else:
                    modes[name] = mode
            clean[key] = modes
        elif key == "limits" and isinstance(value, Mapping):
            limits: dict[str, Any] = {}
            for name, limit in value.items():
                try:
                    ToolLimits.from_config({name: limit})
                except ValueError as exc:
                    problems.append(f"{path}: tools.limits: {exc}{IGNORED}")
                else:
                    limits[name] = limit
            clean[key] = limits
        else:
            try:
                ToolConfig.parse({key: value})
            except ToolConfigError as exc:
                problems.append(f"{path}: {exc}{IGNORED}")
            else:
                clean[key] = value
    return clean


def _agent(raw: Any, path: Path, problems: list[str]) -> Mapping[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        problems.append(f"{path}: agent must be an object, not {shown(repr(raw), 80)}{IGNORED}")
        return {}
    clean: dict[str, Any] = {}
    for key, value in raw.items():
        try:
            check_prompt_setting(key, value, f"{path}: agent")
        except PromptConfigError as exc:
            problems.append(f"{exc}{IGNORED}")
        else:
            clean[key] = value
    return clean


def _servers(raw: Any, path: Path, problems: list[str]) -> Mapping[str, ServerConfig | None]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        problems.append(f"{path}: mcpServers must be an object, not {shown(repr(raw), 80)}{IGNORED}")
        return {}
    clean: dict[str, ServerConfig | None] = {}
    for name, config in raw.items():
        try:
            clean.update(parse_servers({name: config}, f"{path}: mcpServers"))
        except McpConfigError as exc:
            problems.append(f"{exc}{IGNORED}")
    return clean


def merge_objects(base: Mapping[str, Any] | None, over: Any) -> Any:
    """`over` merged over `base` key by key, objects inside too (`tools.permissions`, `tools.limits`);
    a value of `over` that is not an object is returned as it is, for its own parser to refuse."""
    if base is None:
        return over
    if over is None:
        return dict(base)
    if not isinstance(over, Mapping):
        return over
    merged = dict(base)
    for key, value in over.items():
        old = merged.get(key)
        merged[key] = merge_objects(old, value) if isinstance(old, Mapping) else value
    return merged


MAX_SHOWN = 5  # problems shown one by one; more are summed up (`dsh-daemon config` lists them all)


class ProblemReporter:
    """config.json's left-out entries, shown once each per connection (a settings change re-reads the
    file; the same warning again on every change would be noise) and logged. `show` is the front
    end's way to put a line in front of the person."""

    def __init__(self, show: Callable[[str], None]) -> None:
        self._show = show
        self._seen: set[str] = set()

    def report(self, problems: Sequence[str]) -> list[str]:
        """Show and log the problems not reported before; returns them."""
        new = [p for p in problems if p not in self._seen]
        self._seen.update(new)
        for problem in new:
            logger.warning("%s", problem)
        for problem in new[:MAX_SHOWN]:
            self._show(f"dsh: {problem}")
        if len(new) > MAX_SHOWN:
            more = len(new) - MAX_SHOWN
            self._show(f"dsh: {more} more problems in config.json (`dsh-daemon config` lists them)")
        return new
