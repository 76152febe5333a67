"""A running call's live output, shared with other processes through the store (docs/design.md §8).

`tool/output` is live-only: the driver's connections get it as the command prints. A window in
another process follows the session by reading the store (`host/follow.py`), so the driver also
writes the output there, coalesced, into the `tool_output` table: not the session log, so it has no
seq, is never replayed, and the model's history (rebuilt from the log alone) cannot see it.

Invariants kept here:
- Rows are written at most once per `SHARE_EVERY_S` per call (the first at once), each holding the
  text since the previous row; `close` writes what is left, and the tool runner closes a call before
  its `tool/result` is appended. So every row of a call is on disk before its result, and its
  `after_seq` (the log's last seq when it was written) is below the result's seq: a follower that
  delivers rows after the events up to their `after_seq` shows them after the call and before its
  result, in order.
- A call keeps at most `SHARED_CHARS_PER_CALL` characters in the store: older rows of the call are
  deleted as newer ones come (a follower that keeps up has read them; one that did not sees where
  text is missing from `start`). Rows of turns before the previous one go when a call of a new turn
  writes its first row, so the table holds about two turns' output per session.
- Sharing never fails the call: a failed write is logged and the call's sharing stops.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable

from dsh_daemon.session.store import LeaseLostError, SessionStore, SharedOutputRow

logger = logging.getLogger(__name__)

SHARE_EVERY_S = 0.25
SHARED_CHARS_PER_CALL = 100_000


class SharedOutput:
    def __init__(
        self,
        store: SessionStore,
        session_id: str,
        turn: int,
        step: int,
        call_id: str,
        *,
        last_seq: Callable[[], int],
        writable: Callable[[], bool] = lambda: True,
        holder: str | None = None,
        every: float = SHARE_EVERY_S,
        cap: int = SHARED_CHARS_PER_CALL,
    ) -> None:
        """`last_seq`: the log's last seq now; `writable`: whether this process still drives the
        session as far as it knows (nothing is written once it lost the lease); `holder`: its lease
        holder id, which the store checks in each row's transaction (a command prints on after
        another process took the session, with no log write to find out)."""
        self.store = store
        self.session_id = session_id
        self.turn, self.step, self.call_id = turn, step, call_id
        self.last_seq = last_seq
        self.writable = writable
        self.holder = holder
        self.every = every
        self.cap = cap
        self._pending: list[str] = []
        self._written = 0  # characters of the call's output before the pending text
        self._rows: deque[tuple[int, int]] = deque()  # (id, characters) of the call's stored rows
        self._stored = 0
        self._last_write = -float("inf")
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False

    @property
    def stored_chars(self) -> int:
        return self._stored

    def add(self, text: str) -> None:
        """More output: written now if the last row is `every` old, else by a timer then."""
        if self._closed or not text:
            return
        self._pending.append(text)
        if self._timer is not None:
            return
        wait = self._last_write + self.every - time.monotonic()
        if wait <= 0:
            self.flush()
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.flush()
            return
        self._timer = loop.call_later(wait, self.flush)

    def close(self) -> None:
        """The call's body ended: write what is left; later output is not shared."""
        self.flush()
        self._closed = True

    def flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._pending or self._closed:
            return
        text = "".join(self._pending)
        self._pending = []
        start = self._written
        self._written += len(text)
        if len(text) > self.cap:
            start += len(text) - self.cap
            text = text[-self.cap :]
        drop_through: int | None = None
        while self._rows and self._stored + len(text) > self.cap:
            row_id, chars = self._rows.popleft()
            self._stored -= chars
            drop_through = row_id
        if not self.writable():
            return
        first = self._last_write == -float("inf")
        row = SharedOutputRow(0, self.turn, self.step, self.call_id, self.last_seq(), start, text)
        try:
            row_id = self.store.share_tool_output(
                self.session_id,
                row,
                drop_through=drop_through,
                drop_before_turn=self.turn - 1 if first else None,
                holder=self.holder,
            )
        except LeaseLostError:
            self._closed = True  # another process drives the session now: its output is not ours
            return
        except Exception:
            logger.warning(
                "session %s: live output of %s not shared", self.session_id, self.call_id, exc_info=True
            )
            self._closed = True
            return
        self._rows.append((row_id, len(text)))
        self._stored += len(text)
        self._last_write = time.monotonic()
