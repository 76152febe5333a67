"""Reading text files the way the tools need: binary refused, UTF-8 decoded losslessly (BOM and CRLF
kept), line endings as editors count them (`\\n`, `\\r\\n` and a lone `\\r` each end a line)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from dsh_daemon.tools.errors import FileToolError
from dsh_daemon.tools.safefile import read_prefix, read_whole
from dsh_daemon.tools.workspace import Workspace

SNIFF_BYTES = 8192


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def looks_binary(head: bytes) -> bool:
    """NUL in the first block: the same heuristic git and ripgrep use."""
    return b"\0" in head


def read_whole_text(workspace: Workspace, path: Path, shown: str, max_bytes: int) -> str:
    """The whole file as text, for edits: refuses binary, non-UTF-8 and files over `max_bytes`."""
    raw = read_whole(path, shown, max_bytes, workspace, purpose="editing")
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
        raw = read_prefix(path, str(path), max_bytes)
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
