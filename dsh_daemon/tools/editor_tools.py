"""Tools the editor answers (issue 26.2, 26.3): `diagnostics` (the editor's current problems) and the
language features `definition`, `references`, `symbols`, `hover`, answered by the editor's own
language servers. Each is offered only when the client advertises the ability.

Results are paths (as the model names them) + 1-based line:column + the line's text, confined to the
workspace roots (a location outside them is counted, not shown). Positions go to the editor in LSP
terms (0-based, UTF-16 code units); the model names a place as a line and the symbol on it, since
models count columns badly.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsh_daemon.agent.signal import AbortSignal
from dsh_daemon.agent.tools import ToolContext, ToolOutcome
from dsh_daemon.tools.base import ToolBase, get_int, get_opt_str, get_str, make_spec
from dsh_daemon.tools.documents import DocumentSource
from dsh_daemon.tools.editor import EditorServices, EditorUnavailable, FileDiagnostics, LanguageFeature
from dsh_daemon.tools.errors import FileToolError, InvalidArgumentsError, ToolError
from dsh_daemon.tools.safefile import FileTooLargeError, read_prefix_async
from dsh_daemon.tools.textfiles import SNIFF_BYTES, looks_binary
from dsh_daemon.tools.workspace import Workspace

SEVERITY = {1: "error", 2: "warning", 3: "info", 4: "hint"}
NEW_ERRORS_SHOWN = 10  # new errors listed after an edit; the rest counted
DIAGNOSTICS_SHOWN = 200  # problems listed by the diagnostics tool
LOCATIONS_SHOWN = 100  # locations listed by definition / references / symbols
CONTEXT_CHARS = 200  # the line of context shown with a location
CONTEXT_READ_BYTES = 8 * 1024 * 1024  # read of a file, to find the line the model names or show a location's
CONTEXT_BUDGET_BYTES = 32 * 1024 * 1024  # read for the lines shown with one answer's locations


def _line_of(diagnostic: Mapping[str, Any]) -> tuple[int, int]:
    start = (diagnostic.get("range") or {}).get("start") or {}
    line, character = start.get("line"), start.get("character")
    return (line if isinstance(line, int) else 0), (character if isinstance(character, int) else 0)


def _identity(diagnostic: Mapping[str, Any]) -> tuple[str, str, str]:
    """What makes an error the same error before and after an edit (its line may move)."""
    return (str(diagnostic.get("message")), str(diagnostic.get("source")), str(diagnostic.get("code")))


def _errors(found: Sequence[FileDiagnostics], path: Path) -> list[Mapping[str, Any]]:
    return [d for f in found if f.path == path for d in f.diagnostics if (d.get("severity") or 1) == 1]


def reported_problem(shown: str, diagnostic: Mapping[str, Any]) -> dict[str, Any]:
    """A diagnostic as the model is told it, as data for clients (`ReportedProblem`, protocol.md §9).
    The one reading of an LSP diagnostic: the model's words are made from this (`format_problem`), so
    what a client shows from `newErrorList` and what the model read cannot disagree."""
    line, character = _line_of(diagnostic)
    problem: dict[str, Any] = {
        "path": shown,
        "line": line + 1,
        "col": character + 1,
        "severity": SEVERITY.get(diagnostic.get("severity") or 1, "error"),
        "message": " ".join(str(diagnostic.get("message", "")).split()),
    }
    source, code = diagnostic.get("source"), diagnostic.get("code")
    if isinstance(source, str) and source:
        problem["source"] = source
    if isinstance(code, (str, int)) and not isinstance(code, bool) and code != "":
        problem["code"] = code
    return problem


def format_problem(problem: Mapping[str, Any]) -> str:
    """A reported problem as the model reads it: `path:line:col: severity: message [source code]`
    (the code is said only with its source)."""
    source, code = problem.get("source"), problem.get("code")
    tag = f" [{source}{'' if code is None else f' {code}'}]" if source else ""
    where = f"{problem['path']}:{problem['line']}:{problem['col']}"
    return f"{where}: {problem['severity']}: {problem['message']}{tag}"


@dataclass(frozen=True, slots=True)
class NewErrors:
    """Errors the editor reports in a file after an edit that it did not report before."""

    shown: str  # the file, as the model names it
    errors: tuple[Mapping[str, Any], ...]  # LSP diagnostics, in the editor's order

    def note(self) -> str:
        """ "2 new errors in app.py after this edit: …", for the model."""
        count, shown = len(self.errors), self.shown
        noun = "error" if count == 1 else "errors"
        lines = [f"{count} new {noun} in {shown} after this edit (from the editor's language server):"]
        lines += [f"  {format_problem(p)}" for p in self.shown_problems()]
        if count > NEW_ERRORS_SHOWN:
            lines.append(f"  … and {count - NEW_ERRORS_SHOWN} more (the diagnostics tool lists them)")
        return "\n".join(lines)

    def meta(self) -> dict[str, Any]:
        """The same for clients: the edit's `EditMeta.newErrors` and `newErrorList` (the ones shown)."""
        return {
            "newErrors": len(self.errors),
            "newErrorList": self.shown_problems(),
        }

    def shown_problems(self) -> list[dict[str, Any]]:
        """The first errors, read once for both the model's words and the clients' list."""
        return [reported_problem(self.shown, d) for d in self.errors[:NEW_ERRORS_SHOWN]]


