"""run_command: a shell command in the session cwd, streamed live, capped, and stopped for good.

The command runs through the session's sandbox (`sandboxing.CommandSandbox`: confined in
`read-only` and `workspace-write`, unconfined in `full-access`, one path for all three), in its own
session, with its whole process tree tracked, so a timeout, a cancelled turn or the daemon's
shutdown kills every process it started, not just the shell. Its environment carries none of the
daemon's secrets. A confined command that hits the sandbox's walls gets a note saying so and that
only the person can widen it; `escalate` asks the person for a widening (tools/policy.py asks).
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import dataclasses
import logging
import os
import re
import shutil
import signal as signals
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsh_daemon.agent.budget import GENERIC_HINT, SNAP, marker
from dsh_daemon.agent.tools import ToolContext, ToolOutcome
from dsh_daemon.model.jsonvalue import FrozenDict, thaw
from dsh_daemon.model.messages import TextBlock
from dsh_daemon.model.payloads import ProcessStarted
from dsh_daemon.sandbox.attach import TOKEN_VARIABLE, Ticket, wrapper_argv
from dsh_daemon.tools.base import ToolBase, get_bool, get_opt_str, get_str, make_spec, short
from dsh_daemon.tools.checkpoints import Checkpointer
from dsh_daemon.tools.config import SandboxSettings
from dsh_daemon.tools.editor import EditorServices, NoEditor
from dsh_daemon.tools.environment import DaemonSecrets, blanked_secret_names, scrubbed_environment
from dsh_daemon.tools.errors import InvalidArgumentsError
from dsh_daemon.tools.limits import ToolLimits
from dsh_daemon.tools.process_tools import output_section, process_meta
from dsh_daemon.tools.processes import BackgroundProcess, BackgroundProcesses, process_name
from dsh_daemon.tools.sandboxing import (
    CommandSandbox,
    SandboxedProcess,
    SandboxUnavailable,
    Widening,
    unavailable_message,
)
from dsh_daemon.tools.terminal import Terminal, TerminalExit, TerminalOutput, Terminals, TerminalUnavailable
from dsh_daemon.tools.unconfined import SandboxedProcess as UnconfinedProcess
from dsh_daemon.tools.workspace import Workspace

logger = logging.getLogger(__name__)

_READ_CHUNK = 64 * 1024
# Non-interactive defaults: a pager or a prompt would hang until the timeout.
_ENV_DEFAULTS = {"PAGER": "cat", "GIT_PAGER": "cat", "GIT_TERMINAL_PROMPT": "0"}
NO_OUTPUT = "(no output)\n"
FIRST_OUTPUT_QUIET_S = 0.2  # a background command's first output is complete once it is this quiet
# How long the attach wrapper may take to reach the daemon from the editor's terminal.
ATTACH_TIMEOUT_S = 30.0


@dataclass
class _Output:
    """The result keeps the head and the tail (errors are usually at the end); the middle is elided
    with the budget marker (agent/budget.py), which says how much and how to see it."""

    cap: int
    hint: str = GENERIC_HINT
    head: str = ""
    tail: str = ""
    total: int = 0
    lines: int = 0

    def add(self, text: str) -> None:
        self.total += len(text)
        self.lines += text.count("\n")
        room = self.cap // 2 - len(self.head)
        if room > 0:
            self.head += text[:room]
            text = text[room:]
        if text:
            self.tail = (self.tail + text)[-(self.cap - self.cap // 2) :]

    @property
    def truncated(self) -> bool:
        return self.total > len(self.head) + len(self.tail)

    def render(self) -> str:
        if not self.truncated:
            return self.head + self.tail
        # Whole lines where a line break is near, as in `elide_middle`.
        head = self.head[: len(self.head) - len(_snap(self.head, tail=False))]
        tail = _snap(self.tail, tail=True)
        chars = self.total - len(head) - len(tail)
        lines = self.lines - head.count("\n") - tail.count("\n")
        sep = "" if not head or head.endswith("\n") else "\n"
        return f"{head}{sep}{marker(chars, lines, self.hint)}\n{tail}"


def _snap(part: str, *, tail: bool) -> str:
    """What to drop from the inner edge of a kept part to end (head) or start (tail) at a line break
    near it: the head's dropped suffix, or the tail as kept."""
    reach = int(len(part) * SNAP)
    if tail:
        newline = part.find("\n", 0, reach)
        return part[newline + 1 :] if newline >= 0 else part
    newline = part.rfind("\n", len(part) - reach)
    return part[newline + 1 :] if newline >= 0 else ""


