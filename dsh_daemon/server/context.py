"""Editor context (D10): explicit `dsh/context/add` messages and the ambient snapshot pre-step hook.

Explicit context is built from the synced text document when the editor has it open (unsaved text
wins over disk), else from disk. Ambient state is latest-wins; the pre-step hook adds one
`editor{contextKind: snapshot}` message only when the state changed since the last one entered,
bounded in size, never re-sent unchanged.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pygls.uris import to_fs_path
from pygls.workspace import TextDocument, Workspace

from dsh_daemon.agent.hooks import Enter, PreStepContext, PreStepDecision
from dsh_daemon.agent.messages import UserMessage
from dsh_daemon.jsonvalue import dumps
from dsh_daemon.server.errors import invalid_params

MAX_CONTEXT_CHARS = 200_000
MAX_SNAPSHOT_CHARS = 4_000
MAX_SNAPSHOT_DIAGNOSTICS = 10
SEVERITY = {1: "error", 2: "warning", 3: "info", 4: "hint"}


def document_for(workspace: Workspace | None, uri: str) -> tuple[TextDocument, bool]:
    """The editor's document (unsaved text) if open, else the file on disk. Returns (doc, from_editor)."""
    if workspace is not None and uri in workspace.text_documents:
        return workspace.get_text_document(uri), True
    path = to_fs_path(uri)
    if path is None:
        raise invalid_params(f"cannot read {uri}: not a file URI and not open in the editor")
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise invalid_params(f"cannot read {uri}: {exc.strerror or exc}") from exc
    if b"\0" in raw[:8192]:
        raise invalid_params(f"cannot add {uri} as context: it is a binary file")
    return TextDocument(uri, raw.decode("utf-8", errors="replace")), False


def _range_text(doc: TextDocument, rng: Mapping[str, Any]) -> tuple[str, int, int]:
    try:
        start, end = rng["start"], rng["end"]
        from lsprotocol.types import Position

        a = doc.offset_at_position(Position(int(start["line"]), int(start["character"])))
        b = doc.offset_at_position(Position(int(end["line"]), int(end["character"])))
    except (KeyError, TypeError, ValueError) as exc:
        raise invalid_params(f"invalid range: {exc}") from exc
    if b < a:
        a, b = b, a
    return doc.source[a:b], int(start["line"]), int(end["line"])


def _fence(text: str, language: str | None) -> str:
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}{language or ''}\n{text}{'' if text.endswith(chr(10)) else chr(10)}{ticks}"


def format_diagnostics(diagnostics: Sequence[Mapping[str, Any]], limit: int = 50) -> list[str]:
    lines = []
    for diag in list(diagnostics)[:limit]:
        rng = diag.get("range", {}).get("start", {})
        severity = SEVERITY.get(diag.get("severity", 1), "error")
        source = f" [{diag['source']}]" if diag.get("source") else ""
        lines.append(f"- line {int(rng.get('line', 0)) + 1}: {severity}{source}: {diag.get('message', '')}")
    return lines


def build_context_message(
    workspace: Workspace | None,
    uri: str,
    kind: str,
    rng: Mapping[str, Any] | None,
    diagnostics: Sequence[Mapping[str, Any]] | None,
) -> UserMessage:
    doc, from_editor = document_for(workspace, uri)
    path = to_fs_path(uri) or uri
    language = getattr(doc, "language_id", None)
    source: dict[str, Any] = {"kind": "editor", "uri": uri, "contextKind": kind}
    if language:
        source["languageId"] = language
    if from_editor and doc.version is not None:
        source["version"] = doc.version
    if rng is not None:
        source["range"] = rng
    state = " (unsaved editor buffer)" if from_editor else ""
    if kind == "file":
        text = doc.source
        note = ""
        if len(text) > MAX_CONTEXT_CHARS:
            text, note = text[:MAX_CONTEXT_CHARS], f"\n[truncated: first {MAX_CONTEXT_CHARS} characters]"
        body = f"File {path}{state}:\n{_fence(text, language)}{note}"
    elif kind == "selection":
        if rng is None:
            raise invalid_params("dsh/context/add: a selection needs a 'range'")
        text, first, last = _range_text(doc, rng)
        body = f"Selection in {path}{state}, lines {first + 1}-{last + 1}:\n{_fence(text, language)}"
    else:  # diagnostics
        if diagnostics is None:
            raise invalid_params("dsh/context/add: kind 'diagnostics' needs 'diagnostics' (LSP Diagnostic[])")
        lines = format_diagnostics(diagnostics)
        body = f"Diagnostics in {path}:\n" + ("\n".join(lines) if lines else "(none)")
    return UserMessage.create(body, source)


@dataclass
class AmbientState:
    """The editor's latest state for one session; `entered` is the digest of the last snapshot sent."""

    state: dict[str, Any] = field(default_factory=dict)
    entered: str | None = None


def render_snapshot(state: Mapping[str, Any], workspace: Workspace | None) -> str:
    parts: list[str] = ["Editor state:"]
    uri = state.get("activeUri")
    if uri:
        parts.append(f"- active file: {to_fs_path(uri) or uri}")
    selection = state.get("selection")
    if uri and selection:
        start, end = selection.get("start", {}), selection.get("end", {})
        parts.append(
            f"- cursor/selection: line {int(start.get('line', 0)) + 1} to {int(end.get('line', 0)) + 1}"
        )
        if start != end:
            try:
                doc, _ = document_for(workspace, uri)
                text, _, _ = _range_text(doc, selection)
                parts.append("- selected text:\n" + _fence(text[:1500], getattr(doc, "language_id", None)))
            except Exception:  # the snapshot is best effort; the file may be gone
                pass
    visible = state.get("visibleRange")
    if visible:
        parts.append(
            f"- visible lines: {int(visible['start']['line']) + 1}-{int(visible['end']['line']) + 1}"
        )
    diagnostics = state.get("diagnostics") or []
    if diagnostics:
        parts.append("- diagnostics near the cursor:")
        parts.extend(format_diagnostics(diagnostics, MAX_SNAPSHOT_DIAGNOSTICS))
    text = "\n".join(parts)
    return text if len(text) <= MAX_SNAPSHOT_CHARS else text[: MAX_SNAPSHOT_CHARS - 20] + "\n[truncated]"


def snapshot_hook(
    ambient: AmbientState, workspace: Callable[[], Workspace | None]
) -> Callable[[PreStepContext, Callable[[], Awaitable[PreStepDecision]]], Awaitable[PreStepDecision]]:
    async def hook(ctx: PreStepContext, next: Callable[[], Awaitable[PreStepDecision]]) -> PreStepDecision:
        decision = await next()
        if not isinstance(decision, Enter) or not ambient.state:
            return decision
        if not decision.messages and ctx.step == 1:
            return decision
        digest = dumps(ambient.state)
        if digest == ambient.entered:
            return decision
        uri = ambient.state.get("activeUri")
        source: dict[str, Any] = {"kind": "editor", "uri": uri or "", "contextKind": "snapshot"}
        message = UserMessage.create(render_snapshot(ambient.state, workspace()), source)
        ambient.entered = digest  # set only when it enters: a rejected step re-offers it
        return Enter((message, *decision.messages))

    return hook
