"""The durable session store (D7): one SQLite database in WAL mode under the state directory.

Invariants kept here:
- `events` is append-only, keyed by `(session_id, seq)`, with seqs contiguous from 0: an append that
  does not continue the stored seq is refused (`StoreConflictError`), so two writers can never interleave.
- A batch of events is one transaction; `synchronous=FULL` makes a committed batch survive a crash.
- A newer format version is refused with a clear message; unknown event types load only if ignorable.
- Several processes may share the file: readers never block (WAL); a session is driven by the holder
  of its lease row (see `lease.py`).
- A seq once sent to a client is never reused for another event (`gaps.py`): the driver publishes a
  seq only below the ceiling stored in `seq_reservations` (raised in the same transaction as each
  append); a clean release lowers the ceiling to the log's end, and a process taking a lease whose
  reservation is still open fills the reserved seqs with `log/gap` events in the same transaction.
"""

from __future__ import annotations

import _thread
import json
import sqlite3
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from dsh_daemon.model.jsonvalue import dumps, loads
from dsh_daemon.session.gaps import LOG_GAP, gap_data

# `dsh-daemon sessions` loads this module and the model's values it stands on, and nothing more: not
# `typing` (8 ms of a 100 ms budget, issue 20.5) nor `threading` (a lock is all the store needs).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, NamedTuple

    from dsh_daemon.model.events import Event

FORMAT_VERSION = 1
DB_FILENAME = "sessions.sqlite3"
LAST_PROMPT_CHARS = 120
_NO_SEQ_LIMIT = 2**62
_SESSION_COLUMNS = "session_id, title, cwd, created_at, updated_at, status, last_seq, pending"


def _fork_of(row: str) -> str:
    """The SQL of where a fork came from (its `forkOf` JSON text; NULL for a session that is no fork)."""
    return f"(SELECT fork_of FROM session_forks WHERE session_forks.session_id = {row}.session_id)"


def _parent_id(row: str) -> str:
    """The SQL of a subagent's parent session (NULL for a session a person started) for table `row`."""
    return f"(SELECT parent_id FROM session_parents WHERE session_parents.session_id = {row}.session_id)"


# The latest human prompt a session entered: read backwards along the (session_id, seq) key, so it
# costs the events after that prompt, not the whole log.
_LAST_PROMPT = (
    "(SELECT json_extract(e.data, '$.content') FROM events e WHERE e.session_id = p.session_id "
    "AND e.type = 'user/message' AND json_extract(e.data, '$.source.kind') = 'user' "
    "ORDER BY e.seq DESC LIMIT 1)"
)


class StoreError(Exception):
    pass


class NewerFormatError(StoreError):
    pass


class StoreConflictError(StoreError):
    """An append that does not continue the stored seq (another writer got there first)."""


class LeaseLostError(StoreConflictError):
    """This process no longer holds the session's lease (another one took it over)."""

    def __init__(self, session_id: str, holder: str) -> None:
        super().__init__(f"session {session_id} is now driven by another dsh-daemon ({holder})")
        self.session_id = session_id
        self.holder = holder


class CorruptSessionError(StoreError):
    pass


class UntrustedSnapshotError(StoreError):
    """A derived-state snapshot row that is not what a daemon sealed for this session and log (or
    cannot be read): it is a cache, so the caller derives the state from the log instead."""


class UnknownSessionError(StoreError):
    def __init__(self, session_id: str) -> None:
        super().__init__(f"unknown session: {session_id}")
        self.session_id = session_id


# The event and row-checking modules are imported where rows are read, not with the store: listing
# sessions (`dsh-daemon sessions`, issue 20.5) needs neither, nor the `dataclasses` they pull in.


_EVENT_TYPES: tuple[type[Event], frozenset[str]] | None = None


def _event_types() -> tuple[type[Event], frozenset[str]]:
    global _EVENT_TYPES
    if _EVENT_TYPES is None:
        from dsh_daemon.model.events import DURABLE_TYPES, Event

        _EVENT_TYPES = (Event, DURABLE_TYPES)
    return _EVENT_TYPES


if TYPE_CHECKING:  # the fields as mypy checks every use; at run time the same names, untyped

    class _SessionRow(NamedTuple):
        session_id: str
        title: str | None
        cwd: str | None
        created_at: int
        updated_at: int
        status: str
        last_seq: int
        pending: int
        last_prompt: str | None = None  # filled by `list_page` only
        parent_id: str | None = None  # a subagent's session: the session that started it
        fork_of: str | None = None  # a fork: `forkOf` as JSON text (protocol.md §15)

    class _PageRow(NamedTuple):
        sessions: tuple[SessionInfo, ...]
        has_more: bool

    class WorktreeRow(NamedTuple):
        path: str  # the worktree's folder (absolute)
        repo: str  # the main work tree it was added to
        branch: str
        base: str  # what the person named as its base ("HEAD" when nothing)
        base_commit: str  # that base resolved when the worktree was made
        session_id: str | None  # None: its session was deleted and the worktree kept

    class SharedOutputRow(NamedTuple):
        id: int
        turn: int
        step: int
        call_id: str
        after_seq: int  # the last seq the driver had logged when it wrote the row
        start: int  # where `text` starts in the call's whole output, in characters
        text: str

else:
    from collections import namedtuple

    _SessionRow = namedtuple(
        "_SessionRow",
        "session_id title cwd created_at updated_at status last_seq pending last_prompt parent_id fork_of",
        defaults=(None, None, None),
    )
    _PageRow = namedtuple("_PageRow", "sessions has_more")
    WorktreeRow = namedtuple("WorktreeRow", "path repo branch base base_commit session_id")
    SharedOutputRow = namedtuple("SharedOutputRow", "id turn step call_id after_seq start text")


class SessionInfo(_SessionRow):
    __slots__ = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "sessionId": self.session_id,
            "title": self.title,
            "cwd": self.cwd,
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
            "status": self.status,
            "lastSeq": self.last_seq,
            "pending": self.pending,
        }
        if self.last_prompt is not None:
            out["lastPrompt"] = self.last_prompt
        if self.parent_id is not None:
            out["parentId"] = self.parent_id
        if self.fork_of is not None:
            out["forkOf"] = json.loads(self.fork_of)
        return out


class SessionPage(_PageRow):
    """One page of `list_page`: most recently updated first; `has_more` when older sessions remain."""

    __slots__ = ()


