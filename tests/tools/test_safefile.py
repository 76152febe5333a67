"""The one safe reader (tools/safefile.py) against real special files: what it refuses, with which
typed error, and that it never blocks nor reads past its cap (issue 32 item 3)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dsh_daemon.tools import safefile
from dsh_daemon.tools.errors import FileToolError
from dsh_daemon.tools.safefile import (
    FileTooLargeError,
    open_regular,
    read_prefix,
    read_prefix_async,
    read_whole,
    read_whole_async,
)

CAP = 8 * 1024 * 1024


def refused(path: Path) -> FileToolError:
    with pytest.raises(FileToolError) as caught:
        read_prefix(path, path.name, CAP)
    return caught.value


def test_only_regular_files_are_read(root: Path) -> None:
    os.mkfifo(root / "pipe")
    (root / "real.txt").write_text("text\n")
    (root / "link.txt").symlink_to(root / "real.txt")
    (root / "dir").mkdir()
    pipe = refused(root / "pipe")  # a blocking open would wait here for a writer, forever
    assert pipe.code == "NOT_A_FILE" and "(a FIFO)" in str(pipe)
    device = refused(Path("/dev/zero"))
    assert device.code == "NOT_A_FILE" and "(a character device)" in str(device)
    assert refused(root / "dir").code == "IS_DIRECTORY"
    assert refused(root / "missing").code == "NOT_FOUND"
    # callers pass resolved paths: a symlink in the last component means it was swapped since
    link = refused(root / "link.txt")
    assert link.code == "NOT_A_FILE" and "symbolic link" in str(link)
    assert read_prefix(root / "real.txt", "real.txt", CAP).data == b"text\n"


def test_a_fifo_swapped_in_after_the_check_is_refused_once_open(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The path is checked, then opened: a FIFO put there in between is opened without blocking and
    refused by the fstat of the opened descriptor."""
    os.mkfifo(root / "pipe")
    monkeypatch.setattr(safefile, "check_regular", lambda path, shown: None)  # the check saw a file
    with pytest.raises(FileToolError) as caught:
        open_regular(root / "pipe", "pipe")
    assert caught.value.code == "NOT_A_FILE"


async def test_a_huge_file_is_read_up_to_the_cap_or_refused_with_its_size_and_the_cap(root: Path) -> None:
    huge = root / "huge.bin"
    huge.write_bytes(b"head\n")
    os.truncate(huge, 1 << 30)  # sparse: no disk used
    prefix = await read_prefix_async(huge, "huge.bin", CAP)
    assert len(prefix.data) == CAP and prefix.truncated and prefix.stat.st_size == 1 << 30
    assert prefix.data.startswith(b"head\n")
    with pytest.raises(FileTooLargeError) as caught:
        await read_whole_async(huge, "huge.bin", CAP, purpose="editing")
    error = caught.value
    assert error.code == "TOO_LARGE" and (error.size, error.cap) == (1 << 30, CAP)
    assert str(error) == f"huge.bin is {1 << 30} bytes, over the {CAP}-byte limit for editing"
    small = root / "small.txt"
    small.write_text("all of it\n")
    assert read_whole(small, "small.txt", CAP).data == b"all of it\n"
