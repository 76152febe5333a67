"""Load what the first session needs while the client is still between `initialize` and its first
session request (issue 20): the front ends answer `initialize` before any of it is imported, then
call `preload_in_background` once that reply is written.

One daemon thread imports the named modules in order. Python's per-module import locks make a
request that needs one of them meanwhile wait for that module, never see it half-built (the modules
named here have no import cycle with the request path: each front end names the module its own
first request imports first). A module that fails to import is only logged: the request that needs
it imports it again and reports the failure where a client sees it.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Sequence

logger = logging.getLogger(__name__)

# What the host imports lazily for every session, after the front end's own modules.
HOST_MODULES = ("dsh_daemon.host.sessions", "dsh_daemon.llm.deepseek")


def preload_in_background(front_end_modules: Sequence[str]) -> threading.Thread:
    thread = threading.Thread(
        target=_import_all, args=([*front_end_modules, *HOST_MODULES],), name="dsh-preload", daemon=True
    )
    thread.start()
    return thread


def _import_all(modules: Sequence[str]) -> None:
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:
            logger.warning("preloading %s failed", name, exc_info=True)
            return
