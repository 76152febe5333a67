"""Which file versions the model has seen, so a post-execute hook can tell it when a file changed
underneath it (an external edit, a formatter, a `git checkout`, a run_command)."""

from __future__ import annotations

import os
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from dsh_daemon.tools.documents import DocumentSource
from dsh_daemon.tools.textfiles import sha256_text, utf8_hash_of_file

Change = Literal["changed", "deleted"]


@dataclass
class _Seen:
    sha256: str | None  # None when only part of a huge file was read
    size: int | None  # disk stat when the version came from disk
    mtime_ns: int | None
    # After the model's own edit through the editor: the text the editor's synced copy may still show
    # until its change notification arrives (it is not a change, so no notice; cleared once caught up).
    superseded: str | None = None


class ReadTracker:
    def __init__(self, documents: DocumentSource, *, max_files: int = 256, max_bytes: int = 8 << 20):
        self.documents = documents
        self.max_files = max_files
        self.max_bytes = max_bytes
        self._seen: OrderedDict[Path, _Seen] = OrderedDict()

    def __contains__(self, path: Path) -> bool:
        return path in self._seen

    def record(self, path: Path, text: str | None, stat: os.stat_result | None = None) -> None:
        """The model now knows `text` (None: an unhashed part of a huge file) as `path`'s content."""
        seen = _Seen(
            sha256_text(text) if text is not None else None,
            stat.st_size if stat is not None else None,
            stat.st_mtime_ns if stat is not None else None,
        )
        self._seen[path] = seen
        self._seen.move_to_end(path)
        while len(self._seen) > self.max_files:
            self._seen.popitem(last=False)

    def record_current(self, path: Path, text: str, before: str | None = None) -> None:
        """After the model's own edit: `text` is current (the model's edit is the new read state);
        take the disk stat as it is now. `before`: the text the edit replaced, which the editor's
        synced copy may still show for a moment; it is not reported as a change."""
        try:
            stat = path.stat()
        except OSError:
            stat = None
        self.record(path, text, stat)
        if before is not None:
            self._seen[path].superseded = sha256_text(before)

    def record_rewound(self, path: Path, text: str | None, before: str | None) -> None:
        """A rewind that cut the conversation wrote `path` back to `text` (None: deleted it). The kept
        history saw that version (or never saw the file), so it is no change to report: a file the
        model knew is known again as `text`; a deleted one is forgotten."""
        if text is None:
            self._seen.pop(path, None)
        elif path in self._seen:
            self.record_current(path, text, before)

    def changes(self) -> list[tuple[Path, Change]]:
        """Files whose current view differs from what the model saw. Each change is reported once:
        the record moves on to the new version (the model is told; it re-reads when it needs to)."""
        out: list[tuple[Path, Change]] = []
        for path, seen in list(self._seen.items()):
            change = self._check(path, seen)
            if change == "deleted":
                del self._seen[path]
            if change is not None:
                out.append((path, change))
        return out

    def _check(self, path: Path, seen: _Seen) -> Change | None:
        document = self.documents.text_for(path)
        if document is not None:
            current = sha256_text(document)
            if current == seen.sha256:
                seen.superseded = None  # the editor caught up with the model's edit
                return None
            if current == seen.superseded:
                return None  # the editor has not sent the model's own edit back yet
            self._seen[path] = _Seen(current, seen.size, seen.mtime_ns)
            return "changed"
        try:
            stat = path.stat()
        except FileNotFoundError:
            return "deleted"
        except OSError:
            return None
        if stat.st_size == seen.size and stat.st_mtime_ns == seen.mtime_ns:
            return None  # fast path: untouched since the record
        on_disk = utf8_hash_of_file(path, self.max_bytes)
        self._seen[path] = _Seen(on_disk, stat.st_size, stat.st_mtime_ns)
        if on_disk is not None and on_disk == seen.sha256:
            return None  # touched (or the editor saved what the model saw) but the same text
        return "changed"
