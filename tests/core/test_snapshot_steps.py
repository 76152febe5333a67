"""A snapshot's encode runs on the event loop in steps (issue 40.4): no step but the last copies a
whole table's text, so none holds the loop for a time that grows with the session (a 100,000-event
session's tables are megabytes). Measured in bytes allocated, never in time."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

from dsh_daemon.agent.snapshot import SnapshotCodec, SnapshotView
from dsh_daemon.llm.scripted import reply
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
