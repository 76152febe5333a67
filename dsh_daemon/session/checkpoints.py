"""Checkpoints in the session store: what the agent's tools changed, and the content before, so a
rewind can take it back (docs/design.md §14, protocol.md §15).

Rows (`checkpoints`), one per change, in the order the changes were made (`id`):
- `edit`: an edit_file / write_file call; `before_hash` is the sha256 of the file's bytes before
  (None: the file did not exist), `after_hash` after. The before content is kept in `checkpoint_contents`.
- `command`: a run_command call; `tree_before` / `tree_after` are git tree objects of the work tree
  under `root` written just before and after it (None: not a git work tree, nothing restorable).
- `rewind`: a file a rewind restored (before: what it held then; after: what the rewind wrote), so a
  later rewind knows what the file is expected to hold.
- `undo`: a file the person's `dsh/turn/undo` wrote (before: what it held then; after: what the undo
  wrote), for the same reason; a later rewind chains it like an edit.
- An edit's and an undo's after content is kept too (under `after_hash`), so a turn's diff is
  rebuilt from the store alone, exactly, after a restart (host/turndiff.py).

Invariants kept here:
- Contents are content-addressed per session (`(session_id, sha256 of the raw bytes)`): a content
  stored twice is stored once; a before content lives while a row that is not `dropped` names it.
  It is stored zlib-compressed (level 1: fast, and source text shrinks several times); `size` is what it takes
  in the store, which is what the budget counts.
- A session's contents stay under its byte budget: first the after contents no row needs as its
  before are deleted, oldest first (only a turn's diff reads them; it says so when one is gone);
  then the oldest rows are marked `dropped` (the row stays, so a rewind can say which file of which
  turn lost its content) and the contents no row needs any more are deleted, in the same
  transaction as the insert that went over.
"""

from __future__ import annotations

import hashlib
import sqlite3
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from dsh_daemon.session.store import SessionStore, now_ms

Kind = Literal["edit", "command", "rewind", "undo"]
_COLUMNS = (
    "id, turn, step, call_id, kind, path, before_hash, after_hash, root, tree_before, tree_after, dropped"
)


def content_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True, slots=True)
class Checkpoint:
    id: int
    turn: int
    step: int
    call_id: str | None
    kind: Kind
    path: str | None
    before_hash: str | None  # None: the file did not exist
    after_hash: str | None  # None: the file does not exist after
    root: str | None  # a command's git work tree
    tree_before: str | None
    tree_after: str | None
    dropped: bool  # over the budget: the before content is gone


@dataclass(frozen=True, slots=True)
class Recorded:
    """What an insert did to the budget: rows dropped to stay under it (oldest first)."""

    dropped: tuple[Checkpoint, ...]


