"""A session's long-lived state is kept out of the cyclic collector's full passes once it has been
built (issue 40.4, `host/heap.py`): after a session is opened, and after a derived-state snapshot is
encoded, what is alive then is frozen; only the daemon's front ends turn that on."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh_daemon.host.heap import keep_long_lived_state, stop_keeping_long_lived_state
from dsh_daemon.llm.scripted import reply
from dsh_daemon.model.messages import Message
from tests.core.harness import Harness, msg


@pytest.fixture
def keeping() -> Iterator[None]:
    """As `dsh-daemon` runs; everything frozen goes back to the collector after the test."""
    keep_long_lived_state()
    try:
        yield
    finally:
        stop_keeping_long_lived_state()


def _walked_by_the_collector(objects: list[object]) -> list[object]:
    """Those of `objects` that some generation's pass still walks (a frozen object is in none)."""
    walked = {id(o) for o in gc.get_objects()}
    return [o for o in objects if id(o) in walked]


def _history(h: Harness) -> list[Message]:
    return [message for _, message in h.agent.derive().entries]


async def test_the_state_a_snapshot_was_encoded_from_is_frozen(tmp_path: Path, keeping: None) -> None:
    h = Harness(tmp_path, [reply("one"), reply("two")], snapshot_every=1)
    h.agent.followup(msg("A", id="A"))
    await h.idle()
    await h.manager.close()  # (waits for the snapshot's encode and write)
    history = _history(h)
    assert len(history) >= 2 and all(gc.is_tracked(m) for m in history)
    assert _walked_by_the_collector(history) == []


async def test_a_session_opened_from_its_snapshot_is_frozen(tmp_path: Path, keeping: None) -> None:
    h = Harness(tmp_path, [reply("one")], snapshot_every=1)
    h.agent.followup(msg("A", id="A"))
    await h.idle()
    session_id = h.agent.session_id
    await h.manager.close()
    gc.unfreeze()  # (what the first harness left: only the open below may freeze it again)
    opened = Harness(tmp_path, session_id=session_id)  # (decodes the snapshot: no turn ends here)
    history = _history(opened)
    assert len(history) >= 2
    assert _walked_by_the_collector(history) == []
    await opened.manager.close()


async def test_nothing_is_frozen_unless_a_front_end_asked(tmp_path: Path) -> None:
    frozen = gc.get_freeze_count()
    h = Harness(tmp_path, [reply("one")], snapshot_every=1)
    h.agent.followup(msg("A", id="A"))
    await h.idle()
    await h.manager.close()
    assert gc.get_freeze_count() == frozen
    assert _walked_by_the_collector(_history(h)) != []


async def test_a_closed_session_frozen_with_the_rest_is_freed(tmp_path: Path, keeping: None) -> None:
    """Its agent is a cycle holding the whole state: frozen, nothing would ever free it."""
    h = Harness(tmp_path, [reply("one")], snapshot_every=1)
    h.agent.followup(msg("A", id="A"))
    await h.idle()
    await h.manager._snapshots_written()
    session_id = h.agent.session_id
    agent = weakref.ref(h.agent)
    history = weakref.ref(h.agent.log)
    del h.agent
    await h.manager.close_session(session_id)
    assert agent() is None and history() is None
    await h.manager.close()
