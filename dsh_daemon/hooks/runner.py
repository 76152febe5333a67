"""Runs one configured hook: confined like the session's commands, its input a JSON document on
stdin, its answer read from a bounded stdout (and stderr), killed with its whole tree at its timeout.

What a hook can answer (protocol.md "Hooks"):
- exit 0 with nothing on stdout: nothing to say;
- exit 0 with a JSON object: `decision: "block"` with a `reason`, `additionalContext`, `permission:
  "allow" | "deny"` (with a `reason`), any of them;
- exit 2: block, the reason on stderr (as Claude Code's hooks do).
Anything else (another status, stdout that is not a JSON object, a field of the wrong type, more than
MAX_STDOUT bytes, no exit within the timeout, a sandbox that cannot confine it) is a `HookFailure`:
the hook says nothing, and the caller reports it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal as signals
import tempfile
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from dsh_daemon.model.hooks import HookCommand

MAX_STDOUT = 64 * 1024  # more than any answer needs: past it the hook is killed and fails
MAX_STDERR = 8 * 1024  # kept of stderr (the reason of an exit 2, or what a failing hook said)
MAX_REASON = 4000  # characters of a reason or a context the model is given
DRAIN_GRACE_S = 1.0  # after the hook exits, how long something it left may keep its pipes open
BLOCK_STATUS = 2


@dataclass(frozen=True, slots=True)
class HookAnswer:
    """What a hook said (every field optional)."""

    block: bool = False
    reason: str | None = None
    context: str | None = None
    permission: str | None = None  # "allow" | "deny"


@dataclass(frozen=True, slots=True)
class HookFailure:
    reason: str


class SpawnedProcess(Protocol):
    async def wait(self) -> int: ...

    def kill_tree(self, sig: int = signals.SIGKILL) -> None: ...


Spawn = Callable[..., Awaitable[tuple[SpawnedProcess, Callable[[], Awaitable[None]]]]]


class HookRunner:
    """Runs hooks through `spawn` (the session's `CommandSandbox.spawn`), in `cwd`, with `env`
    (already without the daemon's secrets)."""

    def __init__(self, spawn: Spawn, cwd: Callable[[], Path], env: Callable[[], Mapping[str, str]]) -> None:
        self._spawn = spawn
        self._cwd = cwd
        self._env = env

    async def run(self, hook: HookCommand, document: Mapping[str, Any]) -> HookAnswer | HookFailure:
        try:
            return await self._run(hook, document)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the sandbox refused (SandboxUnavailable), a pipe failed, …
            return HookFailure(f"it could not be started: {type(exc).__name__}: {exc}")

    async def _run(self, hook: HookCommand, document: Mapping[str, Any]) -> HookAnswer | HookFailure:
        # stdin is a file, not a pipe: a hook that never reads it cannot block the daemon's write.
        with tempfile.TemporaryFile() as stdin:
            # A lone surrogate (which no logged value holds, but a document must not fail on) is
            # written as its JSON escape, `\udXXX`, by the backslash replacement.
            stdin.write(json.dumps(document, ensure_ascii=False).encode("utf-8", "backslashreplace"))
            stdin.seek(0)
            out_read, out_write = os.pipe()
            err_read, err_write = os.pipe()
            try:
                proc, finish = await self._spawn(
                    hook.argv(),
                    cwd=self._cwd(),
                    env=dict(self._env()),
                    stdin=stdin.fileno(),
                    stdout=out_write,
                    stderr=err_write,
                )
            except BaseException:
                os.close(out_read)
                os.close(err_read)
                raise
            finally:
                os.close(out_write)
                os.close(err_write)
        try:
            return await self._collect(hook, proc, out_read, err_read)
        finally:
            await asyncio.shield(finish())

    async def _collect(
        self, hook: HookCommand, proc: SpawnedProcess, out_fd: int, err_fd: int
    ) -> HookAnswer | HookFailure:
        loop = asyncio.get_running_loop()
        out, err = _Capped(MAX_STDOUT), _Capped(MAX_STDERR)
        transports = []
        for fd, sink in ((out_fd, out), (err_fd, err)):
            transport, _ = await loop.connect_read_pipe(sink.itself, os.fdopen(fd, "rb", 0))
            transports.append(transport)
        exited = asyncio.ensure_future(proc.wait())
        overflow = asyncio.ensure_future(out.overflowed.wait())
        try:
            done, _ = await asyncio.wait(
                {exited, overflow}, timeout=hook.timeout_s, return_when=asyncio.FIRST_COMPLETED
            )
            if overflow in done:
                return HookFailure(f"it wrote more than {MAX_STDOUT // 1024} KiB on stdout (it was stopped)")
            if exited not in done:
                return HookFailure(f"it did not finish within {hook.timeout_s:g} s (it was stopped)")
            # Whatever it left running may hold the pipes open: a short grace, then it is killed.
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.gather(out.ended.wait(), err.ended.wait()), DRAIN_GRACE_S)
        finally:
            proc.kill_tree(signals.SIGKILL)  # the hook's whole tree: a hung one, and any leftovers
            with contextlib.suppress(asyncio.TimeoutError, Exception):
                await asyncio.wait_for(asyncio.shield(exited), DRAIN_GRACE_S)
            for task in (exited, overflow):
                task.cancel()
            for transport in transports:
                transport.close()
            close = getattr(proc, "close", None)
            if close is not None:
                close()
        setup_error = getattr(proc, "setup_error", None)
        if setup_error:
            return HookFailure(f"the sandbox could not confine it, so it did not run: {setup_error}")
        return parse_answer(exited.result(), out.data(), err.data())


def parse_answer(status: int, stdout: bytes, stderr: bytes) -> HookAnswer | HookFailure:
    """What the hook's exit status and output say (the module's note)."""
    said = stderr.decode("utf-8", "replace").strip()
    if status == BLOCK_STATUS:
        return HookAnswer(block=True, reason=_cut(said) or "blocked by a hook (exit status 2)")
    if status != 0:
        what = f"was killed by signal {-status}" if status < 0 else f"exited with status {status}"
        return HookFailure(f"it {what}" + (f": {_cut(said, 300)}" if said else ""))
    text = stdout.decode("utf-8", "replace").strip()
    if not text:
        return HookAnswer()
    try:
        answer = json.loads(text)
    except ValueError:
        return HookFailure(f"its output is not JSON: {_cut(text, 120)!r}")
    if not isinstance(answer, dict):
        return HookFailure(f"its output is not a JSON object: {_cut(text, 120)!r}")
    return _fields(answer)


def _fields(answer: Mapping[str, Any]) -> HookAnswer | HookFailure:
    decision = answer.get("decision")
    if decision not in (None, "block", "approve", "allow"):
        return HookFailure(f"'decision' must be \"block\", not {_cut(repr(decision), 80)}")
    permission = answer.get("permission")
    if permission not in (None, "allow", "deny"):
        return HookFailure(f'\'permission\' must be "allow" or "deny", not {_cut(repr(permission), 80)}')
    strings: dict[str, str | None] = {}
    for key in ("reason", "additionalContext"):
        value = answer.get(key)
        if value is not None and not isinstance(value, str):
            return HookFailure(f"'{key}' must be a string, not {_cut(repr(value), 80)}")
        try:
            (value or "").encode("utf-8")
        except UnicodeEncodeError:  # "\ud800" in its JSON: a message could not hold it
            return HookFailure(f"'{key}' is not valid Unicode (it holds a lone surrogate)")
        strings[key] = _cut(value) if value else None
    return HookAnswer(decision == "block", strings["reason"], strings["additionalContext"], permission)


def _cut(text: str, limit: int = MAX_REASON) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _Capped(asyncio.Protocol):
    """A pipe's bytes up to `cap`; past it `overflowed` is set and the rest is dropped."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.chunks: list[bytes] = []
        self.size = 0
        self.overflowed = asyncio.Event()
        self.ended = asyncio.Event()

    def data_received(self, data: bytes) -> None:
        room = self.cap - self.size
        if room > 0:
            self.chunks.append(data[:room])
        self.size += len(data)
        if self.size > self.cap:
            self.overflowed.set()

    def eof_received(self) -> bool | None:
        self.ended.set()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.ended.set()

    def data(self) -> bytes:
        return b"".join(self.chunks)

    def itself(self) -> _Capped:
        """The protocol factory `connect_read_pipe` takes."""
        return self


def hook_document(
    session_id: str, cwd: Path, roots: Sequence[Path], event: str, **fields: Any
) -> dict[str, Any]:
    """The JSON document a hook reads on stdin: the session, the event, and the event's own fields."""
    return {
        "session": {"id": session_id, "cwd": str(cwd), "roots": [str(r) for r in roots]},
        "event": event,
        **{k: v for k, v in fields.items() if v is not None},
    }
