"""run_command: a shell command in the session cwd, streamed live, capped, and stopped for good.

The command runs in its own session/process group (`start_new_session=True`), and its whole process
tree is tracked (`proctree`: children that `setsid`/`nohup`/double-fork themselves out of the group
included), so a timeout, a cancelled turn or the daemon's shutdown kills every process it started,
not just the shell.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import dataclasses
import logging
import os
import shutil
import signal as signals
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dsh_daemon.agent.budget import GENERIC_HINT, SNAP, marker
from dsh_daemon.agent.tools import ToolContext, ToolOutcome
from dsh_daemon.model.jsonvalue import FrozenDict
from dsh_daemon.model.messages import TextBlock
from dsh_daemon.tools import proctree
from dsh_daemon.tools.base import ToolBase, get_str, make_spec, short
from dsh_daemon.tools.checkpoints import Checkpointer
from dsh_daemon.tools.editor import EditorServices, NoEditor
from dsh_daemon.tools.environment import DaemonSecrets, blanked_secret_names, scrubbed_environment
from dsh_daemon.tools.errors import InvalidArgumentsError
from dsh_daemon.tools.limits import ToolLimits
from dsh_daemon.tools.terminal import TerminalExit, TerminalOutput, Terminals, TerminalUnavailable
from dsh_daemon.tools.workspace import Workspace

logger = logging.getLogger(__name__)

_READ_CHUNK = 64 * 1024
# Non-interactive defaults: a pager or a prompt would hang until the timeout.
_ENV_DEFAULTS = {"PAGER": "cat", "GIT_PAGER": "cat", "GIT_TERMINAL_PROMPT": "0"}
NO_OUTPUT = "(no output)\n"


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


async def _until_exit(proc: asyncio.subprocess.Process, tree: proctree.ProcessTree | None = None) -> int:
    """The shell's exit status as soon as it is known. Not `proc.wait()`: on Python 3.11 that also
    waits for the output pipe to close, which a background grandchild can hold open indefinitely.
    With `tree`, the command's processes are scanned meanwhile (~every 0.2 s), so one that detaches
    and loses its parent is still known as the command's."""
    delay = 0.005
    waited = 0.0
    while proc.returncode is None:
        await asyncio.sleep(delay)
        waited += delay
        delay = min(delay * 2, 0.05)
        if tree is not None and waited >= 0.2:
            waited = 0.0
            tree.scan()
    if tree is not None:
        tree.scan()
    return proc.returncode


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
        "the output when it exits are killed too. Long output keeps its beginning and end.",
        {
            "command": {"type": "string", "description": "The shell command line."},
            "timeout": {"type": "number", "description": "Seconds before it is killed (default 120)."},
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
    ) -> None:
        self.workspace = workspace
        self.limits = limits
        self.secrets = secrets or DaemonSecrets()  # kept out of the command's environment
        self.shell = shell or shutil.which("bash") or "/bin/sh"
        self.checkpoints = checkpoints
        self.editor = editor or NoEditor()

    def permission_title(self, args: Mapping[str, Any]) -> str:
        return f"Run: {short(str(args.get('command', '?')))}"

    def permission_scope(self, args: Mapping[str, Any]) -> str | None:
        return f"{self.spec.name}:{args.get('command')}"

    async def permission_preview(self, args: Mapping[str, Any]) -> Mapping[str, Any] | None:
        command = args.get("command")
        if not isinstance(command, str):
            return None
        return {"command": command, "cwd": str(self.workspace.cwd)}

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
        ctx.signal.check()
        if self.checkpoints is None:
            return await self._run(command, ctx, limit_s=timeout)
        # The work tree before and after the command, so a rewind can restore what it changed.
        async with self.checkpoints.command(ctx.call):
            return await self._run(command, ctx, limit_s=timeout)

    async def _run(self, command: str, ctx: ToolContext, *, limit_s: float) -> ToolOutcome:
        unsaved = await self._unsaved(ctx)
        terminals = self.editor.terminals
        if terminals is not None:
            try:
                outcome = await self._run_in_terminal(terminals, command, ctx, limit_s)
            except TerminalUnavailable as exc:
                logger.warning("the editor's terminal could not run the command (%s): run here", exc)
            else:
                return self._with_unsaved(outcome, unsaved)
        return self._with_unsaved(await self._run_here(command, ctx, limit_s=limit_s), unsaved)

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
        output = _Output(output_limit, self.truncation_hint)
        if kept.truncated:
            output.add(
                f"[the editor's terminal kept only the end of the output: its last {output_limit:,} bytes]\n"
            )
        output.add(kept.text)
        code = ended.exit_code if ended is not None else None
        outcome = self._outcome(
            command, code, output, stopped, limit_s, signal=ended.signal if ended else None
        )
        meta = dict(outcome.meta or {})
        meta["terminalId"] = terminal.terminal_id
        return dataclasses.replace(outcome, meta=FrozenDict(meta))

    async def _run_here(self, command: str, ctx: ToolContext, *, limit_s: float) -> ToolOutcome:
        timeout = limit_s
        proctree.become_subreaper()
        proctree.forget_finished()
        tree = proctree.ProcessTree(0)
        proc = await asyncio.create_subprocess_exec(
            self.shell,
            "-c",
            command,
            cwd=self.workspace.cwd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
            env={**scrubbed_environment(os.environ, self.secrets), **_ENV_DEFAULTS, **tree.env},
        )
        tree.started(proc.pid)
        proctree.register(tree)
        output = _Output(self.limits.command_output_chars, self.truncation_hint)
        pump = asyncio.create_task(self._pump(proc, output, ctx))
        exited = asyncio.create_task(_until_exit(proc, tree))
        aborted = asyncio.create_task(ctx.signal.wait())
        stopped: str | None = None
        try:
            done, _ = await asyncio.wait(
                {exited, aborted}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
            if exited not in done:
                stopped = "cancelled" if aborted in done else "timeout"
                await self._kill_tree(proc, tree)
            else:
                # The shell is gone; whatever still holds the pipe after a grace is a leftover.
                _, still = await asyncio.wait({pump}, timeout=self.limits.command_drain_grace_s)
                if still:
                    await self._kill_tree(proc, tree)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(pump), timeout=self.limits.command_kill_grace_s)
        finally:
            # Also on task cancellation (daemon shutdown): nothing the command started survives it.
            if proc.returncode is None or not pump.done():
                await self._kill_tree(proc, tree)
            leftover = not pump.done()
            for task in (pump, exited, aborted):
                task.cancel()
            await asyncio.gather(pump, exited, aborted, return_exceptions=True)
            if leftover:
                # Something the tree walk could not reach still holds the pipe: stop reading.
                transport = getattr(proc, "_transport", None)
                if transport is not None:
                    transport.close()
        return self._outcome(command, proc.returncode, output, stopped, timeout)

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

    async def _pump(self, proc: asyncio.subprocess.Process, output: _Output, ctx: ToolContext) -> None:
        assert proc.stdout is not None
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        streamed = 0
        while True:
            chunk = await proc.stdout.read(_READ_CHUNK)
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

    async def _kill_tree(self, proc: asyncio.subprocess.Process, tree: proctree.ProcessTree) -> None:
        """SIGTERM the group and the whole tree, give the shell a short grace, then SIGKILL them: children
        that ignore SIGTERM, outlive the shell or left the group, die too."""
        tree.signal(signals.SIGTERM)
        try:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(_until_exit(proc), timeout=self.limits.command_kill_grace_s)
        finally:  # even when this wait is itself cancelled (shutdown), the tree gets SIGKILL
            tree.signal(signals.SIGKILL)
        await _until_exit(proc)
        for _ in range(20):  # collect the adopted orphans just killed (bounded: they die at once)
            tree.reap()
            if not tree.alive():
                break
            await asyncio.sleep(0.01)

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


UNSAVED_NAMED = 10  # documents named in the note; the rest are counted


def unsaved_note(shown: list[str]) -> str:
    """ "app.py has unsaved changes in the editor; the command saw the saved file"."""
    names = ", ".join(shown[:UNSAVED_NAMED])
    if len(shown) > UNSAVED_NAMED:
        names += f" and {len(shown) - UNSAVED_NAMED} more"
    if len(shown) == 1:
        return f"{names} has unsaved changes in the editor; the command saw the saved file"
    return f"{names} have unsaved changes in the editor; the command saw the saved files"
