"""A live text delta's frame is filled into its fixed shape, without a held message, when nothing
would hold it (issue 40.5): the bytes are the general encoder's, and anything the shape does not fit
(a tool-call delta, a stored event, a lone surrogate, a client that is behind) takes the general way.
A real pipe is the writer's stream, so whether the client is behind is the kernel's answer."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from typing import Any

import pytest

from dsh_daemon.model.jsonvalue import FrozenDict
from dsh_daemon.model.payloads import AssistantDelta
from dsh_daemon.server import eventwire
from dsh_daemon.server.stdout import CoalescingWriter


class _Protocol:
    def __init__(self, writer: CoalescingWriter) -> None:
        self.writer = writer


@pytest.fixture
def pipe() -> Iterator[tuple[int, CoalescingWriter]]:
    read_end, write_end = os.pipe()
    stream = os.fdopen(write_end, "wb", buffering=0)
    try:
        yield read_end, CoalescingWriter(stream)
    finally:
        stream.close()
        os.close(read_end)


def _params(text: str, kind: str = "text", session: str = "s-1", offset: int = 7) -> dict[str, Any]:
    event = AssistantDelta.fast_event(3, 2, offset, FrozenDict({"type": kind, "text": text}))
    return {"sessionId": session, "type": event.type, "data": event.data}


def _raw(turn: object, delta: dict[str, Any]) -> dict[str, Any]:
    return {
        "sessionId": "s",
        "type": "assistant/delta",
        "data": {"turn": turn, "step": 1, "offset": 0, "delta": delta},
    }


TEXTS = ["d1 ", "", 'quote " back \\ slash', "tab\tnew\nline\x00\x1f", "héllo 🙂 \u2028 ü"]


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("kind", ["text", "reasoning"])
def test_the_filled_frame_is_the_general_encoders(text: str, kind: str) -> None:
    params = _params(text, kind, session='sé"ss')
    assert eventwire._text_delta_frame(params) == eventwire._frame(params)


@pytest.mark.parametrize(
    "params",
    [
        {**_params("x"), "seq": 4},  # a stored event
        _params("lone \ud800"),  # `_frame` escapes it
        _raw(True, {"type": "text", "text": "x"}),
        _raw(1, {"type": "tool-call", "index": 0}),
        _raw(1, {"type": "text", "text": 5}),
    ],
    ids=["stored", "surrogate", "bool-turn", "tool-call", "not-a-string"],
)
def test_what_the_shape_does_not_fit_is_left_to_the_general_way(params: dict[str, Any]) -> None:
    assert eventwire._text_delta_frame(params) is None


def test_a_client_that_keeps_up_gets_the_frame_without_a_held_message(
    pipe: tuple[int, CoalescingWriter], monkeypatch: pytest.MonkeyPatch
) -> None:
    read_end, writer = pipe
    protocol = _Protocol(writer)
    made: list[object] = []
    real = eventwire._mergeable
    monkeypatch.setattr(eventwire, "_mergeable", lambda params: made.append(params) or real(params))
    first, second = _params("a", offset=0), _params("b", offset=1)
    eventwire.send_event(protocol, first)  # type: ignore[arg-type]
    writer.flush()
    assert os.read(read_end, 1 << 16) == eventwire._frame(first)
    eventwire.send_event(protocol, second)  # type: ignore[arg-type]
    writer.flush()
    assert os.read(read_end, 1 << 16) == eventwire._frame(second)
    assert made == []  # neither was made into a mergeable message: nothing could hold it


def test_a_client_that_is_behind_still_gets_the_deltas_merged(pipe: tuple[int, CoalescingWriter]) -> None:
    read_end, writer = pipe
    protocol = _Protocol(writer)

    async def stream() -> None:  # held messages wait on the running loop
        eventwire.send_event(protocol, _params("a", offset=0))  # type: ignore[arg-type]
        writer.flush()  # written, not read: the client is behind from here on
        for offset, text in enumerate("bcd", start=1):
            eventwire.send_event(protocol, _params(text, offset=offset))  # type: ignore[arg-type]
        writer.flush()
        assert writer.held.pending
        assert os.read(read_end, 1 << 16) == eventwire._frame(_params("a", offset=0))
        writer.flush_all()

    asyncio.run(stream())
    assert os.read(read_end, 1 << 16) == eventwire._frame(_params("bcd", offset=1))
