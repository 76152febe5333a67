"""Edits are computed (pure: before/after text, diff, hashes) separately from being applied, so the
server can route the same `ComputedEdit` through the editor's `workspace/applyEdit` instead of disk."""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from dsh_daemon.tools.errors import EditConflictError, FileToolError
from dsh_daemon.tools.safefile import read_prefix
from dsh_daemon.tools.textfiles import SNIFF_BYTES, looks_binary, sha256_text
from dsh_daemon.tools.workspace import Workspace

if TYPE_CHECKING:
    from dsh_daemon.agent.signal import AbortSignal


@dataclass(frozen=True, slots=True)
class ComputedEdit:
    path: Path  # the real (resolved) path
    before_text: str  # "" when created
    after_text: str
    unified_diff: str
    before_sha256: str | None  # None when the file is created
    after_sha256: str
    created: bool
    # The person's unsaved changes in the file (protocol.md §9): None, none; "apart", the file on
    # disk gets `disk_text` (the saved text plus only this edit); "both", the document is saved with
    # them; "buffer-only", nothing is written (the edit overlaps them and the person chose so).
    unsaved: str | None = None
    disk_text: str | None = None
    disk_before_sha256: str | None = None  # the saved text `disk_text` was computed from
    # What the editor's undo list and edit list call it: "edit" (the agent's), "rewind" or "undo"
    # (the person's rewind or turn-diff undo taking an edit back), in the applyEdit label.
    verb: str = "edit"

    def meta(self) -> dict[str, Any]:
        """What clients render: `tool/result` meta."""
        meta: dict[str, Any] = {
            "path": str(self.path),
            "diff": self.unified_diff,
            "beforeHash": self.before_sha256,
            "afterHash": self.after_sha256,
            "created": self.created,
        }
        if self.unsaved is not None:
            meta["unsaved"] = self.unsaved
        return meta

    @property
    def stats(self) -> tuple[int, int]:
        """(lines added, lines removed) according to the diff."""
        added = removed = 0
        for line in self.unified_diff.splitlines():
            if line.startswith("+") and not line.startswith("+++"):
                added += 1
            elif line.startswith("-") and not line.startswith("---"):
                removed += 1
        return added, removed


def unified_diff(before: str, after: str, name: str, *, created: bool = False) -> str:
    """A `diff -u`-style text; a missing final newline is marked as `diff` does."""
    import difflib  # on first use: a session that edits nothing never loads it (issue 40, RSS)

    old = before.splitlines(keepends=True)
    new = after.splitlines(keepends=True)
    lines = difflib.unified_diff(old, new, "/dev/null" if created else f"a/{name}", f"b/{name}")
    out: list[str] = []
    for line in lines:
        out.append(line)
        if not line.endswith(("\n", "\r")):
            out.append("\n\\ No newline at end of file\n")
    return "".join(out)


def compute_edit(path: Path, before: str | None, after: str, name: str) -> ComputedEdit:
    """`before` is None when the file does not exist yet."""
    created = before is None
    before_text = before or ""
    return ComputedEdit(
        path=path,
        before_text=before_text,
        after_text=after,
        unified_diff=unified_diff(before_text, after, name, created=created),
        before_sha256=None if created else sha256_text(before_text),
        after_sha256=sha256_text(after),
        created=created,
    )


class EditApplier(Protocol):
    async def apply(self, edit: ComputedEdit, signal: AbortSignal | None = None) -> str | None:
        """Make `edit` real; raise EditConflictError when the target no longer matches `before`.
        Returns a note for the model when the edit landed with a caveat (e.g. in the editor's buffer,
        but the file on disk could not be written), else None. `signal` (the turn's) may end a wait
        on the editor with `AbortedError`; a write to disk is never cut short by it."""
        ...


class DiskEditApplier:
    """Writes atomically (temp file + rename in the same directory, mode kept) after re-checking that
    the file still holds exactly the text the edit was computed from."""

    def __init__(self, workspace: Workspace | None = None) -> None:
        self.workspace = workspace

    async def apply(self, edit: ComputedEdit, signal: AbortSignal | None = None) -> str | None:
        await asyncio.to_thread(self._apply, edit)
        return None

    def _apply(self, edit: ComputedEdit) -> None:
        if self.workspace is not None:
            # A symlink created since the edit was computed must not redirect the write.
            if self.workspace.resolve(edit.path) != edit.path:
                raise EditConflictError(f"{edit.path} now resolves elsewhere; read it again")
        data = edit.after_text.encode("utf-8")
        if edit.created:
            edit.path.parent.mkdir(parents=True, exist_ok=True)
            self._create(edit.path, data)
            return
        current = self.current_hash(edit.path, len(edit.before_text.encode("utf-8")))
        if current != edit.before_sha256:
            raise EditConflictError(
                f"{edit.path} changed since the edit was computed (on disk, or it has unsaved changes "
                "in the editor); read it again and redo the edit"
            )
        self.replace_whole(edit.path, data)

    @staticmethod
    def replace_whole(path: Path, data: bytes) -> None:
        """Atomically replace an existing file's bytes (temp file + rename, mode kept)."""
        mode = path.stat().st_mode & 0o7777
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".dsh-tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp, mode)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    @staticmethod
    def write_text(path: Path, text: str) -> None:
        """Write `text` as the file's whole content (created if missing, parents included): the
        editor's buffer saved by the daemon for a client that cannot save it itself."""
        data = text.encode("utf-8")
        if path.exists():
            DiskEditApplier.replace_whole(path, data)
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "xb") as handle:
            handle.write(data)

    @staticmethod
    def current_hash(path: Path, before_bytes: int) -> str | None:
        """The file's text hash now (None: not UTF-8 text, or bigger than the text the edit began from)."""
        try:
            raw = read_prefix(path, str(path), before_bytes)
        except FileToolError as exc:
            if exc.code == "NOT_FOUND":
                raise EditConflictError(f"{path} was deleted since the edit was computed") from None
            raise EditConflictError(f"{path} cannot be read any more: {exc}") from None
        if raw.truncated or looks_binary(raw.data[:SNIFF_BYTES]):
            return None
        try:
            return sha256_text(raw.data.decode("utf-8"))
        except UnicodeDecodeError:
            return None

    @staticmethod
    def _create(path: Path, data: bytes) -> None:
        """Create without replacing a file that appeared meanwhile: write a temp file, then hard-link it
        into place (link fails when the name exists); plain exclusive create where links are refused."""
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".dsh-tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp, 0o666 & ~_UMASK)
            try:
                os.link(tmp, path)
            except FileExistsError:
                raise EditConflictError(
                    f"{path} was created by someone else meanwhile; read it first"
                ) from None
            except OSError:
                try:
                    with open(path, "xb") as handle:
                        handle.write(data)
                except FileExistsError:
                    raise EditConflictError(f"{path} was created by someone else meanwhile") from None
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _read_umask() -> int:
    """Read once at import: os.umask can only be read by setting it, which would race with other
    threads creating files, so the /proc value is preferred."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _read_umask()
