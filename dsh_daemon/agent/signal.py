"""A cooperative abort signal for one activity (a driver run), with the first cause kept."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

T = TypeVar("T")


_UNWINDING: set[asyncio.Future[Any]] = set()  # cancelled work left to unwind (see `race`): kept alive


def _unwound(task: asyncio.Future[Any]) -> None:
    _UNWINDING.discard(task)
    if not task.cancelled():
        task.exception()  # retrieved: the cancelled work's own outcome does not matter any more


class AbortedError(Exception):
    """Raised out of an await that lost the race against its abort signal."""

    def __init__(self, cause: str) -> None:
        super().__init__(f"aborted: {cause}")
        self.cause = cause


class AbortSignal:
    def __init__(self) -> None:
        self._event = asyncio.Event()
        self.cause: str | None = None
        self.discard_unentered = False  # see `abort`

    @property
    def aborted(self) -> bool:
        return self.cause is not None

    def abort(self, cause: str, *, discard_unentered: bool = False) -> bool:
        """Abort with `cause`; the first cause wins. Returns whether this call aborted.
        `discard_unentered` (a clearing cancel, which discards the whole queue): input the turn
        claimed but has not entered is discarded rather than put back; it holds even when an
        earlier abort set the cause (a clearing cancel after a keep-inbox one still clears)."""
        self.discard_unentered = self.discard_unentered or discard_unentered
        if self.cause is not None:
            return False
        self.cause = cause
        self._event.set()
        return True

    def check(self) -> None:
        if self.cause is not None:
            raise AbortedError(self.cause)

    async def wait(self) -> str:
        await self._event.wait()
        assert self.cause is not None
        return self.cause

    async def race(self, awaitable: Awaitable[T], *, settle: bool = True) -> T:
        """Await `awaitable` unless the signal fires first; then cancel it and raise AbortedError.
        With `settle` (the default) the cancelled work has unwound when this raises; without it, it
        unwinds on its own afterwards (a provider stream closing its connection: the turn's end need
        not wait for that)."""
        if self.cause is not None:
            if isinstance(awaitable, asyncio.Future):
                awaitable.cancel()  # work already started (a task) stops too
            else:
                close = getattr(awaitable, "close", None)
                if close is not None:
                    close()  # a coroutine that will never run must not warn "never awaited"
            raise AbortedError(self.cause)
        task: asyncio.Future[T] = asyncio.ensure_future(awaitable)
        if task.done():
            return task.result()
        waiter = asyncio.ensure_future(self._event.wait())
        try:
            racing: set[asyncio.Future[Any]] = {task, waiter}
            await asyncio.wait(racing, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            task.cancel()
            waiter.cancel()
            raise
        if task.done():
            waiter.cancel()
            return task.result()
        task.cancel()
        if settle:
            try:
                await task
            except BaseException:  # the cancelled work's own outcome does not matter any more
                pass
        else:
            _UNWINDING.add(task)
            task.add_done_callback(_unwound)
        assert self.cause is not None
        raise AbortedError(self.cause)

    async def sleep(self, seconds: float) -> None:
        await self.race(asyncio.sleep(seconds))
