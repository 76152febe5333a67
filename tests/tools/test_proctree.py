"""run_command kills the whole process tree a command started, children that `setsid` or `nohup`
themselves out of its process group included (issue 8, item 7)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from dsh_daemon.tools import proctree
from tests.tools.conftest import FakeContext, alive, gone, pid_in, run_tool, text_of
from tests.tools.test_command import fast_kit

pytestmark = pytest.mark.skipif(
    shutil.which("setsid") is None or not Path("/proc/self/stat").exists(), reason="needs setsid and /proc"
)


async def test_a_setsid_child_dies_with_the_commands_timeout(root: Path) -> None:
    kit = fast_kit(root)
    command = "setsid sleep 300 & echo PID=$!; sleep 300"
    outcome = await asyncio.wait_for(run_tool(kit, "run_command", {"command": command, "timeout": 0.5}), 30)
    assert outcome.error_code == "TIMEOUT"
    assert await gone(pid_in(text_of(outcome)))


async def test_a_setsid_nohup_child_with_detached_output_dies_on_cancel(root: Path) -> None:
    kit = fast_kit(root)
    started = asyncio.Event()
    ctx = FakeContext(on_output=lambda text: started.set())
    command = "setsid nohup sleep 300 >/dev/null 2>&1 & echo PID=$!; sleep 300"
    task = asyncio.create_task(run_tool(kit, "run_command", {"command": command}, ctx))
    await asyncio.wait_for(started.wait(), 10)
    pid = pid_in("".join(ctx.outputs))
    assert alive(pid)
    ctx.signal.abort("user")
    outcome = await asyncio.wait_for(task, 10)
    assert outcome.error_code == "CANCELLED"
    assert await gone(pid)


async def test_an_orphan_whose_parent_exited_at_once_is_still_found(root: Path) -> None:
    """A double fork: the intermediate shell is gone before any scan could see the child."""
    kit = fast_kit(root)
    command = "(setsid sh -c 'echo $$ > pidfile; exec sleep 300' </dev/null >/dev/null 2>&1 &); sleep 300"
    task = asyncio.create_task(run_tool(kit, "run_command", {"command": command, "timeout": 1}))
    outcome = await asyncio.wait_for(task, 30)
    assert outcome.error_code == "TIMEOUT"
    assert await gone(int((root / "pidfile").read_text()))


async def test_a_detached_background_process_dies_when_the_daemon_shuts_down(root: Path) -> None:
    kit = fast_kit(root)
    outcome = await run_tool(
        kit, "run_command", {"command": "setsid sleep 300 >/dev/null 2>&1 & echo PID=$!"}
    )
    pid = pid_in(text_of(outcome))
    assert not outcome.is_error and alive(pid)  # it may outlive its command …
    await kit.sandbox.aclose()  # (the session's close, as the daemon's shutdown closes every session)
    proctree.kill_all()
    assert await gone(pid)  # … not the session


async def test_task_cancellation_kills_a_child_that_left_the_group(root: Path) -> None:
    kit = fast_kit(root)
    started = asyncio.Event()
    ctx = FakeContext(on_output=lambda text: started.set())
    command = "setsid sleep 300 >/dev/null 2>&1 & echo PID=$!; wait"
    task = asyncio.create_task(run_tool(kit, "run_command", {"command": command}, ctx))
    await asyncio.wait_for(started.wait(), 10)
    pid = pid_in("".join(ctx.outputs))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await gone(pid)