def prompt_preview(content_json: str | None, limit: int = LAST_PROMPT_CHARS) -> str | None:
    """The text blocks of a stored message's `content` (JSON text), whitespace collapsed, cut to `limit`."""
    if content_json is None:
        return None
    try:
        content = loads(content_json)
    except ValueError:
        return None
    if not isinstance(content, list | tuple):
        return None
    text = " ".join(
        str(b.get("text", "")) for b in content if isinstance(b, Mapping) and b.get("type") == "text"
    )
    return " ".join(text.split())[:limit]


def now_ms() -> int:
    return int(time.time() * 1000)


_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (
    session_id TEXT PRIMARY KEY,
    title TEXT,
    cwd TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    status TEXT NOT NULL DEFAULT 'idle',
    last_seq INTEGER NOT NULL DEFAULT -1,
    pending INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS events (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    time INTEGER NOT NULL,
    type TEXT NOT NULL,
    data TEXT NOT NULL,
    ignorable INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;
-- The events of one type (the inbox splices, the mode, the plan's events) without a scan of the
-- session's whole log: attaching to a 100,000-event session read it five times (~13 ms each).
CREATE INDEX IF NOT EXISTS events_by_type ON events (session_id, type, seq);
CREATE TABLE IF NOT EXISTS seq_reservations (
    session_id TEXT PRIMARY KEY,
    ceiling INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS leases (
    session_id TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    pid INTEGER NOT NULL,
    host TEXT NOT NULL,
    heartbeat INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS checkpoints (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    time INTEGER NOT NULL,
    turn INTEGER NOT NULL,
    step INTEGER NOT NULL,
    call_id TEXT,
    kind TEXT NOT NULL,
    path TEXT,
    before_hash TEXT,
    after_hash TEXT,
    root TEXT,
    tree_before TEXT,
    tree_after TEXT,
    dropped INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS checkpoints_by_session ON checkpoints (session_id, turn);
CREATE TABLE IF NOT EXISTS checkpoint_contents (
    session_id TEXT NOT NULL,
    hash TEXT NOT NULL,
    size INTEGER NOT NULL,
    data BLOB NOT NULL,
    UNIQUE (session_id, hash)
);
CREATE TABLE IF NOT EXISTS handovers (
    session_id TEXT PRIMARY KEY,
    requester TEXT NOT NULL,
    pid INTEGER NOT NULL,
    host TEXT NOT NULL,
    force INTEGER NOT NULL DEFAULT 0,
    requested_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS derived_snapshots (
    session_id TEXT PRIMARY KEY,
    upto_seq INTEGER NOT NULL,
    format INTEGER NOT NULL,
    data TEXT NOT NULL,
    seal TEXT
);
CREATE TABLE IF NOT EXISTS deferred_sends (
    session_id TEXT NOT NULL,
    message_id TEXT NOT NULL,
    data TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (session_id, message_id)
);
CREATE TABLE IF NOT EXISTS tool_output (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    turn INTEGER NOT NULL,
    step INTEGER NOT NULL,
    call_id TEXT NOT NULL,
    after_seq INTEGER NOT NULL,
    start INTEGER NOT NULL,
    text TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS tool_output_by_session ON tool_output (session_id, id);
CREATE TABLE IF NOT EXISTS session_parents (
    session_id TEXT PRIMARY KEY,
    parent_id TEXT NOT NULL,
    call_id TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS session_parents_by_parent ON session_parents (parent_id);
CREATE TABLE IF NOT EXISTS session_forks (
    session_id TEXT PRIMARY KEY,
    fork_of TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS worktrees (
    path TEXT PRIMARY KEY,
    repo TEXT NOT NULL,
    branch TEXT NOT NULL,
    base TEXT NOT NULL,
    base_commit TEXT NOT NULL,
    session_id TEXT
);
CREATE INDEX IF NOT EXISTS worktrees_by_session ON worktrees (session_id);
"""

# A derived-state snapshot stands for the rows it was folded from (`agent/snapshot.py`): a row at or
# below its seq that changes or goes (a hand edit, a tool, a newer build) drops it, in the same
# statement, so a resume never trusts state derived from rows that are no longer there. (The log
# itself is append-only: the daemon never updates or deletes an event except with its session.)
_TRIGGERS = (
    "CREATE TRIGGER IF NOT EXISTS derived_snapshots_row_changed AFTER UPDATE ON events BEGIN "
    "DELETE FROM derived_snapshots WHERE session_id IN (old.session_id, new.session_id) "
    "AND upto_seq >= min(old.seq, new.seq); END",
    "CREATE TRIGGER IF NOT EXISTS derived_snapshots_row_deleted AFTER DELETE ON events BEGIN "
    "DELETE FROM derived_snapshots WHERE session_id = old.session_id AND upto_seq >= old.seq; END",
)

# The name each `CREATE ... IF NOT EXISTS <name>` statement creates.
_SCHEMA_NAMES = frozenset(
    part.split()[0] for part in (_SCHEMA + " ".join(_TRIGGERS)).split("IF NOT EXISTS")[1:]
)
_TRIGGER_NAMES = frozenset(trigger.split("IF NOT EXISTS")[1].split()[0] for trigger in _TRIGGERS)


def _has_column(db: sqlite3.Connection, table: str, column: str) -> bool:
    return any(row[1] == column for row in db.execute(f"PRAGMA table_info({table})"))


def _connect(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=10.0)
    db.execute("PRAGMA synchronous=FULL")
    db.execute("PRAGMA busy_timeout=10000")
    return db


class SessionStore:
    """All SQL lives here. Two connections: the store's own, for every method but `write_snapshot`,
    used from one thread (the event loop's); and `write_snapshot`'s, opened when first needed, used
    from a worker thread (the `dsh-snapshot` one) under `_snapshot_lock`. SQLite orders the two
    writers; both write only inside `transaction`."""

    def __init__(self, state_dir: Path | str) -> None:
        self.state_dir = Path(state_dir)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.state_dir / DB_FILENAME
        self._db = _connect(self.path)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._snapshot_db: sqlite3.Connection | None = None  # `write_snapshot`'s own, opened when needed
        self._snapshot_lock = _thread.allocate_lock()
        if self._schema_is_current():
            return
        with self.transaction():
            found = self._schema_names()
            for statement in _SCHEMA.strip().split(";"):
                if statement.strip():
                    self._db.execute(statement)
            if "derived_snapshots" in found:
                if not _has_column(self._db, "derived_snapshots", "seal"):
                    # a store from before the seal: its snapshots have none, so they are rebuilt
                    self._db.execute("ALTER TABLE derived_snapshots ADD COLUMN seal TEXT")
                if not _TRIGGER_NAMES <= found:
                    # Rows may have changed while a trigger that drops the snapshots they stand for
                    # was missing: none of them can be trusted (issue 32.4).
                    self._db.execute("DELETE FROM derived_snapshots")
            for trigger in _TRIGGERS:
                self._db.execute(trigger)
            row = self._db.execute("SELECT value FROM meta WHERE key='format_version'").fetchone()
            if row is None:
                self._db.execute("INSERT INTO meta VALUES ('format_version', ?)", (str(FORMAT_VERSION),))
            elif int(row[0]) > FORMAT_VERSION:
                raise NewerFormatError(
                    f"the session store {self.path} was written by a newer dsh-daemon "
                    f"(format {row[0]}, this build reads up to {FORMAT_VERSION}) — upgrade dsh-daemon"
                )

    def _schema_is_current(self) -> bool:
        """Every table, index and trigger is there and the format is one this build reads: nothing to
        create, so opening the store writes nothing (no transaction, no disk flush: a session list
        or a first session costs one flush less). A newer format is refused here too."""
        if not _SCHEMA_NAMES <= self._schema_names() or not _has_column(
            self._db, "derived_snapshots", "seal"
        ):
            return False
        row = self._db.execute("SELECT value FROM meta WHERE key='format_version'").fetchone()
        if row is None:
            return False
        if int(row[0]) > FORMAT_VERSION:
            raise NewerFormatError(
                f"the session store {self.path} was written by a newer dsh-daemon "
                f"(format {row[0]}, this build reads up to {FORMAT_VERSION}) — upgrade dsh-daemon"
            )
        return True

    def _schema_names(self) -> set[str]:
        return {
            str(name) for (name,) in self._db.execute("SELECT name FROM sqlite_master WHERE type<>'view'")
        }

    def close(self) -> None:
        with self._snapshot_lock:  # (after a snapshot write under way on a worker thread)
            if self._snapshot_db is not None:
                self._snapshot_db.close()
                self._snapshot_db = None
        self._db.close()

    @property
    def db(self) -> sqlite3.Connection:
        """The connection, for the store's companions in this package (`checkpoints.py`)."""
        return self._db

    @contextmanager
    def transaction(self, db: sqlite3.Connection | None = None) -> Iterator[sqlite3.Connection]:
        """One write transaction on the store's connection, or on `db` (`write_snapshot`'s own):
        BEGIN IMMEDIATE takes the write lock at once (waiting up to the busy timeout), so it never
        fails half way for want of it; committed when the block ends, rolled back when it raises."""
        db = self._db if db is None else db
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    # ---- sessions ----------------------------------------------------------------------------------

    def create_session(
        self,
        session_id: str,
        *,
        title: str | None,
        cwd: str | None,
        parent: tuple[str, str] | None = None,
        worktree: WorktreeRow | None = None,
    ) -> SessionInfo:
        """`parent`: (parent session, its call) of a subagent's session; `worktree`: the git worktree
        made for the session (its `session_id` is this one); each linked in the same transaction."""
        stamp = now_ms()
        with self.transaction() as db:
            db.execute(
                "INSERT INTO sessions (session_id, title, cwd, created_at, updated_at) VALUES (?,?,?,?,?)",
                (session_id, title, cwd, stamp, stamp),
            )
            if parent is not None:
                db.execute("INSERT INTO session_parents VALUES (?,?,?)", (session_id, *parent))
            if worktree is not None:  # recorded before it was made (`record_worktree`): now linked
                db.execute(
                    "INSERT OR REPLACE INTO worktrees VALUES (?,?,?,?,?,?)", (*worktree[:5], session_id)
                )
        return self.session_info(session_id)

    @staticmethod
    def record_fork_origin(db: sqlite3.Connection, session_id: str, fork_of: Mapping[str, Any]) -> None:
        """Within a fork's creation (`create_session_with_events`'s `also`): where it came from, so a
        list row says it is a fork without reading its log."""
        db.execute("INSERT OR REPLACE INTO session_forks VALUES (?,?)", (session_id, dumps(fork_of)))

    # ---- worktrees the daemon made (host/worktrees.py) ---------------------------------------------------

    def worktree_of(self, session_id: str) -> WorktreeRow | None:
        row = self._db.execute("SELECT * FROM worktrees WHERE session_id=?", (session_id,)).fetchone()
        return None if row is None else WorktreeRow(*row)

    def worktree_at(self, path: str) -> WorktreeRow | None:
        row = self._db.execute("SELECT * FROM worktrees WHERE path=?", (path,)).fetchone()
        return None if row is None else WorktreeRow(*row)

    def worktrees(self) -> list[WorktreeRow]:
        """Every worktree the daemon made and has not removed, kept or not by a session."""
        return [WorktreeRow(*row) for row in self._db.execute("SELECT * FROM worktrees ORDER BY rowid")]

    def record_worktree(self, row: WorktreeRow) -> None:
        """A worktree about to be made, before any session has it: a crash from here on leaves it
        listed (its folder, if made, is the person's to keep or remove), never unknown."""
        with self.transaction() as db:
            db.execute("INSERT INTO worktrees VALUES (?,?,?,?,?,?)", (*row[:5], None))

    def forget_worktree(self, path: str) -> None:
        """The worktree was removed (discarded, or kept as a branch only): no record of it stays."""
        with self.transaction() as db:
            db.execute("DELETE FROM worktrees WHERE path=?", (path,))

    def children_of(self, parent_id: str) -> list[tuple[str, str]]:
        """(child session, the parent's call that started it) of every subagent session of `parent_id`."""
        rows = self._db.execute(
            "SELECT session_id, call_id FROM session_parents WHERE parent_id=? ORDER BY rowid", (parent_id,)
        )
        return [(str(child), str(call)) for child, call in rows]

    def create_session_with_events(
        self,
        session_id: str,
        *,
        title: str | None,
        cwd: str | None,
        events: Iterable[Event],
        also: Callable[[sqlite3.Connection], None] | None = None,
    ) -> SessionInfo:
        """A new session that holds `events` (seqs from 0) from the start, with nothing pending: the
        row, the events and `also`'s writes (the rest of the same creation, such as a fork's
        checkpoints) are one transaction, so a crash leaves the whole session or no trace of it."""
        batch = list(events)
        stamp = now_ms()
        with self.transaction() as db:
            db.execute(
                "INSERT INTO sessions (session_id, title, cwd, created_at, updated_at) VALUES (?,?,?,?,?)",
                (session_id, title, cwd, stamp, stamp),
            )
            _insert_events(db, session_id, -1, batch)
            if batch:
                db.execute(
                    "UPDATE sessions SET last_seq=?, updated_at=?, pending=0 WHERE session_id=?",
                    (batch[-1].seq, batch[-1].time, session_id),
                )
            if also is not None:
                also(db)
        return self.session_info(session_id)

    def session_info(self, session_id: str) -> SessionInfo:
        row = self._db.execute(
            f"SELECT {_SESSION_COLUMNS}, NULL, {_parent_id('sessions')}, {_fork_of('sessions')} "
            "FROM sessions WHERE session_id=?",
            (session_id,),
        ).fetchone()
        if row is None:
            raise UnknownSessionError(session_id)
        return SessionInfo(*row)

    def has_session(self, session_id: str) -> bool:
        return (
            self._db.execute("SELECT 1 FROM sessions WHERE session_id=?", (session_id,)).fetchone()
            is not None
        )

    def list_sessions(self, cwd: str | None = None) -> list[SessionInfo]:
        sql = "SELECT session_id, title, cwd, created_at, updated_at, status, last_seq, pending FROM sessions"
        args: tuple[Any, ...] = ()
        if cwd is not None:
            sql += " WHERE cwd=?"
            args = (cwd,)
        sql += " ORDER BY updated_at DESC, session_id"
        return [SessionInfo(*row) for row in self._db.execute(sql, args)]

    def list_page(
        self, cwd: str | None = None, *, limit: int | None = None, before: int | None = None
    ) -> SessionPage:
        """At most `limit` (None: all) sessions updated before `before` (ms; None: from the newest),
        most recent first, each with its `last_prompt`. Sessions sharing the page's oldest `updated_at`
        all join the page (it may exceed `limit`), so `before = <that updatedAt>` loses none."""
        where: list[str] = ["1=1"]
        args: list[Any] = []
        if cwd is not None:  # a session in a worktree of the repository at `cwd` is one of its sessions
            where.append("(cwd=? OR session_id IN (SELECT session_id FROM worktrees WHERE repo=?))")
            args += [cwd, cwd]
        if before is not None:
            where.append("updated_at<?")
            args.append(before)
        cond = " AND ".join(where)
        if limit is None:
            return SessionPage(tuple(self._page_rows(cond, args, None)), False)
        rows = self._page_rows(cond, args, limit + 1)
        if len(rows) <= limit:
            return SessionPage(tuple(rows), False)
        boundary = rows[limit - 1].updated_at
        if rows[limit].updated_at != boundary:
            return SessionPage(tuple(rows[:limit]), True)
        # a tie across the page boundary: the whole tied group joins this page
        rows = self._page_rows(f"{cond} AND updated_at>=?", [*args, boundary], None)
        more = self._db.execute(
            f"SELECT 1 FROM sessions WHERE {cond} AND updated_at<? LIMIT 1", (*args, boundary)
        ).fetchone()
        return SessionPage(tuple(rows), more is not None)

    def _page_rows(self, cond: str, args: list[Any], limit: int | None) -> list[SessionInfo]:
        limit_sql = "" if limit is None else f" LIMIT {int(limit)}"
        sql = (
            f"SELECT p.*, {_LAST_PROMPT}, {_parent_id('p')}, {_fork_of('p')} FROM (SELECT "
            f"{_SESSION_COLUMNS} FROM sessions WHERE {cond} "
            f"ORDER BY updated_at DESC, session_id{limit_sql}) p ORDER BY p.updated_at DESC, p.session_id"
        )
        # the columns in SessionInfo's order; the last prompt (9th) is shown as its preview
        return [
            SessionInfo._make((*row[:8], prompt_preview(row[8]), *row[9:]))
            for row in self._db.execute(sql, args)
        ]

    def delete_session(self, session_id: str, *, holder: str | None = None) -> bool:
        """Remove the session's rows (events, summary, lease) in one transaction; False when there was
        no such session. With `holder`, refuse (`LeaseLostError`) while another holder has the lease."""
        with self.transaction() as db:
            if holder is not None:
                _check_holder(db, session_id, holder)
            db.execute("DELETE FROM events WHERE session_id=?", (session_id,))
            db.execute("DELETE FROM leases WHERE session_id=?", (session_id,))
            db.execute("DELETE FROM checkpoints WHERE session_id=?", (session_id,))
            db.execute("DELETE FROM checkpoint_contents WHERE session_id=?", (session_id,))
            db.execute("DELETE FROM handovers WHERE session_id=?", (session_id,))
            db.execute("DELETE FROM deferred_sends WHERE session_id=?", (session_id,))
            db.execute("DELETE FROM tool_output WHERE session_id=?", (session_id,))
            db.execute("DELETE FROM derived_snapshots WHERE session_id=?", (session_id,))
            db.execute("DELETE FROM seq_reservations WHERE session_id=?", (session_id,))
            db.execute("DELETE FROM session_parents WHERE session_id=?", (session_id,))
            db.execute("DELETE FROM session_forks WHERE session_id=?", (session_id,))
            # A worktree outlives its session unless removed first: listed, never silently deleted.
            db.execute("UPDATE worktrees SET session_id=NULL WHERE session_id=?", (session_id,))
            deleted = db.execute("DELETE FROM sessions WHERE session_id=?", (session_id,)).rowcount
        return deleted > 0

    def update_session(
        self,
        session_id: str,
        *,
        title: str | None = None,
        status: str | None = None,
        pending: int | None = None,
        flush: bool = True,
    ) -> None:
        """Update the session's row. Without `flush` the commit is not flushed to disk
        (`synchronous=NORMAL`): it survives the daemon's crash (it is in the WAL the moment it
        commits) but an OS crash may lose it until the next flushed commit. For the status and
        pending count, a cache of the log that the next open rewrites, which otherwise waited for a
        second disk flush at every turn end, on the event loop."""
        sets, args = ["updated_at=?"], [now_ms()]
        if title is not None:
            sets.append("title=?")
            args.append(title)  # type: ignore[arg-type]
        if status is not None:
            sets.append("status=?")
            args.append(status)  # type: ignore[arg-type]
        if pending is not None:
            sets.append("pending=?")
            args.append(pending)
        with self._flushed(flush), self.transaction() as db:
            db.execute(f"UPDATE sessions SET {', '.join(sets)} WHERE session_id=?", (*args, session_id))

    @contextmanager
    def _flushed(self, flush: bool) -> Iterator[None]:
        """The commits inside are flushed to disk (`synchronous=FULL`, the store's rule) or, without
        `flush`, left to the OS (`NORMAL`: a later FULL commit flushes them with itself, in order)."""
        if flush:
            yield
            return
        self._db.execute("PRAGMA synchronous=NORMAL")
        try:
            yield
        finally:
            self._db.execute("PRAGMA synchronous=FULL")

    # ---- events ------------------------------------------------------------------------------------

    def append_events(
        self,
        session_id: str,
        events: Iterable[Event],
        *,
        pending: int | None = None,
        holder: str | None = None,
        reserve_to: int | None = None,
    ) -> None:
        """Commit `events` (already seq-numbered) as one transaction, refusing any seq gap or overlap,
        and, with `holder`, refusing a writer whose lease another process has taken over. With
        `reserve_to`, the session's seq ceiling is raised to it in the same transaction: seqs below it
        may be sent to clients before they are stored."""
        batch = list(events)
        if not batch:
            return
        with self.transaction() as db:
            if reserve_to is not None:
                _raise_ceiling(db, session_id, reserve_to)
            if holder is not None:
                _check_holder(db, session_id, holder)
            row = db.execute("SELECT last_seq FROM sessions WHERE session_id=?", (session_id,)).fetchone()
            if row is None:
                raise UnknownSessionError(session_id)
            _insert_events(db, session_id, int(row[0]), batch)
            last = batch[-1]
            if pending is None:
                db.execute(
                    "UPDATE sessions SET last_seq=?, updated_at=? WHERE session_id=?",
                    (last.seq, last.time, session_id),
                )
            else:
                db.execute(
                    "UPDATE sessions SET last_seq=?, updated_at=?, pending=? WHERE session_id=?",
                    (last.seq, last.time, pending, session_id),
                )

    def load_events(self, session_id: str, after_seq: int = -1, before_seq: int | None = None) -> list[Event]:
        """The session's events after `after_seq`, each row checked first (`validate.py`): a row of
        the wrong shape, or a sessions row that disagrees with the log, is `CorruptSessionError`
        naming what is wrong, and nothing is changed. One read transaction: a consistent snapshot
        even while another process appends."""
        from dsh_daemon.session.validate import ROW_IS_WELL_FORMED, describe_row, summary_row_problem

        db = self._db
        db.execute("BEGIN")
        try:
            info = db.execute("SELECT last_seq FROM sessions WHERE session_id=?", (session_id,)).fetchone()
            if info is None:
                raise UnknownSessionError(session_id)
            below = _NO_SEQ_LIMIT if before_seq is None else before_seq
            bad = db.execute(
                "SELECT seq, type, data FROM events WHERE session_id=? AND seq>? AND seq<? "
                f"AND NOT {ROW_IS_WELL_FORMED} ORDER BY seq LIMIT 1",
                (session_id, after_seq, below),
            ).fetchone()
            if bad is not None:
                seq, kind, data = bad
                why = describe_row(kind, data)
                raise CorruptSessionError(
                    f"session {session_id}: unreadable event at seq {seq} ({kind}): {why}"
                )
            events = self._read_events(session_id, after_seq, below)
            (stored_last,) = db.execute(
                "SELECT coalesce(max(seq), -1) FROM events WHERE session_id=?", (session_id,)
            ).fetchone()
            problem = summary_row_problem(int(info[0]), int(stored_last))
            if problem is not None:
                raise CorruptSessionError(f"session {session_id}: {problem}")
            return events
        finally:
            db.execute("COMMIT")

    def _read_events(self, session_id: str, after_seq: int, below: int) -> list[Event]:
        events: list[Event] = []
        event_type, known = _event_types()
        append, stored = events.append, event_type.stored
        expected = after_seq + 1
        for seq, stamp, kind, data, ignorable in self._db.execute(
            "SELECT seq, time, type, data, ignorable FROM events WHERE session_id=? AND seq>? AND seq<? "
            "ORDER BY seq",
            (session_id, after_seq, below),
        ):
            # The one loop a resume runs per stored row: the checks of `_decode`, inlined.
            if (
                seq != expected
                or (kind not in known and not ignorable)
                or data[:1] != "{"
                or data[-1:] != "}"
            ):
                if seq != expected:
                    raise CorruptSessionError(f"session {session_id}: seq gap at {expected} (found {seq})")
                _decode(session_id, seq, stamp, kind, data, ignorable)  # raises the right error
            expected += 1
            append(stored(kind, data, seq, stamp, bool(ignorable)))
        return events

    def load_events_of_type(self, session_id: str, kind: str) -> list[Event]:
        """The session's durable events of one type, in order (e.g. the inbox splices alone, which
        rebuild the pending items without reading a long session's whole log)."""
        if not self.has_session(session_id):
            raise UnknownSessionError(session_id)
        rows = self._db.execute(
            # named: without statistics the planner takes the primary key for the ORDER BY and scans
            "SELECT seq, time, type, data, ignorable FROM events INDEXED BY events_by_type "
            "WHERE session_id=? AND type=? ORDER BY seq",
            (session_id, kind),
        )
        return [
            _decode(session_id, seq, stamp, k, data, ignorable) for seq, stamp, k, data, ignorable in rows
        ]

    def last_event_of_type(self, session_id: str, kind: str, below_seq: int) -> Event | None:
        """The newest event of type `kind` with seq < `below_seq` (one seek in `events_by_type`)."""
        row = self._db.execute(
            "SELECT seq, time, type, data, ignorable FROM events INDEXED BY events_by_type "
            "WHERE session_id=? AND type=? AND seq<? "
            "ORDER BY seq DESC LIMIT 1",
            (session_id, kind, below_seq),
        ).fetchone()
        return None if row is None else _decode(session_id, *row)

    # ---- derived-state snapshots (agent/snapshot.py; a cache of what the log derives) --------------

    def read_snapshot(self, session_id: str) -> tuple[int, int, str] | None:
        """`(upto_seq, format, data)` of the session's derived-state snapshot, if it has one; a row
        whose seal does not match (`seal.py`: another session's, edited, forged, or of a log whose row
        at `upto_seq` is not the one it was folded from) or that cannot be read is
        `UntrustedSnapshotError`, and nothing is changed."""
        from dsh_daemon.session import seal

        row = self._db.execute(
            "SELECT upto_seq, format, CAST(data AS BLOB), seal FROM derived_snapshots WHERE session_id=?",
            (session_id,),
        ).fetchone()
        if row is None:
            return None
        upto, format, raw, found = row
        if type(upto) is not int or type(format) is not int or not isinstance(raw, bytes):
            raise UntrustedSnapshotError("a snapshot row of the wrong column types")
        if found is None:
            raise UntrustedSnapshotError("the snapshot is not sealed (written before seals, or by hand)")
        try:
            key = seal.read_key(self.state_dir, create=False)
        except seal.SealKeyError as exc:
            raise UntrustedSnapshotError(str(exc)) from None
        if key is None:
            raise UntrustedSnapshotError(f"no seal key ({seal.KEY_FILENAME}) to check the snapshot with")
        at_upto = self._event_row(self._db, session_id, upto)
        if at_upto is None:
            raise UntrustedSnapshotError(f"the log holds no row at the snapshot's seq {upto}")
        if not seal.matches(seal.seal(key, session_id, upto, format, at_upto, raw), found):
            raise UntrustedSnapshotError(
                "its seal does not match (another session's or another store's snapshot, its row "
                "edited, or its log's row at its seq changed)"
            )
        try:
            return upto, format, raw.decode("utf-8")
        except UnicodeDecodeError as exc:  # (sealed, so written by a key holder: still refused)
            raise UntrustedSnapshotError(f"the snapshot is not UTF-8: {exc}") from None

    @staticmethod
    def _event_row(db: sqlite3.Connection, session_id: str, seq: int) -> tuple[object, ...] | None:
        """The stored event row at `seq`, as the seal binds it (no decoding: a row's bytes as stored)."""
        row = db.execute(
            "SELECT seq, time, type, CAST(data AS BLOB), ignorable FROM events WHERE session_id=? AND seq=?",
            (session_id, seq),
        ).fetchone()
        return None if row is None else tuple(row)

    def write_snapshot(self, session_id: str, upto_seq: int, format: int, data: str) -> bool:
        """Store a snapshot of the state after seq `upto_seq`, sealed (`seal.py`), replacing an older
        one, in one transaction; refused (False) unless the log holds `upto_seq` on disk, and never
        replacing a newer snapshot.

        Safe to call from a worker thread, unlike the rest of the store: it writes through a
        connection of its own. A long session's snapshot is megabytes, and its write (with the disk
        flush) is best done away from the event loop that appends events; SQLite orders the two
        writers, and the GIL is released while it writes and while the seal hashes it."""
        from dsh_daemon.session import seal

        key = seal.read_key(self.state_dir, create=True)
        assert key is not None
        with self._snapshot_lock:
            if self._snapshot_db is None:
                self._snapshot_db = _connect(self.path)
            # The row at `upto_seq` never changes once stored (the log is append-only), so the seal is
            # computed before the write transaction, which then holds the lock only to write.
            at_upto = self._event_row(self._snapshot_db, session_id, upto_seq)
            if at_upto is None:
                return False
            sealed = seal.seal(key, session_id, upto_seq, format, at_upto, data.encode("utf-8"))
            with self.transaction(self._snapshot_db) as db:
                row = db.execute("SELECT last_seq FROM sessions WHERE session_id=?", (session_id,)).fetchone()
                if row is None or int(row[0]) < upto_seq:
                    return False  # nothing written (the empty transaction ends)
                db.execute(
                    "INSERT INTO derived_snapshots (session_id, upto_seq, format, data, seal) "
                    "VALUES (?,?,?,?,?) ON CONFLICT(session_id) DO UPDATE SET upto_seq=excluded.upto_seq, "
                    "format=excluded.format, data=excluded.data, seal=excluded.seal "
                    "WHERE excluded.upto_seq >= upto_seq",
                    (session_id, upto_seq, format, data, sealed),
                )
        return True

    def drop_snapshot(self, session_id: str) -> None:
        with self.transaction() as db:
            db.execute("DELETE FROM derived_snapshots WHERE session_id=?", (session_id,))

    def turn_start_seq(self, session_id: str, turn: int) -> int | None:
        """The seq of turn `turn`'s `turn/start` (None: no such turn), found without decoding events."""
        row = self._db.execute(
            "SELECT seq FROM events INDEXED BY events_by_type WHERE session_id=? AND type='turn/start' "
            "AND json_extract(data, '$.turn')=? ORDER BY seq DESC LIMIT 1",
            (session_id, turn),
        ).fetchone()
        return None if row is None else int(row[0])

    def iter_events_backward(
        self, session_id: str, up_to_seq: int, batch: int = 512
    ) -> Generator[Event, None, None]:
        """The events with `seq <= up_to_seq`, newest first, read lazily (stop early to read only the
        tail). Close the iterator (or exhaust it) to end the read."""
        cursor = self._db.execute(
            "SELECT seq, time, type, data, ignorable FROM events WHERE session_id=? AND seq<=? "
            "ORDER BY seq DESC",
            (session_id, up_to_seq),
        )
        try:
            expected = up_to_seq
            while rows := cursor.fetchmany(batch):
                for seq, stamp, kind, data, ignorable in rows:
                    if seq != expected:
                        raise CorruptSessionError(
                            f"session {session_id}: seq gap at {expected} (found {seq})"
                        )
                    expected -= 1
                    yield _decode(session_id, seq, stamp, kind, data, ignorable)
        finally:
            cursor.close()

    def last_seq(self, session_id: str) -> int:
        return self.session_info(session_id).last_seq

    # ---- leases (see lease.py for the policy) ------------------------------------------------------

    def read_lease(self, session_id: str) -> tuple[str, int, str, int] | None:
        row = self._db.execute(
            "SELECT holder, pid, host, heartbeat FROM leases WHERE session_id=?", (session_id,)
        ).fetchone()
        if not row:
            return None
        holder, pid, host, heartbeat = row
        return str(holder), int(pid), str(host), int(heartbeat)

    def write_lease(
        self, session_id: str, holder: str, pid: int, host: str, *, replace_holder: str | None
    ) -> bool:
        """Take the lease if it is free, or if it is held by `replace_holder` (a dead holder). Taking
        it (not renewing our own) first settles what the previous driver reserved: its unstored seqs
        become `log/gap` events, in the same transaction (`gaps.py`)."""
        stamp = now_ms()
        with self.transaction() as db:
            row = db.execute("SELECT holder FROM leases WHERE session_id=?", (session_id,)).fetchone()
            if row is not None and row[0] not in (holder, replace_holder):
                return False
            if row is None or row[0] != holder:
                _fill_reserved_gap(db, session_id)
            db.execute(
                "INSERT OR REPLACE INTO leases (session_id, holder, pid, host, heartbeat) VALUES (?,?,?,?,?)",
                (session_id, holder, pid, host, stamp),
            )
        return True

    def heartbeat_leases(self, holder: str) -> None:
        with self.transaction() as db:
            db.execute("UPDATE leases SET heartbeat=? WHERE holder=?", (now_ms(), holder))

    def release_lease(self, session_id: str, holder: str) -> None:
        """Let go of the lease after a clean stop (everything published is stored by then): the seq
        reservation closes with it, so the next driver has no gap to fill."""
        with self.transaction() as db:
            released = db.execute(
                "DELETE FROM leases WHERE session_id=? AND holder=?", (session_id, holder)
            ).rowcount
            if released:
                db.execute(
                    "UPDATE seq_reservations SET ceiling=(SELECT last_seq + 1 FROM sessions "
                    "WHERE session_id=?) WHERE session_id=?",
                    (session_id, session_id),
                )

    def reserve_seqs(self, session_id: str, ceiling: int) -> int:
        """Raise the session's seq ceiling to at least `ceiling` (on disk on return); the ceiling now."""
        current = self.seq_ceiling(session_id)
        if current >= ceiling:
            return current
        with self.transaction() as db:
            _raise_ceiling(db, session_id, ceiling)
        return self.seq_ceiling(session_id)

    def seq_ceiling(self, session_id: str) -> int:
        """The session's seq ceiling: no seq at or above it was ever sent to a client."""
        row = self._db.execute(
            "SELECT ceiling FROM seq_reservations WHERE session_id=?", (session_id,)
        ).fetchone()
        return -1 if row is None else int(row[0])

    # ---- handing a session over (see host/handover.py for the protocol) -----------------------------

    def request_handover(self, session_id: str, requester: str, pid: int, host: str, *, force: bool) -> None:
        """Ask the lease's holder to pass the lease to `requester` (one request per session: the
        newest asker wins; a forcing request stays forcing)."""
        with self.transaction() as db:
            db.execute(
                "INSERT INTO handovers (session_id, requester, pid, host, force, requested_at) "
                "VALUES (?,?,?,?,?,?) ON CONFLICT(session_id) DO UPDATE SET requester=excluded.requester, "
                "pid=excluded.pid, host=excluded.host, force=max(force, excluded.force), "
                "requested_at=excluded.requested_at",
                (session_id, requester, pid, host, int(force), now_ms()),
            )

    def handover_requests(self, holder: str) -> list[tuple[str, str, bool, int, str]]:
        """`(session_id, requester, force, pid, host)` for each session `holder` leases that another
        asks for (`pid`, `host`: the asking process)."""
        rows = self._db.execute(
            "SELECT h.session_id, h.requester, h.force, h.pid, h.host FROM handovers h JOIN leases l "
            "ON l.session_id = h.session_id WHERE l.holder=? AND h.requester<>?",
            (holder, holder),
        ).fetchall()
        return [(str(sid), str(who), bool(force), int(pid), str(host)) for sid, who, force, pid, host in rows]

    def force_handover(self, session_id: str, holder: str) -> bool:
        """The holder lets go at once: the session's pending request becomes a forcing one. False
        when nobody asks for the session (or `holder` does not hold its lease)."""
        with self.transaction() as db:
            changed = db.execute(
                "UPDATE handovers SET force=1 WHERE session_id=? AND requester<>? AND EXISTS "
                "(SELECT 1 FROM leases l WHERE l.session_id=? AND l.holder=?)",
                (session_id, holder, session_id, holder),
            ).rowcount
        return changed > 0

    def hand_over_lease(self, session_id: str, holder: str) -> bool:
        """Pass `holder`'s lease to the requester of the session's handover, in one transaction (no
        third process can take the lease between the release and the take); False when `holder` does
        not hold it or nobody asks for it any more."""
        with self.transaction() as db:
            row = db.execute(
                "SELECT requester, pid, host FROM handovers WHERE session_id=?", (session_id,)
            ).fetchone()
            lease = db.execute("SELECT holder FROM leases WHERE session_id=?", (session_id,)).fetchone()
            if row is None or lease is None or lease[0] != holder:
                return False
            db.execute(
                "UPDATE leases SET holder=?, pid=?, host=?, heartbeat=? WHERE session_id=?",
                (row[0], row[1], row[2], now_ms(), session_id),
            )
            db.execute("DELETE FROM handovers WHERE session_id=?", (session_id,))
            # the holder flushed its log first (`hand_over_idle_session`): like a clean release, the
            # seq reservation closes, so the new holder has no gap to fill (session/gaps.py)
            db.execute(
                "UPDATE seq_reservations SET ceiling=(SELECT last_seq + 1 FROM sessions "
                "WHERE session_id=?) WHERE session_id=?",
                (session_id, session_id),
            )
        return True

    def clear_handover(self, session_id: str, requester: str | None = None) -> None:
        """Forget the handover request of the session (only `requester`'s, when given)."""
        with self.transaction() as db:
            if requester is None:
                db.execute("DELETE FROM handovers WHERE session_id=?", (session_id,))
            else:
                db.execute(
                    "DELETE FROM handovers WHERE session_id=? AND requester=?", (session_id, requester)
                )

    def defer_send(self, session_id: str, message_id: str, data: str) -> None:
        """A prompt for a session another process drives, kept until a process driving it enters it."""
        with self.transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO deferred_sends (session_id, message_id, data, created_at) "
                "VALUES (?,?,?,?)",
                (session_id, message_id, data, now_ms()),
            )

    def deferred_sends(self, session_id: str) -> list[tuple[str, str]]:
        """`(message_id, data)` of the session's deferred prompts, oldest first."""
        rows = self._db.execute(
            "SELECT message_id, data FROM deferred_sends WHERE session_id=? ORDER BY created_at, rowid",
            (session_id,),
        ).fetchall()
        return [(str(mid), str(data)) for mid, data in rows]

    def drop_deferred_send(self, session_id: str, message_id: str) -> None:
        with self.transaction() as db:
            db.execute(
                "DELETE FROM deferred_sends WHERE session_id=? AND message_id=?", (session_id, message_id)
            )

    # ---- live tool output shared with other processes (`liveoutput.py`; not the log) -----------------

    def share_tool_output(
        self,
        session_id: str,
        row: SharedOutputRow,
        *,
        drop_through: int | None = None,
        drop_before_turn: int | None = None,
        holder: str | None = None,
    ) -> int:
        """Store one row of a running call's live output (its `id` is ignored) and return its id. In
        the same transaction, `drop_through` removes the call's rows up to that id (its per-call
        cap) and `drop_before_turn` the session's rows of older turns. With `holder`, a writer whose
        lease another process has taken is refused (`LeaseLostError`), as `append_events` refuses it:
        its rows would reach followers after the new driver's result for the call. Not flushed to disk on
        commit (`synchronous=NORMAL`): live output is a view for other processes, not history, so a
        crash may lose it; the next `FULL` commit flushes it with everything before it."""
        with self._flushed(False), self.transaction() as db:
            if holder is not None:
                _check_holder(db, session_id, holder)
            if drop_through is not None:
                db.execute(
                    "DELETE FROM tool_output WHERE session_id=? AND call_id=? AND id<=?",
                    (session_id, row.call_id, drop_through),
                )
            if drop_before_turn is not None:
                db.execute(
                    "DELETE FROM tool_output WHERE session_id=? AND turn<?",
                    (session_id, drop_before_turn),
                )
            cursor = db.execute(
                "INSERT INTO tool_output (session_id, turn, step, call_id, after_seq, start, text) "
                "VALUES (?,?,?,?,?,?,?)",
                (session_id, row.turn, row.step, row.call_id, row.after_seq, row.start, row.text),
            )
        return int(cursor.lastrowid or 0)

    def tool_output_after(self, session_id: str, after_id: int) -> list[SharedOutputRow]:
        """The session's live-output rows with an id above `after_id`, oldest first."""
        rows = self._db.execute(
            "SELECT id, turn, step, call_id, after_seq, start, text FROM tool_output "
            "WHERE session_id=? AND id>? ORDER BY id",
            (session_id, after_id),
        ).fetchall()
        return [SharedOutputRow(*row) for row in rows]

    def last_tool_output_id(self, session_id: str) -> int:
        """The id of the session's newest live-output row (0 when there is none)."""
        row = self._db.execute("SELECT max(id) FROM tool_output WHERE session_id=?", (session_id,)).fetchone()
        return int(row[0]) if row is not None and row[0] is not None else 0


def _check_holder(db: sqlite3.Connection, session_id: str, holder: str) -> None:
    """Inside a write transaction: `LeaseLostError` when another process holds the session's lease."""
    lease = db.execute("SELECT holder FROM leases WHERE session_id=?", (session_id,)).fetchone()
    if lease is not None and lease[0] != holder:
        raise LeaseLostError(session_id, lease[0])


def _insert_events(db: sqlite3.Connection, session_id: str, last_seq: int, batch: list[Event]) -> None:
    """Inside a write transaction: `batch` appended after `last_seq`, refusing any seq gap or overlap."""
    expected = last_seq + 1
    for offset, event in enumerate(batch):
        if event.seq != expected + offset:
            raise StoreConflictError(
                f"session {session_id}: append at seq {event.seq}, store expects {expected + offset}"
            )
    db.executemany(
        "INSERT INTO events (session_id, seq, time, type, data, ignorable) VALUES (?,?,?,?,?,?)",
        [(session_id, e.seq, e.time, e.type, dumps(e.data), int(e.ignorable)) for e in batch],
    )


def _raise_ceiling(db: sqlite3.Connection, session_id: str, ceiling: int) -> None:
    db.execute(
        "INSERT INTO seq_reservations (session_id, ceiling) VALUES (?, ?) "
        "ON CONFLICT(session_id) DO UPDATE SET ceiling=max(ceiling, excluded.ceiling)",
        (session_id, ceiling),
    )


def _fill_reserved_gap(db: sqlite3.Connection, session_id: str) -> None:
    """Turn the seqs the previous driver reserved but never stored into `log/gap` events, from the
    log's end through the ceiling, stamped with the last event's time (so doing it twice gives the
    same rows), and close the reservation. Nothing to do after a clean stop."""
    row = db.execute(
        "SELECT s.last_seq, r.ceiling, coalesce((SELECT time FROM events e WHERE e.session_id = s.session_id "
        "AND e.seq = s.last_seq), s.created_at) FROM sessions s JOIN seq_reservations r "
        "ON r.session_id = s.session_id WHERE s.session_id=?",
        (session_id,),
    ).fetchone()
    if row is None:
        return
    last, ceiling, stamp = int(row[0]), int(row[1]), int(row[2])
    (stored_last,) = db.execute(
        "SELECT coalesce(max(seq), -1) FROM events WHERE session_id=?", (session_id,)
    ).fetchone()
    if stored_last != last:
        return  # a corrupt summary row: left as it is, for `load_events` to report
    if ceiling > last + 1:
        data = dumps(gap_data(last + 1, ceiling))
        db.executemany(
            "INSERT INTO events (session_id, seq, time, type, data, ignorable) VALUES (?,?,?,?,?,1)",
            [(session_id, seq, stamp, LOG_GAP, data) for seq in range(last + 1, ceiling + 1)],
        )
        db.execute("UPDATE sessions SET last_seq=? WHERE session_id=?", (ceiling, session_id))
        last = ceiling
    db.execute("UPDATE seq_reservations SET ceiling=? WHERE session_id=?", (last + 1, session_id))


def _decode(session_id: str, seq: int, stamp: int, kind: str, data: str, ignorable: int) -> Event:
    event_type, known = _event_types()
    if kind not in known and not ignorable:
        raise CorruptSessionError(
            f"session {session_id}: unknown event type {kind!r} at seq {seq} "
            "(written by a newer dsh-daemon? upgrade to read it)"
        )
    if not (data.startswith("{") and data.endswith("}")):
        raise CorruptSessionError(f"session {session_id}: unreadable event at seq {seq}: not a JSON object")
    # Parsed when first used (Event.data): a resume parses only what it looks at. A row that passes
    # the check above but still is not JSON fails there, as `UnreadableEventError` (`session_unreadable`).
    return event_type.stored(kind, data, seq, stamp, bool(ignorable))
