"""`!cmd`: a shell command the person runs from the chat; its output goes with the next prompt.

It runs in its own process group (Esc or Ctrl-C stops it and whatever it started), with no stdin (the
chat owns the terminal), in the chat's directory."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable

OUTPUT_KEEP_CHARS = 100_000  # what goes with the prompt: the head and the tail of longer output
KILL_GRACE_S = 2.0


def cap(text: str, limit: int = OUTPUT_KEEP_CHARS) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    cut = len(text) - 2 * half
    return f"{text[:half]}\n[… {cut:,} characters elided here …]\n{text[-half:]}"


async def run_shell(command: str, cwd: str, on_output: Callable[[str], None]) -> tuple[str, int]:
    """Run `command` with the user's shell; stream its output (stdout and stderr merged) to
    `on_output`; return (all the output, exit status). Cancelled: the whole process group is killed."""
    proc = await asyncio.create_subprocess_shell(
        command,
        cwd=cwd,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
        executable=os.environ.get("SHELL") or None,
    )
    assert proc.stdout is not None
    chunks: list[str] = []
    try:
        while data := await proc.stdout.read(65536):
            text = data.decode(errors="replace")
            chunks.append(text)
            on_output(text)
        return "".join(chunks), await proc.wait()
    except asyncio.CancelledError:
        await _kill_group(proc)
        raise


async def _kill_group(proc: asyncio.subprocess.Process) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            await asyncio.wait_for(proc.wait(), KILL_GRACE_S)
            return
        except TimeoutError:
            continue
