"""A derived-state snapshot is trusted only when it is this session's, folded from this log, and
decodes whole (issue 32.4, docs/design.md §6.7, `session/seal.py`). A row damaged with the `sqlite3`
shell in any way — cut short, deeply nested, holding a lone surrogate or a value of the wrong type,
its text edited, another session's copied in, its log's row at its seq changed — is ignored and said
once; the session opens with exactly the state its log derives, its next model request equals, byte
for byte, the rebuild from the log, and the next turn end writes a good snapshot again."""

from __future__ import annotations

import json
import logging
import re
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from dsh_daemon.agent.invariants import requests_match_log
from dsh_daemon.llm.scripted import reply
from dsh_daemon.model.jsonvalue import dumps
from dsh_daemon.session import seal
from dsh_daemon.session.store import DB_FILENAME, SessionStore
from tests.core.harness import Harness, echo_tool, msg
from tests.core.test_snapshot import _scenario, derived_state

IGNORED = "derived-state snapshot ignored"


def _open(state: Path, session_id: str) -> Harness:
    return Harness(state, [reply("resumed")], tools=[echo_tool()], session_id=session_id, snapshot_every=1)


async def _expected(state: Path, session_id: str) -> str:
    """The state the log derives (the snapshot dropped first, so it is the log's alone)."""
    store = SessionStore(state)
    store.drop_snapshot(session_id)
    store.close()
    h = Harness(state, [], tools=[echo_tool()], session_id=session_id)
    assert h.agent.log.events.base == 0
    state_text = derived_state(h.agent)
    await h.manager.close()
    return state_text


def _reseal(db: sqlite3.Connection, state: Path, session_id: str) -> None:
    """What a process that can read the key file could do: seal the row as it now stands."""
    key = seal.read_key(state, create=False)
    assert key is not None
    upto, format, data = db.execute(
        "SELECT upto_seq, format, CAST(data AS BLOB) FROM derived_snapshots WHERE session_id=?", (session_id,)
    ).fetchone()
    row = db.execute(
        "SELECT seq, time, type, CAST(data AS BLOB), ignorable FROM events WHERE session_id=? AND seq=?",
        (session_id, upto),
    ).fetchone()
    sealed = seal.seal(key, session_id, upto, format, tuple(row), data)
    db.execute("UPDATE derived_snapshots SET seal=? WHERE session_id=?", (sealed, session_id))


def _deep(data: str) -> str:
    return re.sub(r'"turn":\d+', '"turn":' + "[" * 100_000 + "]" * 100_000, data, count=1)


def _lone_surrogate(data: str) -> str:
    return data.replace('"one"', '"one \\ud800"', 1)


def _wrong_type(data: str) -> str:
    return re.sub(r'"turn":\d+', '"turn":true', data, count=1)


def _edited(data: str) -> str:
    return data.replace('"one"', '"EDITED BY HAND"', 1)


