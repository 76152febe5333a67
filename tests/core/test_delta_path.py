"""The streamed-delta path's shortcuts give what the general code gives (issue 40): the chunk event's
freeze, and the writer's question whether the client is behind."""

from __future__ import annotations

import os

import pytest

from dsh_daemon.host.outbox import ReadPosition, unread_probe
from dsh_daemon.model.jsonvalue import FrozenDict, NotJsonError, freeze_flat_objects, freeze_json


def test_flat_deltas_freeze_as_freeze_json_does_and_frozen_ones_are_kept() -> None:
    frozen = FrozenDict({"type": "text", "text": "héllo 🙂"})
    deltas = [
        frozen,
        {"type": "reasoning", "text": "plain"},
        {"type": "tool-call", "index": 0, "id": "call_1", "name": "grep", "arguments": '{"q":'},
        {"type": "tool-call", "index": 0, "arguments": None},
        {"type": "odd", "nested": {"list": [1, 2.5, True]}},  # not flat: the general way
    ]
    got = freeze_flat_objects(deltas, path="$.deltas")
    assert got == freeze_json(deltas, path="$.deltas")
    assert got[0] is frozen
    assert all(type(item) is FrozenDict for item in got)
    assert type(got[4]["nested"]["list"]) is tuple


@pytest.mark.parametrize(
    "bad",
    [{"type": "text", "text": "lone \ud800"}, {"type": "text", "text": float("nan")}, {1: "x"}],
    ids=["surrogate", "nan", "key"],
)
def test_what_freeze_json_refuses_is_refused_with_its_path(bad: dict[object, object]) -> None:
    with pytest.raises(NotJsonError) as flat:
        freeze_flat_objects([{"type": "text", "text": "ok"}, bad], path="$.deltas")
    with pytest.raises(NotJsonError) as general:
        freeze_json([{"type": "text", "text": "ok"}, bad], path="$.deltas")
    assert str(flat.value) == str(general.value) and "$.deltas[1]" in str(flat.value)


def test_the_reader_is_asked_once_per_write_not_once_per_delta() -> None:
    read_end, write_end = os.pipe()
    try:
        probe = unread_probe(write_end)
        assert probe is not None
        asked = 0

        def counting() -> int:
            nonlocal asked
            asked += 1
            return probe()

        position = ReadPosition(counting)
        os.write(write_end, b"x" * 100)
        position.written, position.mark = 100, 100
        assert position.behind()  # nothing read yet
        os.read(read_end, 100)
        assert not position.behind()
        asked = 0
        assert [position.behind() for _ in range(50)] == [False] * 50
        assert asked == 0  # nothing written since: the answer stands
        os.write(write_end, b"y" * 10)  # the next message leaves and is not read
        position.written, position.mark = 110, 110
        assert position.behind() and asked == 1
        position.mark = 120  # a mark moved alone (ACP sets it a pass later) is asked again too
        os.read(read_end, 10)
        assert position.behind() and asked == 2  # 110 written, all read, but the mark says 120
    finally:
        os.close(read_end)
        os.close(write_end)
