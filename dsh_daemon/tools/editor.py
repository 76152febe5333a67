"""What the editor can do for the tools beyond holding documents (issue 26): say which open documents
differ from disk, report its diagnostics, and answer language-feature questions through its own
language servers. A front end implements `EditorServices` from what its client advertised; each
ability is optional (`None` / empty: the client does not offer it, and the tools behave as without
an editor).

Values cross this seam as LSP JSON (`Diagnostic`, `Location`, ...) keyed by real paths, so the tools
need no LSP library.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from dsh_daemon.tools.terminal import Terminals

if TYPE_CHECKING:
    from dsh_daemon.agent.signal import AbortSignal

LanguageFeature = Literal["definition", "references", "symbols", "hover"]
LANGUAGE_FEATURES: tuple[LanguageFeature, ...] = ("definition", "references", "symbols", "hover")


@dataclass(frozen=True)
class FileDiagnostics:
    path: Path
    diagnostics: tuple[Mapping[str, Any], ...]  # LSP `Diagnostic` JSON


class EditorUnavailable(Exception):
    """The editor could not answer (no answer in time, an error reply, a malformed answer, the client
    gone)."""


class EditorServices(Protocol):
    @property
    def diagnostics_supported(self) -> bool: ...

    @property
    def language_features(self) -> frozenset[str]: ...

    @property
    def terminals(self) -> Terminals | None:
        """The editor's terminals, where `run_command` runs when offered (None: the daemon runs it)."""
        ...

    def unsaved_paths(self) -> list[Path]:
        """Open documents whose text differs from the file on disk (what a command would not see)."""
        ...

    async def diagnostics(
        self, paths: Sequence[Path] | None, settle_s: float | None = None, signal: AbortSignal | None = None
    ) -> list[FileDiagnostics]:
        """The editor's diagnostics of `paths` (None: every document with problems). With `settle_s`
        (after an edit): once the language servers have re-checked `paths`, waiting `settle_s` at most
        (an editor that cannot say when they have is asked after `settle_s`). `signal` (the turn's)
        ends the wait with `AbortedError`."""
        ...

    async def language_request(
        self, feature: LanguageFeature, params: Mapping[str, Any], signal: AbortSignal | None = None
    ) -> dict[str, Any]:
        """`dsh/editor/<feature>` with `params` (`uri` already a URI); the client's answer, its shape
        checked (`EditorUnavailable` naming the field otherwise)."""
        ...


class NoEditor:
    """No editor services: nothing unsaved is known, no diagnostics, no language features."""

    diagnostics_supported = False
    language_features: frozenset[str] = frozenset()
    terminals: Terminals | None = None

    def unsaved_paths(self) -> list[Path]:
        return []

    async def diagnostics(
        self, paths: Sequence[Path] | None, settle_s: float | None = None, signal: AbortSignal | None = None
    ) -> list[FileDiagnostics]:
        return []

    async def language_request(
        self, feature: LanguageFeature, params: Mapping[str, Any], signal: AbortSignal | None = None
    ) -> dict[str, Any]:
        raise EditorUnavailable("the editor offers no language features")
