"""MCP server configurations, from every source, parsed into frozen values (no SDK import here).

Object shape (`$DSH_HOME/config.json` `mcpServers`, `initializationOptions.mcpServers`,
`dsh/session/new` `mcpServers`)::

    {"files": {"command": "npx", "args": ["-y", "@mcp/files"], "env": {"K": "v"}, "cwd": "/p"},
     "docs":  {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer …"}},
     "old":   null}

`type` ("stdio" or "http") may be given too; a stdio server's `sandbox` ("workspace-write",
"read-only", or `true`: the session's configured mode) starts its process confined by the session's
sandbox instead of unconfined (`false`/absent: unconfined, as before; issue 41.4); `startupTimeoutS`
bounds a server's start (default 30),
`toolTimeoutS` one tool call (default 300), `maxMessageBytes` one message a stdio server sends
(default 16 MiB; a larger tool result is cut with a marker).
`null` removes a server a lower source defined. ACP's `session/new.mcpServers` list shape
(`[{name, command, args, env: [{name, value}]} | {type: "http", name, url, headers: [{name, value}]}]`)
is read by `parse_acp_servers`.

Names become part of tool names (`mcp__{server}__{tool}`), so characters outside `[A-Za-z0-9_-]` are
replaced by `_` (and a name is cut at 30 characters); two names that become the same are one server,
the later source winning.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

from dsh_daemon.model.configfile import CONFIG_FILE, ConfigFileError, read_config_file

DEFAULT_STARTUP_TIMEOUT_S = 30.0
DEFAULT_TOOL_TIMEOUT_S = 300.0
DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024
MAX_SERVER_KEY = 30
STDIO_KEYS = frozenset(
    {"type", "command", "args", "env", "cwd", "startupTimeoutS", "toolTimeoutS", "maxMessageBytes", "sandbox"}
)
SESSION_MODE = "session"  # `sandbox: true`: the session's configured mode when the server starts
SERVER_SANDBOX_MODES = ("workspace-write", "read-only")
HTTP_KEYS = frozenset({"type", "url", "headers", "startupTimeoutS", "toolTimeoutS"})
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


class McpConfigError(ValueError):
    """An `mcpServers` value of the wrong shape, named in the message."""


@dataclass(frozen=True, slots=True)
class StdioServer:
    name: str  # the key: what tool names and status events use
    command: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()  # over a minimal inherited environment (PATH, HOME, …)
    cwd: str | None = None  # default: the session's cwd
    startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S
    tool_timeout_s: float = DEFAULT_TOOL_TIMEOUT_S
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    # None: unconfined; "workspace-write" / "read-only"; SESSION_MODE: the session's configured mode
    sandbox: str | None = None

    @property
    def transport(self) -> str:
        return "stdio"


@dataclass(frozen=True, slots=True)
class HttpServer:
    name: str
    url: str
    headers: tuple[tuple[str, str], ...] = ()
    startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S
    tool_timeout_s: float = DEFAULT_TOOL_TIMEOUT_S

    @property
    def transport(self) -> str:
        return "http"


ServerConfig: TypeAlias = StdioServer | HttpServer
# A source's servers by key; None removes what a lower source defined under that key.
ServerSource: TypeAlias = Mapping[str, ServerConfig | None]


def server_key(name: str) -> str:
    """The name as it appears in tool names: `[A-Za-z0-9_-]`, at most 30 characters."""
    return _UNSAFE.sub("_", name)[:MAX_SERVER_KEY]


def merge(*sources: ServerSource) -> dict[str, ServerConfig]:
    """Later sources override earlier ones server by server; None removes a server."""
    out: dict[str, ServerConfig] = {}
    for source in sources:
        for key, server in source.items():
            if server is None:
                out.pop(key, None)
            else:
                out[key] = server
    return out


def parse_servers(raw: Any, where: str = "mcpServers") -> dict[str, ServerConfig | None]:
    """The object shape `{name: {command, …} | {url, …} | null}`; `where` prefixes error messages."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise McpConfigError(f"{where} must be an object {{name: server}}, not {_shown(raw)}")
    out: dict[str, ServerConfig | None] = {}
    for name, entry in raw.items():
        key = _key(name, f"{where}: server name")
        here = f"{where}.{name}"
        if entry is None:
            out[key] = None
            continue
        if not isinstance(entry, Mapping):
            raise McpConfigError(f"{here} must be an object ({{command, …}} or {{url, …}}) or null")
        out[key] = _server(key, entry, here)
    return out


