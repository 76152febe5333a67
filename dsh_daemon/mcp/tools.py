"""An MCP server's tools through the tool seam: `mcp__{server}__{tool}` with the server's JSON schema;
a call's result (text; images, audio and binary resources as a short reference; `isError`) becomes
the tool result. A tool whose server is not running stays known (a call to it fails with
`MCP_UNAVAILABLE`) but is no longer offered to the model (`McpToolRegistry.specs`)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping
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

    async def call(
        self, tool: str, arguments: Mapping[str, Any], progress: Progress | None = None
    ) -> CallToolResult: ...


Progress = Callable[[float, float | None, str | None], None]  # done, total, message


def progress_line(done: float, total: float | None, message: str | None) -> str:
    """`[progress 3/10] indexing src/` (a line of the call's live output)."""
    amount = f"{done:g}/{total:g}" if total else f"{done:g}"
    return f"[progress {amount}]{' ' + message if message else ''}\n"


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

    @property
    def title(self) -> str:
        """How the tool is named to a person: "server: tool"."""
        return f"{self.server.name}: {self.mcp_name}"

    async def execute(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        if not self.server.running:
            return ToolOutcome.error(f"Error: {self.server.unavailable_reason()}", UNAVAILABLE)

        def progress(done: float, total: float | None, message: str | None) -> None:
            # The server's `notifications/progress` for this call, shown live as the call's output.
            ctx.emit_output(progress_line(done, total, message))

        try:
            result = await ctx.signal.race(self.server.call(self.mcp_name, args, progress))
        except ServerGoneError as exc:
            return ToolOutcome.error(f"Error: {exc}", UNAVAILABLE)
        except McpCallError as exc:
            return ToolOutcome.error(f"Error: MCP server {self.server.name!r}: {exc}", PROTOCOL_ERROR)
        return outcome_of(result, self.title)


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


def outcome_of(result: CallToolResult, origin: str = "an MCP tool") -> ToolOutcome:
    """Text content as text; everything else as a short note the model can read (no DeepSeek model
    takes images), and, for the editor to show, as the MCP content blocks themselves in the result's
    `meta.mcpContent` (images, resource links, embedded resources: MCP's shapes are ACP's). `origin`
    names the tool in the notes ("fix: picture")."""
    parts: list[str] = []
    shown: list[dict[str, Any]] = []
    budget = [MAX_SHOWN_BYTES]
    for block in result.content:
        parts.append(_block_text(block, origin))
        displayed = _displayed(block, budget)
        if displayed is not None:
            shown.append(displayed)
    if not parts and result.structuredContent is not None:
        parts.append(json.dumps(result.structuredContent, ensure_ascii=False))
    text = "\n".join(p for p in parts if p) or (
        "(no output)" if not result.isError else "(error, no message)"
    )
    meta = FrozenDict({"mcpContent": freeze_json(shown)}) if shown else None
    if result.isError:
        return ToolOutcome((TextBlock(f"Error: {text}"),), True, TOOL_ERROR, meta)
    return ToolOutcome((TextBlock(text),), meta=meta)


MAX_SHOWN_BYTES = 4 << 20  # base64 of images and binary resources kept for the editor, per result


def size_text(size: int) -> str:
    if size < 1024:
        return f"{size} bytes"
    if size < 1 << 20:
        return f"{size / 1024:.0f} KB"
    return f"{size / (1 << 20):.1f} MB"


def _block_text(block: Any, origin: str) -> str:
    kind = getattr(block, "type", None)
    if kind == "text":
        return str(block.text)
    if kind in ("image", "audio"):
        size = len(block.data) * 3 // 4  # base64
        return f"[{block.mimeType}, {size_text(size)} from {origin}; not readable by this text-only model]"
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
        return f"[resource {resource.uri}: {mime}, {size_text(len(blob) * 3 // 4)} from {origin}; not shown]"
    return f"[{kind or 'unknown'} content; not shown]"


def _displayed(block: Any, budget: list[int]) -> dict[str, Any] | None:
    """An MCP content block the editor can show beside the text: an image (while its data fits the
    result's budget), a resource link, an embedded resource (binary ones within the budget)."""
    kind = getattr(block, "type", None)
    if kind not in ("image", "resource_link", "resource"):
        return None
    if kind == "image" and len(block.data) > budget[0]:
        return None
    if kind == "resource" and len(getattr(block.resource, "blob", "") or "") > budget[0]:
        return None
    shown: dict[str, Any] = block.model_dump(mode="json", by_alias=True, exclude_none=True)
    shown.pop("_meta", None)
    shown.pop("annotations", None)
    budget[0] -= len(shown.get("data", "")) + len(shown.get("resource", {}).get("blob", ""))
    return shown
