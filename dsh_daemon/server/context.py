"""Editor context (D10): explicit `dsh/context/add` messages and the ambient snapshot pre-step hook.

Explicit context is built from the synced text document when the editor has it open (unsaved text
wins over disk), else from disk: only inside the session's workspace roots, through the tools' one
safe reader. An explicit read happens while the request is dispatched, so a context request takes
effect in arrival order relative to the requests pipelined around it (the safe reader cannot block:
regular files only, opened non-blocking, capped). Ambient state is latest-wins; the pre-step hook adds one
`editor{contextKind: snapshot}` message only when the state changed since the last one entered,
bounded in size, never re-sent unchanged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pygls.uris import to_fs_path
from pygls.workspace import TextDocument, Workspace

from dsh_daemon.host.editor_context import (
    MAX_CONTEXT_READ_BYTES,
    context_path,
    diagnostics_message,
    editor_source,
    fence,
    file_message,
    format_diagnostics,
    read_context_file,
    selection_message,
)
from dsh_daemon.host.errors import WireError, invalid_params, shown
from dsh_daemon.host.port import Enter, PreStepContext, PreStepDecision
from dsh_daemon.host.port import Workspace as ToolWorkspace
from dsh_daemon.model.jsonvalue import dumps
from dsh_daemon.model.messages import UserMessage

MAX_SNAPSHOT_CHARS = 4_000
MAX_SNAPSHOT_DIAGNOSTICS = 10


@dataclass(frozen=True)
class ContextDocument:
    doc: TextDocument
    from_editor: bool  # the editor's synced text (else read from disk)
    truncated: bool = False  # only the first MAX_CONTEXT_READ_BYTES of the file were read
    unsaved: bool = False  # the editor's text differs from the file on disk (or there is none)


class ContextSource:
    """Where editor context comes from: the editor's synced document (unsaved text wins), else the
    file on disk, read the host's way (`host/editor_context.py`: inside the session's workspace roots
    only, through the tools' one safe reader). Anything else is refused: `outside_workspace`, or
    `invalid_params`."""

    def __init__(self, editor: Callable[[], Workspace | None], workspace: ToolWorkspace) -> None:
        self._editor = editor
        self.workspace = workspace

    def synced(self, uri: str) -> TextDocument | None:
        editor = self._editor()
        if editor is not None and uri in editor.text_documents:
            return editor.get_text_document(uri)
        return None

    def disk_path(self, uri: str) -> Path:
        """The real path of a file URI inside the workspace roots (checked before anything opens it)."""
        path = to_fs_path(uri) if uri.startswith("file:") else None
        if not path:
            raise invalid_params(f"cannot read {shown(uri)}: not a file URI and not open in the editor")
        return context_path(self.workspace, path, uri, elsewhere=" and not open in the editor")

    async def document(self, uri: str) -> ContextDocument:
        """The document behind `uri`, read in a worker thread (for the ambient snapshot hook)."""
        doc = self.synced(uri)
        if doc is not None:
            return ContextDocument(doc, from_editor=True, unsaved=True)
        path = self.disk_path(uri)
        return await asyncio.to_thread(self._read_disk, uri, path)

    def document_now(self, uri: str) -> ContextDocument:
        """The document behind `uri`, read now: a synced document is marked `unsaved` only when its
        text differs from the file on disk (or the file cannot be read)."""
        doc = self.synced(uri)
        if doc is None:
            return self._read_disk(uri, self.disk_path(uri))
        try:
            on_disk = self._read_disk(uri, self.disk_path(uri))
            unsaved = on_disk.truncated or on_disk.doc.source != doc.source
        except WireError:  # outside the roots, missing, binary: nothing on disk to match
            unsaved = True
        return ContextDocument(doc, from_editor=True, unsaved=unsaved)

    def _read_disk(self, uri: str, path: Path) -> ContextDocument:
        read = read_context_file(self.workspace, path, uri)
        return ContextDocument(TextDocument(uri, read.text), from_editor=False, truncated=read.truncated)


def _range_text(doc: TextDocument, rng: Mapping[str, Any]) -> tuple[str, int, int]:
    try:
        start, end = rng["start"], rng["end"]
        from lsprotocol.types import Position

        a = doc.offset_at_position(Position(int(start["line"]), int(start["character"])))
        b = doc.offset_at_position(Position(int(end["line"]), int(end["character"])))
    except (KeyError, TypeError, ValueError) as exc:
        raise invalid_params(f"invalid range: {exc}") from exc
    first, last = int(start["line"]), int(end["line"])
    if b < a:
        a, b = b, a
        first, last = last, first
    if last > first and doc.source[:b].endswith(("\n", "\r")):
        last -= 1  # a selection ending at the start of a line does not include that line
    return doc.source[a:b], first, last


def build_context_message(
    document: ContextDocument,
    uri: str,
    kind: str,
    rng: Mapping[str, Any] | None,
    diagnostics: Sequence[Mapping[str, Any]] | None,
) -> UserMessage:
    doc, from_editor = document.doc, document.from_editor
    path = to_fs_path(uri) or uri
    version = doc.version if from_editor else None
    source = editor_source(uri, kind, rng=rng, language=getattr(doc, "language_id", None), version=version)
    if kind == "file":
        return file_message(
            uri, path, doc.source, source, unsaved=document.unsaved, truncated=document.truncated
        )
    if kind == "selection":
        if rng is None:
            raise invalid_params("dsh/context/add: a selection needs a 'range'")
        text, first, last = _range_text(doc, rng)
        if document.truncated and max(first, last) >= len(doc.lines) - 1:
            raise invalid_params(
                f"dsh/context/add: the selection is past the first {MAX_CONTEXT_READ_BYTES} bytes of {path}"
            )
        return selection_message(path, text, first + 1, last + 1, source, unsaved=document.unsaved)
    if diagnostics is None:
        raise invalid_params("dsh/context/add: kind 'diagnostics' needs 'diagnostics' (LSP Diagnostic[])")
    return diagnostics_message(path, diagnostics, source)


@dataclass
class AmbientState:
    """The editor's latest state for one session; `entered` is the digest of the last snapshot sent."""

    state: dict[str, Any] = field(default_factory=dict)
    entered: str | None = None


def render_snapshot(state: Mapping[str, Any], doc: TextDocument | None) -> str:
    """The snapshot text; `doc` is the active document (for the selected text), when it can be read."""
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
        if start != end and doc is not None:
            try:
                text, _, _ = _range_text(doc, selection)
                parts.append("- selected text:\n" + fence(text[:1500], getattr(doc, "language_id", None)))
            except Exception:  # the snapshot is best effort
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
    ambient: AmbientState, source: Callable[[], ContextSource]
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
        state = dict(ambient.state)
        uri = state.get("activeUri")
        doc = None
        if uri and state.get("selection"):
            try:
                doc = (await source().document(uri)).doc
            except Exception:  # outside the workspace, gone, binary: no selected text
                doc = None
        message = UserMessage.create(
            render_snapshot(state, doc), {"kind": "editor", "uri": uri or "", "contextKind": "snapshot"}
        )
        ambient.entered = digest  # set only when it enters: a rejected step re-offers it
        return Enter((message, *decision.messages))

    return hook
