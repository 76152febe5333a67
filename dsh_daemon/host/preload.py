"""Load what the first session needs while the client is still between `initialize` and its first
session request (issue 20): the front ends answer `initialize` before any of it is imported, then
call `preload_in_background` once that reply is written.

One daemon thread imports the named modules in order. The main thread never imports at the same
time: each front end calls `settle` before it handles a message, which waits for a preload still
running (the message would have needed most of those modules anyway). So no two threads ever import
along one import cycle from two ends, where one of them could be handed a module half-built. A module
that fails to import is only logged: the request that needs it imports it again and reports the
failure where a client sees it.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Sequence

logger = logging.getLogger(__name__)

# What the host imports lazily for every session, after the front end's own modules.
HOST_MODULES = ("dsh_daemon.host.sessions", "dsh_daemon.llm.deepseek")

_running: list[threading.Thread] = []  # the preload in progress (one per process: one front end)


def preload_in_background(front_end_modules: Sequence[str]) -> None:
    thread = threading.Thread(
        target=_import_all, args=([*front_end_modules, *HOST_MODULES],), name="dsh-preload", daemon=True
    )
    _running.append(thread)
    thread.start()


def settle() -> None:
    """Wait for a preload in progress to finish (at once when there is none)."""
    while _running:
        _running[0].join()
        _running.pop(0)


def _import_all(modules: Sequence[str]) -> None:
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:
            logger.warning("preloading %s failed", name, exc_info=True)
            return
