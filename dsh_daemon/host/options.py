"""The daemon's configuration, parsed once into frozen, typed values, whichever front end asked.

The LSP server passes `initializationOptions` (and later `workspace/didChangeConfiguration`
settings); ACP mode passes `initialize`'s `_meta.dsh`. Both are merged over `$DSH_HOME/config.json`,
the environment and the command-line flags, checked here, and refused with an `OptionsError` naming
the key; each front end turns that into its own `invalid_params`. Nothing re-reads the raw mapping
later, so nothing can fail on it after a session exists. Light imports only: `initialize` must stay
as fast as a bare pygls server's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsh_daemon.agent.system_prompt import PromptConfig, PromptConfigError, load_prompt_config
from dsh_daemon.host.errors import HostError
from dsh_daemon.llm.config import ConfigError, ProviderConfig, load_provider_config
from dsh_daemon.mcp.config import (
    McpConfigError,
    ServerConfig,
    load_file_servers,
    merge,
    parse_acp_servers,
    parse_servers,
)
from dsh_daemon.mcp.config import ServerSource as ServerSource  # a session's own servers, for front ends
from dsh_daemon.tools.config import ToolConfig, ToolConfigError

DEFAULT_PERMISSION_TIMEOUT_S = 300.0
# Keys that are not provider configuration (which is everything else, flat or inside `provider`).
NON_PROVIDER_KEYS = frozenset({"permissionTimeoutS", "tools", "agent", "mcpServers"})


class OptionsError(HostError, ValueError):
    """A configuration value of the wrong type or range; the message names the key."""


@dataclass(frozen=True)
class DaemonOptions:
    provider: ProviderConfig = field(default_factory=ProviderConfig)
    permission_timeout_s: float = DEFAULT_PERMISSION_TIMEOUT_S
    tools: ToolConfig = field(default_factory=ToolConfig)
    agent: PromptConfig = field(default_factory=PromptConfig)  # the system prompt (`agent`)
    # MCP servers every session starts: `$DSH_HOME/config.json` `mcpServers`, then `mcpServers` here
    mcp_servers: Mapping[str, ServerConfig] = field(default_factory=dict)


def parse_options(
    state_dir: Path, env: Mapping[str, str], flags: Mapping[str, Any], raw: Any, *, what: str
) -> DaemonOptions:
    """Every source of configuration merged and checked (`what` names `raw` in errors)."""
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise OptionsError(f"{what} must be an object")
    provider_raw = {k: v for k, v in raw.items() if k not in NON_PROVIDER_KEYS}
    try:
        provider = load_provider_config(state_dir, env, flags, provider_raw)
        tools = ToolConfig.parse(raw.get("tools"))
        agent = load_prompt_config(state_dir, raw)
        mcp_servers = merge(load_file_servers(state_dir), parse_servers(raw.get("mcpServers")))
    except (ConfigError, ToolConfigError, PromptConfigError, McpConfigError) as exc:
        raise OptionsError(f"invalid dsh-daemon configuration: {exc}") from exc
    timeout = raw.get("permissionTimeoutS")
    if timeout is None:
        timeout = DEFAULT_PERMISSION_TIMEOUT_S
    elif isinstance(timeout, bool) or not isinstance(timeout, int | float) or not math.isfinite(timeout):
        shown = repr(timeout) if len(repr(timeout)) <= 80 else repr(timeout)[:79] + "…"
        raise OptionsError(
            f"invalid dsh-daemon configuration: permissionTimeoutS must be a positive number of seconds, "
            f"not {shown}"
        )
    elif timeout <= 0:
        raise OptionsError(
            f"invalid dsh-daemon configuration: permissionTimeoutS must be positive, not {timeout}"
        )
    return DaemonOptions(provider, float(timeout), tools, agent, mcp_servers)


def parse_session_servers(raw: Any, where: str, *, acp: bool = False) -> ServerSource:
    """A session's own MCP servers as a client gives them (`dsh/session/new`'s `{name: config}`, or
    ACP's `[{name, command, …}]` list), over the configured ones; `OptionsError` naming the key."""
    try:
        return parse_acp_servers(raw, where) if acp else parse_servers(raw, where)
    except McpConfigError as exc:
        raise OptionsError(str(exc)) from exc
