"""A snapshot's encode runs on the event loop in steps (issue 40.4): no step but the last copies a
whole table's text, so none holds the loop for a time that grows with the session (a 100,000-event
session's tables are megabytes). Measured in bytes allocated or C calls made, never in time."""

from __future__ import annotations

import sys
import tracemalloc
from pathlib import Path

from dsh_daemon.agent.derive import Derivation
from dsh_daemon.agent.snapshot import DerivedSnapshot, SnapshotCodec, SnapshotView
from dsh_daemon.llm.scripted import reply
from dsh_daemon.model.events import TURN_START, Event
from dsh_daemon.model.jsonvalue import freeze_json
from tests.core.harness import Harness, msg


async def test_only_the_last_step_of_an_encode_copies_the_whole_text(tmp_path: Path) -> None:
    turns = 40
    h = Harness(tmp_path, [reply(f"answer {n} " + "x" * 4000) for n in range(turns + 1)])
    for n in range(turns):
        h.agent.followup(msg(f"question {n}", id=f"q{n}"))
        await h.idle()
    codec = SnapshotCodec()
    first = codec.encode(h.agent.snapshot())  # the tables' text is known from here on
    h.agent.followup(msg("one more", id="last"))
    await h.idle()

    peaks: list[int] = []
    steps = codec.encode_steps(SnapshotView.of(h.agent.snapshot()))
    tracemalloc.start()
    try:
        while True:
            tracemalloc.reset_peak()
            try:
                next(steps)
            except StopIteration as done:
                text = done.value
                peaks.append(tracemalloc.get_traced_memory()[1])
                break
            peaks.append(tracemalloc.get_traced_memory()[1])
    finally:
        tracemalloc.stop()
    assert len(first) > 160_000 and len(text) > len(first)
    assert peaks[-1] >= len(text)  # (the measure sees the one copy there is)
    assert max(peaks[:-1]) < len(text) // 4, (max(peaks[:-1]), len(text))
    await h.manager.close()


def _marks_only(turns: int) -> DerivedSnapshot:
    """A derivation of `turns` turns that entered no message (a turn mark each, nothing else)."""
    derivation = Derivation()
    for turn in range(turns):
        derivation.feed(Event(TURN_START, freeze_json({"turn": turn}), turn, 0))
    return DerivedSnapshot(turns - 1, turns - 1, {}, derivation)


def test_no_step_puts_every_turn_mark_into_the_text() -> None:
    """Issue 40.4: one turn mark a turn, and the step that put all of them into the text (two list
    appends each) held the loop 2-4 ms at 14,000 turns. Counted in C calls a step makes, not in time."""
    snapshot = _marks_only(3000)
    codec = SnapshotCodec()
    whole = codec.encode(snapshot)  # every mark known from here on, as at a later turn end
    calls = [0]

    def count(_frame: object, event: str, _arg: object) -> None:
        if event == "c_call":
            calls[0] += 1

    per_step: list[int] = []
    steps = codec.encode_steps(SnapshotView.of(snapshot))
    while True:
        calls[0] = 0
        sys.setprofile(count)
        try:
            next(steps)
        except StopIteration as done:
            text = done.value
            break
        finally:
            sys.setprofile(None)
        per_step.append(calls[0])
    assert text == whole == DerivedSnapshot.encode(snapshot)
    assert max(per_step) < 1500, per_step
