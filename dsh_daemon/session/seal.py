"""The seal that ties a derived-state snapshot to its session and to the log it was folded from
(issue 32.4, docs/design.md §6.7): an HMAC-SHA256, under a secret of this state directory kept outside
the database file, of the session id, the snapshot's `upto` seq and format, the whole stored event row
at `upto`, and the snapshot's text.

What it guarantees: a snapshot row is used only if a daemon that could read the key wrote it, for this
session, at this row of its log, with exactly this text. A row edited through SQLite (its text, its
seq, its session), another session's or another store's snapshot copied in, or one forged by a
statement that can write the database but not read the key file, is refused (then ignored, logged and
rebuilt from the log). What it does not: anyone who can read the key file (a process running as the
same user) can seal what they like; and rows *below* `upto` are bound only by the SQL trigger that
drops the snapshot when one changes (re-reading them on every open is what the snapshot exists to
avoid), so an edit made with that trigger removed is not seen. The log is the source of truth, and
whoever can write the database can rewrite the log itself.

The key is 32 random bytes in `snapshot-seal.key` (mode 0600) beside the database, created once,
atomically (written under a temporary name, then linked into place: a crash leaves no half key, and
two processes creating it at once agree on the one that got there first). It is read at each seal and
check (a few microseconds beside hashing megabytes), so every process of the directory uses the same.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from pathlib import Path

KEY_FILENAME = "snapshot-seal.key"
KEY_BYTES = 32
_DOMAIN = b"dsh derived-state snapshot seal 1"


class SealKeyError(OSError):
    """The key file cannot be read or made."""


def read_key(state_dir: Path, *, create: bool) -> bytes | None:
    """This state directory's key; made first when missing and `create` (a writer), else None. A key
    file of the wrong length is replaced (every snapshot sealed with it is then rebuilt)."""
    path = state_dir / KEY_FILENAME
    try:
        key = path.read_bytes()
    except FileNotFoundError:
        key = b""
    except OSError as exc:
        raise SealKeyError(f"the snapshot seal key {path} cannot be read: {exc}") from None
    if len(key) == KEY_BYTES:
        return key
    if not create:
        return None
    return _make_key(path, replace=bool(key) or path.exists())


def _make_key(path: Path, *, replace: bool) -> bytes:
    temp = path.with_name(f".{KEY_FILENAME}.{os.getpid()}.{os.urandom(4).hex()}")
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, os.urandom(KEY_BYTES))
            os.fsync(fd)
        finally:
            os.close(fd)
        if replace:
            os.replace(temp, path)
        else:
            try:
                os.link(temp, path)
            except FileExistsError:
                pass  # another process made it first: theirs is the key
            os.unlink(temp)
        key = path.read_bytes()
    except OSError as exc:
        raise SealKeyError(f"the snapshot seal key {path} cannot be made: {exc}") from None
    if len(key) != KEY_BYTES:
        raise SealKeyError(f"the snapshot seal key {path} holds {len(key)} bytes, not {KEY_BYTES}")
    return key


def seal(key: bytes, session_id: str, upto: int, format: int, row: tuple[object, ...], data: bytes) -> str:
    """The seal (hex) of a snapshot of `session_id` through `upto`, `row` being the stored event row at
    `upto` (seq, time, type, data, ignorable) and `data` the snapshot's text as UTF-8."""
    mac = hmac.new(key, digestmod=hashlib.sha256)
    texts = (session_id, str(upto), str(format), *(repr(value) for value in row))
    parts: list[bytes] = [_DOMAIN, *(text.encode("utf-8", "surrogatepass") for text in texts), data]
    for raw in parts:
        mac.update(len(raw).to_bytes(8, "big"))
        mac.update(raw)
    return mac.hexdigest()


def matches(expected: str, found: object) -> bool:
    return isinstance(found, str) and hmac.compare_digest(expected, found)
