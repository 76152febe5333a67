"""stdin for the LSP front end, read on a thread of its own (`StdinReader`). Free of pygls: the
`initialize` reply is written from it before the LSP machinery is imported (server/early_init.py)."""

from __future__ import annotations

import asyncio
import os
import threading
from typing import BinaryIO

MAX_HEADER_LINE = 1 << 20
MARK = b"content-length:"


class StdinReader:
    """stdin, read on a daemon thread of its own (never a pool a busy handler could fill, and never
    one that keeps the process alive) into a buffer the frame parser can push bytes back into.
    `stop()` ends it like an EOF."""

    def __init__(self, stdin: BinaryIO) -> None:
        self._loop = asyncio.get_running_loop()
        self._buf = bytearray()
        self._eof = False
        self._waiter: asyncio.Future[None] | None = None
        self._fd = stdin.fileno()
        threading.Thread(target=self._pump, name="dsh-stdin", daemon=True).start()

    def _pump(self) -> None:
        while True:
            try:
                chunk = os.read(self._fd, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                self._loop.call_soon_threadsafe(self.stop)
                return
            self._loop.call_soon_threadsafe(self._feed, chunk)

    def _feed(self, data: bytes) -> None:
        self._buf += data
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def _more(self) -> None:
        self._waiter = self._loop.create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    async def more(self, wait_s: float) -> bool:
        """Wait for more bytes (or EOF); False when none came within `wait_s` seconds. The waiter is
        registered before anything is awaited: bytes fed in between would otherwise wake nobody."""
        if self._eof:
            return True
        waiter = self._waiter = self._loop.create_future()
        try:
            await asyncio.wait_for(waiter, wait_s)
        except TimeoutError:
            return False
        finally:
            self._waiter = None
        return True

    @property
    def eof(self) -> bool:
        return self._eof

    def buffered(self) -> bytes:
        """What has arrived and not been taken yet (a copy; nothing is consumed)."""
        return bytes(self._buf)

    @property
    def buffered_size(self) -> int:
        """How many bytes have arrived and not been taken yet (nothing copied)."""
        return len(self._buf)

    def take(self, n: int) -> bytes:
        return self._take(n)

    def _take(self, n: int) -> bytes:
        out = bytes(self._buf[:n])
        del self._buf[:n]
        return out

    async def readline(self) -> bytes:
        """Bytes through the next `\\n`; b"" at EOF. A run of more than MAX_HEADER_LINE bytes without
        a newline comes back in pieces (the last few bytes stay, so a header split there survives)."""
        searched = 0
        while True:
            at = self._buf.find(b"\n", searched)
            if at >= 0:
                return self._take(at + 1)
            if len(self._buf) >= MAX_HEADER_LINE:
                return self._take(len(self._buf) - len(MARK))
            if self._eof:
                return self._take(len(self._buf))
            searched = len(self._buf)
            await self._more()

    async def read(self, n: int) -> bytes:
        """Up to `n` bytes (fewer when that is what has arrived); b"" at EOF."""
        while not self._buf and not self._eof:
            await self._more()
        return self._take(n)

    async def readexactly(self, n: int) -> bytes:
        """`n` bytes, or fewer at EOF."""
        while len(self._buf) < n and not self._eof:
            await self._more()
        return self._take(n)

    def unread(self, data: bytes) -> None:
        """Put bytes back in front of the stream (resynchronisation)."""
        self._buf[:0] = data

    def stop(self) -> None:
        self._eof = True
        self._wake()

    def close(self) -> None:
        self.stop()
