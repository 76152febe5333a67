"""Paths a client sends (a session's cwd, its extra roots), checked before the OS sees them, the same
way for both front ends: no NUL, no longer than the OS allows. A path past those limits would make
`stat` raise instead of answering, which must be the client's `invalid_params`, not a daemon fault."""

from __future__ import annotations

import os

from dsh_daemon.host.errors import invalid_params

PATH_MAX_BYTES = 4096
NAME_MAX_BYTES = 255


def checked_path(value: str, method: str, key: str) -> str:
    """`value` unchanged, or `invalid_params` naming `key` (a NUL, too long, a component too long)."""
    if "\0" in value:
        raise invalid_params(f"{method}: '{key}' must not contain NUL characters")
    encoded = value.encode("utf-8", "surrogateescape")
    if len(encoded) > PATH_MAX_BYTES:
        raise invalid_params(f"{method}: '{key}' is {len(encoded)} bytes long, over {PATH_MAX_BYTES}")
    if any(len(part) > NAME_MAX_BYTES for part in encoded.split(b"/")):
        raise invalid_params(f"{method}: '{key}' has a path component over {NAME_MAX_BYTES} bytes")
    return value


def is_directory(path: str) -> bool:
    """Whether `path` is a directory; False (not an exception) for a path the OS refuses to look at."""
    try:
        return os.path.isdir(path)
    except (OSError, ValueError):
        return False
