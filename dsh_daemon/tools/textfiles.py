"""Reading text files the way the tools need: binary refused, UTF-8 decoded losslessly (BOM and CRLF
kept), line endings as editors count them (`\\n`, `\\r\\n` and a lone `\\r` each end a line)."""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from dsh_daemon.tools.errors import FileToolError
from dsh_daemon.tools.workspace import Workspace

SNIFF_BYTES = 8192


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def looks_binary(head: bytes) -> bool:
    """NUL in the first block: the same heuristic git and ripgrep use."""
    return b"\0" in head


def check_file(path: Path, shown: str) -> os.stat_result:
    """Refuse anything but a regular file before it is opened: opening a device can have effects of
    its own (a tape rewinds, a watchdog arms), and reading a FIFO or a tty can block forever."""
    try:
        info = path.stat()
    except FileNotFoundError:
        raise FileToolError(f"{shown} does not exist", "NOT_FOUND") from None
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        reason = getattr(exc, "strerror", None) or exc
        raise FileToolError(f"cannot access {shown}: {reason}", "IO_ERROR") from None
    if stat.S_ISDIR(info.st_mode):
        raise FileToolError(f"{shown} is a directory (use list_dir)", "IS_DIRECTORY")
    if not stat.S_ISREG(info.st_mode):
        raise FileToolError(f"{shown} is not a regular file", "NOT_A_FILE")
    return info


def open_regular(path: Path, shown: str, workspace: Workspace | None = None) -> int:
    """THE way this daemon opens a file to read it (tools, change tracking, edits, editor context): a
    regular file only, opened without blocking, and re-verified against `workspace` once open."""
    check_file(path, shown)
    try:
        # O_NONBLOCK: if the path was swapped for a FIFO since it was checked, opening must not hang.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise FileToolError(f"cannot open {shown}: {exc.strerror}", "IO_ERROR") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise FileToolError(f"{shown} is not a regular file", "NOT_A_FILE")
        if workspace is not None:
            workspace.verify_open(fd, path)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_confined(workspace: Workspace, path: Path, shown: str) -> int:
    return open_regular(path, shown, workspace)


@dataclass(frozen=True, slots=True)
class RawRead:
    data: bytes  # at most the cap asked for
    truncated: bool  # the file held more than that
    stat: os.stat_result


def read_regular(path: Path, shown: str, max_bytes: int, workspace: Workspace | None = None) -> RawRead:
    """At most `max_bytes` of a regular file (`open_regular`), never reading past the cap. Blocking:
    call it off the event loop."""
    fd = open_regular(path, shown, workspace)
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        data = handle.read(max_bytes + 1)
    return RawRead(data[:max_bytes], len(data) > max_bytes, info)


def read_whole_text(workspace: Workspace, path: Path, shown: str, max_bytes: int) -> str:
    """The whole file as text, for edits: refuses binary, non-UTF-8 and files over `max_bytes`."""
    info = check_file(path, shown)
    if info.st_size > max_bytes:
        raise FileToolError(
            f"{shown} is {info.st_size} bytes, over the {max_bytes}-byte limit for editing", "TOO_LARGE"
        )
    raw = read_regular(path, shown, max_bytes, workspace)
    if raw.truncated:
        raise FileToolError(f"{shown} grew over the {max_bytes}-byte limit for editing", "TOO_LARGE")
    data = raw.data
    if looks_binary(data[:SNIFF_BYTES]):
        raise FileToolError(f"{shown} is a binary file; only text files can be edited", "BINARY")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise FileToolError(f"{shown} is not UTF-8 text; it cannot be edited safely", "NOT_UTF8") from None
    return text


def utf8_hash_of_file(path: Path, max_bytes: int) -> str | None:
    """sha256 of a regular UTF-8 text file of at most `max_bytes` (None: anything else, or unreadable)."""
    try:
        raw = read_regular(path, str(path), max_bytes)
    except (FileToolError, OSError):
        return None
    if raw.truncated or looks_binary(raw.data[:SNIFF_BYTES]):
        return None
    try:
        return sha256_text(raw.data.decode("utf-8"))
    except UnicodeDecodeError:
        return None


def uses_crlf_only(text: str) -> bool:
    crlf = text.count("\r\n")
    return crlf > 0 and crlf == text.count("\n")


def match_newlines(text: str, reference: str) -> str:
    """Models write `\\n`; in a file that uses CRLF throughout, keep it that way."""
    if uses_crlf_only(reference) and "\n" in text and "\r\n" not in text:
        return text.replace("\n", "\r\n")
    return text
