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

from dsh_daemon.host.port import ComputedEdit, DiskEditApplier, EditConflictError, sha256_text

logger = logging.getLogger(__name__)
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


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
        documents: EditorDocuments,
        disk: DiskEditApplier,
        client_capabilities: Callable[[], types.ClientCapabilities | None],
    ) -> None:
        self._server = server
        self._documents = documents
        self._disk = disk
        self._capabilities = client_capabilities

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

    async def apply(self, edit: ComputedEdit) -> None:
        if not self._can_apply() or (edit.created and not self._can_create()):
            await self._disk.apply(edit)
            return
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
        result = await self._server.workspace_apply_edit_async(
            types.ApplyWorkspaceEditParams(edit=workspace_edit, label=f"dsh: edit {edit.path.name}")
        )
        if not result.applied:
            reason = result.failure_reason or "the editor refused the edit"
            raise EditConflictError(f"{edit.path}: {reason}")
