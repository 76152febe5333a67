"""grep: regex search over workspace files. Uses ripgrep when it is on PATH (fast, honours ignore
files); otherwise a Python walk with the same output, order (by path) and caps. Either search stops
at `grep_timeout_s` (a huge file, a huge tree): the result is then a `TIMEOUT` error that keeps the
matches found by then and says what was being searched."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import re
import shutil
import signal
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsh_daemon.agent.tools import ToolContext, ToolOutcome
from dsh_daemon.tools.base import ToolBase, get_bool, get_opt_str, get_str, make_spec
from dsh_daemon.tools.errors import InvalidArgumentsError, ToolError
from dsh_daemon.tools.limits import ToolLimits
from dsh_daemon.tools.listing import run_stoppable
from dsh_daemon.tools.safefile import open_regular, read_prefix
from dsh_daemon.tools.textfiles import SNIFF_BYTES, looks_binary
from dsh_daemon.tools.walk import IGNORED_DIRS, GlobMatcher, compile_glob, walk_files
from dsh_daemon.tools.workspace import Workspace

_RG_LINE_LIMIT = 64 * 1024 * 1024  # one JSON line per match; minified files make long ones


@dataclass(frozen=True, slots=True)
class Match:
    path: str  # as shown to the model
    line: int
    text: str


@dataclass(frozen=True, slots=True)
class Found:
    matches: list[Match]
    timed_out: bool = False  # stopped at the time bound; `matches` are those found by then
    files_searched: int | None = None  # how many files were read (the Python search counts them)


class GrepTool(ToolBase):
    truncation_hint = "narrow the pattern, path or glob"
    spec = make_spec(
        "grep",
        "Search file contents in the workspace with a regular expression. Returns 'path:line:text' "
        "lines sorted by path. Skips binary files, .git, node_modules and similar.",
        {
            "pattern": {"type": "string", "description": "Regular expression."},
            "path": {"type": "string", "description": "File or directory to search (default '.')."},
            "glob": {"type": "string", "description": "Only files matching this glob, e.g. '*.py'."},
            "case_insensitive": {"type": "boolean", "description": "Ignore case (default false)."},
        },
        ["pattern"],
    )
    parallel_safe = True

    def __init__(self, workspace: Workspace, limits: ToolLimits, *, rg: str | bool | None = True) -> None:
        """`rg`: True finds ripgrep on PATH, a string is its path, None/False forces the fallback."""
        self.workspace = workspace
        self.limits = limits
        self.rg: str | None = shutil.which("rg") if rg is True else (rg or None)

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        pattern = get_str(args, "pattern", allow_empty=False)
        target = self.workspace.resolve(get_str(args, "path", "."))
        glob = get_opt_str(args, "glob") or None
        ignore_case = get_bool(args, "case_insensitive")
        flags = re.IGNORECASE if ignore_case else 0
        try:
            regex = re.compile(pattern, flags)
        except re.error as exc:
            raise InvalidArgumentsError(f"invalid regular expression: {exc}") from None
        glob_regex = compile_glob(glob) if glob else None
        shown = self.workspace.display(target)
        if not target.exists():
            raise ToolError(f"{shown} does not exist", "NOT_FOUND")
        cap = self.limits.grep_max_matches
        ctx.signal.check()
        if not target.is_dir():
            # A single file is opened by the one safe reader (regular files only, non-blocking open,
            # confined), never by rg: rg opens whatever path it is given, and blocks on a FIFO.
            fd = open_regular(target, shown, self.workspace)
            if self.rg is not None:
                found = await ctx.signal.race(self._ripgrep(pattern, target, None, ignore_case, cap + 1, fd))
            else:
                os.close(fd)
                found = await run_stoppable(
                    lambda stop: self._python(regex, target, None, cap + 1, stop), ctx.signal
                )
        elif self.rg is not None:
            found = await ctx.signal.race(self._ripgrep(pattern, target, glob, ignore_case, cap + 1))
        else:
            found = await run_stoppable(
                lambda stop: self._python(regex, target, glob_regex, cap + 1, stop), ctx.signal
            )
        matches = found.matches
        limit = self.limits.grep_line_chars
        lines = [
            f"{m.path}:{m.line}:{m.text if len(m.text) <= limit else m.text[:limit] + '… [cut]'}"
            for m in matches[:cap]
        ]
        if found.timed_out:
            return ToolOutcome.error(self._timeout_note(lines, pattern, shown, glob, found), "TIMEOUT")
        if not matches:
            return ToolOutcome.text("No matches.")
        if len(matches) > cap:
            lines.append(f"[results capped at {cap} matches; narrow the pattern, path or glob]")
        return ToolOutcome.text("\n".join(lines) + "\n")

    def _timeout_note(
        self, lines: list[str], pattern: str, shown: str, glob: str | None, found: Found
    ) -> str:
        where = f"{shown} (glob {glob!r})" if glob else shown
        files = "" if found.files_searched is None else f"; {found.files_searched} files searched"
        kept = f"the matches above ({len(lines)}) were found by then" if lines else "no match by then"
        note = (
            f"[grep stopped after {self.limits.grep_timeout_s:g} s (grep_timeout_s) searching {where} "
            f"for {pattern!r}{files}; {kept}, and there may be more. Narrow the path or glob, or "
            "search the file's part you need with run_command]"
        )
        return "\n".join([*lines, note]) + "\n"

    # ---- ripgrep -------------------------------------------------------------------------------------

    async def _ripgrep(
        self,
        pattern: str,
        target: Path,
        glob: str | None,
        ignore_case: bool,
        want: int,
        fd: int | None = None,
    ) -> Found:
        """rg over the directory `target` (it skips FIFOs and devices while walking), or over the file
        already open as `fd`, given to rg as its stdin (`fd` is closed here)."""
        assert self.rg is not None
        try:
            return await self._run_ripgrep(pattern, target, glob, ignore_case, want, fd)
        finally:
            if fd is not None:
                os.close(fd)

    async def _run_ripgrep(
        self, pattern: str, target: Path, glob: str | None, ignore_case: bool, want: int, fd: int | None
    ) -> Found:
        assert self.rg is not None
        argv = [self.rg, "--json", "--no-config", "--hidden", "--sort", "path", "--no-messages"]
        if glob:
            argv += ["--glob", glob]
        for name in sorted(IGNORED_DIRS):  # after the user's glob: later globs win in rg
            argv += ["--glob", f"!{name}/"]
        if ignore_case:
            argv.append("--ignore-case")
        argv += ["--regexp", pattern, "--", "-" if fd is not None else self._rg_target(target)]
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=self.workspace.cwd,
            stdin=fd if fd is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            limit=_RG_LINE_LIMIT,
        )
        matches: list[Match] = []
        try:
            async with asyncio.timeout(self.limits.grep_timeout_s):
                return await self._read_ripgrep(proc, matches, want, target if fd is not None else None)
        except TimeoutError:
            return Found(matches, timed_out=True)
        finally:
            if proc.returncode is None:
                # os.kill, not proc.kill(): Popen.kill() polls (reaps) first, racing asyncio's child
                # watcher, which then loses the exit status.
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)
                await proc.wait()

    async def _read_ripgrep(
        self, proc: asyncio.subprocess.Process, matches: list[Match], want: int, stdin_path: Path | None
    ) -> Found:
        """rg's matches, appended to `matches` as they come (so a timeout keeps those found by then)."""
        assert proc.stdout is not None and proc.stderr is not None
        while len(matches) < want:
            line = await proc.stdout.readline()
            if not line:
                break
            match = self._parse_rg(line, stdin_path)
            if match is not None:
                matches.append(match)
        if len(matches) >= want:
            return Found(matches)  # enough: the caller's finally stops rg
        stderr = (await proc.stderr.read()).decode("utf-8", errors="replace").strip()
        code = await proc.wait()
        if code == 2 and not matches:
            raise ToolError(f"ripgrep failed: {stderr or 'exit status 2'}", "GREP_FAILED")
        return Found(matches)

    def _rg_target(self, target: Path) -> str:
        shown = self.workspace.display(target)
        return shown if os.path.isabs(shown) else f"./{shown}" if shown != "." else "."

    def _parse_rg(self, line: bytes, stdin_path: Path | None = None) -> Match | None:
        try:
            event = json.loads(line)
        except ValueError:
            return None
        if event.get("type") != "match":
            return None
        data = event["data"]
        path = _rg_text(data.get("path", {}))
        text = _rg_text(data.get("lines", {})).rstrip("\n").rstrip("\r")
        real = stdin_path or Path(os.path.normpath(self.workspace.cwd / path))
        shown = self.workspace.display(real)
        return Match(shown, int(data.get("line_number") or 0), text)

    # ---- Python fallback -----------------------------------------------------------------------------

    def _python(
        self,
        regex: re.Pattern[str],
        target: Path,
        glob: GlobMatcher | None,
        want: int,
        stop: threading.Event,
    ) -> Found:
        deadline = time.monotonic() + self.limits.grep_timeout_s
        matches: list[Match] = []
        searched = 0
        for path, rel in walk_files(target, stop):
            if time.monotonic() >= deadline:
                return Found(matches, timed_out=True, files_searched=searched)
            if glob is not None and not glob.match(rel):
                continue
            try:  # the one safe reader: regular files only, non-blocking open, capped
                raw = read_prefix(path, str(path), self.limits.grep_file_bytes, self.workspace)
            except (ToolError, OSError):
                continue
            searched += 1
            data = raw.data
            if raw.truncated or looks_binary(data[:SNIFF_BYTES]):
                continue
            shown = self.workspace.display(path)
            text = data.decode("utf-8", errors="replace")
            # Lines as rg counts them: split on \n only, a trailing \r belongs to the terminator.
            lines = text.split("\n")
            if lines[-1] == "":
                lines.pop()  # the final terminator does not start another line
            for number, line in enumerate(lines, start=1):
                if number % 4096 == 0 and time.monotonic() >= deadline:
                    return Found(matches, timed_out=True, files_searched=searched)
                line = line.removesuffix("\r")
                if regex.search(line):
                    matches.append(Match(shown, number, line))
                    if len(matches) >= want:
                        return Found(matches, files_searched=searched)
        return Found(matches, files_searched=searched)


def _rg_text(value: Mapping[str, Any]) -> str:
    if "text" in value:
        return str(value["text"])
    if "bytes" in value:
        return base64.b64decode(value["bytes"]).decode("utf-8", errors="replace")
    return ""
