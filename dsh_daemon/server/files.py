"""The editor side of the tools: unsaved buffers as the tools' `DocumentSource`, and edits routed
through `workspace/applyEdit` when the client supports it (so they land in the editor with undo).

An edit is checked against what the editor (or disk) holds right now: a file that changed since the
edit was computed is a conflict, never overwritten.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from dsh_daemon.host.port import (
    AbortedError,
    AbortSignal,
    ComputedEdit,
    DiskEditApplier,
    EditConflictError,
    EditorUnavailable,
    sha256_text,
)
from dsh_daemon.server.client_requests import ClientRequests
from dsh_daemon.server.editor import LspEditor
from dsh_daemon.server.editor_answers import apply_edit_problem

logger = logging.getLogger(__name__)
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
SYNC_WAIT_S = 2.0  # for the editor's didChange after an applied edit


class EditorDocuments:
    """`DocumentSource` over pygls' synced text documents: unsaved text wins over disk."""

    def __init__(self, server: LanguageServer) -> None:
        self._server = server

    def uri_for(self, path: Path) -> str | None:
        try:
            documents = self._server.workspace.text_documents
        except Exception:
            return None
        for uri in documents:
            fs = to_fs_path(uri)
            if fs is not None and Path(fs) == path:
                return str(uri)
        return None

    def text_for(self, path: Path) -> str | None:
        uri = self.uri_for(path)
        return None if uri is None else self._server.workspace.get_text_document(uri).source