def _server(key: str, entry: Mapping[str, Any], here: str) -> ServerConfig:
    kind = entry.get("type")
    if kind is None:
        kind = "http" if "url" in entry and "command" not in entry else "stdio"
    if kind in ("sse",):
        raise McpConfigError(f"{here}.type: the sse transport is not supported (use http or stdio)")
    if kind not in ("stdio", "http", "streamable-http", "streamableHttp"):
        raise McpConfigError(f"{here}.type must be 'stdio' or 'http', not {_shown(kind)}")
    allowed = STDIO_KEYS if kind == "stdio" else HTTP_KEYS
    unknown = sorted(str(k) for k in entry if k not in allowed)
    if unknown:
        raise McpConfigError(f"{here}: unknown settings {unknown} (known: {', '.join(sorted(allowed))})")
    timeout = _timeout(entry.get("startupTimeoutS"), f"{here}.startupTimeoutS")
    call_timeout = _timeout(entry.get("toolTimeoutS"), f"{here}.toolTimeoutS", DEFAULT_TOOL_TIMEOUT_S)
    if kind == "stdio":
        command = entry.get("command")
        if not isinstance(command, str) or not command or "\0" in command:
            raise McpConfigError(f"{here}.command must be a non-empty string")
        args = entry.get("args")
        if args is None:
            args = []
        if not isinstance(args, list) or not all(isinstance(a, str) and "\0" not in a for a in args):
            raise McpConfigError(f"{here}.args must be an array of strings")
        env = _pairs_object(entry.get("env"), f"{here}.env")
        cwd = entry.get("cwd")
        if cwd is not None and (not isinstance(cwd, str) or not cwd or "\0" in cwd):
            raise McpConfigError(f"{here}.cwd must be a path (a non-empty string)")
        max_bytes = _byte_count(entry.get("maxMessageBytes"), f"{here}.maxMessageBytes")
        sandbox = _server_sandbox(entry.get("sandbox"), f"{here}.sandbox")
        return StdioServer(key, command, tuple(args), env, cwd, timeout, call_timeout, max_bytes, sandbox)
    url = _url(entry.get("url"), f"{here}.url")
    headers = _pairs_object(entry.get("headers"), f"{here}.headers")
    return HttpServer(key, url, headers, timeout, call_timeout)


def parse_acp_servers(raw: Any, where: str = "mcpServers") -> dict[str, ServerConfig]:
    """ACP's list shape (`McpServer[]`): stdio entries `{name, command, args, env: [{name, value}]}`,
    `{type: "http", name, url, headers: [{name, value}]}`. SSE entries are refused (not advertised)."""
    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise McpConfigError(f"{where} must be an array")
    out: dict[str, ServerConfig] = {}
    for index, entry in enumerate(raw):
        here = f"{where}[{index}]"
        if not isinstance(entry, Mapping):
            raise McpConfigError(f"{here} must be an object")
        key = _key(entry.get("name"), f"{here}.name")
        kind = entry.get("type", "stdio")
        timeout = DEFAULT_STARTUP_TIMEOUT_S
        if kind == "stdio":
            command = entry.get("command")
            if not isinstance(command, str) or not command or "\0" in command:
                raise McpConfigError(f"{here}.command must be a non-empty string")
            args = entry.get("args") or []
            if not isinstance(args, list) or not all(isinstance(a, str) and "\0" not in a for a in args):
                raise McpConfigError(f"{here}.args must be an array of strings")
            env = _pairs_list(entry.get("env"), f"{here}.env")
            out[key] = StdioServer(key, command, tuple(args), env, None, timeout)
        elif kind == "http":
            url = _url(entry.get("url"), f"{here}.url")
            out[key] = HttpServer(key, url, _pairs_list(entry.get("headers"), f"{here}.headers"), timeout)
        else:
            raise McpConfigError(f"{here}.type {_shown(kind)} is not supported (stdio and http are)")
    return out


def load_file_servers(state_dir: str | Path) -> dict[str, ServerConfig | None]:
    """`mcpServers` of `<state_dir>/config.json` (nothing when the file or the key is absent)."""
    path = Path(state_dir) / CONFIG_FILE
    try:
        data = read_config_file(state_dir)
    except ConfigFileError as exc:
        raise McpConfigError(str(exc)) from exc
    return parse_servers(data.get("mcpServers"), f"{path}: mcpServers")


def _key(name: Any, where: str) -> str:
    if not isinstance(name, str) or not name.strip():
        raise McpConfigError(f"{where} must be a non-empty string, not {_shown(name)}")
    return server_key(name.strip())


def _url(url: Any, where: str) -> str:
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise McpConfigError(f"{where} must be an http:// or https:// URL, not {_shown(url)}")
    return url


def _server_sandbox(value: Any, where: str) -> str | None:
    if value is None or value is False:
        return None
    if value is True:
        return SESSION_MODE
    if value in SERVER_SANDBOX_MODES:
        return str(value)
    raise McpConfigError(
        f"{where} must be true, false, 'workspace-write' or 'read-only' (false: unconfined), "
        f"not {_shown(value)}"
    )


def _byte_count(value: Any, where: str) -> int:
    if value is None:
        return DEFAULT_MAX_MESSAGE_BYTES
    if isinstance(value, bool) or not isinstance(value, int) or value < 1024:
        raise McpConfigError(f"{where} must be a whole number of bytes, at least 1024, not {_shown(value)}")
    return value


def _timeout(value: Any, where: str, default: float = DEFAULT_STARTUP_TIMEOUT_S) -> float:
    if value is None:
        return default
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise McpConfigError(f"{where} must be a positive number of seconds, not {_shown(value)}")
    return float(value)


def _pairs_object(value: Any, where: str) -> tuple[tuple[str, str], ...]:
    if value is None:
        return ()
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) and "\0" not in k + v for k, v in value.items()
    ):
        raise McpConfigError(f"{where} must be an object of strings")
    return tuple((str(k), str(v)) for k, v in value.items())


def _pairs_list(value: Any, where: str) -> tuple[tuple[str, str], ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise McpConfigError(f"{where} must be an array of {{name, value}}")
    out = []
    for item in value:
        if not (
            isinstance(item, Mapping)
            and isinstance(item.get("name"), str)
            and isinstance(item.get("value"), str)
            and "\0" not in item["name"] + item["value"]
        ):
            raise McpConfigError(f"{where} must be an array of {{name, value}} strings")
        out.append((item["name"], item["value"]))
    return tuple(out)


def _shown(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