def _in_terminal(outcome: ToolOutcome, terminal: Terminal) -> ToolOutcome:
    """The outcome of a command the editor's terminal showed: its meta names the terminal."""
    meta = dict(outcome.meta or {})
    meta["terminalId"] = terminal.terminal_id
    return dataclasses.replace(outcome, meta=FrozenDict(meta))


def _signal_name(number: int) -> str:
    try:
        return signals.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _exit_of(task: asyncio.Task[TerminalExit]) -> TerminalExit | None:
    if task.done() and not task.cancelled() and task.exception() is None:
        return task.result()
    return None


class RunCommandTool(ToolBase):
    truncation_hint = (
        "re-run with a narrower command (filter with grep, head or tail, or redirect the output to a "
        "file and read it with read_file offset and limit)"
    )
    spec = make_spec(
        "run_command",
        "Run a shell command in the session directory (stdout and stderr combined, no input). "
        "Killed with everything it started on timeout or cancel; background processes still holding "
        "the output when it exits are killed too. Long output keeps its beginning and end. A server or a "
        "watcher that does not end by itself: use background: true.",
        {
            "command": {"type": "string", "description": "The shell command line."},
            "timeout": {"type": "number", "description": "Seconds before it is killed (default 120)."},
            "background": {
                "type": "boolean",
                "description": (
                    "Run it in the background (a dev server, a watcher): returns at once with a process "
                    "id and its first output; it keeps running across turns until process_stop or the "
                    "session ends. Read it with process_read, write to it with process_write."
                ),
            },
            "name": {"type": "string", "description": "With background: a short name the person sees."},
            "escalate": {
                "type": "object",
                "description": (
                    "Only after a command failed on the sandbox's walls and it must not: ask the person "
                    "to widen the sandbox for this command (they may refuse). Name exactly what it needs."
                ),
                "properties": {
                    "reason": {"type": "string", "description": "Why the command needs it, for the person."},
                    "writable": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "Paths to make writable.",
                    },
                    "network": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "Domains to reach.",
                    },
                    "unconfined": {"type": "boolean", "description": "Run this command without the sandbox."},
                },
                "required": ["reason"],
                "additionalProperties": False,
            },
        },
        ["command"],
    )
    parallel_safe = False

    def __init__(
        self,
        workspace: Workspace,
        limits: ToolLimits,
        *,
        shell: str | None = None,
        checkpoints: Checkpointer | None = None,
        editor: EditorServices | None = None,
        secrets: DaemonSecrets | None = None,
        sandbox: CommandSandbox | None = None,
        processes: BackgroundProcesses | None = None,
    ) -> None:
        self.workspace = workspace
        self.limits = limits
        self.secrets = secrets or DaemonSecrets()  # kept out of the command's environment
        self.shell = shell or shutil.which("bash") or "/bin/sh"
        self.checkpoints = checkpoints
        self.editor = editor or NoEditor()
        self.sandbox = sandbox or CommandSandbox(workspace, SandboxSettings())
        self.processes = processes or BackgroundProcesses(self.sandbox, limits)

    def widening(self, args: Mapping[str, Any]) -> Widening | None:
        """The call's `escalate`, checked (`InvalidArgumentsError` when malformed); None without one."""
        raw = args.get("escalate")
        return None if raw is None else Widening.parse(raw, self.workspace)

    def permission_title(self, args: Mapping[str, Any]) -> str:
        command = short(str(args.get("command", "?")))
        run = "run in the background" if args.get("background") is True else "run"
        widening = self._widening_or_none(args)
        if widening is not None:
            return f"Widen the sandbox ({widening.describe()}) to {run}: {command}"
        return f"{run.capitalize()}: {command}"

    def permission_scope(self, args: Mapping[str, Any]) -> str | None:
        widening = self._widening_or_none(args)
        if widening is not None:
            return widening.scope(str(args.get("command")))
        return f"{self.spec.name}:{args.get('command')}"

    async def permission_preview(self, args: Mapping[str, Any]) -> Mapping[str, Any] | None:
        command = args.get("command")
        if not isinstance(command, str):
            return None
        preview: dict[str, Any] = {"command": command, "cwd": str(self.workspace.cwd)}
        preview["sandbox"] = self.sandbox.mode
        if args.get("background") is True:
            preview["background"] = True
        widening = self.widening(args)
        if widening is not None:
            preview["escalation"] = widening.to_json()
        return preview

    def _widening_or_none(self, args: Mapping[str, Any]) -> Widening | None:
        try:
            return self.widening(args)
        except InvalidArgumentsError:
            return None

    def _timeout(self, args: Mapping[str, Any]) -> float:
        value = args.get("timeout")
        if value is None:
            return self.limits.command_timeout_s
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise InvalidArgumentsError("'timeout' must be a positive number of seconds")
        return min(float(value), self.limits.command_max_timeout_s)

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        command = get_str(args, "command", allow_empty=False)
        timeout = self._timeout(args)
        background = get_bool(args, "background")
        name = get_opt_str(args, "name")
        widening = self.widening(args)
        if widening is not None:
            refusal = await self._check_widening(command, widening, ctx)
            if refusal is not None:
                return refusal
        ctx.signal.check()
        if background:
            return await self._start_background(command, name, ctx, widening)
        if self.checkpoints is None:
            return await self._run(command, ctx, limit_s=timeout, widening=widening)
        # The work tree before and after the command, so a rewind can restore what it changed.
        async with self.checkpoints.command(ctx.call):
            return await self._run(command, ctx, limit_s=timeout, widening=widening)

    async def _start_background(
        self, command: str, name: str | None, ctx: ToolContext, widening: Widening | None
    ) -> ToolOutcome:
        """Started and left running (tools/processes.py owns it from here): a durable
        `process/started`, then the output it wrote within `process_first_output_s` (or until it
        exited), read from its cursor like `process_read`."""
        if self.sandbox.session_mode() == "plan":
            return ToolOutcome.error(
                "Error: plan mode runs commands read-only and in the foreground; the person can leave "
                "plan mode",
                "SANDBOX_DENIED",
            )
        running = self.processes.running()
        if len(running) >= self.limits.process_max_running:
            names = ", ".join(f"{p.process_id} ({short(p.name, 40)})" for p in running)
            return ToolOutcome.error(
                f"Error: {len(running)} background processes run already (at most "
                f"{self.limits.process_max_running}): {names}; stop one with process_stop first",
                "TOO_MANY_PROCESSES",
            )
        env = {**scrubbed_environment(os.environ, self.secrets), **_ENV_DEFAULTS}
        try:
            if self.checkpoints is None:
                process = await self._spawn_background(command, name, env, widening)
            else:
                async with self.checkpoints.command(ctx.call):  # what starting it changed, for a rewind
                    process = await self._spawn_background(command, name, env, widening)
        except SandboxUnavailable as exc:
            text = unavailable_message(str(exc) or self.sandbox.status()["level"], self.sandbox.mode)
            return ToolOutcome.error(f"Error: {text}", "SANDBOX_UNAVAILABLE")
        call = ctx.call
        ctx.log_event(
            ProcessStarted(
                process.process_id,
                process.name,
                command,
                process.pid,
                process.confined,
                call.turn,
                call.call_id,
            ),
            ignorable=True,
        )
        await process.first_output(
            self.limits.process_first_output_s, FIRST_OUTPUT_QUIET_S, ctx.signal.wait()
        )
        text, skipped = process.take_unread(self.limits.process_read_chars)
        head = f"Started {process.process_id} in the background (pid {process.pid}): {short(command)}\n"
        body = output_section(process, text, skipped)
        if process.running:
            body += (
                f"\n[read more with process_read {{process_id: {process.process_id!r}}} (wait_for waits for "
                "a line), write with process_write, stop it with process_stop]"
            )
        if process.confined and not self.sandbox.level().namespaces:
            body += (
                "\n[in this sandbox (Landlock and seccomp, no namespaces) commands cannot serve or reach "
                "each other on loopback: a local server needs the person to widen the sandbox]"
            )
        return ToolOutcome.text(head + body, meta=process_meta(process))

    async def _spawn_background(
        self, command: str, name: str | None, env: Mapping[str, str], widening: Widening | None
    ) -> BackgroundProcess:
        return await self.processes.start(
            [self.shell, "-c", command],
            command=command,
            name=process_name(command, name),
            cwd=self.workspace.cwd,
            env=env,
            widening=widening,
        )

    async def _check_widening(self, command: str, widening: Widening, ctx: ToolContext) -> ToolOutcome | None:
        """A widening runs only when the person approved exactly it, now or for the session; each
        one approved now is a durable `sandbox/widened` (the host writes it), and one they chose to
        keep is saved to their configuration first (`unconfined` never is). None: go ahead."""
        if self.sandbox.session_mode() == "plan":
            return ToolOutcome.error(
                "Error: plan mode runs commands read-only and cannot widen the sandbox; the person can "
                "leave plan mode",
                "SANDBOX_DENIED",
            )
        scope = widening.scope(command)
        for_session = scope in set(self.sandbox.grants())
        approved = getattr(ctx, "approved_preview", None)
        asked_now = (
            approved is not None
            and thaw(approved.get("escalation")) == widening.to_json()
            and approved.get("command") == command
        )
        if not (asked_now or for_session):
            return ToolOutcome.error(
                "Error: the sandbox was not widened: only the person can widen it, and they were not "
                "asked (or did not allow it)",
                "ESCALATION_REFUSED",
            )
        if asked_now:
            scope = "session" if for_session else "once"
            if for_session and getattr(ctx, "persist_approved", False):
                scope = await self._save_widening(widening)
            self.sandbox.on_widened(
                {"callId": ctx.call.call_id, "command": command, **widening.to_json(), "scope": scope}
            )
        return None

    async def _save_widening(self, widening: Widening) -> str:
        """ "Always (saved to config)": the widening saved to the person's configuration (`config`),
        or, when it cannot be (`unconfined`, a config.json that cannot be parsed), kept for the session
        only (`session`), and the person told why. The session grant holds either way."""
        if widening.unconfined:
            problem: str | None = "an unconfined run is never saved to the configuration"
        else:
            problem = await self.sandbox.save_widening(widening)
        if problem is None:
            return "config"
        self.sandbox.on_notice(
            f"The sandbox widening ({widening.describe()}) was not saved to the configuration: {problem}. "
            "It holds for this session only."
        )
        return "session"

    async def _run(
        self, command: str, ctx: ToolContext, *, limit_s: float, widening: Widening | None = None
    ) -> ToolOutcome:
        unsaved = await self._unsaved(ctx)
        terminals = self.editor.terminals
        if terminals is not None:
            # The editor's terminal cannot confine: a confined (or widened) command runs in the
            # session's sandbox with the terminal as its stdio, through the attach wrapper.
            attached = self.sandbox.confined or widening is not None
            try:
                if attached:
                    outcome = await self._run_attached(terminals, command, ctx, limit_s, widening)
                else:
                    outcome = await self._run_in_terminal(terminals, command, ctx, limit_s)
            except TerminalUnavailable as exc:
                logger.warning("the editor's terminal could not run the command (%s): run here", exc)
            else:
                return self._with_unsaved(outcome, unsaved)
        try:
            outcome = await self._run_here(command, ctx, limit_s=limit_s, widening=widening)
        except SandboxUnavailable as exc:
            text = unavailable_message(str(exc) or self.sandbox.status()["level"], self.sandbox.mode)
            outcome = ToolOutcome.error(f"Error: {text}", "SANDBOX_UNAVAILABLE")
        return self._with_unsaved(outcome, unsaved)

    async def _run_in_terminal(
        self, terminals: Terminals, command: str, ctx: ToolContext, limit_s: float
    ) -> ToolOutcome:
        """The command in the editor's terminal, which the person watches live; the output the editor
        kept (its last `command_output_chars`) is the result. Timeout and cancel kill it there; the
        terminal is released in every case (also when this task is cancelled), and the editor may go
        on showing it."""
        output_limit = self.limits.command_output_chars
        terminal = await terminals.create(
            ctx.call.call_id,
            self.shell,
            ["-c", command],
            self.workspace.cwd,
            {**blanked_secret_names(self.secrets), **_ENV_DEFAULTS},
            output_limit,
        )
        stopped: str | None = None
        exited = asyncio.create_task(terminal.wait_for_exit())
        aborted = asyncio.create_task(ctx.signal.wait())
        try:
            done, _ = await asyncio.wait(
                {exited, aborted}, timeout=limit_s, return_when=asyncio.FIRST_COMPLETED
            )
            if exited not in done:
                stopped = "cancelled" if aborted in done else "timeout"
                with contextlib.suppress(TerminalUnavailable):
                    await terminal.kill()
            try:
                kept = await terminal.output()
            except TerminalUnavailable as exc:
                kept = TerminalOutput(f"[the editor's terminal did not give its output: {exc}]\n", False)
            ended = kept.exit or _exit_of(exited)
        finally:
            for task in (exited, aborted):
                task.cancel()
            await asyncio.gather(exited, aborted, return_exceptions=True)
            with contextlib.suppress(TerminalUnavailable):
                await asyncio.shield(terminal.release())
        output = self._terminal_output(kept)
        code = ended.exit_code if ended is not None else None
        outcome = self._outcome(
            command, code, output, stopped, limit_s, signal=ended.signal if ended else None
        )
        return _in_terminal(outcome, terminal)

    def _terminal_output(self, kept: TerminalOutput) -> _Output:
        output_limit = self.limits.command_output_chars
        output = _Output(output_limit, self.truncation_hint)
        if kept.truncated:
            output.add(
                f"[the editor's terminal kept only the end of the output: its last {output_limit:,} bytes]\n"
            )
        output.add(kept.text)
        return output

    async def _run_attached(
        self,
        terminals: Terminals,
        command: str,
        ctx: ToolContext,
        limit_s: float,
        widening: Widening | None,
    ) -> ToolOutcome:
        """A confined command shown in the editor's terminal (issue 41.4). The terminal runs the attach
        wrapper, which hands the daemon its stdio with a one-time token (sandbox/attach.py); the
        command runs in the session's sandbox on those fds, exactly as `_run_here` would run it, and
        its exit status goes back to the wrapper, which exits with it. The timeout, a cancel, or the
        wrapper signalled or killed in the terminal kill the command's whole tree. A wrapper that never
        reaches the daemon (a terminal that could not start it) leaves the command to run here:
        `TerminalUnavailable`, raised only while nothing has run."""
        try:
            point = self.sandbox.attach_point()
        except OSError as exc:  # the run dir or the socket could not be made: the daemon runs it
            raise TerminalUnavailable(f"no attach socket: {exc}") from exc
        if point is None:
            raise TerminalUnavailable("no attach socket on this system")
        argv = [self.shell, "-c", command]
        ticket = point.expect()
        wrapper = wrapper_argv(point.path, argv)
        env = {**blanked_secret_names(self.secrets), **_ENV_DEFAULTS, TOKEN_VARIABLE: ticket.token}
        try:
            terminal = await terminals.create(
                ctx.call.call_id,
                wrapper[0],
                wrapper[1:],
                self.workspace.cwd,
                env,
                self.limits.command_output_chars,
            )
        except BaseException:
            ticket.close()
            raise
        try:
            return await self._attached(terminal, ticket, argv, command, ctx, limit_s, widening)
        finally:
            ticket.close()
            with contextlib.suppress(TerminalUnavailable):
                await asyncio.shield(terminal.release())

    async def _attached(
        self,
        terminal: Terminal,
        ticket: Ticket,
        argv: list[str],
        command: str,
        ctx: ToolContext,
        limit_s: float,
        widening: Widening | None,
    ) -> ToolOutcome:
        """`_run_attached`'s work once the terminal exists: wait for the wrapper, run, report."""
        terminal_exit = asyncio.create_task(terminal.wait_for_exit())
        aborted = asyncio.create_task(ctx.signal.wait())
        killed = asyncio.create_task(ticket.kill.wait())
        waits: set[asyncio.Future[Any]] = {terminal_exit, aborted, killed}
        first: set[asyncio.Future[Any]] = {ticket.attached, terminal_exit, aborted}
        try:
            done, _ = await asyncio.wait(first, timeout=ATTACH_TIMEOUT_S, return_when=asyncio.FIRST_COMPLETED)
            if ticket.attached not in done:
                ticket.close()  # the token is dead: a late wrapper is refused
                if not terminal_exit.done():
                    with contextlib.suppress(TerminalUnavailable):
                        await terminal.kill()
                if aborted in done:  # nothing ran: the cancel is the result
                    output = _Output(self.limits.command_output_chars, self.truncation_hint)
                    return _in_terminal(self._outcome(command, None, output, "cancelled", limit_s), terminal)
                terminal.abandon()
                raise TerminalUnavailable(
                    "the attach wrapper did not reach the daemon from the editor's terminal"
                )
            stdio = ticket.attached.result()
            try:
                proc, finish = await self.sandbox.spawn(
                    argv,
                    cwd=self.workspace.cwd,
                    env={**scrubbed_environment(os.environ, self.secrets), **_ENV_DEFAULTS},
                    stdin=stdio.stdin,
                    stdout=stdio.stdout,
                    stderr=stdio.stderr,
                    widening=widening,
                )
            except SandboxUnavailable as exc:
                text = unavailable_message(str(exc) or self.sandbox.status()["level"], self.sandbox.mode)
                ticket.refuse(text)
                return _in_terminal(ToolOutcome.error(f"Error: {text}", "SANDBOX_UNAVAILABLE"), terminal)
            finally:
                stdio.close()  # the command has its own copies
            exited = asyncio.create_task(proc.wait())
            waits.add(exited)
            stopped: str | None = None
            running: set[asyncio.Future[Any]] = {exited, aborted, killed}
            try:
                ended, _ = await asyncio.wait(running, timeout=limit_s, return_when=asyncio.FIRST_COMPLETED)
                if exited not in ended:
                    stopped = (
                        "cancelled" if aborted in ended else "terminal" if killed in ended else "timeout"
                    )
                    await self._kill_tree(proc, exited)
            finally:
                if not exited.done():  # also when this task is cancelled: nothing it started survives
                    await self._kill_tree(proc, exited)
                await asyncio.shield(finish())
            code = exited.result() if exited.done() and not exited.cancelled() else None
            ticket.finish(code if code is not None else -signals.SIGKILL)
            # The wrapper exits with the status; the terminal then holds all the command printed.
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(
                    asyncio.shield(terminal_exit), timeout=self.limits.command_kill_grace_s
                )
            if not terminal_exit.done():
                with contextlib.suppress(TerminalUnavailable):
                    await terminal.kill()
            try:
                kept = await terminal.output()
            except TerminalUnavailable as exc:
                kept = TerminalOutput(f"[the editor's terminal did not give its output: {exc}]\n", False)
        finally:
            for task in waits:
                task.cancel()
            await asyncio.gather(*waits, return_exceptions=True)
        setup_error = getattr(proc, "setup_error", None)
        if setup_error:  # confinement could not be applied: the command never ran (never unconfined)
            return _in_terminal(
                ToolOutcome.error(
                    f"Error: the sandbox could not confine this command, so it was not run: {setup_error}",
                    "SANDBOX_UNAVAILABLE",
                ),
                terminal,
            )
        output = self._terminal_output(kept)
        signal = None
        if code is not None and code < 0:  # ended by a signal, as subprocess reports it
            signal = _signal_name(-code)
            code = None
        outcome = self._outcome(command, code, output, stopped, limit_s, signal=signal)
        if self.sandbox.confined and widening is None and stopped is None and code != 0:
            outcome = self._with_denial_note(outcome, output.render())
        return _in_terminal(outcome, terminal)

    async def _run_here(
        self, command: str, ctx: ToolContext, *, limit_s: float, widening: Widening | None = None
    ) -> ToolOutcome:
        timeout = limit_s
        read_fd, write_fd = os.pipe()
        devnull = os.open(os.devnull, os.O_RDONLY)
        try:
            proc, finish = await self.sandbox.spawn(
                [self.shell, "-c", command],
                cwd=self.workspace.cwd,
                env={**scrubbed_environment(os.environ, self.secrets), **_ENV_DEFAULTS},
                stdin=devnull,
                stdout=write_fd,
                stderr=write_fd,
                widening=widening,
            )
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)
            os.close(devnull)
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=_READ_CHUNK)
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(read_fd, "rb", 0)
        )
        output = _Output(self.limits.command_output_chars, self.truncation_hint)
        pump = asyncio.create_task(self._pump(reader, output, ctx))
        exited = asyncio.create_task(proc.wait())
        aborted = asyncio.create_task(ctx.signal.wait())
        stopped: str | None = None
        try:
            done, _ = await asyncio.wait(
                {exited, aborted}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
            if exited not in done:
                stopped = "cancelled" if aborted in done else "timeout"
                await self._kill_tree(proc, exited)
            else:
                # The shell is gone; whatever still holds the pipe after a grace is a leftover.
                _, still = await asyncio.wait({pump}, timeout=self.limits.command_drain_grace_s)
                if still:
                    await self._kill_tree(proc, exited)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(pump), timeout=self.limits.command_kill_grace_s)
        finally:
            # Also on task cancellation (daemon shutdown): nothing the command started survives it.
            if not exited.done() or not pump.done():
                await self._kill_tree(proc, exited)
            for task in (pump, aborted):
                task.cancel()
            await asyncio.gather(pump, aborted, return_exceptions=True)
            # Something the tree walk could not reach may still hold the pipe: stop reading.
            transport.close()
            await asyncio.shield(finish())
        code = exited.result() if exited.done() and not exited.cancelled() else None
        setup_error = getattr(proc, "setup_error", None)
        if setup_error:  # confinement could not be applied: the command never ran (never unconfined)
            return ToolOutcome.error(
                f"Error: the sandbox could not confine this command, so it was not run: {setup_error}",
                "SANDBOX_UNAVAILABLE",
            )
        outcome = self._outcome(command, code, output, stopped, timeout)
        if self.sandbox.confined and widening is None and stopped is None and code != 0:
            outcome = self._with_denial_note(outcome, output.render())
        return outcome

    def _with_denial_note(self, outcome: ToolOutcome, text: str) -> ToolOutcome:
        """A confined command that failed on the sandbox's walls: say so, and who can widen it."""
        note = denial_note(text, self.sandbox.mode, self.workspace.roots, self.sandbox.denied_domains())
        if note is None:
            return outcome
        meta = dict(outcome.meta or {})
        meta["sandboxDenied"] = True
        body = "".join(b.text for b in outcome.content if isinstance(b, TextBlock))
        return ToolOutcome.error(f"{body}\n{note}", "SANDBOX_DENIED", meta=meta)

    async def _unsaved(self, ctx: ToolContext) -> list[str]:
        """Open documents whose editor text differs from disk (the command sees the disk), shown
        live to the person (a `tool/output` line) before the command starts."""
        paths = await asyncio.to_thread(self.editor.unsaved_paths)
        shown = [self.workspace.display(p) for p in paths]
        if shown:
            ctx.emit_output(f"[dsh] {unsaved_note(shown)}\n")
        return shown

    @staticmethod
    def _with_unsaved(outcome: ToolOutcome, shown: list[str]) -> ToolOutcome:
        if not shown:
            return outcome
        meta = dict(outcome.meta or {})
        meta["unsavedDocuments"] = shown
        text = "".join(b.text for b in outcome.content if isinstance(b, TextBlock))
        return dataclasses.replace(
            outcome, content=(TextBlock(f"{text}\nNote: {unsaved_note(shown)}"),), meta=FrozenDict(meta)
        )

    async def _pump(self, reader: asyncio.StreamReader, output: _Output, ctx: ToolContext) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        streamed = 0
        while True:
            chunk = await reader.read(_READ_CHUNK)
            text = decoder.decode(chunk, final=not chunk)
            if text:
                output.add(text)
                # Live output carries only the new text; past the stream cap the client gets one notice.
                if streamed < self.limits.command_stream_chars:
                    piece = text[: self.limits.command_stream_chars - streamed]
                    streamed += len(piece)
                    ctx.emit_output(piece)
                    if streamed >= self.limits.command_stream_chars:
                        ctx.emit_output(
                            "\n[live output stopped here; the result keeps the beginning and end]\n"
                        )
            if not chunk:
                return

    async def _kill_tree(self, proc: SandboxedProcess | UnconfinedProcess, exited: asyncio.Task[int]) -> None:
        """SIGTERM the whole tree, give the shell a short grace, then SIGKILL it: children that ignore
        SIGTERM, outlive the shell or left the group, die too."""
        proc.kill_tree(signals.SIGTERM)
        try:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(exited), timeout=self.limits.command_kill_grace_s)
        finally:  # even when this wait is itself cancelled (shutdown), the tree gets SIGKILL
            proc.kill_tree(signals.SIGKILL)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(exited), timeout=self.limits.command_kill_grace_s)

    def _outcome(
        self,
        command: str,
        code: int | None,
        output: _Output,
        stopped: str | None,
        timeout: float,
        *,
        signal: str | None = None,
    ) -> ToolOutcome:
        text = output.render()
        if text and not text.endswith("\n"):
            text += "\n"
        meta: dict[str, Any] = {
            "exitCode": code,
            "truncated": output.truncated,
        }
        if stopped == "cancelled":
            return ToolOutcome.error(
                f"{text}[cancelled: the command and its processes were killed]", "CANCELLED", meta=meta
            )
        if stopped == "terminal":
            return ToolOutcome.error(
                f"{text}[stopped from the editor's terminal: the command and its processes were killed]",
                "CANCELLED",
                meta=meta,
            )
        if stopped == "timeout":
            return ToolOutcome.error(
                f"{text}[timed out after {timeout:g} s: the command and its processes were killed]",
                "TIMEOUT",
                meta=meta,
            )
        if code is None and signal:
            meta["signal"] = signal
            return ToolOutcome.text(f"{text or NO_OUTPUT}[ended by signal {signal}]", meta=meta)
        return ToolOutcome.text(f"{text or NO_OUTPUT}[exit code {code}]", meta=meta)


