"""list_dir and find_files: read-only views of the workspace tree."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from dsh_daemon.agent.signal import AbortSignal
from dsh_daemon.agent.tools import ToolContext, ToolOutcome
from dsh_daemon.tools.base import ToolBase, get_str, make_spec
from dsh_daemon.tools.errors import FileToolError
from dsh_daemon.tools.limits import ToolLimits
from dsh_daemon.tools.walk import compile_glob, walk_files
from dsh_daemon.tools.workspace import Workspace

T = TypeVar("T")


async def run_stoppable(fn: Callable[[threading.Event], T], signal: AbortSignal) -> T:
    """Run a blocking walk in a worker thread; a cancelled turn stops it at its next entry."""
    signal.check()  # before creating the coroutine, so an aborted call leaves none un-awaited
    stop = threading.Event()
    try:
        return await signal.race(asyncio.to_thread(fn, stop))
    finally:
        stop.set()


def list_directory(workspace: Workspace, path: Path, max_entries: int) -> str:
    """A resolved directory's entries, one a line (subdirectories end with '/', symlinks show their
    target), at most `max_entries` of them; FileToolError when it is missing or not a directory."""
    shown = workspace.display(path)
    if not path.exists():
        raise FileToolError(f"{shown} does not exist", "NOT_FOUND")
    if not path.is_dir():
        raise FileToolError(f"{shown} is not a directory (use read_file)", "NOT_A_DIRECTORY")
    with os.scandir(path) as listing:
        entries = sorted(listing, key=lambda e: e.name)
    lines: list[str] = []
    for entry in entries[:max_entries]:
        if entry.is_symlink():
            try:
                target = os.readlink(entry.path)
            except OSError:
                target = "?"
            lines.append(f"{entry.name} -> {target}")
        elif entry.is_dir(follow_symlinks=False):
            lines.append(f"{entry.name}/")
        else:
            lines.append(entry.name)
    header = f"{shown}/ ({len(entries)} entries)"
    if len(entries) > len(lines):
        lines.append(f"[listing capped at {len(lines)} of {len(entries)} entries]")
    if not entries:
        lines.append("(empty directory)")
    return "\n".join([header, *lines]) + "\n"


class ListDirTool(ToolBase):
    truncation_hint = "narrow the path or the pattern"
    spec = make_spec(
        "list_dir",
        "List a directory in the workspace: subdirectories end with '/', symlinks show their target.",
        {
            "path": {
                "type": "string",
                "description": "Directory, relative to the session directory (default '.').",
            }
        },
        [],
    )
    parallel_safe = True

    def __init__(self, workspace: Workspace, limits: ToolLimits) -> None:
        self.workspace = workspace
        self.limits = limits

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        path = self.workspace.resolve(get_str(args, "path", "."))
        return ToolOutcome.text(await asyncio.to_thread(self._list, path))

    def _list(self, path: Path) -> str:
        return list_directory(self.workspace, path, self.limits.list_max_entries)


class FindFilesTool(ToolBase):
    truncation_hint = "narrow the path or the pattern"
    spec = make_spec(
        "find_files",
        "Find files in the workspace by glob ('**/*.py', 'src/**/test_*.{ts,tsx}'; a pattern without '/' "
        "matches file names at any depth). Skips .git, node_modules and similar. Paths sorted by name.",
        {
            "pattern": {"type": "string", "description": "Glob, relative to `path`."},
            "path": {"type": "string", "description": "Directory to search (default '.')."},
        },
        ["pattern"],
    )
    parallel_safe = True

    def __init__(self, workspace: Workspace, limits: ToolLimits) -> None:
        self.workspace = workspace
        self.limits = limits

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        regex = compile_glob(get_str(args, "pattern", allow_empty=False))
        base = self.workspace.resolve(get_str(args, "path", "."))
        if not base.is_dir():
            raise FileToolError(f"{self.workspace.display(base)} is not a directory", "NOT_A_DIRECTORY")
        cap = self.limits.find_max_results

        def find(stop: threading.Event) -> list[str]:
            found: list[str] = []
            for path, rel in walk_files(base, stop):
                if regex.match(rel):
                    found.append(self.workspace.display(path))
                    if len(found) > cap:
                        break
            return found

        found = await run_stoppable(find, ctx.signal)
        if not found:
            return ToolOutcome.text("No files found.")
        text = "\n".join(found[:cap]) + "\n"
        if len(found) > cap:
            text += f"[results capped at {cap}; narrow the pattern or the path]\n"
        return ToolOutcome.text(text)
