"""A real MCP server (FastMCP over stdio) that tries what a confined server must not do, for the
tests of `mcpServers.NAME.sandbox` (issue 41.4): write a file anywhere, read one, report a variable.

Environment: `BOX_MARK` (a path): written at start, before serving (it shows the process ran).
"""

from __future__ import annotations

import os

from mcp.server.fastmcp import FastMCP

server = FastMCP("box", log_level="WARNING")


@server.tool()
def write(path: str, text: str) -> str:
    """Write `text` to the file at `path`."""
    try:
        with open(path, "w") as handle:
            handle.write(text)
    except OSError as exc:
        return f"refused: {exc.strerror}"
    return f"wrote {path}"


@server.tool()
def read(path: str) -> str:
    """The text of the file at `path`."""
    try:
        with open(path) as handle:
            return f"read: {handle.read()}"
    except OSError as exc:
        return f"refused: {exc.strerror}"


@server.tool()
def env(name: str) -> str:
    """The value of the environment variable `name`."""
    return f"{name}={os.environ.get(name, '<unset>')}"


def main() -> None:
    mark = os.environ.get("BOX_MARK")
    if mark:
        with open(mark, "w") as handle:
            handle.write(str(os.getpid()))
    server.run("stdio")


if __name__ == "__main__":
    main()