def new_errors(
    workspace: Workspace, path: Path, before: Sequence[FileDiagnostics], after: Sequence[FileDiagnostics]
) -> NewErrors | None:
    """The errors the editor reports now that it did not before (None: no new one)."""
    known = Counter(_identity(d) for d in _errors(before, path))
    new = []
    for diagnostic in _errors(after, path):
        identity = _identity(diagnostic)
        if known[identity] > 0:
            known[identity] -= 1
        else:
            new.append(diagnostic)
    return NewErrors(workspace.display(path), tuple(new)) if new else None


async def diagnostics_after_edit(
    editor: EditorServices,
    workspace: Workspace,
    path: Path,
    before: Sequence[FileDiagnostics],
    settle_s: float,
    signal: AbortSignal | None = None,
) -> NewErrors | None:
    """The new errors an edit introduced, once the language server re-checked the file (the editor
    says when, or after `settle_s`)."""
    try:
        after = await editor.diagnostics([path], settle_s=settle_s, signal=signal)
    except EditorUnavailable:
        return None
    return new_errors(workspace, path, before, after)


class DiagnosticsTool(ToolBase):
    spec = make_spec(
        "diagnostics",
        "The editor's current problems (errors, warnings) from its language servers: for one file, or "
        "for every open file with problems when no path is given.",
        {"path": {"type": "string", "description": "File path; omit for the whole workspace."}},
        [],
    )

    def __init__(self, workspace: Workspace, editor: EditorServices) -> None:
        self.workspace = workspace
        self.editor = editor

    def target_paths(self, args: Mapping[str, Any]) -> list[str]:
        path = args.get("path")
        return [path] if isinstance(path, str) and path else []

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        path_arg = get_opt_str(args, "path")
        paths = [self.workspace.resolve(path_arg)] if path_arg else None
        try:
            found = await self.editor.diagnostics(paths, signal=ctx.signal)
        except EditorUnavailable as exc:
            return ToolOutcome.error(f"Error: {exc}", "EDITOR_UNAVAILABLE")
        lines = []
        outside = 0
        for item in found:
            if not self.workspace.contains(item.path):
                outside += 1
                continue
            shown = self.workspace.display(item.path)
            ordered = sorted(item.diagnostics, key=lambda d: (d.get("severity") or 1, _line_of(d)))
            lines += [format_problem(reported_problem(shown, d)) for d in ordered]
        if not lines:
            where = self.workspace.display(paths[0]) if paths else "the open files"
            return ToolOutcome.text(f"No problems reported in {where}.")
        text = "\n".join(lines[:DIAGNOSTICS_SHOWN])
        if len(lines) > DIAGNOSTICS_SHOWN:
            text += f"\n… and {len(lines) - DIAGNOSTICS_SHOWN} more; ask for one file at a time"
        if outside:
            text += f"\n({outside} file(s) outside the workspace not shown)"
        return ToolOutcome.text(text)


@dataclass(frozen=True, slots=True)
class _Lines:
    lines: tuple[str, ...]
    size: int  # of the whole file, in bytes
    complete: bool  # False: only the lines in its first CONTEXT_READ_BYTES


class _LocationLines:
    """The lines shown with the locations of one answer: each file read once, however many locations
    it holds, and no more than CONTEXT_BUDGET_BYTES read in all (the rest shown without their line).
    A file that cannot be read as text (gone, a FIFO, a device, binary) shows no line."""

    def __init__(self, tool: _LanguageTool) -> None:
        self._tool = tool
        self._read: dict[Path, tuple[str, ...]] = {}
        self._budget = CONTEXT_BUDGET_BYTES

    async def lines(self, path: Path) -> tuple[str, ...]:
        if path in self._read:
            return self._read[path]
        found: tuple[str, ...] = ()
        if self._budget > 0:
            try:
                text = await self._tool.lines_of(path, str(path))
            except (ToolError, OSError):
                pass
            else:
                found = text.lines
                self._budget -= min(text.size, CONTEXT_READ_BYTES)
        self._read[path] = found
        return found


