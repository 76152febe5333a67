"""The real daemon (`python -m dsh_daemon`), with a turn's end pinned into the loop step right after the
one in which the client's answer to `window/workDoneProgress/create` arrives, for the `$/progress`
ordering test (`tests/server/test_progress_order.py`).

That step is where the race of fc71fa6 lies: before it, what waited for the answer (the turn's
reports) ran as the answer future's callbacks, a loop step after the answer, so an end observed in
between went out first and the client got a report after `WorkDoneProgressEnd`. Over real pipes the
end lands there only by chance (test_multi failed once in a while in CI); here it lands there each
time. The end is held from the moment the daemon asks `create` until the answer has been taken, then
let through with `call_soon`: the next loop step, before anything the answer's own step schedules.
Nothing else changes: the progress reporter sees the session's events in the order they happened
(what comes after a held end waits behind it), only later.
"""

from __future__ import annotations

import asyncio
import runpy
from collections.abc import Callable
from typing import Any


def install() -> None:
    from pygls.progress import Progress

    from dsh_daemon.model.events import TURN_END, Event
    from dsh_daemon.server.frontend import LspFrontEnd

    asking: set[str] = set()  # the tokens whose `create` is not answered yet
    held: dict[str, list[Callable[[], None]]] = {}  # per session: observations held, in order
    create_async = Progress.create_async
    observe = LspFrontEnd.observe

    async def create_then_release(self: Progress, token: Any) -> Any:
        asking.add(str(token))
        try:
            return await create_async(self, token)
        finally:
            asking.discard(str(token))
            asyncio.get_running_loop().call_soon(release_all)

    def release_all() -> None:
        for session_id in [s for s in held if not any(t.startswith(f"dsh-{s}-") for t in asking)]:
            for deliver in held.pop(session_id):
                deliver()

    def observe_held(self: LspFrontEnd, session_id: str, event: Event) -> None:
        token = f"dsh-{session_id}-{event.data.get('turn')}"  # server/progress.py's token of the turn
        if session_id in held or (event.type == TURN_END and token in asking):
            held.setdefault(session_id, []).append(lambda: observe(self, session_id, event))
            return
        observe(self, session_id, event)

    Progress.create_async = create_then_release  # type: ignore[method-assign]
    LspFrontEnd.observe = observe_held  # type: ignore[method-assign]


if __name__ == "__main__":
    install()
    runpy.run_module("dsh_daemon", run_name="__main__", alter_sys=True)
