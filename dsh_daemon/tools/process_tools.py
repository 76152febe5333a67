"""The tools over a session's background processes (`run_command` with `background: true` starts
them; tools/processes.py owns them): `process_read` (the output the model has not read yet, after
waiting for a pattern or the exit if asked), `process_write` (its stdin), `process_stop`."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from dsh_daemon.agent.tools import ToolContext, ToolOutcome
from dsh_daemon.tools.base import ToolBase, get_bool, get_str, make_spec, short
from dsh_daemon.tools.errors import InvalidArgumentsError, ToolError
from dsh_daemon.tools.limits import ToolLimits
from dsh_daemon.tools.processes import BackgroundProcess, BackgroundProcesses, ProcessNotFound

PROCESS_ID = {"process_id": {"type": "string", "description": "The id run_command gave it (p1, p2, …)."}}


class ProcessNotFoundError(ToolError):
    code = "NOT_FOUND"


def _process(processes: BackgroundProcesses, args: Mapping[str, Any]) -> BackgroundProcess:
    process_id = get_str(args, "process_id", allow_empty=False)
    try:
        return processes.get(process_id)
    except ProcessNotFound as exc:
        raise ProcessNotFoundError(str(exc)) from None


def output_section(process: BackgroundProcess, text: str, skipped: int) -> str:
    """The output as the model gets it: what it had not read, a note for what was left out, and
    the process's state."""
    parts = []
    if skipped:
        parts.append(
            f"[{skipped:,} earlier characters of its new output are not shown: only the newest are]\n"
        )
    if text:
        parts.append(text if text.endswith("\n") else text + "\n")
    else:
        parts.append("(no new output)\n")
    parts.append(f"[{process.process_id} {process.status_text()}]")
    return "".join(parts)


def process_meta(process: BackgroundProcess) -> dict[str, Any]:
    meta: dict[str, Any] = {"processId": process.process_id, "running": process.running}
    if not process.running:
        meta["exitCode"] = process.exit_code
        if process.signal is not None:
            meta["signal"] = process.signal
    return meta


class ProcessReadTool(ToolBase):
    spec = make_spec(
        "process_read",
        "Read a background process's output that you have not read yet (the newest part when there is "
        "a lot), and whether it still runs. With wait_for (a regular expression) or timeout, first wait "
        "until the new output matches, the process exits, or the timeout passes.",
        {
            **PROCESS_ID,
            "wait_for": {
                "type": "string",
                "description": "Optional: wait until the new output matches this regular expression.",
            },
            "timeout": {
                "type": "number",
                "description": "Seconds to wait at most (default 30 with wait_for; without it, waits "
                "this long for the exit).",
            },
        },
        ["process_id"],
    )

    def __init__(self, processes: BackgroundProcesses, limits: ToolLimits) -> None:
        self.processes = processes
        self.limits = limits

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        process = _process(self.processes, args)
        raw_pattern = args.get("wait_for")
        pattern = None
        if raw_pattern is not None:
            if not isinstance(raw_pattern, str) or not raw_pattern:
                raise InvalidArgumentsError("'wait_for' must be a non-empty regular expression")
            try:
                pattern = re.compile(raw_pattern, re.MULTILINE)
            except re.error as exc:
                raise InvalidArgumentsError(f"'wait_for' is not a valid regular expression: {exc}") from None
        timeout = self._timeout(args, waiting=pattern is not None)
        outcome = ""
        if timeout is not None:
            outcome = await process.wait_for(pattern, timeout, ctx.signal.wait())
        text, skipped = process.take_unread(self.limits.process_read_chars)
        body = output_section(process, text, skipped)
        meta = process_meta(process)
        if outcome == "timeout":
            what = f"the pattern {raw_pattern!r} did not appear" if pattern is not None else "it did not exit"
            meta["waited"] = "timeout"
            return ToolOutcome.text(f"{body}\n[waited {timeout:g} s: {what}]", meta=meta)
        if outcome == "aborted":
            return ToolOutcome.error(
                f"{body}\n[cancelled while waiting; the process keeps running]", "CANCELLED"
            )
        if outcome:
            meta["waited"] = outcome
        if outcome == "exited" and pattern is not None:
            body += f"\n[it exited before {raw_pattern!r} appeared]"
        return ToolOutcome.text(body, meta=meta)

    def _timeout(self, args: Mapping[str, Any], *, waiting: bool) -> float | None:
        value = args.get("timeout")
        if value is None:
            return 30.0 if waiting else None
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise InvalidArgumentsError("'timeout' must be a number of seconds, 0 or more")
        return min(float(value), self.limits.command_max_timeout_s)


class ProcessWriteTool(ToolBase):
    spec = make_spec(
        "process_write",
        "Write text to a background process's standard input (add \\n to end a line); close: true "
        "closes its input afterwards (end of file). Then read its answer with process_read.",
        {
            **PROCESS_ID,
            "text": {"type": "string", "description": "What to write, exactly."},
            "close": {"type": "boolean", "description": "Close its input after writing (default false)."},
        },
        ["process_id", "text"],
    )
    parallel_safe = False

    def __init__(self, processes: BackgroundProcesses) -> None:
        self.processes = processes

    def confined(self, args: Mapping[str, Any]) -> bool:
        """Whether the process the call writes to runs confined (a write to an unconfined one is asked
        as its command was: what it reads may be commands)."""
        process = self.processes._processes.get(str(args.get("process_id")))
        return process is not None and process.confined

    def permission_title(self, args: Mapping[str, Any]) -> str:
        process = self.processes._processes.get(str(args.get("process_id")))
        what = f"{args.get('process_id')}" + (f" ({short(process.command, 80)})" if process else "")
        return f"Write to process {what}: {short(str(args.get('text', '')), 120)}"

    def permission_scope(self, args: Mapping[str, Any]) -> str | None:
        return f"{self.spec.name}:{args.get('process_id')}:{args.get('text')}"

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        process = _process(self.processes, args)
        text = get_str(args, "text")
        close = get_bool(args, "close")
        if not process.running:
            return ToolOutcome.error(
                f"Error: {process.process_id} is not running ({process.status_text()})", "NOT_RUNNING"
            )
        try:
            process.write(text.encode(), close=close)
        except BrokenPipeError:
            return ToolOutcome.error(f"Error: {process.process_id}'s input is closed", "NOT_RUNNING")
        except BlockingIOError:
            return ToolOutcome.error(
                f"Error: {process.process_id} has not read the input written before (1 MiB waiting)",
                "BUSY",
            )
        closed = " and closed its input" if close else ""
        return ToolOutcome.text(
            f"Wrote {len(text)} characters to {process.process_id}{closed}.", meta=process_meta(process)
        )


class ProcessStopTool(ToolBase):
    spec = make_spec(
        "process_stop",
        "Stop a background process and everything it started (SIGTERM, then SIGKILL after 2 s); "
        "returns its unread output and exit status.",
        dict(PROCESS_ID),
        ["process_id"],
    )
    parallel_safe = False

    def __init__(self, processes: BackgroundProcesses, limits: ToolLimits) -> None:
        self.processes = processes
        self.limits = limits

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        process = _process(self.processes, args)
        await self.processes.stop(process.process_id, "agent")
        text, skipped = process.take_unread(self.limits.process_read_chars)
        return ToolOutcome.text(output_section(process, text, skipped), meta=process_meta(process))


PROCESS_TOOLS = ("process_read", "process_write", "process_stop")
