"""The child's first message: the parent's prompt and the files the parent chose, read now from the
parent's workspace through the daemon's one safe reader (the child starts with them, not with the
parent's history)."""

from __future__ import annotations

from collections.abc import Sequence

from dsh_daemon.tools.errors import InvalidArgumentsError
from dsh_daemon.tools.safefile import read_prefix_async
from dsh_daemon.tools.workspace import Workspace

MAX_FILES = 20
MAX_FILE_BYTES = 64_000  # per file; the child reads the rest with its own tools


async def brief(prompt: str, files: Sequence[str], workspace: Workspace) -> str:
    """The prompt, then each chosen file (its first `MAX_FILE_BYTES`). A path outside the workspace, or
    one that is not a regular file, is the parent's error (`OUTSIDE_WORKSPACE`, `NOT_A_FILE`, …):
    no child starts."""
    if len(files) > MAX_FILES:
        raise InvalidArgumentsError(f"'files' may name at most {MAX_FILES} files")
    parts = [prompt]
    for name in files:
        path = workspace.resolve(name)
        shown = workspace.display(path)
        read = await read_prefix_async(path, shown, MAX_FILE_BYTES, workspace)
        text = read.data.decode("utf-8", errors="replace")
        note = f" (its first {MAX_FILE_BYTES} bytes)" if read.truncated else ""
        parts.append(f'<file path="{shown}"{note}>\n{text}\n</file>')
    return "\n\n".join(parts)
