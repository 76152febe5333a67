"""`dsh-daemon config`: the effective configuration, one line per setting, with where each value came
from (a default, `$DSH_HOME/config.json`, an environment variable, a command-line flag), secrets masked.

The sources are those the daemon itself merges (`host/options.py: parse_options`, with no editor
options: an editor's `initializationOptions` or ACP `_meta.dsh` apply over everything shown here), so
what this prints is what a session would run with. The file's entries that are left out are listed
too, as the front ends report them.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsh_daemon.agent.turnbudget import TurnBudget
from dsh_daemon.host.config_file import FileLayer, read_file_layer
from dsh_daemon.host.options import DaemonOptions, parse_options
from dsh_daemon.llm.config import environment_keys
from dsh_daemon.mcp.config import HttpServer, ServerConfig, StdioServer
from dsh_daemon.model.configfile import CONFIG_FILE

MASK = "<set>"  # what a secret (an API key, an MCP server's env value or header) is shown as
FLAGS = {"model": "--model", "baseUrl": "--base-url", "thinking": "--no-thinking"}
# ProviderConfig attribute -> its key (prices and context windows are listed per model)
PROVIDER_KEYS = {
    "name": "name",
    "base_url": "baseUrl",
    "api_key": "apiKey",
    "model": "model",
    "thinking": "thinking",
    "reasoning_effort": "reasoningEffort",
    "max_tokens": "maxTokens",
    "connect_timeout_s": "connectTimeoutS",
    "idle_timeout_s": "idleTimeoutS",
    "compact_at_ratio": "compactAtRatio",
}
AGENT_KEYS = {
    "system_prompt": "systemPrompt",
    "append_system_prompt": "appendSystemPrompt",
    "project_instructions": "projectInstructions",
    "instructions_max_chars": "instructionsMaxChars",
    "budget": "budget",
}


@dataclass(frozen=True)
class Setting:
    key: str  # dotted, as in config.json (`provider.model`, `tools.permissions.write_file`)
    value: Any  # JSON; secrets are MASK
    source: str  # "default", the file's path, "environment DEEPSEEK_API_KEY", "flag --model"


@dataclass(frozen=True)
class Report:
    state_dir: Path
    settings: tuple[Setting, ...]
    problems: tuple[str, ...]  # config.json's entries that are left out

    def json(self) -> dict[str, Any]:
        return {
            "stateDir": str(self.state_dir),
            "settings": [dataclasses.asdict(s) for s in self.settings],
            "problems": list(self.problems),
        }

    def text(self) -> str:
        rows = [(s.key, _shown(s.value), s.source) for s in self.settings]
        key_width = max(len(r[0]) for r in rows)
        value_width = min(48, max(len(r[1]) for r in rows))
        lines = [
            f"dsh-daemon configuration; config.json: {self.state_dir / CONFIG_FILE}",
            "(an editor's initializationOptions, ACP: _meta.dsh, apply over these)",
            "",
        ]
        lines += [f"{k.ljust(key_width)}  {v.ljust(value_width)}  {src}" for k, v, src in rows]
        if self.problems:
            lines += ["", "Left out of config.json (fix them; the rest of the file applies):"]
            lines += [f"  - {p}" for p in self.problems]
        return "\n".join(lines)


def effective_configuration(state_dir: Path, env: Mapping[str, str], flags: Mapping[str, Any]) -> Report:
    """What the daemon would run with, started with `env` and `flags`, before any editor options."""
    layer = read_file_layer(state_dir)
    options = parse_options(state_dir, env, flags, {}, what="options")
    settings = [
        *_provider(options, layer, env, flags),
        *_tools(options, layer),
        Setting(
            "permissionTimeoutS",
            options.permission_timeout_s,
            _file(layer) if layer.permission_timeout_s is not None else "default",
        ),
        *[
            Setting(
                f"agent.{key}",
                _agent_value(getattr(options.agent, attr)),
                _file(layer) if key in layer.agent else "default",
            )
            for attr, key in AGENT_KEYS.items()
        ],
        *[
            Setting(f"mcpServers.{name}", _server(server), _file(layer))
            for name, server in sorted(options.mcp_servers.items())
        ],
        *_hooks(options, layer),
    ]
    return Report(state_dir, tuple(settings), options.file_problems)


def _hooks(options: DaemonOptions, layer: FileLayer) -> list[Setting]:
    """config.json's hooks, each under its event and index (a project's own are per folder: protocol.md
    §17)."""
    out = []
    index: dict[str, int] = {}
    for hook in options.hooks.hooks:
        n = index[hook.event] = index.get(hook.event, -1) + 1
        value: dict[str, Any] = {
            "command": hook.command if isinstance(hook.command, str) else list(hook.command),
            "timeoutS": hook.timeout_s,
        }
        if hook.matcher is not None:
            value["matcher"] = hook.matcher
        if hook.name is not None:
            value["name"] = hook.name
        out.append(Setting(f"hooks.{hook.event}[{n}]", value, _file(layer)))
    return out


def _file(layer: FileLayer) -> str:
    return "config.json"  # the header names the file


def _source(layer: FileLayer, in_file: bool) -> str:
    return _file(layer) if in_file else "default"


def _provider(
    options: DaemonOptions, layer: FileLayer, env: Mapping[str, str], flags: Mapping[str, Any]
) -> list[Setting]:
    config = options.provider
    from_env = environment_keys(env)
    out = []
    for attr, key in PROVIDER_KEYS.items():
        value = getattr(config, attr)
        if key == "apiKey":
            value = MASK if value else None
        if key in flags:
            source = f"flag {FLAGS.get(key, key)}"
        elif key in from_env:
            source = f"environment {from_env[key]}"
        elif key in layer.provider:
            source = _file(layer)
        else:
            source = "default"
        out.append(Setting(f"provider.{key}", value, source))
    file_prices = layer.provider.get("prices") or {}
    for model, price in sorted(config.prices.items()):
        value = {"cacheHit": price.cache_hit, "cacheMiss": price.cache_miss, "output": price.output}
        source = _file(layer) if model in file_prices else "default"
        out.append(Setting(f"provider.prices.{model}", value, source))
    file_windows = layer.provider.get("contextWindow")
    if config.context_window_all is not None:
        out.append(Setting("provider.contextWindow", config.context_window_all, _file(layer)))
    else:
        for model, tokens in sorted(config.context_windows.items()):
            in_file = isinstance(file_windows, Mapping) and model in file_windows
            source = _file(layer) if in_file else "default"
            out.append(Setting(f"provider.contextWindow.{model}", tokens, source))
    return out


def _tools(options: DaemonOptions, layer: FileLayer) -> list[Setting]:
    tools = options.tools
    file_tools = layer.tools or {}
    file_modes = file_tools.get("permissions") or {}
    file_limits = file_tools.get("limits") or {}
    out = [
        Setting(
            f"tools.permissions.{name}",
            mode,
            _file(layer) if name in file_modes else "default",
        )
        for name, mode in sorted(tools.permissions.items())
    ]
    for limit in dataclasses.fields(tools.limits):
        source = _file(layer) if limit.name in file_limits else "default"
        out.append(Setting(f"tools.limits.{limit.name}", getattr(tools.limits, limit.name), source))
    for key in ("shell", "ripgrep"):
        out.append(
            Setting(f"tools.{key}", getattr(tools, key), _file(layer) if key in file_tools else "default")
        )
    return [*out, *_sandbox(options, file_tools)]


def _sandbox(options: DaemonOptions, file_tools: Mapping[str, Any]) -> list[Setting]:
    """The commands' sandbox: its settings, and the level this machine gives with the reason for
    each layer it cannot have (what a confined mode would run with, or why it would refuse)."""
    from dsh_daemon.tools.sandboxing import machine_level

    sandbox = options.tools.sandbox
    raw = file_tools.get("sandbox")
    in_file = set(raw) if isinstance(raw, Mapping) else {"mode"} if isinstance(raw, str) else set()
    level, confined = machine_level()
    if sandbox.mode == "full-access":
        reached = f"full-access: commands run unconfined and ask first ({level})"
    elif confined:
        reached = level
    else:
        reached = f"{level}; {sandbox.mode} commands are refused until tools.sandbox is full-access"
    return [
        Setting("tools.sandbox.mode", sandbox.mode, "config.json" if "mode" in in_file else "default"),
        Setting(
            "tools.sandbox.network.allow",
            list(sandbox.network_allow),
            "config.json" if "network" in in_file else "default",
        ),
        Setting(
            "tools.sandbox.writable",
            list(sandbox.writable),
            "config.json" if "writable" in in_file else "default",
        ),
        Setting("tools.sandbox.level", reached, "this machine (probed)"),
    ]


def _server(server: ServerConfig) -> dict[str, Any]:
    """A server's configuration with its env values and headers masked (they often hold tokens)."""
    if isinstance(server, StdioServer):
        out: dict[str, Any] = {"command": server.command, "args": list(server.args)}
        if server.env:
            out["env"] = {name: MASK for name, _ in server.env}
        if server.cwd:
            out["cwd"] = server.cwd
        out["maxMessageBytes"] = server.max_message_bytes
        if server.sandbox is not None:  # confined (issue 41.4): the mode, or true for the session's
            out["sandbox"] = True if server.sandbox == "session" else server.sandbox
    else:
        assert isinstance(server, HttpServer)
        out = {"url": server.url}
        if server.headers:
            out["headers"] = {name: MASK for name, _ in server.headers}
    out["startupTimeoutS"] = server.startup_timeout_s
    out["toolTimeoutS"] = server.tool_timeout_s
    return out


def _agent_value(value: Any) -> Any:
    """An `agent` setting as JSON (`budget` is a value object; null: no caps)."""
    return value.json() if isinstance(value, TurnBudget) else value


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 200 else text[:199] + "…"
