"""Workspace confinement: every path a tool touches is resolved (symlinks included) and must stay
inside one of the session's roots.

Resolution uses `os.path.realpath`, so `..`, absolute paths and symlinks (including dangling ones and
ones created mid-session) are judged by where they really lead *at the moment of the call*; a path that
leads outside is refused before anything opens it. Relative paths are taken from the session cwd.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from dsh_daemon.tools.errors import InvalidArgumentsError, OutsideWorkspaceError


def _real(path: str | os.PathLike[str]) -> Path:
    return Path(os.path.realpath(os.fspath(path)))


class Workspace:
    def __init__(self, roots: Sequence[str | os.PathLike[str]], cwd: str | os.PathLike[str] | None = None):
        if not roots:
            raise ValueError("a workspace needs at least one root")
        self.roots: tuple[Path, ...] = tuple(_real(root) for root in roots)
        for root in self.roots:
            if not root.is_dir():
                raise ValueError(f"workspace root {root} is not a directory")
        self.cwd: Path = _real(cwd) if cwd is not None else self.roots[0]
        if not self.contains(self.cwd):
            raise ValueError(f"session cwd {self.cwd} is outside the workspace roots")

    def replace_roots(self, roots: Sequence[str | os.PathLike[str]]) -> None:
        """The editor's workspace folders changed. The session cwd always stays a root (a session never
        loses the directory it was opened in); folders that are not directories are skipped."""
        real = [_real(root) for root in roots]
        kept = [root for root in real if root.is_dir()]
        if not any(self.cwd == root or self.cwd.is_relative_to(root) for root in kept):
            kept.append(self.cwd)
        self.roots = tuple(dict.fromkeys(kept))

    def contains(self, real_path: Path) -> bool:
        """Whether an already-resolved path lies inside a root."""
        return any(real_path == root or real_path.is_relative_to(root) for root in self.roots)

    def resolve(self, path: str | os.PathLike[str]) -> Path:
        """The real path of `path` (relative to the cwd), or OutsideWorkspaceError."""
        text = os.fspath(path)
        if not isinstance(text, str) or not text.strip():
            raise InvalidArgumentsError("path must be a non-empty string")
        if "\0" in text:
            raise InvalidArgumentsError("path must not contain NUL characters")
        joined = Path(text) if os.path.isabs(text) else self.cwd / text
        real = _real(joined)
        if not self.contains(real):
            shown = f"{text} (resolves to {real})" if str(real) != os.path.normpath(str(joined)) else text
            raise OutsideWorkspaceError(
                f"{shown} is outside the workspace ({', '.join(str(r) for r in self.roots)}); "
                "tools may only touch files inside it"
            )
        return real

    def display(self, real_path: Path) -> str:
        """How a path is shown to the model: relative to the cwd when below it, else absolute."""
        if real_path == self.cwd:
            return "."
        if real_path.is_relative_to(self.cwd):
            return str(real_path.relative_to(self.cwd))
        return str(real_path)

    def verify_open(self, fd: int, expected: Path) -> None:
        """Re-check an opened file descriptor, closing the window in which a path component could be
        swapped for a symlink between `resolve` and `open`. Only where /proc exposes fd paths."""
        link = f"/proc/self/fd/{fd}"
        try:
            actual = Path(os.readlink(link))
        except OSError:
            return  # no /proc (macOS): resolve-time check only
        if not self.contains(actual):
            raise OutsideWorkspaceError(f"{expected} changed to lead outside the workspace while opening it")
