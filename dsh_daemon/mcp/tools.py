"""An MCP server's tools through the tool seam: `mcp__{server}__{tool}` with the server's JSON schema;
a call's result (text; images, audio and binary resources as a short reference; `isError`) becomes
the tool result. A tool whose server is not running stays known (a call to it fails with
`MCP_UNAVAILABLE`) but is no longer offered to the model (`McpToolRegistry.specs`)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from dsh_daemon.agent.tools import ToolContext, ToolOutcome, ToolRegistry
from dsh_daemon.model.jsonvalue import FrozenDict, freeze_json
from dsh_daemon.model.messages import TextBlock
from dsh_daemon.model.provider import ToolSpec

if TYPE_CHECKING:
    from mcp.types import CallToolResult

PREFIX = "mcp__"
MAX_TOOL_NAME = 64  # what OpenAI-compatible APIs accept: ^[a-zA-Z0-9_-]{1,64}$
MAX_DESCRIPTION = 4_000
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")

# Error codes of MCP tool results (protocol.md §12).
UNAVAILABLE = "MCP_UNAVAILABLE"  # the server is not running (failed to start, exited, stopped)
TOOL_ERROR = "MCP_TOOL_ERROR"  # the tool ran and reported an error (`isError`)
PROTOCOL_ERROR = "MCP_ERROR"  # the server answered the call with a JSON-RPC error, or timed out


def tool_name(server: str, tool: str) -> str:
    """`mcp__{server}__{tool}`, safe for the model API; a name too long is cut and given a hash."""
    name = f"{PREFIX}{server}__{_UNSAFE.sub('_', tool)}"
    if len(name) <= MAX_TOOL_NAME:
        return name
    digest = hashlib.sha256(tool.encode()).hexdigest()[:8]
    return f"{name[: MAX_TOOL_NAME - 9]}_{digest}"


class McpToolRegistry(ToolRegistry):
    """A registry whose MCP tools come and go with their server: only tools that can run are
    offered; the others stay known, so a call to one fails with a clear error, not UNKNOWN_TOOL."""

    def specs(self) -> tuple[ToolSpec, ...]:
        offered = self.offered
        return tuple(
            t.spec
            for name, t in self.tools.items()
            if getattr(t, "offered", True) and (offered is None or offered(name))
        )


class Caller(Protocol):
    """What a tool needs of its server's connection."""

    name: str

    @property
    def running(self) -> bool: ...

    def unavailable_reason(self) -> str: ...

    async def call(self, tool: str, arguments: Mapping[str, Any]) -> CallToolResult: ...


@dataclass(eq=False)
class McpTool:
    spec: ToolSpec
    server: Caller
    mcp_name: str  # the tool's own name on its server
    parallel_safe: bool = False  # unknown side effects: each call runs alone
    truncation_hint: str = "ask the tool for less (a narrower query, a smaller range)"

    @property
    def offered(self) -> bool:
        return self.server.running

    async def execute(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        if not self.server.running:
            return ToolOutcome.error(f"Error: {self.server.unavailable_reason()}", UNAVAILABLE)
        try:
            result = await ctx.signal.race(self.server.call(self.mcp_name, args))
        except ServerGoneError as exc:
            return ToolOutcome.error(f"Error: {exc}", UNAVAILABLE)
        except McpCallError as exc:
            return ToolOutcome.error(f"Error: MCP server {self.server.name!r}: {exc}", PROTOCOL_ERROR)
        return outcome_of(result)


class ServerGoneError(Exception):
    """The server stopped (or was never running) before the call was answered."""


class McpCallError(Exception):
    """The server answered with an error (JSON-RPC error, invalid params, a timeout)."""


def make_spec(name: str, tool: Any) -> ToolSpec:
    """The model-facing spec of an MCP `Tool` (its name, description and input schema)."""
    description = tool.description or tool.title or f"MCP tool {tool.name}"
    if len(description) > MAX_DESCRIPTION:
        description = description[: MAX_DESCRIPTION - 1] + "…"
    schema = dict(tool.inputSchema or {})
    schema.setdefault("type", "object")
    if schema.get("type") == "object":
        schema.setdefault("properties", {})
    parameters: FrozenDict = freeze_json(schema)
    return ToolSpec(name, description, parameters)


def outcome_of(result: CallToolResult) -> ToolOutcome:
    """Text content as text; everything else as a short reference the model can read."""
    parts: list[str] = []
    for block in result.content:
        parts.append(_block_text(block))
    if not parts and result.structuredContent is not None:
        parts.append(json.dumps(result.structuredContent, ensure_ascii=False))
    text = "\n".join(p for p in parts if p) or (
        "(no output)" if not result.isError else "(error, no message)"
    )
    if result.isError:
        return ToolOutcome((TextBlock(f"Error: {text}"),), True, TOOL_ERROR)
    return ToolOutcome((TextBlock(text),))


def _block_text(block: Any) -> str:
    kind = getattr(block, "type", None)
    if kind == "text":
        return str(block.text)
    if kind in ("image", "audio"):
        size = len(block.data) * 3 // 4  # base64
        return f"[{kind}: {block.mimeType}, about {size:,} bytes; not shown to the model]"
    if kind == "resource_link":
        title = f" ({block.name})" if getattr(block, "name", None) else ""
        return f"[resource link: {block.uri}{title}]"
    if kind == "resource":
        resource = block.resource
        text = getattr(resource, "text", None)
        if isinstance(text, str):
            return f"[resource {resource.uri}]\n{text}"
        blob = getattr(resource, "blob", "") or ""
        mime = getattr(resource, "mimeType", None) or "application/octet-stream"
        return f"[resource {resource.uri}: {mime}, about {len(blob) * 3 // 4:,} bytes; not shown]"
    return f"[{kind or 'unknown'} content; not shown]"
