"""The real daemon (`python -m dsh_daemon`), SIGKILLed by itself at one write point of one operation,
for the crash soak of fork, rewind and snapshot writes (issue 32.9, `tests/server/test_kill_points.py`).

`DSH_TEST_KILL_AT="<operation>:<n>"` (operation: `fork`, `rewind`, `snapshot` or `plan`, a plan's
approval): while that operation
runs, a write point is just before and just after each SQLite `COMMIT` and each file `os.replace` /
`os.unlink`; the process sends itself SIGKILL at the `n`-th one (from 0). So `n` = 0, 1, 2, … lands the
kill before and after every durable step in turn, and a run whose operation completes reached fewer
than `n + 1` points: the caller has covered them all. Nothing is printed (stdout is the protocol).
`snapshot` also makes every turn end write a derived-state snapshot (`snapshot_every` 1).
"""

from __future__ import annotations

import functools
import os
import runpy
import signal
import sqlite3
import threading
from collections.abc import Callable
from typing import Any

OPERATION, _, _AT = os.environ["DSH_TEST_KILL_AT"].partition(":")
KILL_AT = int(_AT)
_state = {"reached": 0}
_armed_here = threading.local()  # armed in the thread running the operation (a snapshot's writer)


def _point() -> None:
    if not getattr(_armed_here, "depth", 0):
        return
    if _state["reached"] == KILL_AT:
        os.kill(os.getpid(), signal.SIGKILL)
    _state["reached"] += 1


class _KillingConnection(sqlite3.Connection):
    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        if sql.strip().upper() != "COMMIT":
            return super().execute(sql, *args)
        _point()
        cursor = super().execute(sql, *args)
        _point()
        return cursor


def _around_file_change(change: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(change)
    def changed(*args: Any, **kwargs: Any) -> Any:
        _point()
        result = change(*args, **kwargs)
        _point()
        return result

    return changed


def _armed(function: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(function)
    def run(*args: Any, **kwargs: Any) -> Any:
        _armed_here.depth = getattr(_armed_here, "depth", 0) + 1
        try:
            return function(*args, **kwargs)
        finally:
            _armed_here.depth -= 1

    return run


def _armed_async(function: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(function)
    async def run(*args: Any, **kwargs: Any) -> Any:
        _armed_here.depth = getattr(_armed_here, "depth", 0) + 1
        try:
            return await function(*args, **kwargs)
        finally:
            _armed_here.depth -= 1

    return run


def install() -> None:
    from dsh_daemon.host import history, hosted
    from dsh_daemon.host.manager import SessionManager
    from dsh_daemon.session.store import SessionStore

    sqlite3.connect = functools.partial(sqlite3.connect, factory=_KillingConnection)  # type: ignore[assignment]
    os.replace = _around_file_change(os.replace)
    os.unlink = _around_file_change(os.unlink)
    if OPERATION == "fork":
        history.fork = _armed(history.fork)  # type: ignore[assignment]
    elif OPERATION == "rewind":
        history.rewind = _armed_async(history.rewind)  # type: ignore[assignment]
    elif OPERATION == "snapshot":
        SessionStore.write_snapshot = _armed(SessionStore.write_snapshot)  # type: ignore[method-assign]
        assert SessionManager.__init__.__kwdefaults__ is not None
        SessionManager.__init__.__kwdefaults__["snapshot_every"] = 1
    elif OPERATION == "plan":
        hosted.approve_plan_durably = _armed(hosted.approve_plan_durably)  # type: ignore[assignment]
    else:
        raise SystemExit(f"unknown operation {OPERATION!r}")


if __name__ == "__main__":
    install()
    runpy.run_module("dsh_daemon", run_name="__main__", alter_sys=True)
