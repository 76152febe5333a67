"""Load what the first session needs while the client is still between `initialize` and its first
session request (issue 20): the front ends answer `initialize` before any of it is imported, then
call `preload_in_background` once that reply is written.

One daemon thread imports the named modules in order: first the few a front end needs to answer a
first `session/new` from the store alone (`first`, ACP: `host/early.py`), then everything else. The
main thread never imports at the same time: each front end calls `settle` before it handles a
message, which waits for a preload still running (the message would have needed most of those
modules anyway), or `settle(first_only=True)` for a message that needs only the first modules (and
imports nothing else). So no two threads ever import along one import cycle from two ends, where one
of them could be handed a module half-built. A module that fails to import is only logged: the
request that needs it imports it again and reports the failure where a client sees it.

Between the two parts the thread holds back, for `hold_s` at most, until the front end has answered
the request it answers with the first modules (`proceed`): a client sends its first `session/new`
the moment `initialize` is answered, and that answer would otherwise share the interpreter (the GIL)
with the import of the rest. Anything that needs the rest (`settle()`) lets it go on at once.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Callable, Sequence

logger = logging.getLogger(__name__)

# What the host imports lazily for every session, after the front end's own modules.
HOST_MODULES = ("dsh_daemon.host.sessions", "dsh_daemon.llm.deepseek")

_running: list[threading.Thread] = []  # the preload in progress (one per process: one front end)
_first_done = threading.Event()  # the `first` modules are imported (or the preload has ended)
_first_done.set()  # no preload: nothing to wait for
_go_on = threading.Event()  # the rest may be imported now
_go_on.set()


def preload_in_background(
    front_end_modules: Sequence[str], first: Sequence[str] = (), hold_s: float = 0.0
) -> None:
    """Import `first`, then (after `proceed`, or `hold_s` at most) `front_end_modules` and the host's,
    on a background thread."""
    _first_done.clear()
    if hold_s > 0:
        _go_on.clear()
    thread = threading.Thread(
        target=_import_all,
        args=(first, [*front_end_modules, *HOST_MODULES], hold_s),
        name="dsh-preload",
        daemon=True,
    )
    _running.append(thread)
    thread.start()


def proceed() -> None:
    """The request answered with the first modules is answered: the rest may be imported now."""
    _go_on.set()


def settle(*, first_only: bool = False, before_wait: Callable[[], None] | None = None) -> None:
    """Wait for a preload in progress to finish (at once when there is none); with `first_only`, for
    its first modules only: the caller then imports nothing that is not among them. `before_wait` runs
    first when there is something to wait for (the LSP front end sends the frames it has made, so a
    reply already made does not wait with the next request)."""
    if first_only:
        if before_wait is not None and not _first_done.is_set():
            before_wait()
        _first_done.wait()
        return
    _go_on.set()
    if before_wait is not None and any(thread.is_alive() for thread in _running):
        before_wait()
    while _running:
        _running[0].join()
        _running.pop(0)


def _import_all(first: Sequence[str], then: Sequence[str], hold_s: float) -> None:
    try:
        _import(first)
    finally:
        _first_done.set()
    _go_on.wait(hold_s)
    _import(then)


def _import(modules: Sequence[str]) -> None:
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:
            logger.warning("preloading %s failed", name, exc_info=True)
            return
