"""Streamed messages to a client that has fallen behind: held, merged, sent once it has read the rest.

A streamed reply is one notification per provider delta. A client that cannot keep up (an editor
decoding one message per token) gets further behind with every one, while a message that merged
the deltas it has not read yet would cost it one decode. So while the client has not read the last
streamed message written to it (`ReadPosition`: the kernel's count of unread bytes against where
that message ended), each mergeable message (a text delta, a piece of command output) is held
instead of written, merged into the held one before it when they join (same block, contiguous), and
the held messages leave as soon as the client has read that far, or just before any other message
(which never overtakes them: order is part of the contract). A client that keeps up sees one
message per delta, written at once, exactly as without this. A client may also ask for a fixed
window (`window_s`): a mergeable message then waits that long for the ones after it even when the
client keeps up.

What it does not do: it never holds a message that is not mergeable, so replies and other events
leave as before; on a stream whose unread bytes the kernel cannot tell (a terminal, a file), the
client never counts as behind.
"""

from __future__ import annotations

import array
import asyncio
import fcntl
import os
import stat
import sys
import termios
from collections.abc import Callable
from typing import Protocol

POLL_S = 0.002  # how often a held message looks whether the client has read the rest


class Mergeable(Protocol):
    def absorb(self, later: Mergeable) -> bool:
        """Take `later` into this message when they join (same block, contiguous); False otherwise."""
        ...

    def encode(self) -> bytes:
        """The message's frame, as it goes on the wire."""
        ...


def unread_probe(fd: int) -> Callable[[], int] | None:
    """A count of the bytes written to `fd` that its reader has not read yet; None when the kernel
    cannot tell (not a pipe or a socket)."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return None
    if stat.S_ISFIFO(mode):
        request = termios.FIONREAD  # a pipe's unread bytes, asked from either end
    elif stat.S_ISSOCK(mode):
        request = termios.TIOCOUTQ  # SIOCOUTQ: what the peer has not consumed, in buffer sizes
    else:
        return None
    count = array.array("i", [0])
    socket = stat.S_ISSOCK(mode)

    def unread() -> int:
        try:
            fcntl.ioctl(fd, request, count, True)
        except OSError:
            return 0
        if socket and count[0]:
            return sys.maxsize  # sizes, not bytes: anything unconsumed counts as all of it unread
        return count[0]

    try:
        fcntl.ioctl(fd, request, count, True)
    except OSError:
        return None
    return unread


class ReadPosition:
    """Whether the reader has read the last streamed message written: the bytes written so far, less
    those the kernel says are unread, against where that message ended (`mark`, set by the writer
    once the message has left, at the end of the loop's pass that made it). Only that message
    counts: one read at model speed is never held because a reply or a stored chunk written after it
    is still on its way, and the messages one pass makes all leave as they are."""

    def __init__(self, unread: Callable[[], int] | None) -> None:
        self._unread = unread
        self.written = 0  # bytes handed to the stream so far
        self.mark = 0  # where the last streamed message that has left ends
        self._caught_up: tuple[int, int] | None = None  # (written, mark) when the reader was seen past mark

    def behind(self) -> bool:
        if self._unread is None:
            return False
        # Unread bytes only shrink while nothing more is written, so a reader once past the mark stays
        # past it until `written` or `mark` moves: one ioctl per write to the pipe, not one per delta
        # (an HTTP read yields hundreds at full speed).
        state = (self.written, self.mark)
        if state == self._caught_up:
            return False
        if self.written - self._unread() < self.mark:
            return True
        self._caught_up = state
        return False


class HeldMessages:
    """The mergeable messages held back while the client is behind, in order.

    `write`: where released messages go (the front end's ordered writer); `behind`: whether the
    client has unread bytes (None: never); `window_s`: how long a mergeable message waits for the
    next one even when the client keeps up (0: only while it is behind)."""

    def __init__(
        self,
        write: Callable[[bytes], None],
        behind: Callable[[], bool] | None,
        window_s: float = 0.0,
    ) -> None:
        self._write = write
        self._behind = behind
        self.window_s = window_s
        self._held: list[Mergeable] = []
        self._since = 0.0
        self._timer: asyncio.TimerHandle | None = None

    @property
    def pending(self) -> bool:
        return bool(self._held)

    def would_hold(self) -> bool:
        """Whether `offer` would hold a message now (one is held, a window applies, or the client is
        behind): when not, the caller may write a streamed message's frame without making one."""
        return bool(self._held) or self.window_s > 0 or (self._behind is not None and self._behind())

    def offer(self, message: Mergeable) -> bool:
        """True when `message` is held (merged into the last held one if they join); False when the
        client keeps up and no window applies: the caller writes it now."""
        if self._held:
            if not self._held[-1].absorb(message):
                self._held.append(message)
            return True
        if self.window_s <= 0 and (self._behind is None or not self._behind()):
            return False
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (shutting down): nothing could release it later
            return False
        self._held.append(message)
        self._since = loop.time()
        self._schedule(loop, min(POLL_S, self.window_s) if self.window_s > 0 else POLL_S)
        return True

    def release(self) -> bytes:
        """The held messages' frames, in order; nothing is held afterwards."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        held, self._held = self._held, []
        return b"".join(message.encode() for message in held)

    def _schedule(self, loop: asyncio.AbstractEventLoop, delay: float) -> None:
        self._timer = loop.call_later(delay, self._check, loop)

    def _check(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = None
        if not self._held:
            return
        waited = loop.time() - self._since
        if waited < self.window_s:
            self._schedule(loop, min(POLL_S, self.window_s - waited))
        elif self._behind is not None and self._behind():
            self._schedule(loop, POLL_S)
        else:
            self._write(self.release())
