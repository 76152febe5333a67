"""Stage timestamps for the chat benchmark's Esc -> cancelled figure (bench/chat_typing_bench.py).

The benchmark puts this folder on PYTHONPATH with DSH_BENCH_TRACE=<file>; Python imports
`sitecustomize` at start in both processes (the chat and the daemon it starts), and this wraps a
few functions as their modules are imported to append `<CLOCK_MONOTONIC ns> <stage>` lines to the
file. The clock is system-wide, so the two processes' lines compare. Nothing here runs without
DSH_BENCH_TRACE; the product code knows nothing of it.

Stages, in order: esc_read (a read of the terminal holding an Esc), esc_handler (the chat's Esc
binding runs), cancel_written (`dsh/cancel` written to the daemon's stdin), cancel_received (the
daemon's session cancels), turn_end_logged (the daemon builds the turn's `turn/end`),
turn_end_committing / turn_end_committed (its forced commit: SQLite, synchronous=FULL),
stream_closed (the provider's HTTP response closed), turn_end_sent (the daemon's write of the
`turn/end` event returned), message_received (the chat handles the interrupted reply's message),
turn_end_received (the chat handles the `turn/end` event), cancelled_printed (the chat prints the
"[cancelled" line), render_start / render_done (the interrupted reply's markdown, which that line
waits for), cancelled_written (that line flushed to the terminal)."""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import os
import sys
import time
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

TRACE = os.environ.get("DSH_BENCH_TRACE")


def mark(stage: str) -> None:
    if TRACE:
        fd = os.open(TRACE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, f"{time.monotonic_ns()} {stage}\n".encode())
        finally:
            os.close(fd)


def _before(owner: Any, name: str, stage: str, when: Callable[..., bool] = lambda *a, **k: True) -> None:
    original = getattr(owner, name)

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if when(*args, **kwargs):
            mark(stage)
        return original(*args, **kwargs)

    setattr(owner, name, wrapper)


def _patch_stdin(module: ModuleType) -> None:
    original = module.PosixStdinReader.read

    def read(self: Any, count: int = 1024) -> str:
        data: str = original(self, count)
        if "\x1b" in data:
            mark("esc_read")
        return data

    module.PosixStdinReader.read = read


def _patch_output(module: ModuleType) -> None:
    original = module.Vt100_Output.flush

    def flush(self: Any) -> None:
        cancelled = "[cancelled" in "".join(self._buffer)
        original(self)
        if cancelled:
            mark("cancelled_written")

    module.Vt100_Output.flush = flush


def _patch_tui(module: ModuleType) -> None:
    _before(module.TuiView, "interrupt", "esc_handler")
    render = module.render_reply

    def render_reply(*args: Any, **kwargs: Any) -> Any:
        interrupted = args[4] if len(args) > 4 else kwargs.get("interrupted")
        if interrupted:
            mark("render_start")
        out = render(*args, **kwargs)
        if interrupted:
            mark("render_done")
        return out

    module.render_reply = render_reply
    _before(module.TuiView, "print", "cancelled_printed", lambda self, text: "[cancelled" in text)


def _patch_rpc(module: ModuleType) -> None:
    _before(
        module.RpcPipe,
        "_write",
        "cancel_written",
        lambda self, message: message.get("method") == "dsh/cancel",
    )


def _patch_core(module: ModuleType) -> None:
    _before(module.Chat, "turn_end", "turn_end_received")
    _before(module.Chat, "show_message", "message_received", lambda self, *a, **k: k.get("interrupted"))


def _patch_httpx(module: ModuleType) -> None:
    original = module.Response.aclose

    async def aclose(self: Any) -> None:
        await original(self)
        mark("stream_closed")

    module.Response.aclose = aclose


def _patch_store(module: ModuleType) -> None:
    original = module.SessionStore.append_events

    def append_events(self: Any, session_id: str, events: Any, *args: Any, **kwargs: Any) -> Any:
        events = list(events)
        ending = any(event.type == "turn/end" for event in events)
        if ending:
            mark("turn_end_committing")
        result = original(self, session_id, events, *args, **kwargs)
        if ending:
            mark("turn_end_committed")
        return result

    module.SessionStore.append_events = append_events


def _patch_writer(module: ModuleType) -> None:
    original = module.CoalescingWriter.flush

    def flush(self: Any) -> None:
        ended = any(b'"turn/end"' in data for data in self._buffer)
        original(self)
        if ended:
            mark("turn_end_sent")

    module.CoalescingWriter.flush = flush


def _patch_hosted(module: ModuleType) -> None:
    _before(module.HostedSession, "cancel", "cancel_received")


def _patch_turn(module: ModuleType) -> None:
    ended = module.TurnEnded

    def turn_ended(*args: Any, **kwargs: Any) -> Any:
        mark("turn_end_logged")
        return ended(*args, **kwargs)

    module.TurnEnded = turn_ended


PATCHES: dict[str, Callable[[ModuleType], None]] = {
    "prompt_toolkit.input.posix_utils": _patch_stdin,
    "prompt_toolkit.output.vt100": _patch_output,
    "dsh_daemon.chat.tui": _patch_tui,
    "dsh_daemon.chat.rpc": _patch_rpc,
    "dsh_daemon.chat.core": _patch_core,
    "dsh_daemon.host.hosted": _patch_hosted,
    "dsh_daemon.server.stdout": _patch_writer,
    "dsh_daemon.session.store": _patch_store,
    "dsh_daemon.agent.turn": _patch_turn,
    "httpx._models": _patch_httpx,
}


class _Loader(importlib.abc.Loader):
    def __init__(self, inner: Any, patch: Callable[[ModuleType], None]) -> None:
        self.inner, self.patch = inner, patch

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.inner.create_module(spec)  # type: ignore[no-any-return]

    def exec_module(self, module: ModuleType) -> None:
        self.inner.exec_module(module)
        self.patch(module)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        patch = PATCHES.get(fullname)
        if patch is None:
            return None
        for finder in sys.meta_path:
            if finder is self:
                continue
            spec = getattr(finder, "find_spec", lambda *a: None)(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _Loader(spec.loader, patch)
                return spec  # type: ignore[no-any-return]
        return None


if TRACE:
    sys.meta_path.insert(0, _Finder())
