"""Project instructions: the project's own notes for agents, found from the workspace root down to
the session cwd and merged into the system prompt (docs/design.md §9).

Per directory, the first of `AGENTS.md`, `CLAUDE.md`, `.github/copilot-instructions.md` that is a
regular file counts (the later names are fallbacks for projects written for other agents). Files are
merged in order, root first, each under its path as a heading; a nearer file comes later, so where two
disagree the one nearer the cwd is read last. The merged text is capped (`max_chars` of file content in
all) and a cut is visible: a note says what was cut and that `read_file` shows the rest.

Re-reading is cheap: `ProjectInstructions.load` stats every candidate path and reads the files again
only when a path's (mtime, ctime, size, inode) changed, so it can run before every model request. A
changed file changes the system prompt, hence the durable `request/header`, so rebuilt requests still
match what was sent.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

CANDIDATES: tuple[str, ...] = ("AGENTS.md", "CLAUDE.md", os.path.join(".github", "copilot-instructions.md"))
DEFAULT_MAX_CHARS = 32_000
HEADING = "# Project instructions"
PREAMBLE = (
    "These are the project's own instructions, from files in the workspace (root first, then the "
    "directories down to the working directory). Follow them; where two disagree, the one nearer the "
    "working directory wins."
)

_Signature = tuple[int, int, int, int] | None


@dataclass(frozen=True, slots=True)
class InstructionFile:
    path: Path
    text: str  # decoded, possibly only a prefix (see `size`)
    size: int  # bytes on disk


def instruction_dirs(cwd: str | os.PathLike[str], roots: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """The directories searched, root first: from the deepest root that contains `cwd` down to `cwd`
    itself; just `cwd` when no root contains it."""
    here = Path(os.path.realpath(cwd))
    containing = [
        real
        for real in (Path(os.path.realpath(root)) for root in roots)
        if here == real or here.is_relative_to(real)
    ]
    if not containing:
        return [here]
    root = max(containing, key=lambda p: len(p.parts))
    dirs = [root]
    for part in here.relative_to(root).parts:
        dirs.append(dirs[-1] / part)
    return dirs


def _signature(path: Path) -> _Signature:
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(st.st_mode):
        return None  # a directory or a FIFO is not an instruction file (a FIFO read would block)
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)


def _read(path: Path, size: int, limit_chars: int) -> str | None:
    """At most about `limit_chars` characters of the file (UTF-8, undecodable bytes replaced)."""
    try:
        # Non-blocking, and checked again once open: the path may have become a FIFO since its stat.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            data = handle.read(min(size, limit_chars * 4 + 4))
    except OSError:
        return None
    return data.decode("utf-8", errors="replace")


def render(files: Sequence[InstructionFile], max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """The merged section ("" when there are no files), file content capped at `max_chars` in all."""
    if not files:
        return ""
    parts = [HEADING, PREAMBLE]
    left = max_chars
    for file in files:
        text = file.text.strip("\n").rstrip()
        whole = len(file.text.encode("utf-8", errors="replace")) >= file.size
        if left <= 0:
            parts.append(
                f"[omitted: {file.path} ({file.size} bytes): the project instructions are capped at "
                f"{max_chars} characters; read the file with read_file]"
            )
            continue
        parts.append(f"## {file.path}")
        if len(text) <= left and whole:
            parts.append(text)
            left -= len(text)
            continue
        shown = text[:left]
        parts.append(
            f"{shown}\n\n[truncated: the first {len(shown)} characters of {file.path} ({file.size} bytes) "
            f"are shown; the project instructions are capped at {max_chars} characters; read the file "
            "with read_file for the rest]"
        )
        left = 0
    return "\n\n".join(parts)


class ProjectInstructions:
    """The instruction files of one session, re-read only when one of them changes."""

    def __init__(self, max_chars: int = DEFAULT_MAX_CHARS) -> None:
        self.max_chars = max_chars
        self._key: tuple[object, ...] | None = None
        self._text = ""
        self.reads = 0  # how many times the files were actually read (tests, logs)

    def load(self, cwd: str | os.PathLike[str], roots: Sequence[str | os.PathLike[str]]) -> str:
        dirs = instruction_dirs(cwd, roots)
        found = [[(d / name, _signature(d / name)) for name in CANDIDATES] for d in dirs]
        key = tuple(tuple(candidates) for candidates in found)
        if key == self._key:
            return self._text
        files: list[InstructionFile] = []
        for candidates in found:
            for path, signature in candidates:
                text = None if signature is None else _read(path, signature[2], self.max_chars)
                if text is not None and signature is not None:
                    files.append(InstructionFile(path, text, signature[2]))
                    break  # the first candidate of a directory wins; the others are fallbacks
        self.reads += 1
        self._key, self._text = key, render(files, self.max_chars)
        return self._text
