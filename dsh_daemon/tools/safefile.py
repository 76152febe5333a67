"""The one safe reader: how the daemon opens and reads any file a model, an editor or a person names
(the tools, the editor tools and the locations an editor answers with, editor context, change
tracking, edit conflict checks, rewind, the unsaved-buffer check before a command).

What it guarantees, and why each part is there:
- only a regular file is read: a FIFO, a socket, a device (`/dev/zero`, a tty) or a directory fails
  with a typed `FileToolError` (`NOT_A_FILE`, `IS_DIRECTORY`) before any byte is read; opening a
  device can have effects of its own (a tape rewinds, a watchdog arms) and reading a FIFO or a tty
  blocks until a writer comes, which may be never;
- the open never blocks: `O_NONBLOCK`, then `fstat` on the opened descriptor, because the path can be
  swapped for a FIFO between the check and the open; `O_NOFOLLOW`, because callers pass paths they
  already resolved (symlinks followed and judged), so a symlink in the last component now means the
  path was swapped since, and it is refused rather than followed to wherever it leads;
- at most the cap is read, never the whole of a file of any size: `read_prefix` says whether there
  was more, `read_whole` refuses a larger file with `TOO_LARGE`, saying its size and the cap;
- the `*_async` forms read in a worker thread: a slow disk or a cold 8 MB read never stalls the event
  loop, so every other session keeps answering.

It does not stop a file from changing while it is read (a writer may append or truncate between the
`fstat` and the last byte); callers that need one consistent text compare hashes afterwards.
"""

from __future__ import annotations

import asyncio
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from dsh_daemon.tools.errors import FileToolError
from dsh_daemon.tools.workspace import Workspace

_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)


class FileTooLargeError(FileToolError):
    """A file over the cap of the read that wanted all of it."""

    code = "TOO_LARGE"

    def __init__(self, shown: str, size: int, cap: int, purpose: str = "") -> None:
        what = f" for {purpose}" if purpose else ""
        super().__init__(f"{shown} is {size} bytes, over the {cap}-byte limit{what}")
        self.size = size
        self.cap = cap


def check_regular(path: Path, shown: str) -> os.stat_result:
    """The file's `lstat`, or a typed refusal: missing, a directory, a symlink, anything not regular."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        raise FileToolError(f"{shown} does not exist", "NOT_FOUND") from None
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        reason = getattr(exc, "strerror", None) or exc
        raise FileToolError(f"cannot access {shown}: {reason}", "IO_ERROR") from None
    if stat.S_ISDIR(info.st_mode):
        raise FileToolError(f"{shown} is a directory (use list_dir)", "IS_DIRECTORY")
    if stat.S_ISLNK(info.st_mode):
        raise _swapped_for_symlink(shown)
    if not stat.S_ISREG(info.st_mode):
        raise FileToolError(f"{shown} is not a regular file ({_kind(info.st_mode)})", "NOT_A_FILE")
    return info


def open_regular(path: Path, shown: str, workspace: Workspace | None = None) -> int:
    """A read-only descriptor of the regular file at `path` (the caller closes it), opened without
    blocking and re-checked once open: still a regular file, and still inside `workspace`."""
    check_regular(path, shown)
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        if exc.errno == getattr(os, "ELOOP", None):
            raise _swapped_for_symlink(shown) from None
        raise FileToolError(f"cannot open {shown}: {exc.strerror}", "IO_ERROR") from None
    except ValueError:
        raise FileToolError(f"cannot open {shown}: the path holds a NUL character", "IO_ERROR") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise FileToolError(f"{shown} is not a regular file ({_kind(mode)})", "NOT_A_FILE")
        if workspace is not None:
            workspace.verify_open(fd, path)
    except BaseException:
        os.close(fd)
        raise
    return fd


@dataclass(frozen=True, slots=True)
class RawRead:
    data: bytes  # at most the cap asked for
    truncated: bool  # the file held more than that
    stat: os.stat_result  # of the opened descriptor


def read_prefix(path: Path, shown: str, max_bytes: int, workspace: Workspace | None = None) -> RawRead:
    """At most `max_bytes` of a regular file (`open_regular`), never reading past the cap. Blocking:
    from the event loop, use `read_prefix_async`."""
    fd = open_regular(path, shown, workspace)
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        data = handle.read(max_bytes + 1)
    return RawRead(data[:max_bytes], len(data) > max_bytes, info)


def read_whole(
    path: Path, shown: str, max_bytes: int, workspace: Workspace | None = None, *, purpose: str = ""
) -> RawRead:
    """All of a regular file of at most `max_bytes`; `FileTooLargeError` (its size, the cap) otherwise,
    without reading it. Blocking: from the event loop, use `read_whole_async`."""
    fd = open_regular(path, shown, workspace)
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if info.st_size > max_bytes:
            raise FileTooLargeError(shown, info.st_size, max_bytes, purpose)
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:  # it grew since the fstat
        raise FileTooLargeError(shown, len(data), max_bytes, purpose)
    return RawRead(data, False, info)


async def read_prefix_async(
    path: Path, shown: str, max_bytes: int, workspace: Workspace | None = None
) -> RawRead:
    return await asyncio.to_thread(read_prefix, path, shown, max_bytes, workspace)


async def read_whole_async(
    path: Path, shown: str, max_bytes: int, workspace: Workspace | None = None, *, purpose: str = ""
) -> RawRead:
    return await asyncio.to_thread(read_whole, path, shown, max_bytes, workspace, purpose=purpose)


def _swapped_for_symlink(shown: str) -> FileToolError:
    return FileToolError(f"{shown} became a symbolic link after it was resolved; not followed", "NOT_A_FILE")


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a file"
