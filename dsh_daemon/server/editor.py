"""The editor's own abilities, asked for over the wire (issue 26, protocol.md §9): `dsh/document/save`,
`dsh/editor/diagnostics` and the `dsh/editor/*` language features, each offered only when the
client advertised it under `initialize.params.capabilities.experimental.dsh`.

Every request goes through `ClientRequests` (server/client_requests.py): bounded by a timeout, its
answer's shape checked (server/editor_answers.py), ended by the turn's cancel; any failure is an
`EditorUnavailable` the tools turn into a result for the model (never a wire error, never a stalled
turn).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from dsh_daemon.host.port import (
    LANGUAGE_FEATURES,
    AbortSignal,
    EditorUnavailable,
    FileDiagnostics,
    LanguageFeature,
    ToolError,
    read_whole,
)
from dsh_daemon.server.client_requests import ClientRequests
from dsh_daemon.server.editor_answers import (
    LANGUAGE_ANSWER_CHECKS,
    array,
    diagnostics_problem,
    save_problem,
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
    # `texts` on dsh/document/save: the client writes the given text to the file, keeping the
    # document's unsaved changes in its buffer (issue 37)
    document_save_text: bool = False

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
            dsh.get("documentSave") is True and dsh.get("documentSaveText") is True,
        )


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
        requests: ClientRequests,
        offered: Callable[[], ClientDsh],
        timeout_s: Callable[[], float],
    ) -> None:
        self._server = server
        self._requests = requests
        self._offered = offered
        self._timeout_s = timeout_s

    @property
    def offers_save(self) -> bool:
        return self._offered().document_save

    @property
    def offers_save_text(self) -> bool:
        return self._offered().document_save_text

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
        self, paths: Sequence[Path] | None, settle_s: float | None = None, signal: AbortSignal | None = None
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
                # a client that cannot tell: a fixed settle time
                sleep = asyncio.sleep(settle_s)
                await (sleep if signal is None else signal.race(sleep))
        started = time.monotonic()
        answer = await self._requests.ask(
            "dsh/editor/diagnostics", params, timeout_s, check=diagnostics_problem, signal=signal
        )
        out = []
        unsettled = []
        for item in array(answer.get("items")) or []:
            path = _path_of(item.get("uri"))
            found = array(item.get("diagnostics"))
            if path is None or found is None:
                continue
            if item.get("settled") is False:
                unsettled.append(path.name)
            out.append(FileDiagnostics(path, tuple(found)))
        if "settleMs" in params:
            logger.info(
                "diagnostics after an edit: %s (answered after %.2f s)",
                f"not re-checked within {settle_s:g} s: {', '.join(unsettled)}"
                if unsettled
                else "re-checked by the editor's language servers",
                time.monotonic() - started,
            )
        return out

    async def language_request(
        self, feature: LanguageFeature, params: Mapping[str, Any], signal: AbortSignal | None = None
    ) -> dict[str, Any]:
        if feature not in self.language_features:
            raise EditorUnavailable(f"the editor does not offer {feature}")
        answer = await self._requests.ask(
            f"dsh/editor/{feature}",
            dict(params),
            self._timeout_s(),
            check=LANGUAGE_ANSWER_CHECKS[feature],
            signal=signal,
        )
        return dict(answer)

    async def save(
        self,
        uris: Sequence[str],
        signal: AbortSignal | None = None,
        texts: Mapping[str, str] | None = None,
    ) -> dict[str, str]:
        """`dsh/document/save`: the uris the editor could not save, with its reason (empty: all saved).
        `texts` (only to a client offering `documentSaveText`): the text to write for a uri instead
        of the document's."""
        params: dict[str, Any] = {"uris": list(uris)}
        if texts:
            params["texts"] = dict(texts)
        answer = await self._requests.ask(
            "dsh/document/save", params, self._timeout_s(), check=save_problem, signal=signal
        )
        saved = array(answer.get("saved")) or []
        failed: dict[str, str] = {}
        for entry in array(answer.get("failed")) or []:
            failed[entry["uri"]] = str(entry.get("message") or "not saved")
        for uri in uris:
            if uri not in failed and uri not in saved:
                failed[uri] = "the editor did not say it saved it"
        return failed
