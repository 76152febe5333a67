"""The daemon's configuration, parsed once into frozen, typed values, whichever front end asked.

The LSP server passes `initializationOptions` (and later `workspace/didChangeConfiguration`
settings); ACP mode passes `initialize`'s `_meta.dsh`. Both are merged over `$DSH_HOME/config.json`
(`config_file.py`: the same keys, its bad entries reported rather than refused), the environment and
the command-line flags, checked here, and refused with an `OptionsError` naming the key; each front
end turns that into its own `invalid_params`. Nothing re-reads the raw mapping
later, so nothing can fail on it after a session exists. Light imports only: `initialize` must stay
as fast as a bare pygls server's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsh_daemon.agent.system_prompt import PromptConfig, PromptConfigError, load_prompt_config
from dsh_daemon.host.config_file import (
    TimeoutSettingError,
    check_permission_timeout,
    merge_objects,
    read_file_layer,
)
from dsh_daemon.host.errors import HostError, shown
from dsh_daemon.llm.config import ConfigError, ProviderConfig, load_provider_config
from dsh_daemon.mcp.config import (
    McpConfigError,
    ServerConfig,
    merge,
    parse_acp_servers,
    parse_servers,
)
from dsh_daemon.mcp.config import ServerSource as ServerSource  # a session's own servers, for front ends
from dsh_daemon.model.hooks import HookConfigError, HookSettings, parse_hooks
from dsh_daemon.tools.config import ToolConfig, ToolConfigError

DEFAULT_PERMISSION_TIMEOUT_S = 300.0
# Keys that are not provider configuration (which is everything else, flat or inside `provider`).
NON_PROVIDER_KEYS = frozenset(
    {"permissionTimeoutS", "tools", "agent", "mcpServers", "deltaCoalesceMs", "hooks"}
)
MAX_DELTA_COALESCE_MS = 1000.0


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
    # config.json's entries that were left out, each naming the file and the key (shown and logged by
    # the front ends: `report_file_problems`)
    file_problems: tuple[str, ...] = ()
    # How long a streamed delta waits for the next ones to be merged with it even when the client
    # keeps up (`deltaCoalesceMs`; 0: merged only while the client is behind, host/outbox.py)
    delta_coalesce_s: float = 0.0
    # The person's hooks (model/hooks.py): config.json's, then the editor's (a project's own are
    # added per session, once trusted: hooks/project.py)
    hooks: HookSettings = field(default_factory=HookSettings)


def parse_options(
    state_dir: Path, env: Mapping[str, str], flags: Mapping[str, Any], raw: Any, *, what: str
) -> DaemonOptions:
    """Every source of configuration merged and checked (`what` names `raw` in errors). `raw` (the
    editor's options) is refused whole when a key is bad; config.json's bad entries are left out and
    reported in `file_problems` (`host/config_file.py`)."""
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise OptionsError(f"{what} must be an object")
    layer = read_file_layer(state_dir)
    provider_raw = {k: v for k, v in raw.items() if k not in NON_PROVIDER_KEYS}
    try:
        provider = load_provider_config(state_dir, env, flags, provider_raw, file_section=layer.provider)
        tools = ToolConfig.parse(merge_objects(layer.tools, raw.get("tools")))
        agent = load_prompt_config(state_dir, raw, file_section=layer.agent)
        mcp_servers = merge(layer.mcp_servers, parse_servers(raw.get("mcpServers")))
        hooks = layer.hooks + parse_hooks(raw.get("hooks"))
    except (ConfigError, ToolConfigError, PromptConfigError, McpConfigError, HookConfigError) as exc:
        raise OptionsError(f"invalid dsh-daemon configuration: {exc}") from exc
    timeout = raw.get("permissionTimeoutS")
    try:
        if timeout is not None:
            timeout = check_permission_timeout(timeout)
    except TimeoutSettingError as exc:
        raise OptionsError(f"invalid dsh-daemon configuration: {exc}") from exc
    if timeout is None:
        timeout = layer.permission_timeout_s or DEFAULT_PERMISSION_TIMEOUT_S
    window = _delta_coalesce_ms(raw.get("deltaCoalesceMs")) / 1000
    return DaemonOptions(provider, timeout, tools, agent, mcp_servers, layer.problems, window, hooks)


def _delta_coalesce_ms(value: Any) -> float:
    """`deltaCoalesceMs`: a number of milliseconds from 0 to MAX_DELTA_COALESCE_MS (absent: 0)."""
    if value is None:
        return 0.0
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 <= value <= MAX_DELTA_COALESCE_MS  # NaN fails this too
    ):
        raise OptionsError(
            "invalid dsh-daemon configuration: deltaCoalesceMs must be a number of milliseconds "
            f"from 0 to {MAX_DELTA_COALESCE_MS:g}, not {shown(repr(value), 80)}"
        )
    return float(value)


def parse_session_servers(raw: Any, where: str, *, acp: bool = False) -> ServerSource:
    """A session's own MCP servers as a client gives them (`dsh/session/new`'s `{name: config}`, or
    ACP's `[{name, command, …}]` list), over the configured ones; `OptionsError` naming the key."""
    try:
        return parse_acp_servers(raw, where) if acp else parse_servers(raw, where)
    except McpConfigError as exc:
        raise OptionsError(str(exc)) from exc


API_KEY_VARIABLE = "DEEPSEEK_API_KEY"


def api_key_missing(options: DaemonOptions) -> bool:
    """No API key although the provider needs one (DeepSeek's own API; a local OpenAI-compatible
    server may take none): a prompt could only fail."""
    from dsh_daemon.llm.deepseek import needs_api_key

    provider = options.provider
    return not provider.api_key and needs_api_key(provider.base_url)
