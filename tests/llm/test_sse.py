"""The SSE parser: framing rules of provider.md §1.6, whatever way the bytes are split."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_daemon.llm.sse import SseEvent, SseParser
from tests.fakes.deepseek_server import STREAM_B, STREAM_C, wire


def parse(*chunks: bytes) -> tuple[list[SseEvent], SseParser]:
    parser = SseParser()
    events: list[SseEvent] = []
    for chunk in chunks:
        events.extend(parser.feed(chunk))
    return events, parser


def data_lines(lines: tuple[str, ...]) -> list[str]:
    return [line.removeprefix("data: ") for line in lines if line.startswith("data: ")]


def test_stream_c_yields_every_data_event_and_swallows_keep_alives() -> None:
    events, parser = parse(wire(STREAM_C))
    assert [e.data for e in events] == data_lines(STREAM_C)
    assert events[-1].data == "[DONE]"
    assert parser.comments == 2
    assert not parser.pending


@given(st.lists(st.integers(min_value=0, max_value=len(wire(STREAM_B))), max_size=40))
def test_splitting_anywhere_gives_the_same_events(cuts: list[int]) -> None:
    raw = "".join(
        line + "\n\n" for line in (*STREAM_B[:-1], 'data: {"content":"héllo wörld 你好 🙂"}', "data: [DONE]")
    )
    raw_bytes = raw.encode()
    bounds = sorted({0, len(raw_bytes), *(min(c, len(raw_bytes)) for c in cuts)})
    chunks = [raw_bytes[a:b] for a, b in itertools.pairwise(bounds)]
    whole, _ = parse(raw_bytes)
    split, _ = parse(*chunks)
    assert split == whole
    assert split[-2].data == '{"content":"héllo wörld 你好 🙂"}'


def test_one_byte_at_a_time_keeps_utf8_intact() -> None:
    raw = 'data: {"content":"ünïcödé 漢字"}\n\n'.encode()
    events, _ = parse(*(raw[i : i + 1] for i in range(len(raw))))
    assert events == [SseEvent('{"content":"ünïcödé 漢字"}')]


def test_crlf_and_cr_line_endings() -> None:
    events, _ = parse(b"data: a\r\n\r\ndata: b\r\rdata: c\n\n")
    assert [e.data for e in events] == ["a", "b", "c"]


def test_crlf_split_between_cr_and_lf_is_one_line_ending() -> None:
    # A CR at the end of a chunk may be half of a CRLF: the parser must not see an extra blank line.
    events, _ = parse(b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n")
    assert [e.data for e in events] == ["a\nb"]


def test_data_with_and_without_space_and_multiline_join() -> None:
    events, _ = parse(b"data:x\ndata:  two spaces\ndata: y\n\n")
    assert [e.data for e in events] == ["x\n two spaces\ny"]


def test_bom_at_start_is_ignored() -> None:
    events, _ = parse(b"\xef\xbb", b"\xbfdata: a\n\n")
    assert [e.data for e in events] == ["a"]


def test_comments_and_events_without_data_are_not_yielded() -> None:
    events, parser = parse(b": keep-alive\n\n:\n\nevent: ping\n\nid: 7\nretry: 10\n\ndata: z\n\n")
    assert [e.data for e in events] == ["z"]
    assert parser.comments == 2


def test_event_field_is_kept() -> None:
    events, _ = parse(b"event: error\ndata: {}\n\n")
    assert events == [SseEvent("{}", "error")]


def test_done_without_blank_line_is_still_pending() -> None:
    events, parser = parse(b"data: a\n\ndata: [DONE]\n")
    assert [e.data for e in events] == ["a"]
    assert parser.pending  # the caller must treat EOF here as truncation


def test_a_line_that_never_ends_is_a_malformed_response_not_unbounded_memory() -> None:
    from dsh_daemon.llm.sse import MAX_LINE_BYTES, SseParser
    from dsh_daemon.model.provider import MALFORMED_RESPONSE, ProviderFailure

    parser = SseParser()
    chunk = b"data: " + b"x" * 65536
    with pytest.raises(ProviderFailure) as failure:
        for _ in range(MAX_LINE_BYTES // len(chunk) + 2):
            parser.feed(chunk)
    assert failure.value.failure.code == MALFORMED_RESPONSE
