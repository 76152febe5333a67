"""A real MCP server (the `mcp` package's FastMCP) over stdio, for the daemon's MCP client tests.

Environment: `FIXTURE_PIDS` (a path): at start, spawn a grandchild that outlives this server unless
its tree is killed, and write "<server pid> <grandchild pid>" there. `FIXTURE_FAIL_START` (a message):
print it on stderr and exit 2 before serving. `FIXTURE_HTTP_PORT`: serve streamable HTTP on
127.0.0.1:<port>/mcp instead of stdio.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from typing import Any

from mcp.server.fastmcp import Context, FastMCP, Image
from mcp.types import EmbeddedResource, ImageContent, ResourceLink, TextContent, TextResourceContents

# A 1x1 PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)

server = FastMCP("fixture", log_level="WARNING")


@server.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return f"echo: {text}"


@server.tool()
def fail(message: str) -> str:
    """Always fails with the message."""
    raise ValueError(message)


@server.tool()
def crash() -> str:
    """End the server process at once, without answering."""
    os._exit(3)


@server.tool()
def picture() -> Image:
    """A tiny PNG."""
    return Image(data=PNG, format="png")


@server.tool()
def chart() -> list[Any]:
    """Words, a PNG, a link to a file and an embedded text resource."""
    return [
        TextContent(type="text", text="the chart:"),
        ImageContent(type="image", data=base64.b64encode(PNG * 200).decode(), mimeType="image/png"),
        ResourceLink(
            type="resource_link", uri="file:///data/report.csv", name="report.csv", mimeType="text/csv"
        ),
        EmbeddedResource(
            type="resource",
            resource=TextResourceContents(
                uri="file:///data/notes.md", mimeType="text/markdown", text="# Notes\nfine"
            ),
        ),
    ]


@server.tool()
async def slow(steps: int, ctx: Context) -> str:  # type: ignore[type-arg]
    """Report progress `steps` times, then answer."""
    for i in range(steps):
        await ctx.report_progress(i + 1, steps, f"step {i + 1}")
    return "slow done"


@server.tool()
def big(size: int) -> str:
    """`size` characters of text."""
    return "".join(f"line {i}\n" for i in range(size // 8 + 1))[:size]


def main() -> None:
    message = os.environ.get("FIXTURE_FAIL_START")
    if message:
        print(message, file=sys.stderr, flush=True)
        sys.exit(2)
    pids = os.environ.get("FIXTURE_PIDS")
    if pids:
        child = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(600)"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        with open(pids, "w") as handle:
            handle.write(f"{os.getpid()} {child.pid}")
    port = os.environ.get("FIXTURE_HTTP_PORT")
    if port:
        server.settings.host = "127.0.0.1"
        server.settings.port = int(port)
        server.run("streamable-http")
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()
