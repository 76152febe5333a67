"""The client's files: `fs/read_text_file` for what the editor holds (unsaved buffers) and
`fs/write_text_file` for edits, when the client advertises them; the disk otherwise.

The tools read documents synchronously (`DocumentSource.text_for`), so the text is fetched just
before a call that reads or edits a file, by a pre-execute hook that runs ahead of the permission
policy (so an edit's preview is computed from the editor's text too). An edit is applied only if the
file still holds exactly the text it was computed from (else `EDIT_CONFLICT`, nothing written).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsh_daemon.acp.rpc import Connection
from dsh_daemon.host.port import (
    AbortSignal,
    ComputedEdit,
    DiskEditApplier,
    EditConflictError,
    PreExecuteDecision,
    ToolCall,
    ToolError,
    Workspace,
    sha256_text,
)

logger = logging.getLogger(__name__)

FS_TIMEOUT_S = 30.0
FILE_TOOLS = frozenset({"read_file", "edit_file", "write_file"})


@dataclass(frozen=True)
class FsCapabilities:
    read: bool = False
    write: bool = False

    @classmethod
    def parse(cls, client_capabilities: Any) -> FsCapabilities:
        fs = client_capabilities.get("fs") if isinstance(client_capabilities, Mapping) else None
        if not isinstance(fs, Mapping):
            return cls()
        return cls(fs.get("readTextFile") is True, fs.get("writeTextFile") is True)


class ClientFiles:
    """One session's view of the client's files (a `DocumentSource`, an `EditApplier`, and the hook)."""

    def __init__(
        self, connection: Connection, session_id: str, workspace: Workspace, capabilities: FsCapabilities
    ) -> None:
        self._connection = connection
        self._session_id = session_id
        self._workspace = workspace
        self.capabilities = capabilities
        self._texts: dict[Path, str] = {}
        self._disk = DiskEditApplier(workspace)

    # ---- DocumentSource ------------------------------------------------------------------------------

    def text_for(self, path: Path) -> str | None:
        return self._texts.get(path)

    async def read(self, path: Path) -> str | None:
        """The client's text of `path` (None: it could not give one, e.g. no such file)."""
        request_id, future = self._connection.send_request(
            "fs/read_text_file", {"sessionId": self._session_id, "path": str(path)}
        )
        try:
            result = await asyncio.wait_for(asyncio.shield(future), FS_TIMEOUT_S)
        except TimeoutError:
            self._connection.cancel_outgoing(request_id)
            return None
        except Exception as exc:
            logger.info("fs/read_text_file %s: %s", path, exc)
            return None
        content = result.get("content") if isinstance(result, Mapping) else None
        return content if isinstance(content, str) else None

    async def prefetch(self, call: ToolCall, signal: AbortSignal) -> PreExecuteDecision | None:
        """Pre-execute hook: fetch the editor's text of the file a file tool is about to touch."""
        if not self.capabilities.read or call.name not in FILE_TOOLS or call.args is None:
            return None
        raw = call.args.get("path")
        if not isinstance(raw, str):
            return None
        try:
            path = self._workspace.resolve(raw)
        except (ToolError, OSError, ValueError):
            return None  # the tool reports it
        text = await signal.race(self.read(path))
        if text is None:
            self._texts.pop(path, None)
        else:
            self._texts[path] = text
        return None

    # ---- EditApplier ---------------------------------------------------------------------------------

    async def apply(self, edit: ComputedEdit, signal: AbortSignal | None = None) -> str | None:
        if not self.capabilities.write:
            await self._disk.apply(edit)
            self._texts.pop(edit.path, None)
            return None
        if self.capabilities.read:
            current = await self.read(edit.path)
            if edit.created:
                if current:
                    raise EditConflictError(
                        f"{edit.path} was created by someone else meanwhile; read it first"
                    )
            elif current is None or sha256_text(current) != edit.before_sha256:
                raise EditConflictError(
                    f"{edit.path} changed since the edit was computed; read it again and redo the edit"
                )
        elif not edit.created:
            current_hash = await asyncio.to_thread(
                DiskEditApplier.current_hash, edit.path, len(edit.before_text.encode("utf-8"))
            )
            if current_hash != edit.before_sha256:
                raise EditConflictError(
                    f"{edit.path} changed since the edit was computed; read it again and redo the edit"
                )
        request_id, future = self._connection.send_request(
            "fs/write_text_file",
            {"sessionId": self._session_id, "path": str(edit.path), "content": edit.after_text},
        )
        try:
            await asyncio.wait_for(asyncio.shield(future), FS_TIMEOUT_S)
        except TimeoutError:
            self._connection.cancel_outgoing(request_id)
            raise EditConflictError(f"{edit.path}: the editor did not confirm the write") from None
        except Exception as exc:
            raise EditConflictError(f"{edit.path}: the editor refused the write: {exc}") from None
        self._texts[edit.path] = edit.after_text
        return None