def end_position(text: str) -> types.Position:
    """The LSP position just past the end of `text` (UTF-16 code units, as negotiated by default)."""
    parts = _LINE_BREAK.split(text)
    last = parts[-1]
    return types.Position(line=len(parts) - 1, character=len(last.encode("utf-16-le")) // 2)


class WorkspaceEditApplier:
    """Applies through `workspace/applyEdit` when the client can; otherwise writes to disk."""

    def __init__(
        self,
        server: LanguageServer,
        requests: ClientRequests,
        documents: EditorDocuments,
        disk: DiskEditApplier,
        client_capabilities: Callable[[], types.ClientCapabilities | None],
        timeout_s: Callable[[], float],
        editor: LspEditor | None = None,
    ) -> None:
        """`timeout_s`: read at each edit (`tools.limits.editor_request_timeout_s`)."""
        self._server = server
        self._requests = requests
        self._timeout_s = timeout_s
        self._documents = documents
        self._disk = disk
        self._capabilities = client_capabilities
        self._editor = editor

    @property
    def keeps_drafts(self) -> bool:
        """Edits go through the editor, so the person's unsaved changes in an edited document can be
        kept out of the file on disk (`ComputedEdit.unsaved`; protocol.md §9)."""
        return self._can_apply()

    def _can_apply(self) -> bool:
        caps = self._capabilities()
        return bool(caps and caps.workspace and caps.workspace.apply_edit)

    def _can_create(self) -> bool:
        caps = self._capabilities()
        edit = caps.workspace.workspace_edit if caps and caps.workspace else None
        return bool(
            edit
            and edit.resource_operations
            and types.ResourceOperationKind.Create in edit.resource_operations
        )

    async def apply(self, edit: ComputedEdit, signal: AbortSignal | None = None) -> str | None:
        """The edit in the editor (undo works there), then on disk: commands and the person's tools
        see what the buffer shows (protocol.md §9, coherence). Only the edited document is saved.
        An editor that does not answer usably (in time, with `{applied: boolean}`) fails the edit as
        `EditorUnavailable`; whether it applied the edit after all is then unknown."""
        if not self._can_apply() or (edit.created and not self._can_create()):
            await self._disk.apply(edit)
            return None
        uri = self._documents.uri_for(edit.path) or edit.path.as_uri()
        if edit.created:
            changes: list[Any] = [
                types.CreateFile(
                    uri=uri, options=types.CreateFileOptions(overwrite=False, ignore_if_exists=False)
                ),
                types.TextDocumentEdit(
                    text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=None),
                    edits=[
                        types.TextEdit(
                            types.Range(types.Position(0, 0), types.Position(0, 0)), edit.after_text
                        )
                    ],
                ),
            ]
            workspace_edit = types.WorkspaceEdit(document_changes=changes)
        else:
            current = self._documents.text_for(edit.path)
            if current is None:
                # The file is not open in the editor: check the disk copy (bounded, regular files only).
                current_hash = await asyncio.to_thread(
                    DiskEditApplier.current_hash, edit.path, len(edit.before_text.encode("utf-8"))
                )
            else:
                current_hash = sha256_text(current)
            if current_hash != edit.before_sha256:
                raise EditConflictError(
                    f"{edit.path} changed since the edit was computed; read it again and redo the edit"
                )
            # Same hash: the file holds exactly the text the edit was computed from.
            whole = types.Range(types.Position(0, 0), end_position(edit.before_text))
            workspace_edit = types.WorkspaceEdit(changes={uri: [types.TextEdit(whole, edit.after_text)]})
        params = types.ApplyWorkspaceEditParams(
            edit=workspace_edit, label=f"dsh: {edit.verb} {edit.path.name}"
        )
        try:
            result = await self._requests.ask(
                types.WORKSPACE_APPLY_EDIT,
                params,
                self._timeout_s(),
                check=apply_edit_problem,
                signal=signal,
            )
        except EditorUnavailable as exc:
            raise EditorUnavailable(
                f"{exc}; the edit of {edit.path.name} may or may not be in the editor: read the file "
                "again before editing it"
            ) from None
        if not result["applied"]:
            reason = result.get("failureReason") or "the editor refused the edit"
            raise EditConflictError(f"{edit.path}: {reason}")
        await self._until_synced(edit, signal)
        return await self._save(edit, uri, signal)

    async def _until_synced(self, edit: ComputedEdit, signal: AbortSignal | None) -> None:
        """Wait (bounded) for the editor's change notification of an open document, so the next read
        sees the edit rather than the text it replaced (a client may debounce its didChange)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SYNC_WAIT_S
        while loop.time() < deadline and not (signal is not None and signal.aborted):
            current = self._documents.text_for(edit.path)
            if current is None or current == edit.after_text:
                return
            await asyncio.sleep(0.01)

    async def _save(self, edit: ComputedEdit, uri: str, signal: AbortSignal | None) -> str | None:
        """Buffer == disk after an edit: the editor saves the document when it can
        (`dsh/document/save`), else the daemon writes the same text. Nothing else is saved. The edit
        is in the editor by now: a cancel while the save is asked ends the wait, not the edit (which
        is still reported as made, so its checkpoint is kept). The person's unsaved changes in the
        document are written only when they chose so (`edit.unsaved`)."""
        if edit.unsaved == "buffer-only":
            return (
                f"Note: your edit overlaps the user's unsaved changes in {edit.path.name}; they chose to "
                "keep it in the editor's buffer only. It is not saved: commands and other programs see "
                "the old file."
            )
        if edit.unsaved == "apart" and edit.disk_text is not None:
            return await self._write_apart(edit, uri, signal)
        note = await self._save_whole(edit, uri, signal)
        if note is None and edit.unsaved == "both":
            return (
                f"Note: your edit overlaps the user's unsaved changes in {edit.path.name}; they chose to "
                "save both: the file on disk now holds their unsaved changes too."
            )
        return note

    async def _write_apart(self, edit: ComputedEdit, uri: str, signal: AbortSignal | None) -> str | None:
        """The file gets the saved text plus only the agent's edit; the buffer keeps the person's
        unsaved changes (still unsaved). Written by the editor when it can (so it knows the file's new
        state and does not warn on the person's next save), else by the daemon; never over a file
        that changed since its text was merged."""
        assert edit.disk_text is not None
        kept = (
            f"Note: {edit.path.name} has unsaved changes in the editor that are not yours; your edit is "
            "in the editor's buffer on top of them, and the file on disk got your edit only (their "
            "changes stay unsaved): commands see your edit and nothing of theirs."
        )
        failed: str | None = None
        try:
            current = await asyncio.to_thread(
                DiskEditApplier.current_hash, edit.path, len(edit.disk_text.encode("utf-8")) + (1 << 20)
            )
        except EditConflictError as exc:
            current, failed = None, str(exc)
        if failed is None and current != edit.disk_before_sha256:
            failed = "the file changed on disk meanwhile"
        if failed is None and self._editor is not None and self._editor.offers_save_text:
            try:
                problems = await self._editor.save([uri], signal, texts={uri: edit.disk_text})
            except EditorUnavailable as exc:
                problems = {uri: str(exc)}
            except AbortedError:
                problems = {uri: "the turn was cancelled before the editor answered"}
            failed = problems.get(uri) if problems else None
        elif failed is None:
            try:
                await asyncio.to_thread(DiskEditApplier.write_text, edit.path, edit.disk_text)
            except OSError as exc:
                failed = str(exc.strerror or exc)
        if failed is None:
            return kept
        return (
            f"Note: the edit is in the editor, on top of the user's unsaved changes in {edit.path.name}, "
            f"but it was not written to disk ({failed}); commands and other programs see the old file."
        )

    async def _save_whole(self, edit: ComputedEdit, uri: str, signal: AbortSignal | None) -> str | None:
        if self._editor is not None and self._editor.offers_save:
            try:
                failed = await self._editor.save([uri], signal)
            except EditorUnavailable as exc:
                failed = {uri: str(exc)}
            except AbortedError:
                failed = {uri: "the turn was cancelled before the editor answered"}
            if not failed:
                return None
            return (
                f"Note: the edit is in the editor, but the editor did not save {edit.path.name} "
                f"({failed.get(uri, 'not saved')}); commands and other programs see the old file."
            )
        try:
            await asyncio.to_thread(DiskEditApplier.write_text, edit.path, edit.after_text)
        except OSError as exc:
            return (
                f"Note: the edit is in the editor, but {edit.path.name} could not be written to disk "
                f"({exc.strerror or exc}); commands and other programs see the old file."
            )
        return None
