"""The protocol's stdout writer: frames made in one pass of the event loop leave in one write.

A streamed reply is one `dsh/event` per parsed delta, and an HTTP read often yields dozens of them:
one `write` + `flush` each was the largest cost of the stream (a syscall per delta). Frames are kept
in order in one buffer (pygls' replies and requests go through the same writer) and written when the
loop next runs its callbacks, before it waits for anything, so no frame waits for more input.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, BinaryIO

logger = logging.getLogger(__name__)


class CoalescingWriter:
    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self._buffer: list[bytes] = []
        self._scheduled = False
        self._broken = False

    def write(self, data: bytes) -> None:
        if self._broken:
            return
        self._buffer.append(data)
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
        try:
            self._stream.write(data)
            self._stream.flush()
        except (BrokenPipeError, ValueError, OSError) as exc:  # the client went away
            self._broken = True
            logger.info("client went away: %s", exc)

    def close(self) -> None:
        self.flush()
        self._stream.close()


def flush_made(protocol: Any) -> None:
    """The frames `protocol` has made leave now, not when the loop next runs its callbacks: for the
    moments the loop is about to be held up (waiting for the preload, `host/preload.py`), so a reply
    already made does not wait with it."""
    writer = getattr(protocol, "writer", None)
    if isinstance(writer, CoalescingWriter):
        writer.flush()
