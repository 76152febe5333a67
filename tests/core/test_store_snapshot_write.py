"""`SessionStore.write_snapshot` writes through its own connection (from the dsh-snapshot thread) in
the store's one `transaction`: a refused write and a failed one leave nothing written and no
transaction open on that connection, so the next write goes through; the store's own connection is
not the one used."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from dsh_daemon.model import events as ev
from dsh_daemon.model.events import Event
from dsh_daemon.model.jsonvalue import FrozenDict
from dsh_daemon.session.store import SessionStore


def test_write_snapshot_refused_failed_and_written_on_its_own_connection(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    store.create_session("s1", title=None, cwd=str(tmp_path))
    store.append_events("s1", [Event(ev.TURN_START, FrozenDict({"turn": 1}), 0, 1)])

    def on_worker(*args: object) -> bool:
        """As the host does: the write on another thread than the store's."""
        result: list[bool] = []
        errors: list[BaseException] = []

        def run() -> None:
            try:
                result.append(store.write_snapshot(*args))  # type: ignore[arg-type]
            except BaseException as exc:  # handed back to the test's thread
                errors.append(exc)

        worker = threading.Thread(target=run, name="dsh-snapshot-test")
        worker.start()
        worker.join()
        if errors:
            raise errors[0]
        return result[0]

    # Refused: the log does not hold seq 5 on disk. Nothing written.
    assert on_worker("s1", 5, 1, "ahead") is False
    assert store.read_snapshot("s1") is None
    # Failed half way (a value SQLite cannot bind): rolled back, nothing written.
    with pytest.raises(sqlite3.Error):
        on_worker("s1", 0, object(), "state at 0")
    assert store.read_snapshot("s1") is None
    # Neither left a transaction open on the snapshot connection: this one goes through.
    assert on_worker("s1", 0, 1, "state at 0") is True
    assert store.read_snapshot("s1") == (0, 1, "state at 0")
    # Never replacing a newer snapshot with an older one.
    store.append_events("s1", [Event(ev.TURN_END, FrozenDict({"turn": 1}), 1, 1)])
    assert on_worker("s1", 1, 1, "state at 1") is True
    assert on_worker("s1", 0, 1, "older") is True
    assert store.read_snapshot("s1") == (1, 1, "state at 1")
    # The store's own connection was never in a transaction of the snapshot's, and still writes.
    assert not store.db.in_transaction
    store.drop_snapshot("s1")
    assert store.read_snapshot("s1") is None
    store.close()
