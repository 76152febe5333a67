"""ACP mode's configuration, parsed once at `initialize` into frozen values.

ACP has no `initializationOptions`; the same keys (provider keys flat or under `provider`,
`permissionTimeoutS`, `tools`, `agent`, `mcpServers`) may come in `initialize`'s `_meta.dsh`, over
`$DSH_HOME/config.json`, the environment and the command-line flags.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsh_daemon.acp.errors import invalid_params, shown
from dsh_daemon.agent.system_prompt import PromptConfig, PromptConfigError, load_prompt_config
from dsh_daemon.llm.config import ConfigError, ProviderConfig, load_provider_config
from dsh_daemon.mcp.config import McpConfigError, ServerConfig, load_file_servers, merge, parse_servers
from dsh_daemon.tools.config import ToolConfig, ToolConfigError

DEFAULT_PERMISSION_TIMEOUT_S = 300.0
NON_PROVIDER_KEYS = frozenset({"permissionTimeoutS", "tools", "agent", "mcpServers"})


@dataclass(frozen=True)
class AcpOptions:
    provider: ProviderConfig = field(default_factory=ProviderConfig)
    permission_timeout_s: float = DEFAULT_PERMISSION_TIMEOUT_S
    tools: ToolConfig = field(default_factory=ToolConfig)
    agent: PromptConfig = field(default_factory=PromptConfig)
    mcp_servers: Mapping[str, ServerConfig] = field(default_factory=dict)  # before session/new's own


def parse_options(state_dir: Path, env: Mapping[str, str], flags: Mapping[str, Any], raw: Any) -> AcpOptions:
    """Every source merged and checked; a bad value is `invalid_params` naming the key."""
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise invalid_params("_meta.dsh must be an object")
    provider_raw = {k: v for k, v in raw.items() if k not in NON_PROVIDER_KEYS}
    try:
        provider = load_provider_config(state_dir, env, flags, provider_raw)
        tools = ToolConfig.parse(raw.get("tools"))
        agent = load_prompt_config(state_dir, raw)
        mcp_servers = merge(load_file_servers(state_dir), parse_servers(raw.get("mcpServers")))
    except (ConfigError, ToolConfigError, PromptConfigError, McpConfigError) as exc:
        raise invalid_params(f"invalid dsh-daemon configuration: {exc}") from exc
    timeout = raw.get("permissionTimeoutS", DEFAULT_PERMISSION_TIMEOUT_S)
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not math.isfinite(timeout)
        or timeout <= 0
    ):
        raise invalid_params(
            f"invalid dsh-daemon configuration: permissionTimeoutS must be a positive number, "
            f"not {shown(repr(timeout), 80)}"
        )
    return AcpOptions(provider, float(timeout), tools, agent, mcp_servers)
