"""The editor's own abilities, asked for over the wire (issue 26, protocol.md §9): `dsh/document/save`,
`dsh/editor/diagnostics` and the `dsh/editor/*` language features, each offered only when the
client advertised it under `initialize.params.capabilities.experimental.dsh`.

Every request is bounded by a timeout; a request that times out is cancelled with `$/cancelRequest`,
and any failure is an `EditorUnavailable` the tools turn into a result for the model (never a wire
error, never a stalled turn).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from dsh_daemon.host.port import (
    LANGUAGE_FEATURES,
    EditorUnavailable,
    FileDiagnostics,
    LanguageFeature,
    ToolError,
    read_whole,
)

logger = logging.getLogger(__name__)

UNSAVED_CHECK_MAX_DOCUMENTS = 200  # open documents compared with disk before a command
UNSAVED_CHECK_MAX_BYTES = 8 << 20  # a bigger file is not compared (not reported)


@dataclass(frozen=True)
class ClientDsh:
    """What the client offers (`capabilities.experimental.dsh`)."""

    document_save: bool = False
    diagnostics: bool = False
    language_features: frozenset[str] = frozenset()
    # `settleMs` on dsh/editor/diagnostics: the client answers when its language servers re-checked
    diagnostics_settle: bool = False

    @classmethod
    def of(cls, capabilities: types.ClientCapabilities | None) -> ClientDsh:
        experimental = capabilities.experimental if capabilities is not None else None
        dsh = experimental.get("dsh") if isinstance(experimental, Mapping) else None
        if not isinstance(dsh, Mapping):
            return cls()
        features = dsh.get("languageFeatures")
        offered = frozenset(
            f for f in (features if isinstance(features, list) else []) if f in LANGUAGE_FEATURES
        )
        return cls(
            dsh.get("documentSave") is True,
            dsh.get("diagnostics") is True,
            offered,
            dsh.get("diagnostics") is True and dsh.get("diagnosticsSettle") is True,
        )


async def client_request(
    server: LanguageServer, method: str, params: Mapping[str, Any], timeout_s: float
) -> Mapping[str, Any]:
    """One request to the client, bounded by `timeout_s`; the answer must be an object."""
    msg_id = f"dsh-{uuid.uuid4()}"
    future = asyncio.wrap_future(server.protocol.send_request(method, dict(params), msg_id=msg_id))
    try:
        async with asyncio.timeout(timeout_s):
            answer = await future
    except TimeoutError:
        server.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=msg_id))
        raise EditorUnavailable(f"the editor did not answer {method} within {timeout_s:g} s") from None
    except asyncio.CancelledError:
        if not future.done():
            server.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=msg_id))
        raise
    except Exception as exc:
        raise EditorUnavailable(f"the editor could not answer {method}: {exc}") from None
    if not isinstance(answer, Mapping):
        raise EditorUnavailable(f"the editor's answer to {method} is not an object")
    return answer


def _path_of(uri: Any) -> Path | None:
    if not isinstance(uri, str) or not uri.startswith("file:"):
        return None
    fs = to_fs_path(uri)
    return Path(fs) if fs else None


class LspEditor:
    """`EditorServices` over the LSP connection."""

    terminals = None  # the LSP wire has no terminals: commands run in the daemon

    def __init__(
        self,
        server: LanguageServer,
        offered: Callable[[], ClientDsh],
        timeout_s: Callable[[], float],
    ) -> None:
        self._server = server
        self._offered = offered
        self._timeout_s = timeout_s

    @property
    def offers_save(self) -> bool:
        return self._offered().document_save

    @property
    def diagnostics_supported(self) -> bool:
        return self._offered().diagnostics

    @property
    def language_features(self) -> frozenset[str]:
        return self._offered().language_features

    def unsaved_paths(self) -> list[Path]:
        try:
            documents = dict(self._server.workspace.text_documents)
        except Exception:
            return []
        out = []
        for uri, document in list(documents.items())[:UNSAVED_CHECK_MAX_DOCUMENTS]:
            path = _path_of(uri)
            if path is None:
                continue
            try:
                real = Path(os.path.realpath(path))  # the editor may name it through a symlink
                raw = read_whole(real, str(real), UNSAVED_CHECK_MAX_BYTES)
            except (ToolError, OSError, ValueError):
                continue  # not a regular file (gone, a FIFO, a device), or too big to compare
            on_disk = raw.data.decode("utf-8", errors="replace")
            if on_disk != document.source:
                out.append(path)
        return out

    async def diagnostics(
        self, paths: Sequence[Path] | None, settle_s: float | None = None
    ) -> list[FileDiagnostics]:
        offered = self._offered()
        if not offered.diagnostics:
            return []
        uris = None if paths is None else [p.as_uri() for p in paths]
        params: dict[str, Any] = {"uris": uris}
        timeout_s = self._timeout_s()
        if settle_s is not None and settle_s > 0:
            if offered.diagnostics_settle and uris is not None:
                # The client answers as soon as its language servers re-checked: usually well
                # before the cap, which bounds the wait as the fixed settle time did.
                params["settleMs"] = round(settle_s * 1000)
                timeout_s += settle_s
            else:
                await asyncio.sleep(settle_s)  # a client that cannot tell: a fixed settle time
        started = time.monotonic()
        answer = await client_request(self._server, "dsh/editor/diagnostics", params, timeout_s)
        items = answer.get("items")
        out = []
        unsettled = []
        for item in items if isinstance(items, list) else []:
            if not isinstance(item, Mapping):
                continue
            path = _path_of(item.get("uri"))
            found = item.get("diagnostics")
            if path is None or not isinstance(found, list):
                continue
            if item.get("settled") is False:
                unsettled.append(path.name)
            out.append(FileDiagnostics(path, tuple(d for d in found if isinstance(d, Mapping))))
        if "settleMs" in params:
            logger.info(
                "diagnostics after an edit: %s (answered after %.2f s)",
                f"not re-checked within {settle_s:g} s: {', '.join(unsettled)}"
                if unsettled
                else "re-checked by the editor's language servers",
                time.monotonic() - started,
            )
        return out

    async def language_request(self, feature: LanguageFeature, params: Mapping[str, Any]) -> dict[str, Any]:
        if feature not in self.language_features:
            raise EditorUnavailable(f"the editor does not offer {feature}")
        answer = await client_request(self._server, f"dsh/editor/{feature}", params, self._timeout_s())
        return dict(answer)

    async def save(self, uris: Sequence[str]) -> dict[str, str]:
        """`dsh/document/save`: the uris the editor could not save, with its reason (empty: all saved)."""
        answer = await client_request(
            self._server, "dsh/document/save", {"uris": list(uris)}, self._timeout_s()
        )
        saved = answer.get("saved")
        failed: dict[str, str] = {}
        for entry in answer.get("failed") or []:
            if isinstance(entry, Mapping) and isinstance(entry.get("uri"), str):
                failed[entry["uri"]] = str(entry.get("message") or "not saved")
        for uri in uris:
            if uri not in failed and not (isinstance(saved, list) and uri in saved):
                failed[uri] = "the editor did not say it saved it"
        return failed