DAMAGES: dict[str, Callable[[str], str]] = {
    "truncated": lambda data: data[: len(data) // 2],
    "deep-nesting": _deep,
    "lone-surrogate": _lone_surrogate,
    "wrong-type": _wrong_type,
    "edited-text": _edited,
}


async def _damaged_then_opened(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    damage: Callable[[sqlite3.Connection, str], None],
    snapshots: list[tuple[int, str]] | None = None,
) -> None:
    """The scenario's snapshot damaged by `damage(db, session_id)`, then the session opened and run
    (`snapshots`: each snapshot the scenario wrote, `(upto, data)`)."""
    state = tmp_path / "s"
    session_id = await _scenario(state, snapshots)
    db = sqlite3.connect(state / DB_FILENAME)
    # kept aside while the state the log alone derives is found
    db.execute("CREATE TABLE kept AS SELECT * FROM derived_snapshots WHERE session_id=?", (session_id,))
    db.commit()
    db.close()
    expected = await _expected(state, session_id)
    db = sqlite3.connect(state / DB_FILENAME)
    db.execute("INSERT INTO derived_snapshots SELECT * FROM kept")
    db.execute("DROP TABLE kept")
    damage(db, session_id)
    db.commit()
    db.close()

    with caplog.at_level(logging.WARNING, logger="dsh_daemon.host.manager"):
        h = _open(state, session_id)
    assert caplog.text.count(IGNORED) == 1, caplog.text
    assert h.agent.log.events.base == 0  # derived from the whole log instead
    assert derived_state(h.agent) == expected
    assert h.manager.store.read_snapshot(session_id) is None  # dropped: said once, not at every open
    h.agent.followup(msg("next", id="next"))
    await h.idle()
    h.check()  # every request equals, byte for byte, its rebuild from the log
    stored = h.manager.store.load_events(session_id)
    assert requests_match_log(stored, h.provider.requests, h.prior_requests) == []  # ... as on disk
    sent = dumps(h.provider.requests[-1].to_json())
    assert "EDITED" not in sent and "one" in sent
    await h.manager.close()

    # Rebuilt: the turn end wrote a sealed snapshot again, and an open with it derives the same.
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="dsh_daemon.host.manager"):
        again = _open(state, session_id)
    assert IGNORED not in caplog.text
    assert again.agent.log.events.base > 0
    with_snapshot = derived_state(again.agent)
    await again.manager.close()
    assert with_snapshot == await _expected(state, session_id)


@pytest.mark.parametrize("resealed", [False, True], ids=["as-edited", "resealed-with-the-key"])
@pytest.mark.parametrize("name", list(DAMAGES))
async def test_a_damaged_snapshot_is_ignored_said_once_and_rebuilt_from_the_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, name: str, resealed: bool
) -> None:
    """Edited as it stands, the seal refuses it; sealed again by someone who can read the key, the
    decoder still refuses whatever is not a state it could have written (an edited text that is
    well formed and sealed again is the one thing it cannot tell: that is what the key guards)."""
    if resealed and name == "edited-text":
        pytest.skip("a well-formed edit sealed with the key is indistinguishable from the daemon's own")

    def damage(db: sqlite3.Connection, session_id: str) -> None:
        (data,) = db.execute(
            "SELECT data FROM derived_snapshots WHERE session_id=?", (session_id,)
        ).fetchone()
        damaged = DAMAGES[name](data)
        assert damaged != data
        db.execute("UPDATE derived_snapshots SET data=? WHERE session_id=?", (damaged, session_id))
        if resealed:
            _reseal(db, tmp_path / "s", session_id)

    await _damaged_then_opened(tmp_path, caplog, damage)


async def test_another_sessions_snapshot_copied_in_is_ignored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The same conversation in a second session of the same store (its own message ids): its sealed
    snapshot, copied over this session's, is not this session's."""
    other = await _scenario(tmp_path / "s")

    def damage(db: sqlite3.Connection, session_id: str) -> None:
        db.execute(
            "UPDATE derived_snapshots SET (upto_seq, format, data, seal) = (SELECT upto_seq, format, data, "
            "seal FROM derived_snapshots WHERE session_id=?) WHERE session_id=?",
            (other, session_id),
        )
        db.execute("DELETE FROM derived_snapshots WHERE session_id=?", (other,))

    await _damaged_then_opened(tmp_path, caplog, damage)


async def test_a_snapshot_whose_log_row_changed_behind_the_trigger_is_ignored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The trigger dropped, the row at the snapshot's seq rewritten, the trigger put back: the seal
    binds that row, so the snapshot no longer matches its log."""

    def damage(db: sqlite3.Connection, session_id: str) -> None:
        (upto,) = db.execute(
            "SELECT upto_seq FROM derived_snapshots WHERE session_id=?", (session_id,)
        ).fetchone()
        (trigger,) = db.execute(
            "SELECT sql FROM sqlite_master WHERE name='derived_snapshots_row_changed'"
        ).fetchone()
        db.execute("DROP TRIGGER derived_snapshots_row_changed")
        db.execute("UPDATE events SET time=time+1 WHERE session_id=? AND seq=?", (session_id, upto))
        db.execute(trigger)

    await _damaged_then_opened(tmp_path, caplog, damage)