class CheckpointStore:
    def __init__(self, store: SessionStore, max_bytes: int) -> None:
        self.store = store
        self.max_bytes = max_bytes

    def record_file(
        self,
        session_id: str,
        *,
        turn: int,
        step: int,
        call_id: str | None,
        kind: Kind,
        path: str,
        before: bytes | None,
        after_hash: str | None,
        after: bytes | None = None,
    ) -> Recorded:
        """One changed file and its content before (None: it did not exist), and after when given
        (its hash is `after_hash`), kept under the budget."""
        before_hash = None if before is None else content_hash(before)
        contents = [(before_hash, before)]
        if after is not None:
            contents.append((after_hash, after))
        new = [
            (digest, zlib.compress(data, 1))
            for digest, data in dict(contents).items()
            if digest is not None and data is not None and not self._has(session_id, digest)
        ]
        with self.store.transaction() as db:
            for digest, packed in new:
                db.execute(
                    "INSERT OR IGNORE INTO checkpoint_contents (session_id, hash, size, data) "
                    "VALUES (?,?,?,?)",
                    (session_id, digest, len(packed), packed),
                )
            db.execute(
                "INSERT INTO checkpoints (session_id, time, turn, step, call_id, kind, path, before_hash, "
                "after_hash) VALUES (?,?,?,?,?,?,?,?,?)",
                (session_id, now_ms(), turn, step, call_id, kind, path, before_hash, after_hash),
            )
            dropped = self._keep_budget(session_id)
        return Recorded(dropped)

    def record_command(
        self,
        session_id: str,
        *,
        turn: int,
        step: int,
        call_id: str | None,
        root: str | None,
        tree_before: str | None,
        tree_after: str | None,
    ) -> None:
        with self.store.transaction() as db:
            db.execute(
                "INSERT INTO checkpoints (session_id, time, turn, step, call_id, kind, root, tree_before, "
                "tree_after) VALUES (?,?,?,?,?,?,?,?,?)",
                (session_id, now_ms(), turn, step, call_id, "command", root, tree_before, tree_after),
            )

    def _has(self, session_id: str, content: str) -> bool:
        row = self.store.db.execute(
            "SELECT 1 FROM checkpoint_contents WHERE session_id=? AND hash=?", (session_id, content)
        ).fetchone()
        return row is not None

    def _keep_budget(self, session_id: str) -> tuple[Checkpoint, ...]:
        db = self.store.db
        total = _blob_bytes(self.store, session_id)
        if total <= self.max_bytes:
            return ()
        # First the after contents only turn diffs read (no row's before): a rewind never needs them.
        afters = db.execute(
            "SELECT after_hash FROM checkpoints WHERE session_id=? AND after_hash IS NOT NULL ORDER BY id",
            (session_id,),
        ).fetchall()
        for (digest,) in afters:
            if total <= self.max_bytes:
                return ()
            total -= _delete_if_unused(db, session_id, str(digest))
        dropped: list[Checkpoint] = []
        rows = db.execute(
            f"SELECT {_COLUMNS} FROM checkpoints WHERE session_id=? AND dropped=0 "
            "AND before_hash IS NOT NULL ORDER BY id",
            (session_id,),
        ).fetchall()
        for row in rows:
            if total <= self.max_bytes:
                break
            checkpoint = _row(row)
            db.execute("UPDATE checkpoints SET dropped=1 WHERE id=?", (checkpoint.id,))
            dropped.append(checkpoint)
            total -= _delete_if_unused(db, session_id, checkpoint.before_hash)
        return tuple(dropped)

    def since_turn(self, session_id: str, turn: int) -> list[Checkpoint]:
        """Every row of turn `turn` or later, in the order the changes were made."""
        rows = self.store.db.execute(
            f"SELECT {_COLUMNS} FROM checkpoints WHERE session_id=? AND turn>=? ORDER BY id",
            (session_id, turn),
        )
        return [_row(row) for row in rows]

    def of_turn(self, session_id: str, turn: int) -> list[Checkpoint]:
        """The rows of turn `turn` alone, in the order the changes were made."""
        rows = self.store.db.execute(
            f"SELECT {_COLUMNS} FROM checkpoints WHERE session_id=? AND turn=? ORDER BY id",
            (session_id, turn),
        )
        return [_row(row) for row in rows]

    def blob(self, session_id: str, content: str) -> bytes | None:
        row = self.store.db.execute(
            "SELECT data FROM checkpoint_contents WHERE session_id=? AND hash=?", (session_id, content)
        ).fetchone()
        return None if row is None else zlib.decompress(row[0])

    def stored_bytes(self, session_id: str) -> int:
        return _blob_bytes(self.store, session_id)

    @staticmethod
    def copy_within(db: sqlite3.Connection, source: str, target: str, up_to_turn: int) -> None:
        """A fork's checkpoints: the source's rows of turns up to `up_to_turn` and their blobs, written
        inside the caller's transaction (the one that creates the fork, `create_session_with_events`)."""
        db.execute(
            "INSERT INTO checkpoints (session_id, time, turn, step, call_id, kind, path, before_hash, "
            "after_hash, root, tree_before, tree_after, dropped) SELECT ?, time, turn, step, call_id, "
            "kind, path, before_hash, after_hash, root, tree_before, tree_after, dropped "
            "FROM checkpoints WHERE session_id=? AND turn<=? ORDER BY id",
            (target, source, up_to_turn),
        )
        db.execute(
            "INSERT OR IGNORE INTO checkpoint_contents (session_id, hash, size, data) SELECT ?, b.hash, "
            "b.size, b.data FROM checkpoint_contents b WHERE b.session_id=? AND (b.hash IN (SELECT "
            "before_hash FROM checkpoints WHERE session_id=? AND dropped=0) OR b.hash IN (SELECT "
            "after_hash FROM checkpoints WHERE session_id=? AND dropped=0))",
            (target, source, target, target),
        )


def _delete_if_unused(db: sqlite3.Connection, session_id: str, digest: str | None) -> int:
    """Delete a content no row that is not dropped needs as its before; the bytes it freed."""
    still_used = db.execute(
        "SELECT 1 FROM checkpoints WHERE session_id=? AND before_hash=? AND dropped=0 LIMIT 1",
        (session_id, digest),
    ).fetchone()
    if still_used is not None:
        return 0
    size = db.execute(
        "SELECT size FROM checkpoint_contents WHERE session_id=? AND hash=?", (session_id, digest)
    ).fetchone()
    db.execute("DELETE FROM checkpoint_contents WHERE session_id=? AND hash=?", (session_id, digest))
    return 0 if size is None else int(size[0])


def _blob_bytes(store: SessionStore, session_id: str) -> int:
    row = store.db.execute(
        "SELECT COALESCE(SUM(size), 0) FROM checkpoint_contents WHERE session_id=?", (session_id,)
    ).fetchone()
    return int(row[0])


def _row(row: Sequence[object]) -> Checkpoint:
    rid, turn, step, call_id, kind, path, before, after, root, tree_before, tree_after, dropped = row
    return Checkpoint(
        int(rid),  # type: ignore[call-overload]
        int(turn),  # type: ignore[call-overload]
        int(step),  # type: ignore[call-overload]
        None if call_id is None else str(call_id),
        str(kind),  # type: ignore[arg-type]
        None if path is None else str(path),
        None if before is None else str(before),
        None if after is None else str(after),
        None if root is None else str(root),
        None if tree_before is None else str(tree_before),
        None if tree_after is None else str(tree_after),
        bool(dropped),
    )