class _LanguageTool(ToolBase):
    feature: LanguageFeature

    def __init__(self, workspace: Workspace, documents: DocumentSource, editor: EditorServices) -> None:
        self.workspace = workspace
        self.documents = documents
        self.editor = editor

    def target_paths(self, args: Mapping[str, Any]) -> list[str]:
        path = args.get("path")
        return [path] if isinstance(path, str) and path else []

    async def lines_of(self, path: Path, shown: str) -> _Lines:
        """The file's lines as the model sees them: the editor's unsaved text first, else the disk
        through the one safe reader (a regular file only, read in a worker thread, at most
        CONTEXT_READ_BYTES of it). FileToolError when it cannot be read as text."""
        text = self.documents.text_for(path)
        if text is not None:
            return _Lines(tuple(text.splitlines()), len(text.encode("utf-8")), complete=True)
        raw = await read_prefix_async(path, shown, CONTEXT_READ_BYTES, self.workspace)
        if looks_binary(raw.data[:SNIFF_BYTES]):
            raise FileToolError(f"{shown} is a binary file ({raw.stat.st_size} bytes)", "BINARY")
        lines = raw.data.decode("utf-8", errors="replace").splitlines()
        if raw.truncated and lines:
            lines.pop()  # cut somewhere inside it
        return _Lines(tuple(lines), raw.stat.st_size, complete=not raw.truncated)

    async def position(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """`{uri, position}` of "the symbol on line N" (its first occurrence on that line), in LSP terms."""
        path = self.workspace.resolve(get_str(args, "path", allow_empty=False))
        line = get_int(args, "line", 0, minimum=1)
        if line == 0:
            raise InvalidArgumentsError("'line' (1-based) is required")
        symbol = get_str(args, "symbol", allow_empty=False)
        shown = self.workspace.display(path)
        found = await self.lines_of(path, shown)
        lines = found.lines
        if line > len(lines):
            if not found.complete:
                raise FileTooLargeError(
                    shown, found.size, CONTEXT_READ_BYTES, f"finding a line past line {len(lines)}"
                )
            raise InvalidArgumentsError(f"{shown} has {len(lines)} lines; line {line} does not exist")
        column = lines[line - 1].find(symbol)
        if column < 0:
            raise InvalidArgumentsError(
                f"{symbol!r} is not on line {line} of {shown}: {lines[line - 1].strip()[:CONTEXT_CHARS]!r}"
            )
        character = len(lines[line - 1][:column].encode("utf-16-le")) // 2
        return {"uri": path.as_uri(), "position": {"line": line - 1, "character": character}}

    async def ask(self, params: Mapping[str, Any], ctx: ToolContext) -> dict[str, Any] | ToolOutcome:
        try:
            answer = await self.editor.language_request(self.feature, params, ctx.signal)
        except EditorUnavailable as exc:
            return ToolOutcome.error(f"Error: {exc}", "EDITOR_UNAVAILABLE")
        if answer.get("noLanguageServer"):
            return ToolOutcome.text(
                "No language server for this file in the editor; use grep and read_file instead.",
                meta={"noLanguageServer": True},  # LanguageToolMeta: what clients show (protocol.md §9)
            )
        return answer

    async def ask_at(
        self, args: Mapping[str, Any], ctx: ToolContext, **extra: Any
    ) -> dict[str, Any] | ToolOutcome:
        """Ask the editor about the place `args` names (path, line, symbol): its answer, or the
        outcome the model gets when there is none (the editor failed, or no language server)."""
        return await self.ask({**await self.position(args), **extra}, ctx)

    async def render_locations(self, locations: Sequence[Any], what: str) -> str:
        lines = []
        outside = 0
        read = _LocationLines(self)
        for location in locations:
            if not isinstance(location, Mapping):
                continue
            rendered = await self.render_location(location, read)
            if rendered is None:
                outside += 1
            else:
                lines.append(rendered)
        if not lines and not outside:
            return f"No {what} found."
        shown = lines[:LOCATIONS_SHOWN]
        if len(lines) > LOCATIONS_SHOWN:
            shown.append(f"… and {len(lines) - LOCATIONS_SHOWN} more")
        if outside:
            shown.append(f"({outside} outside the workspace: libraries or other projects, not shown)")
        return "\n".join(shown)

    async def render_location(
        self, location: Mapping[str, Any], read: _LocationLines, label: str = ""
    ) -> str | None:
        """`path:line:col: the line's text`; None when it is outside the workspace."""
        uri = location.get("uri") or location.get("targetUri")
        rng = location.get("range") or location.get("targetSelectionRange") or {}
        if not isinstance(uri, str) or not uri.startswith("file://"):
            return None
        from urllib.parse import unquote, urlparse

        try:
            # lstat and readlink only: resolving never opens the file, whatever it is
            real = Path(os.path.realpath(unquote(urlparse(uri).path)))  # noqa: ASYNC240
        except (OSError, ValueError):
            return None
        if not self.workspace.contains(real):
            return None
        line, character = _line_of({"range": rng})
        lines = await read.lines(real)
        context = lines[line].strip()[:CONTEXT_CHARS] if line < len(lines) else ""
        prefix = f"{label} " if label else ""
        return f"{prefix}{self.workspace.display(real)}:{line + 1}:{character + 1}: {context}"


_PLACE = {
    "path": {"type": "string", "description": "File path."},
    "line": {"type": "integer", "description": "1-based line where the symbol is used or defined."},
    "symbol": {
        "type": "string",
        "description": "The identifier on that line (its first occurrence is used).",
    },
}


class DefinitionTool(_LanguageTool):
    feature = "definition"
    spec = make_spec(
        "definition",
        "Where a symbol is defined, from the editor's language server (follows imports across files, "
        "unlike grep). Name the place by path, line and the symbol on that line.",
        _PLACE,
        ["path", "line", "symbol"],
    )

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        answer = await self.ask_at(args, ctx)
        if isinstance(answer, ToolOutcome):
            return answer
        return ToolOutcome.text(await self.render_locations(answer.get("locations") or [], "definition"))


class ReferencesTool(_LanguageTool):
    feature = "references"
    spec = make_spec(
        "references",
        "Every use of a symbol in the workspace, from the editor's language server (exact, unlike grep: "
        "no same-named strangers). Name the place by path, line and the symbol on that line.",
        {**_PLACE, "include_declaration": {"type": "boolean", "description": "Include the definition."}},
        ["path", "line", "symbol"],
    )

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        include = args.get("include_declaration")
        answer = await self.ask_at(args, ctx, includeDeclaration=include is not False)
        if isinstance(answer, ToolOutcome):
            return answer
        return ToolOutcome.text(await self.render_locations(answer.get("locations") or [], "references"))


class SymbolsTool(_LanguageTool):
    feature = "symbols"
    spec = make_spec(
        "symbols",
        "Symbols (classes, functions, variables) from the editor's language server: the outline of one "
        "file (`path`), or the workspace's symbols matching `query`.",
        {
            "path": {"type": "string", "description": "File path: its outline."},
            "query": {"type": "string", "description": "Name (or part of one) to find in the workspace."},
        },
        [],
    )

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        path_arg = get_opt_str(args, "path")
        query = get_opt_str(args, "query")
        if bool(path_arg) == bool(query):
            raise InvalidArgumentsError("give exactly one of 'path' (a file's outline) or 'query'")
        params = {"uri": self.workspace.resolve(path_arg).as_uri()} if path_arg else {"query": query}
        answer = await self.ask(params, ctx)
        if isinstance(answer, ToolOutcome):
            return answer
        lines = []
        outside = 0
        read = _LocationLines(self)
        for symbol in answer.get("symbols") or []:
            if not isinstance(symbol, Mapping) or not isinstance(symbol.get("location"), Mapping):
                continue
            container = symbol.get("containerName")
            name = f"{container}.{symbol.get('name')}" if container else str(symbol.get("name"))
            label = f"{_kind(symbol.get('kind'))} {name}"
            rendered = await self.render_location(symbol["location"], read, label)
            if rendered is None:
                outside += 1
            else:
                lines.append(rendered)
        if not lines:
            return ToolOutcome.text(
                "No symbols found." + (f" ({outside} outside the workspace)" if outside else "")
            )
        text = "\n".join(lines[:LOCATIONS_SHOWN])
        if len(lines) > LOCATIONS_SHOWN:
            text += f"\n… and {len(lines) - LOCATIONS_SHOWN} more; narrow the query"
        return ToolOutcome.text(text)


class HoverTool(_LanguageTool):
    feature = "hover"
    spec = make_spec(
        "hover",
        "What the editor's language server says about a symbol: its type, signature and documentation. "
        "Name the place by path, line and the symbol on that line.",
        _PLACE,
        ["path", "line", "symbol"],
    )

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        answer = await self.ask_at(args, ctx)
        if isinstance(answer, ToolOutcome):
            return answer
        contents = answer.get("contents")
        text = contents.strip() if isinstance(contents, str) else ""
        return ToolOutcome.text(text[:8000] or "The language server has nothing to say about it.")


# LSP SymbolKind, the common ones
_KINDS = {
    2: "module", 5: "class", 6: "method", 7: "property", 8: "field", 9: "constructor", 10: "enum",
    11: "interface", 12: "function", 13: "variable", 14: "constant", 23: "struct", 26: "type",
}  # fmt: skip


def _kind(kind: Any) -> str:
    return _KINDS.get(kind, "symbol") if isinstance(kind, int) else "symbol"


LANGUAGE_TOOLS: tuple[type[_LanguageTool], ...] = (DefinitionTool, ReferencesTool, SymbolsTool, HoverTool)