# What a command prints when the kernel refused it: conservative (a denial note on a command that
# failed for another reason only costs the model a line), matched on a failed command's output only.
_DENIED = re.compile(
    r"(permission denied|operation not permitted|read-only file system|EACCES|EPERM|EROFS"
    r"|network is unreachable|could not resolve host|temporary failure in name resolution"
    r"|name or service not known|connection refused)",
    re.IGNORECASE,
)
_PATH = re.compile(r"""['"`‘]?(/[^\s'"`’:]+)['"`’]?(?::|\s|$)""")
NOTE_PATHS = 5


def denial_note(text: str, mode: str, roots: tuple[Path, ...], domains: list[str]) -> str | None:
    """The note for a confined command that failed on the sandbox's walls, or None when its output
    shows no sign of it: which paths or domains (as far as the output names them), and that only
    the person can widen the sandbox."""
    lines = [line for line in text.splitlines() if _DENIED.search(line)]
    if not lines and not domains:
        return None
    paths = []
    for line in lines:
        for match in _PATH.finditer(line):
            path = match.group(1).rstrip(".,;)")
            if path not in paths:
                paths.append(path)
    what = []
    if paths:
        what.append("paths: " + ", ".join(paths[:NOTE_PATHS]))
    if domains:
        what.append("domains refused by the proxy: " + ", ".join(domains[:NOTE_PATHS]))
    named = f" ({'; '.join(what)})" if what else ""
    writable = (
        "only the workspace (" + ", ".join(str(r) for r in roots) + ") and the temp directory are writable"
    )
    if mode == "read-only":
        writable = "nothing is writable but the temp directory (plan mode or read-only)"
    return (
        f"[sandbox: this command ran confined in {mode} mode and was refused by it{named}: {writable}, "
        "and the network is reachable only for allowed domains through the proxy. This is not a bug to "
        "work around. Only the person can widen the sandbox: if the command really needs it, run it "
        "again with escalate {reason, writable: [paths] or network: [domains]} and the person will be "
        "asked; otherwise do it differently inside the workspace.]"
    )


UNSAVED_NAMED = 10  # documents named in the note; the rest are counted


def unsaved_note(shown: list[str]) -> str:
    """ "app.py has unsaved changes in the editor; the command saw the saved file"."""
    names = ", ".join(shown[:UNSAVED_NAMED])
    if len(shown) > UNSAVED_NAMED:
        names += f" and {len(shown) - UNSAVED_NAMED} more"
    if len(shown) == 1:
        return f"{names} has unsaved changes in the editor; the command saw the saved file"
    return f"{names} have unsaved changes in the editor; the command saw the saved files"
