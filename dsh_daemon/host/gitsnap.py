"""Snapshots of a git work tree that leave the repository's state alone (the index, HEAD, the stash
list and every ref stay as they are): the work tree is added to a temporary copy of the index
(`GIT_INDEX_FILE`) and written as a tree object. Only objects are written (git's own object store,
where an unreferenced object lives until `git gc` prunes it: two weeks by default).

What a snapshot holds is what `git add -A` would take: tracked and untracked files, not ignored ones.
git runs through `gitrun` (nothing the repository configures runs: no hook, filter or fsmonitor, and
none of the daemon's secrets in its environment); a snapshot is taken without any filter, so its
blobs hold the bytes on disk. Blocking: call these off the event loop."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from dsh_daemon.host.gitrun import NO_DIFF_PROGRAMS, GitFailed, no_filters, run_git

GitError = GitFailed  # a snapshot git fails or times out on is skipped: the rewind says so


def _git(
    root: Path | str, *args: str, env: dict[str, str] | None = None, config: tuple[str, ...] = ()
) -> bytes:
    return run_git(root, *args, env=env, config=config)[0]


def work_tree_root(cwd: Path | str) -> Path | None:
    """The top of the git work tree holding `cwd` (None: not in one, or no git)."""
    try:
        out = _git(cwd, "rev-parse", "--show-toplevel").decode().strip()
    except GitError:
        return None
    return Path(out) if out else None


def snapshot(root: Path | str) -> str:
    """A tree object of the work tree as it is now (tracked and untracked files, ignored ones left out)."""
    index = _git(root, "rev-parse", "--path-format=absolute", "--git-path", "index").decode().strip()
    fd, temp = tempfile.mkstemp(prefix="dsh-index-")
    os.close(fd)
    try:
        if os.path.exists(index):
            # A copy keeps the real index's stat data: `add -A` then re-reads only changed files. It
            # keeps the index's mtime too: git re-reads an entry as racily clean only when the file's
            # mtime is not older than the index's, and a copy dated now made a same-size edit in the
            # second the index was written look unchanged (a worktree's first edit went missing).
            shutil.copyfile(index, temp)
            stat = os.stat(index)
            os.utime(temp, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        else:
            os.unlink(temp)
        env = {"GIT_INDEX_FILE": temp}
        # write-tree too: writing an index re-reads a racily clean file through its clean filter.
        off = no_filters(root)
        _git(root, "add", "-A", "--", ".", env=env, config=off)
        return _git(root, "write-tree", env=env, config=off).decode().strip()
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temp)


@dataclass(frozen=True, slots=True)
class Change:
    path: str  # relative to the work tree's root
    old: str | None  # blob id before (None: absent)
    new: str | None  # blob id after (None: absent)
    old_mode: str
    new_mode: str


_ZERO = "0" * 40


def changes(root: Path | str, before: str, after: str) -> list[Change]:
    """The files that differ between two trees (renames as a deletion and an addition)."""
    out = _git(root, "diff-tree", *NO_DIFF_PROGRAMS, "-r", "-z", "--no-renames", before, after)
    parts = out.split(b"\0")
    found: list[Change] = []
    index = 0
    while index + 1 < len(parts):
        meta, path = parts[index].decode(), parts[index + 1].decode("utf-8", "surrogateescape")
        index += 2
        fields = meta.lstrip(":").split()
        if len(fields) < 5:
            continue
        old_mode, new_mode, old, new = fields[0], fields[1], fields[2], fields[3]
        found.append(
            Change(path, None if old == _ZERO else old, None if new == _ZERO else new, old_mode, new_mode)
        )
    return found


def has_object(root: Path | str, object_id: str) -> bool:
    try:
        _git(root, "cat-file", "-e", object_id)
    except GitError:
        return False
    return True


def read_blob(root: Path | str, blob: str) -> bytes:
    return _git(root, "cat-file", "blob", blob)


def blob_id(data: bytes) -> str:
    """git's id of a blob with these bytes (what `git hash-object` prints, without a filter)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()
