"""The protocol's stdout writer: frames made in one pass of the event loop leave in one write.

A streamed reply is one `dsh/event` per parsed delta, and an HTTP read often yields dozens of them:
one `write` + `flush` each was the largest cost of the stream (a syscall per delta). Frames are kept
in order in one buffer (pygls' replies and requests go through the same writer) and written when the
loop next runs its callbacks, before it waits for anything, so no frame waits for more input.

While the client has not read what was written before, streamed deltas are held and merged instead
(`host/outbox.py`); any other frame first releases them, so nothing overtakes a held delta.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, BinaryIO

from dsh_daemon.host.outbox import HeldMessages, Mergeable, ReadPosition, unread_probe

logger = logging.getLogger(__name__)


class CoalescingWriter:
    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self._buffer: list[bytes] = []
        self._scheduled = False
        self._broken = False
        try:
            probe = unread_probe(stream.fileno())
        except (OSError, ValueError, AttributeError):  # no descriptor (a test's stream)
            probe = None
        self.position = ReadPosition(probe)
        self._buffered = 0  # bytes in `_buffer`
        self._streamed_end: int | None = None  # where in `_buffer` the last streamed frame ends
        self.held = HeldMessages(self.write_streamed, self.position.behind)

    def send_mergeable(self, message: Mergeable) -> None:
        """A streamed delta: held (and merged) while the client has not read the last one, else
        written like any frame."""
        if self._broken:
            return
        if not self.held.offer(message):
            self.write_streamed(message.encode())

    def write_streamed(self, data: bytes) -> None:
        """A streamed message's frame, written now (the caller found nothing to hold it for)."""
        self.write(data)
        self._streamed_end = self._buffered

    def write(self, data: bytes) -> None:
        if self._broken:
            return
        if self.held.pending:
            released = self.held.release()  # held deltas first: nothing overtakes them
            self._buffer.append(released)
            self._buffered += len(released)
            self._streamed_end = self._buffered
        self._buffer.append(data)
        self._buffered += len(data)
        if self._scheduled:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (shutting down): write at once
            self.flush()
            return
        loop.call_soon(self.flush)
        self._scheduled = True

    def flush(self) -> None:
        self._scheduled = False
        if not self._buffer or self._broken:
            self._buffer.clear()
            return
        data = b"".join(self._buffer)
        self._buffer.clear()
        self._buffered = 0
        streamed_end, self._streamed_end = self._streamed_end, None
        try:
            self._stream.write(data)
            self._stream.flush()
            if streamed_end is not None:
                self.position.mark = self.position.written + streamed_end
            self.position.written += len(data)
        except (BrokenPipeError, ValueError, OSError) as exc:  # the client went away
            self._broken = True
            logger.info("client went away: %s", exc)

    def flush_all(self) -> None:
        """Everything, held deltas included, leaves now (the process is about to end)."""
        if self.held.pending:
            self.write_streamed(self.held.release())
        self.flush()

    def close(self) -> None:
        self.flush_all()
        self._stream.close()


def flush_made(protocol: Any) -> None:
    """The frames `protocol` has made leave now, not when the loop next runs its callbacks: for the
    moments the loop is about to be held up (waiting for the preload, `host/preload.py`), so a reply
    already made does not wait with it."""
    writer = getattr(protocol, "writer", None)
    if isinstance(writer, CoalescingWriter):
        writer.flush()


def set_delta_window(protocol: Any, window_s: float) -> None:
    """The client's `deltaCoalesceMs`: how long a streamed delta waits for the next ones."""
    writer = getattr(protocol, "writer", None)
    if isinstance(writer, CoalescingWriter):
        writer.held.window_s = window_s
