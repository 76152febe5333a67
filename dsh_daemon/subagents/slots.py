"""How many subagents run at once, daemon-wide: a bound the configuration may change while children
run (a lower bound lets the running ones finish and holds new ones until they are under it)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from dsh_daemon.agent.signal import AbortSignal


class SubagentSlots:
    def __init__(self, limit: int) -> None:
        self._limit = max(1, limit)
        self.running = 0
        self.most_at_once = 0  # the highest `running` seen (what tests of the bound read)
        self._changed = asyncio.Condition()

    @property
    def limit(self) -> int:
        return self._limit

    def set_limit(self, limit: int) -> None:
        self._limit = max(1, limit)
        asyncio.get_running_loop().create_task(self._notify())

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    @asynccontextmanager
    async def held(self, signal: AbortSignal) -> AsyncIterator[None]:
        """One slot for the block; waiting for it ends with the call's abort (`AbortedError`)."""
        await signal.race(self._acquire())
        try:
            yield
        finally:
            self.running -= 1
            await self._notify()

    async def _acquire(self) -> None:
        async with self._changed:
            await self._changed.wait_for(lambda: self.running < self._limit)
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
