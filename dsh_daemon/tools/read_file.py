"""read_file: numbered lines of a text file, the editor's unsaved text first, with line ranges and
caps. Line endings are kept verbatim (CRLF stays CRLF) so what the model quotes back matches."""

from __future__ import annotations

import asyncio
import io
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from dsh_daemon.agent.tools import ToolContext, ToolOutcome
from dsh_daemon.tools.base import ToolBase, get_int, get_str, make_spec
from dsh_daemon.tools.documents import DocumentSource
from dsh_daemon.tools.errors import FileToolError
from dsh_daemon.tools.limits import ToolLimits
from dsh_daemon.tools.safefile import open_regular
from dsh_daemon.tools.textfiles import SNIFF_BYTES, looks_binary
from dsh_daemon.tools.tracking import ReadTracker
from dsh_daemon.tools.workspace import Workspace

_TERMINATORS = ("\r\n", "\n", "\r")


def _split_terminator(line: str) -> tuple[str, str]:
    for end in _TERMINATORS:
        if line.endswith(end):
            return line[: -len(end)], end
    return line, ""


def render_lines(lines: Iterable[str], offset: int, limit: int, limits: ToolLimits, *, scan_all: bool) -> str:
    """Lines `offset`..`offset+limit-1` numbered `N<TAB>`; stops at the character budget. With
    `scan_all` the remaining lines are only counted (small files), otherwise reading stops early."""
    out: list[str] = []
    used = 0
    number = 0
    last = 0
    capped = False
    more = False
    for number, line in enumerate(lines, start=1):
        if number < offset:
            continue
        if last - offset + 1 >= limit or capped:
            more = True
            if not scan_all:
                break
            continue
        body, end = _split_terminator(line)
        if len(body) > limits.read_line_chars:
            cut = len(body) - limits.read_line_chars
            body = f"{body[: limits.read_line_chars]}… [line cut: {cut} more chars]"
        entry = f"{number:>6}\t{body}{end}"
        if out and used + len(entry) > limits.read_max_chars:
            capped = True
            more = True
            if not scan_all:
                break
            continue
        out.append(entry)
        used += len(entry)
        last = number
    total = number if scan_all else None
    if offset > 1 and last == 0:
        shown_total = total if total is not None else "fewer"
        raise FileToolError(f"offset {offset} is past the end of the file ({shown_total} lines)", "BAD_RANGE")
    text = "".join(out)
    if text and not text.endswith(("\n", "\r")):
        text += "\n"
    if not out:
        text = "(empty file)\n"
    elif more:
        of = f" of {total}" if total is not None else ""
        why = f"output capped at {limits.read_max_chars} characters; " if capped else ""
        text += f"[showing lines {offset}-{last}{of}; {why}continue with offset={last + 1}]\n"
    return text


class ReadFileTool(ToolBase):
    truncation_hint = "read the part you need with read_file offset and limit"
    spec = make_spec(
        "read_file",
        "Read a text file in the workspace. Returns numbered lines ('N<TAB>text', line endings kept). "
        "Shows the editor's unsaved text when the file is open there. Long files: use offset/limit.",
        {
            "path": {"type": "string", "description": "File path, relative to the session directory."},
            "offset": {"type": "integer", "minimum": 1, "description": "First line to show (1-based)."},
            "limit": {"type": "integer", "minimum": 1, "description": "How many lines to show."},
        },
        ["path"],
    )
    parallel_safe = True

    def __init__(
        self, workspace: Workspace, documents: DocumentSource, tracker: ReadTracker, limits: ToolLimits
    ):
        self.workspace = workspace
        self.documents = documents
        self.tracker = tracker
        self.limits = limits

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        path = self.workspace.resolve(get_str(args, "path", allow_empty=False))
        offset = max(1, get_int(args, "offset", 1, minimum=0))
        limit = get_int(args, "limit", self.limits.read_default_lines, minimum=1)
        shown = self.workspace.display(path)
        document = self.documents.text_for(path)
        if document is not None:
            rendered = render_lines(
                io.StringIO(document, newline=""), offset, limit, self.limits, scan_all=True
            )
            self.tracker.record(path, document)
            return ToolOutcome.text(rendered + "[unsaved text from the editor]\n")
        text, whole, stat, lossy = await asyncio.to_thread(self._read_disk, path, shown, offset, limit)
        self.tracker.record(path, whole, stat)
        if lossy:
            text += "[not valid UTF-8: undecodable bytes are shown as U+FFFD]\n"
        return ToolOutcome.text(text)

    def _read_disk(
        self, path: Path, shown: str, offset: int, limit: int
    ) -> tuple[str, str | None, os.stat_result, bool]:
        """(rendered text, whole text when the file was small enough to hash, stat, lossy decode)."""
        fd = open_regular(path, shown, self.workspace)
        with os.fdopen(fd, "rb") as raw:
            stat = os.fstat(raw.fileno())
            head = raw.read(SNIFF_BYTES)
            if looks_binary(head):
                raise FileToolError(f"{shown} is a binary file ({stat.st_size} bytes); not shown", "BINARY")
            if stat.st_size <= self.limits.whole_file_bytes:
                data = head + raw.read(self.limits.whole_file_bytes + 1 - len(head))
                try:
                    whole: str | None = data.decode("utf-8")
                    lossy = False
                except UnicodeDecodeError:
                    whole, lossy = None, True
                text = whole if whole is not None else data.decode("utf-8", errors="replace")
                rendered = render_lines(
                    io.StringIO(text, newline=""), offset, limit, self.limits, scan_all=True
                )
                return rendered, whole, stat, lossy
            # A huge file: decode only as far as the requested range (never the whole file).
            raw.seek(0)
            stream = io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline="")
            rendered = render_lines(stream, offset, limit, self.limits, scan_all=False)
            note = f"[large file: {stat.st_size} bytes]\n"
            return rendered + note, None, stat, False
