"""Where the editor's unsaved text comes from. The server implements `DocumentSource` from LSP
`didOpen`/`didChange`; tools read through it first so the model sees what the person sees."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Protocol


class DocumentSource(Protocol):
    def text_for(self, path: Path) -> str | None:
        """The open document's current text for the real path `path`, or None when it is not open."""
        ...


class NoDocuments:
    """No editor attached: every read goes to disk."""

    def text_for(self, path: Path) -> str | None:
        return None


class StaticDocuments:
    """A fixed set of open documents (tests, or a client that pushes snapshots)."""

    def __init__(self, texts: Mapping[Path, str] | None = None) -> None:
        self.texts: dict[Path, str] = dict(texts or {})

    def text_for(self, path: Path) -> str | None:
        return self.texts.get(path)
