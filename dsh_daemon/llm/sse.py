"""An incremental Server-Sent Events parser (WHATWG event-stream rules).

Feed it bytes exactly as they arrive; it returns the events completed by those bytes. It handles splits
anywhere (in a line ending, in a UTF-8 sequence), LF / CRLF / CR line endings, a leading BOM, multi-line
`data:` joined with "\\n", and `data:` with or without the space. Comment lines (`: keep-alive`) are
swallowed: their only effect — re-arming the idle timer — happens in the transport, on any bytes.

An event is complete only at its blank line, so a final `data: [DONE]` without one stays pending; the
caller treats EOF without `[DONE]` as a truncated stream.
"""

from __future__ import annotations

from typing import NamedTuple

from dsh_daemon.model.provider import MALFORMED_RESPONSE, LlmFailure, ProviderFailure

MAX_LINE_BYTES = 4 * 1024 * 1024
MAX_EVENT_BYTES = 16 * 1024 * 1024


def _too_big(what: str) -> ProviderFailure:
    return ProviderFailure(LlmFailure(MALFORMED_RESPONSE, f"the provider sent {what}"))


class SseEvent(NamedTuple):
    """One event (a tuple, not a frozen dataclass: one is made per streamed delta, and a tuple is made
    in half the time)."""

    data: str
    event: str = "message"


class SseParser:
    def __init__(self) -> None:
        self._buffer = b""
        self._data: list[str] = []
        self._data_bytes = 0
        self._event = ""
        self._started = False  # the BOM may only appear before the first byte of the first line
        self.comments = 0  # comment lines seen (keep-alives), for diagnostics and tests

    def feed(self, chunk: bytes) -> list[SseEvent]:
        buffer = self._buffer + chunk if self._buffer else chunk
        if len(buffer) > MAX_LINE_BYTES and b"\n" not in chunk and b"\r" not in chunk:
            # A server that never ends a line would grow this buffer (and its copies) without bound.
            raise _too_big(f"an SSE line longer than {MAX_LINE_BYTES} bytes")
        # Splitting bytes (not text) is safe: 0x0A and 0x0D never occur inside a UTF-8 sequence, so a
        # line is decoded only once it is whole.
        if b"\r" in buffer:
            lines, self._buffer = _split_lines(buffer)
        else:  # LF only, as every server we know sends: one C-level split
            lines = buffer.split(b"\n")
            self._buffer = lines.pop()
        events: list[SseEvent] = []
        data = self._data
        for raw in lines:
            if raw.startswith(b"data: ") and self._started:  # the hot path: one `data:` line
                data.append(raw[6:].decode("utf-8", errors="replace"))
                self._data_bytes += len(raw)
                if self._data_bytes > MAX_EVENT_BYTES:
                    raise _too_big(f"an SSE event larger than {MAX_EVENT_BYTES} bytes")
                continue
            # the blank line that ends an event: dispatched without decoding it first
            event = self._dispatch() if not raw and self._started else self._line(raw)
            if event is not None:
                events.append(event)
                data = self._data
        return events

    def _line(self, raw: bytes) -> SseEvent | None:
        line = raw.decode("utf-8", errors="replace")
        if not self._started:
            self._started = True
            if line.startswith("\ufeff"):
                line = line[1:]
        if not line:
            return self._dispatch()
        if line[0] == ":":
            self.comments += 1
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        # `id` and `retry` steer browser reconnection, which a one-shot model request never does.
        return None

    def _dispatch(self) -> SseEvent | None:
        if not self._data:  # an event without data lines is dropped, as the standard says
            self._event = ""
            return None
        event = SseEvent("\n".join(self._data), self._event or "message")
        self._data = []
        self._data_bytes = 0
        self._event = ""
        return event

    @property
    def pending(self) -> bool:
        """Bytes or data lines received but not completed into an event."""
        return bool(self._buffer or self._data)


def _split_lines(buffer: bytes) -> tuple[list[bytes], bytes]:
    """Complete lines ending in LF, CRLF or CR, and the incomplete rest. A CR at the very end is kept
    in the rest: it may be the first half of a CRLF split across two chunks."""
    lines: list[bytes] = []
    start = 0
    end = len(buffer)
    while start < end:
        lf = buffer.find(b"\n", start)
        cr = buffer.find(b"\r", start, lf if lf >= 0 else end)
        if cr >= 0:
            if cr + 1 == end:
                break
            lines.append(buffer[start:cr])
            start = cr + 2 if buffer[cr + 1] == 0x0A else cr + 1
        elif lf >= 0:
            lines.append(buffer[start:lf])
            start = lf + 1
        else:
            break
    return lines, buffer[start:]
