"""A session's background processes (`run_command` with `background: true`): started through the
session's sandbox like every command, owned by the daemon across turns, stopped with their whole
process tree by the agent (`process_stop`), the person (`dsh/process/stop`, a cancel that stops
processes), the session's close or the daemon's shutdown.

- Each process gets a stdin pipe (`process_write`) and one output pipe (stdout and stderr).
- Its output is kept twice, both bounded: the newest `process_buffer_chars` in memory, which the
  model reads from a cursor (`process_read`: only what it has not read yet), and a ring file under
  the session's directory (`output_dir`, the newest `process_log_bytes` to twice that), so a client,
  or a later daemon after a restart, can still show the last lines. The output never enters the log.
- When its main process exits, what it left running is killed (a background command is one
  process: a shell that starts `server &` and exits ends with the server).
- `process/started` is written by the tool (between its call and its result); `process/exited` by
  whoever the host wires to `on_exited`, once per process.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import logging
import os
import re
import signal as signals
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsh_daemon.model.payloads import ProcessExited, ProcessStopper
from dsh_daemon.tools.limits import ToolLimits
from dsh_daemon.tools.sandboxing import CommandSandbox, SandboxedProcess, Widening
from dsh_daemon.tools.unconfined import SandboxedProcess as UnconfinedProcess

logger = logging.getLogger(__name__)

_READ_CHUNK = 64 * 1024
_STDIN_BACKLOG = 1024 * 1024  # input the process has not read yet, past which a write is refused
_MATCH_OVERLAP = 4096  # a pattern is searched again this far back, so a match across chunks is found


class ProcessNotFound(LookupError):
    """No process of that id in this session."""


class OutputRing:
    """The newest output of one process in a file: appended as it comes, cut back to the newest
    `max_bytes` whenever it reaches twice that (so it never holds more than 2 × `max_bytes`)."""

    def __init__(self, path: Path, max_bytes: int) -> None:
        self.path = path
        self.max_bytes = max_bytes
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd: int | None = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600)
        self._size = 0

    def append(self, data: bytes) -> None:
        if self._fd is None or not data:
            return
        try:
            os.write(self._fd, data)
            self._size += len(data)
            if self._size >= 2 * self.max_bytes:
                self._cut()
        except OSError as exc:  # a full disk loses the file's copy, never the process
            logger.warning("process output file %s: %s", self.path, exc)

    def _cut(self) -> None:
        cut_marker(self.path).touch()  # a reader can tell the file no longer starts at the beginning
        keep = read_tail(self.path, self.max_bytes)
        temp = self.path.with_suffix(".tmp")
        temp.write_bytes(keep)
        os.replace(temp, self.path)
        assert self._fd is not None
        os.close(self._fd)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        self._size = len(keep)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def read_tail(path: Path, max_bytes: int) -> bytes:
    """The last `max_bytes` of the file, starting at a character (b"" when there is none)."""
    try:
        with open(path, "rb") as file:
            size = file.seek(0, os.SEEK_END)
            file.seek(max(0, size - max_bytes))
            data = file.read(max_bytes)
    except FileNotFoundError:
        return b""
    if len(data) == max_bytes or size > max_bytes:
        start = 0
        while start < min(4, len(data)) and data[start] & 0xC0 == 0x80:  # a character's middle
            start += 1
        data = data[start:]
    return data


def cut_marker(path: Path) -> Path:
    return path.with_name(path.name + ".cut")


def tail_text(path: Path, max_chars: int) -> tuple[str, bool]:
    """The last `max_chars` characters of a process's output file, and whether older output was left
    out (`dsh/process/output`, also for a session a daemon before this one ran)."""
    data = read_tail(path, max_chars * 4)
    text = data.decode("utf-8", errors="replace")
    truncated = len(text) > max_chars or _size(path) > len(data) or cut_marker(path).exists()
    return text[-max_chars:], truncated


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


@dataclass
class BackgroundProcess:
    """One background process and what is known of it."""

    process_id: str
    name: str
    command: str
    confined: bool
    pid: int
    proc: SandboxedProcess | UnconfinedProcess
    ring: OutputRing | None
    finish: Callable[[], Awaitable[None]]
    buffer_chars: int
    started_at: float = field(default_factory=time.time)
    exit_code: int | None = None
    signal: int | None = None
    stopped_by: ProcessStopper | None = None
    exited: asyncio.Event = field(default_factory=asyncio.Event)
    text: str = ""  # the newest output, at most `buffer_chars`
    start: int = 0  # how many characters were produced before `text[0]`
    read_at: int = 0  # the model's cursor: what it has read (process_read, the start's first output)
    recorded: bool = False  # its `process/exited` is written (once)
    last_output_at: float = 0.0  # time.monotonic() of its latest output
    _grew: asyncio.Event = field(default_factory=asyncio.Event)
    _stdin: asyncio.WriteTransport | None = None
    _tasks: list[asyncio.Task[Any]] = field(default_factory=list)

    @property
    def running(self) -> bool:
        return not self.exited.is_set()

    @property
    def total(self) -> int:
        return self.start + len(self.text)

    def add_output(self, text: str) -> None:
        self.last_output_at = time.monotonic()
        self.text += text
        if len(self.text) > self.buffer_chars:
            drop = len(self.text) - self.buffer_chars
            self.text = self.text[drop:]
            self.start += drop
        self._grew.set()

    def unread(self) -> tuple[str, int]:
        """What the model has not read, and how many characters of it the buffer no longer holds."""
        begin = max(self.read_at, self.start)
        return self.text[begin - self.start :], begin - self.read_at

    def take_unread(self, max_chars: int) -> tuple[str, int]:
        """The unread output, newest `max_chars` of it (the cursor moves to the end), and how many
        unread characters were left out (dropped by the buffer or over `max_chars`)."""
        text, skipped = self.unread()
        if len(text) > max_chars:
            skipped += len(text) - max_chars
            text = text[-max_chars:]
        self.read_at = self.total
        return text, skipped

    async def wait_for(self, pattern: re.Pattern[str] | None, limit_s: float, abort: Awaitable[Any]) -> str:
        """Until `pattern` matches the unread output (None: never), the process exits, `limit_s`
        passes or `abort` completes: "matched" | "exited" | "timeout" | "aborted"."""
        deadline = asyncio.get_running_loop().time() + limit_s
        aborted = asyncio.ensure_future(abort)
        scanned = self.read_at
        try:
            while True:
                self._grew.clear()
                if pattern is not None:
                    begin = max(scanned - _MATCH_OVERLAP, self.read_at, self.start)
                    if pattern.search(self.text, begin - self.start):
                        return "matched"
                    scanned = self.total
                if not self.running:
                    return "exited"
                remaining = deadline - asyncio.get_running_loop().time()
                if remaining <= 0:
                    return "timeout"
                grew = asyncio.ensure_future(self._grew.wait())
                ended = asyncio.ensure_future(self.exited.wait())
                try:
                    await asyncio.wait(
                        {grew, ended, aborted}, timeout=remaining, return_when="FIRST_COMPLETED"
                    )
                finally:
                    for task in (grew, ended):
                        task.cancel()
                if aborted.done():
                    return "aborted"
        finally:
            aborted.cancel()

    async def first_output(self, limit_s: float, quiet_s: float, abort: Awaitable[Any]) -> None:
        """Until it has written something and then nothing for `quiet_s` (its first lines, without
        waiting out `limit_s` for a server that is ready at once), it exits, `limit_s` passes or
        `abort` completes."""
        deadline = time.monotonic() + limit_s
        aborted = asyncio.ensure_future(abort)
        try:
            while self.running and not aborted.done():
                now = time.monotonic()
                if now >= deadline:
                    return
                wait = deadline - now
                if self.total > self.read_at:
                    quiet_for = now - self.last_output_at
                    if quiet_for >= quiet_s:
                        return
                    wait = min(wait, quiet_s - quiet_for)
                self._grew.clear()
                grew = asyncio.ensure_future(self._grew.wait())
                ended = asyncio.ensure_future(self.exited.wait())
                try:
                    await asyncio.wait({grew, ended, aborted}, timeout=wait, return_when="FIRST_COMPLETED")
                finally:
                    grew.cancel()
                    ended.cancel()
        finally:
            aborted.cancel()

    def write(self, data: bytes, *, close: bool) -> None:
        """Input for the process (`BrokenPipeError` when it no longer reads; `BlockingIOError` when
        it has not read the last megabyte)."""
        stdin = self._stdin
        if stdin is None or stdin.is_closing():
            raise BrokenPipeError("its input is closed")
        if stdin.get_write_buffer_size() + len(data) > _STDIN_BACKLOG:
            raise BlockingIOError("it has not read the input written before")
        if data:
            stdin.write(data)
        if close:
            stdin.close()

    def status_text(self) -> str:
        if self.running:
            return "running"
        how = f"exit code {self.exit_code}" if self.exit_code is not None else f"signal {self.signal}"
        if self.exit_code is None and self.signal is None:
            how = "ended"
        return f"exited ({how}{f', stopped by {self.stopped_by}' if self.stopped_by else ''})"

    def exited_payload(self) -> ProcessExited:
        return ProcessExited(self.process_id, self.exit_code, self.signal, self.stopped_by)


class BackgroundProcesses:
    """The background processes of one session (see the module's note)."""

    def __init__(self, sandbox: CommandSandbox, limits: ToolLimits) -> None:
        self.sandbox = sandbox
        self.limits = limits
        self.output_dir: Path | None = None  # the session's directory for output files (host sets)
        self.on_exited: Callable[[ProcessExited], None] = lambda _payload: None  # host wires
        self.next_number = 1  # the host continues a session's numbering from its log
        self._processes: dict[str, BackgroundProcess] = {}
        self._closed = False

    # ---- starting -------------------------------------------------------------------------------------

    def running(self) -> list[BackgroundProcess]:
        return [p for p in self._processes.values() if p.running]

    def all(self) -> list[BackgroundProcess]:
        return list(self._processes.values())

    def get(self, process_id: str) -> BackgroundProcess:
        process = self._processes.get(process_id)
        if process is None:
            known = ", ".join(f"{p.process_id} ({p.status_text()})" for p in self._processes.values())
            raise ProcessNotFound(
                f"no background process {process_id!r} in this session"
                + (f" (its processes: {known})" if known else " (it has none now)")
            )
        return process

    def output_file(self, process_id: str) -> Path | None:
        return None if self.output_dir is None else self.output_dir / f"{process_id}.log"

    async def start(
        self,
        argv: Sequence[str],
        *,
        command: str,
        name: str,
        cwd: Path,
        env: Mapping[str, str],
        widening: Widening | None = None,
    ) -> BackgroundProcess:
        """Started under the session's sandbox (`SandboxUnavailable` as for any command); its output
        and exit followed from here on."""
        if self._closed:
            raise RuntimeError("the session's processes are closed")
        process_id = f"p{self.next_number}"
        self.next_number += 1
        confined = self.sandbox.confined and not (widening is not None and widening.unconfined)
        out_read, out_write = os.pipe()
        in_read, in_write = os.pipe()
        try:
            proc, finish = await self.sandbox.spawn(
                argv, cwd=cwd, env=env, stdin=in_read, stdout=out_write, stderr=out_write, widening=widening
            )
        except BaseException:
            for fd in (out_read, in_write):
                os.close(fd)
            raise
        finally:
            for fd in (out_write, in_read):
                os.close(fd)
        path = self.output_file(process_id)
        ring = None
        if path is not None:
            try:
                ring = OutputRing(path, self.limits.process_log_bytes)
            except OSError as exc:
                logger.warning("process %s: no output file (%s)", process_id, exc)
        process = BackgroundProcess(
            process_id,
            name,
            command,
            confined,
            proc.pid,
            proc,
            ring,
            finish,
            self.limits.process_buffer_chars,
        )
        self._processes[process_id] = process
        loop = asyncio.get_running_loop()
        try:
            reader = asyncio.StreamReader(limit=_READ_CHUNK)
            out, _ = await loop.connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(out_read, "rb", 0)
            )
            stdin, _ = await loop.connect_write_pipe(asyncio.Protocol, os.fdopen(in_write, "wb", 0))
        except BaseException:
            proc.kill_tree(signals.SIGKILL)
            raise
        process._stdin = stdin
        setup_error = getattr(proc, "setup_error", None)
        if setup_error:
            process.add_output(
                f"[the sandbox could not confine this command, so it was not run: {setup_error}]\n"
            )
        process._tasks.append(loop.create_task(self._follow(process, reader, out)))
        return process

    async def _follow(
        self, process: BackgroundProcess, reader: asyncio.StreamReader, out: asyncio.BaseTransport
    ) -> None:
        """Read its output until it exits; then kill what it left, drain, close, record."""
        pump = asyncio.create_task(self._pump(process, reader))
        proc = process.proc
        code = -signals.SIGKILL
        try:
            try:
                code = await proc.wait()
            except OSError as exc:  # the sandbox lost it: treat it as killed, its tree with it
                logger.warning("process %s: its status was lost (%s)", process.process_id, exc)
            # The main process is gone: whatever of its tree is left goes too (after the output it
            # already wrote is read).
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(pump), self.limits.command_drain_grace_s)
            proc.kill_tree(signals.SIGKILL)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(pump), self.limits.command_kill_grace_s)
        except asyncio.CancelledError:
            proc.kill_tree(signals.SIGKILL)
            raise
        finally:
            pump.cancel()
            await asyncio.gather(pump, return_exceptions=True)
            out.close()
            if process._stdin is not None:
                process._stdin.close()
            if process.ring is not None:
                process.ring.close()
            with contextlib.suppress(Exception):
                await asyncio.shield(process.finish())
        process.exit_code, process.signal = (code, None) if code >= 0 else (None, -code)
        process.exited.set()
        process._grew.set()
        self._record(process)

    async def _pump(self, process: BackgroundProcess, reader: asyncio.StreamReader) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        while True:
            chunk = await reader.read(_READ_CHUNK)
            if process.ring is not None:
                process.ring.append(chunk)
            text = decoder.decode(chunk, final=not chunk)
            if text:
                process.add_output(text)
            if not chunk:
                return

    def _record(self, process: BackgroundProcess) -> None:
        if process.recorded:
            return
        process.recorded = True
        try:
            self.on_exited(process.exited_payload())
        except Exception:  # the record must never break the process's end
            logger.exception("process %s: its exit could not be recorded", process.process_id)

    # ---- stopping -------------------------------------------------------------------------------------

    async def stop(self, process_id: str, by: ProcessStopper) -> BackgroundProcess:
        """SIGTERM to its whole tree, SIGKILL after the grace; returns once it has exited."""
        process = self.get(process_id)
        if process.running:
            if process.stopped_by is None:
                process.stopped_by = by
            process.proc.kill_tree(signals.SIGTERM)
            try:
                await asyncio.wait_for(
                    asyncio.shield(process.exited.wait()), self.limits.command_kill_grace_s
                )
            except TimeoutError:
                pass
            finally:
                if process.running:
                    process.proc.kill_tree(signals.SIGKILL)
            await process.exited.wait()
        return process

    async def stop_all(self, by: ProcessStopper) -> list[BackgroundProcess]:
        running = self.running()
        await asyncio.gather(*(self.stop(p.process_id, by) for p in running))
        return running

    def stop_all_now(self, by: ProcessStopper) -> None:
        """Without waiting (the session is closing, its log about to be let go): SIGTERM to every
        running tree (`aclose` sends SIGKILL after the grace), and their `process/exited` written
        now, saying who stopped them."""
        for process in self.running():
            if process.stopped_by is None:
                process.stopped_by = by
            process.proc.kill_tree(signals.SIGTERM)
            self._record(process)

    async def aclose(self) -> None:
        """Every process is stopped and followed to its end (the session's sandbox closes after)."""
        self._closed = True
        for process in self.running():
            if process.stopped_by is None:
                process.stopped_by = "session-close"
        await self.stop_all("session-close")
        tasks = [t for p in self._processes.values() for t in p._tasks]
        await asyncio.gather(*tasks, return_exceptions=True)


def process_name(command: str, name: str | None) -> str:
    """The name the person sees: the one given, else the command's first line, shortened."""
    text = (name or command).strip().splitlines()[0] if (name or command).strip() else command
    return text if len(text) <= 60 else text[:59] + "…"
