"""How editor context reads to the model: one wording for every front end.

The LSP server (`dsh/context/add`, `context` on a send) and ACP mode (resource blocks in a prompt)
find the text differently, but the `editor` message they enter is written here, so the model sees
the same "File …" / "Selection in …, lines a-b" / "Diagnostics in …" blocks whichever editor sent it.
A file read from disk for it is read here too, the same way for both: only inside the session's
workspace roots, through the tools' one safe reader (regular files only, a non-blocking open, a size
cap), so a FIFO, a device or `/proc/self/fd/0` never blocks the daemon.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsh_daemon.host.errors import invalid_params, outside_workspace, shown
from dsh_daemon.model.messages import UserMessage
from dsh_daemon.model.wire import TerminalOutput
from dsh_daemon.tools.errors import OutsideWorkspaceError, ToolError
from dsh_daemon.tools.limits import ToolLimits
from dsh_daemon.tools.listing import list_directory
from dsh_daemon.tools.safefile import read_prefix
from dsh_daemon.tools.textfiles import SNIFF_BYTES, looks_binary
from dsh_daemon.tools.workspace import Workspace

MAX_CONTEXT_CHARS = 200_000  # of a file or a selection, per message
MAX_TERMINAL_OUTPUT_CHARS = 64_000  # of a terminal command's output (its tail), per message
MAX_TERMINAL_LINE_CHARS = 4_000  # of its command line
MAX_CONTEXT_READ_BYTES = 8 * 1024 * 1024  # read from disk at most (a selection may lie this deep)
SEVERITY = {1: "error", 2: "warning", 3: "info", 4: "hint"}


def fence(text: str, language: str | None = None) -> str:
    """`text` in a code fence long enough that nothing inside can close it."""
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}{language or ''}\n{text}{'' if text.endswith(chr(10)) else chr(10)}{ticks}"


def editor_source(
    uri: str,
    kind: str,
    *,
    rng: Mapping[str, Any] | None = None,
    language: str | None = None,
    version: int | None = None,
) -> dict[str, Any]:
    source: dict[str, Any] = {"kind": "editor", "uri": uri, "contextKind": kind}
    if language:
        source["languageId"] = language
    if version is not None:
        source["version"] = version
    if rng is not None:
        source["range"] = rng
    return source


def file_message(
    uri: str, path: str, text: str, source: dict[str, Any], *, unsaved: bool = False, truncated: bool = False
) -> UserMessage:
    note = ""
    if len(text) > MAX_CONTEXT_CHARS or truncated:
        text = text[:MAX_CONTEXT_CHARS]
        note = f"\n[truncated: first {len(text)} characters]"
    state = " (unsaved editor buffer)" if unsaved else ""
    return UserMessage.create(f"File {path}{state}:\n{fence(text, source.get('languageId'))}{note}", source)


def selection_message(
    path: str, text: str, first_line: int, last_line: int, source: dict[str, Any], *, unsaved: bool = False
) -> UserMessage:
    """`first_line`/`last_line` count from 1 and name the lines that hold selected text."""
    state = " (unsaved editor buffer)" if unsaved else ""
    body = fence(text[:MAX_CONTEXT_CHARS], source.get("languageId"))
    return UserMessage.create(f"Selection in {path}{state}, lines {first_line}-{last_line}:\n{body}", source)


def format_diagnostics(diagnostics: Sequence[Mapping[str, Any]], limit: int = 50) -> list[str]:
    lines = []
    for diag in list(diagnostics)[:limit]:
        rng = diag.get("range", {}).get("start", {})
        severity = SEVERITY.get(diag.get("severity", 1), "error")
        source = f" [{diag['source']}]" if diag.get("source") else ""
        lines.append(f"- line {int(rng.get('line', 0)) + 1}: {severity}{source}: {diag.get('message', '')}")
    return lines


def diagnostics_message(
    path: str, diagnostics: Sequence[Mapping[str, Any]], source: dict[str, Any]
) -> UserMessage:
    lines = format_diagnostics(diagnostics)
    return UserMessage.create(f"Diagnostics in {path}:\n" + ("\n".join(lines) if lines else "(none)"), source)


def git_diff_message(path: str, diff: str, source: dict[str, Any]) -> UserMessage:
    """The uncommitted changes of the work tree at `path`, as the editor read them (`git diff HEAD`)."""
    if not diff.strip():
        return UserMessage.create(f"Uncommitted changes in {path} (git diff HEAD): none.", source)
    note = ""
    if len(diff) > MAX_CONTEXT_CHARS:
        diff = diff[:MAX_CONTEXT_CHARS]
        note = f"\n[truncated: first {len(diff)} characters]"
    return UserMessage.create(
        f"Uncommitted changes in {path} (git diff HEAD):\n{fence(diff, 'diff')}{note}", source
    )


def terminal_message(run: TerminalOutput, source: dict[str, Any]) -> UserMessage:
    """A command of one of the editor's terminals and its output, as the editor recorded it. The
    output is the person's terminal's, attached by them: it goes to the model as it came (the tail
    of a long one: the end of a build or a test run is where its failure is)."""
    name = " ".join(run.name.split())[:200] or "terminal"
    where = f" (in {run.cwd.replace(chr(10), ' ')[:1000]})" if run.cwd else ""
    ended = (
        f"exit code {run.exit_code}"
        if run.exit_code is not None
        else "no exit code (still running, or its shell reported none)"
    )
    command = run.command
    if len(command) > MAX_TERMINAL_LINE_CHARS:
        command = command[:MAX_TERMINAL_LINE_CHARS] + "…"
    output = run.output
    cut = bool(run.truncated)
    if len(output) > MAX_TERMINAL_OUTPUT_CHARS:
        output = output[-MAX_TERMINAL_OUTPUT_CHARS:]
        cut = True
    notes = []
    if cut:
        notes.append(f"[truncated: the last {len(output)} characters of its output]")
    if not output.strip():
        notes.append("(it printed nothing)")
    body = fence(f"$ {command}\n{output}", "console")
    text = f'A command in the terminal "{name}"{where}, {ended}:\n{body}'
    return UserMessage.create("\n".join([text, *notes]), source)


@dataclass(frozen=True)
class FileText:
    text: str
    truncated: bool = False  # only the first MAX_CONTEXT_READ_BYTES of the file were read


def context_path(workspace: Workspace, path: str, uri: str, *, elsewhere: str = "") -> Path:
    """The real path of a file a client names, checked before anything opens it: inside the
    workspace roots (else `outside_workspace`), no NUL (else `invalid_params`). `elsewhere` is added
    to the refusal (where else the text could have come from, e.g. "and not open in the editor")."""
    if "\0" in path:
        raise invalid_params(f"cannot read {shown(uri)}: the path holds a NUL character")
    try:
        return workspace.resolve(path)
    except OutsideWorkspaceError:
        roots = ", ".join(str(r) for r in workspace.roots)
        raise outside_workspace(
            f"cannot read {shown(uri)}: it is outside the workspace ({shown(roots)}){elsewhere}", path
        ) from None
    except (ToolError, OSError, ValueError) as exc:
        raise invalid_params(f"cannot read {shown(uri)}: {exc}") from None


def read_context_file(workspace: Workspace, real: Path, uri: str) -> FileText:
    """A file's text for editor context, read now (at most MAX_CONTEXT_READ_BYTES; binary refused)."""
    try:
        raw = read_prefix(real, str(real), MAX_CONTEXT_READ_BYTES, workspace)
    except OutsideWorkspaceError:
        raise outside_workspace(
            f"cannot read {shown(uri)}: it leads outside the workspace", str(real)
        ) from None
    except ToolError as exc:
        raise invalid_params(f"cannot read {shown(uri)}: {exc}") from None
    except OSError as exc:
        raise invalid_params(f"cannot read {shown(uri)}: {exc.strerror or exc}") from None
    if looks_binary(raw.data[:SNIFF_BYTES]):
        raise invalid_params(f"cannot attach {shown(uri)} as context: it is a binary file")
    return FileText(raw.data.decode("utf-8", errors="replace"), raw.truncated)


def directory_message(workspace: Workspace, real: Path, uri: str) -> UserMessage:
    """A directory the person linked, attached as its listing (as `list_dir` shows it)."""
    try:
        listing = list_directory(workspace, real, ToolLimits().list_max_entries)
    except ToolError as exc:
        raise invalid_params(f"cannot list {shown(uri)}: {exc}") from None
    except OSError as exc:
        raise invalid_params(f"cannot list {shown(uri)}: {exc.strerror or exc}") from None
    return UserMessage.create(f"Directory {real}:\n{fence(listing)}", editor_source(uri, "file"))


def reference_message(workspace: Workspace, path: str, uri: str) -> UserMessage:
    """A file or directory the person linked that lies outside the workspace: named, not read (the
    agent's own read of it meets the tools' confinement like any other)."""
    roots = ", ".join(str(r) for r in workspace.roots)
    return UserMessage.create(
        f"Linked {path} (outside this session's workspace: {roots}; its content is not attached). "
        "Reading it goes through the tools, which only reach inside the workspace: if you need it, "
        "say so, and the person can paste it or add its directory to the session.",
        editor_source(uri, "file"),
    )
