"""Reading a long session's events of one type costs those events, not the session's whole log.

Attaching to a session nobody drives reads its inbox splices, its mode and its plan from the store
(`host/sessions.py` `_attach_from_store`). Each read used to scan every event of the session (the
primary key is `(session_id, seq)`): a 100,000-event session's attach took ~150 ms. The work is
counted in SQLite virtual-machine steps (a progress handler), which is deterministic, not timed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dsh_daemon.model import events as ev
from dsh_daemon.model.events import Event
from dsh_daemon.model.jsonvalue import freeze_json
from dsh_daemon.session.store import SessionStore

TURNS = 3000  # 12,000 events: a scan of them costs well over 100,000 VM steps


def _long_session(store: SessionStore, *, plan_at: int | None = None) -> None:
    store.create_session("s", title=None, cwd=None)
    rows: list[tuple[str, dict[str, Any]]] = []
    for turn in range(1, TURNS + 1):
        rows += [
            (ev.TURN_START, {"turn": turn}),
            (ev.STEP_START, {"turn": turn, "step": 1}),
            (ev.STEP_END, {"turn": turn, "step": 1}),
            (ev.TURN_END, {"turn": turn, "reason": {"kind": "completed"}}),
        ]
        if turn == plan_at:
            rows.append((ev.PLAN_UPDATED, {"turn": turn, "steps": [{"title": "t", "status": "pending"}]}))
    rows.append((ev.SESSION_MODE, {"mode": "plan"}))
    store.append_events(
        "s", [Event(kind, freeze_json(data), seq, 0) for seq, (kind, data) in enumerate(rows)]
    )


def _vm_steps(store: SessionStore, read: Any) -> tuple[int, Any]:
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 100
        return 0

    store.db.set_progress_handler(count, 100)
    try:
        result = read()
    finally:
        store.db.set_progress_handler(None, 100)
    return steps, result


def test_events_of_one_type_cost_those_events_not_the_whole_log(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    _long_session(store)
    steps, modes = _vm_steps(store, lambda: store.load_events_of_type("s", ev.SESSION_MODE))
    assert [e.data["mode"] for e in modes] == ["plan"]
    assert steps < 1000, steps  # a scan of the 12,001 events took ~150,000
    steps, none = _vm_steps(store, lambda: store.load_events_of_type("s", ev.INBOX_SPLICED))
    assert none == [] and steps < 1000, steps
    steps, last = _vm_steps(store, lambda: store.last_event_of_type("s", ev.TURN_START, 8))
    assert last is not None and last.seq == 4 and steps < 1000, steps
    steps, seq = _vm_steps(store, lambda: store.turn_start_seq("s", 2))
    assert seq == 4 and steps < 40_000, steps  # the turn starts' numbers are read: 3,000 of 12,001 rows
    # the index is the same for a store made before it existed: created when the store opens
    store.db.execute("DROP INDEX events_by_type")
    store.close()
    again = SessionStore(tmp_path)
    steps, modes = _vm_steps(again, lambda: again.load_events_of_type("s", ev.SESSION_MODE))
    assert len(modes) == 1 and steps < 1000, steps
    again.close()
