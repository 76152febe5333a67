"""`$/progress` per running turn: begun at `turn/start`, reported as output arrives (throttled), ended
at `turn/end`; `window/workDoneProgress/cancel` from the editor cancels the turn keeping the inbox."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from dsh_daemon.model import events as ev
from dsh_daemon.model.events import Event
from dsh_daemon.model.payloads import TurnEnded, TurnStarted

logger = logging.getLogger(__name__)

REPORT_EVERY_S = 0.25
CREATE_TIMEOUT_S = 10.0  # for the client's answer to window/workDoneProgress/create


class TurnProgress:
    """One session's progress reporter; subscribe `on_event` to the session's events."""

    def __init__(self, server: LanguageServer, session_id: str, cancel_turn: Callable[[], None]) -> None:
        self._server = server
        self._session_id = session_id
        self._cancel_turn = cancel_turn
        self._token: str | None = None
        self._ready: asyncio.Future[bool] | None = None
        # What waits for the turn's `create` answer, in the order it happened: a future's callbacks
        # run a loop step after it is done, so an end that came in that step went out before them.
        self._waiting: list[Callable[[str], None]] = []
        self._chars = 0
        self._last_report = 0.0
        self._task: asyncio.Task[None] | None = None

    def on_event(self, event: Event) -> None:
        if event.type == ev.TURN_START:
            self._begin(TurnStarted.of(event).turn)
        elif event.type == ev.ASSISTANT_DELTA and self._token is not None:
            delta = event.data["delta"]  # the hottest path: read as sent (payloads.AssistantDelta)
            self._chars += len(delta.get("text", "") or delta.get("arguments", ""))
            now = time.monotonic()
            if now - self._last_report >= REPORT_EVERY_S:
                self._last_report = now
                self._after_ready(lambda token: self._report(token, f"~{self._chars // 4} tokens"))
        elif event.type == ev.TURN_END and self._token is not None:
            reason = TurnEnded.of(event).reason.kind
            self._after_ready(lambda token: self._end(token, reason))
            self._token = None

    def _begin(self, turn: int) -> None:
        token = f"dsh-{self._session_id}-{turn}"
        self._token, self._chars = token, 0
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[bool] = loop.create_future()
        waiting: list[Callable[[str], None]] = []
        self._ready, self._waiting = ready, waiting

        async def create() -> None:
            try:
                # bounded: a client that never answers gets no progress for this turn, and nothing
                # waits on it (TimeoutError is one more failure below)
                async with asyncio.timeout(CREATE_TIMEOUT_S):
                    await self._server.work_done_progress.create_async(token)
            except Exception as exc:
                logger.debug("progress create failed: %s", exc)
                ready.set_result(False)
                waiting.clear()
                return
            self._server.work_done_progress.begin(
                token,
                types.WorkDoneProgressBegin(
                    title="dsh: agent turn", cancellable=True, message=f"turn {turn}"
                ),
            )
            cancel_future = self._server.work_done_progress.tokens.get(token)
            if cancel_future is not None:
                cancel_future.add_done_callback(
                    lambda f: f.cancelled() and loop.call_soon_threadsafe(self._cancel_turn)
                )
            ready.set_result(True)
            for action in waiting:  # in order, before anything that comes after (same loop step)
                action(token)
            waiting.clear()

        self._task = loop.create_task(create())

    def _after_ready(self, action: Callable[[str], None]) -> None:
        token, ready = self._token, self._ready
        if token is None or ready is None:
            return
        if not ready.done():
            self._waiting.append(action)
        elif ready.result():
            action(token)

    def _report(self, token: str, message: str) -> None:
        self._server.work_done_progress.report(token, types.WorkDoneProgressReport(message=message))

    def _end(self, token: str, reason: str) -> None:
        self._server.work_done_progress.end(token, types.WorkDoneProgressEnd(message=reason))
        self._server.work_done_progress.tokens.pop(token, None)