async def test_a_sealed_snapshot_the_log_does_not_fold_onto_is_ignored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Turn 1's snapshot (B and C pending) sealed again by a key holder with its inbox emptied: it
    decodes, but the rows after it claim B, which it does not hold. Not a session that cannot be
    opened: the state is derived from the log."""
    snapshots: list[tuple[int, str]] = []

    def damage(db: sqlite3.Connection, session_id: str) -> None:
        upto, data = snapshots[0]
        value = json.loads(data)
        assert value["inbox"]["next-turn"], "turn 1 ends with B and C pending"
        value["inbox"] = {target: [] for target in value["inbox"]}
        emptied = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        db.execute(
            "UPDATE derived_snapshots SET upto_seq=?, data=? WHERE session_id=?", (upto, emptied, session_id)
        )
        _reseal(db, tmp_path / "s", session_id)

    await _damaged_then_opened(tmp_path, caplog, damage, snapshots)


async def test_a_missing_trigger_found_at_open_drops_every_snapshot(tmp_path: Path) -> None:
    """Rows may have changed while the trigger that drops their snapshots was gone: none is trusted."""
    session_id = await _scenario(tmp_path / "s")
    db = sqlite3.connect(tmp_path / "s" / DB_FILENAME)
    db.execute("DROP TRIGGER derived_snapshots_row_deleted")
    db.commit()
    db.close()
    store = SessionStore(tmp_path / "s")
    assert store.read_snapshot(session_id) is None
    assert store.db.execute("SELECT count(*) FROM sqlite_master WHERE type='trigger'").fetchone() == (2,)
    store.close()


def test_a_surrogate_escape_is_found_only_where_it_is_one() -> None:
    from dsh_daemon.agent.snapshot import _surrogate_escape

    assert _surrogate_escape('"a \\ud800 b"') == "\\ud800"
    assert _surrogate_escape('"a \\uDFFF"') == "\\uDFFF"
    assert _surrogate_escape('"a \\\\\\udc00"') == "\\udc00"  # an escaped backslash, then the escape
    assert _surrogate_escape('"C:\\\\udev \\\\ud800"') is None  # a backslash, then the letters
    assert _surrogate_escape('"\\u00e9 \\ud7ff \\ue000"') is None
    assert _surrogate_escape('"x\\\\\\udbff"') == "\\udbff"


def test_a_store_from_before_seals_gains_the_column_and_its_snapshots_are_not_trusted(tmp_path: Path) -> None:
    from dsh_daemon.model import events as ev
    from dsh_daemon.model.events import Event
    from dsh_daemon.model.jsonvalue import FrozenDict
    from dsh_daemon.session.store import UntrustedSnapshotError

    store = SessionStore(tmp_path)
    store.create_session("s", title=None, cwd=None)
    store.append_events("s", [Event(ev.TURN_START, FrozenDict({"turn": 1}), 0, 1)])
    assert store.write_snapshot("s", 0, 1, "state")
    assert store.read_snapshot("s") == (0, 1, "state")
    store.close()
    db = sqlite3.connect(tmp_path / DB_FILENAME)
    db.execute("ALTER TABLE derived_snapshots DROP COLUMN seal")  # the table as the last build made it
    db.commit()
    db.close()
    store = SessionStore(tmp_path)
    with pytest.raises(UntrustedSnapshotError, match="not sealed"):
        store.read_snapshot("s")
    assert store.write_snapshot("s", 0, 1, "state again")
    assert store.read_snapshot("s") == (0, 1, "state again")
    store.close()
    (tmp_path / seal.KEY_FILENAME).write_bytes(b"short")  # a damaged key: replaced, its seals refused
    store = SessionStore(tmp_path)
    with pytest.raises(UntrustedSnapshotError, match="no seal key"):
        store.read_snapshot("s")
    assert store.write_snapshot("s", 0, 1, "sealed anew")
    assert store.read_snapshot("s") == (0, 1, "sealed anew")
    assert (tmp_path / seal.KEY_FILENAME).stat().st_mode & 0o777 == 0o600
    store.close()
