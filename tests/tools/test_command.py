"""run_command: output, exit codes, streaming of only new text, caps, and killing the whole process
group (grandchildren included) on timeout, cancel and task cancellation — the same in full-access
(unconfined) and workspace-write (confined, where this machine can confine: the sandbox's spawn)."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
from pathlib import Path

import pytest

from dsh_daemon.tools import sandboxing
from dsh_daemon.tools.factory import ToolKit, build_tool_registry
from dsh_daemon.tools.sandboxing import LAYERS_VARIABLE, probe_level
from dsh_daemon.tools.workspace import Workspace
from tests.tools.conftest import FakeContext, alive, gone, pid_in, run_tool, text_of


def _mode(param: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """`layer0`: workspace-write with Landlock + seccomp alone (the test-only knob)."""
    if param == "full-access":
        return param
    if not probe_level().confined:
        pytest.skip(f"no confinement on this machine: {probe_level().describe()}")
    if param == "layer0":
        monkeypatch.setenv(LAYERS_VARIABLE, "landlock-only")
    return "workspace-write"


@pytest.fixture(params=["full-access", "layer0", "workspace-write"])
def sandbox_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    return _mode(request.param, monkeypatch)


@pytest.fixture(params=["full-access", "layer0"])
def pid_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Where a command's `$!` is a pid the test can look up: not in layer 1's PID namespace
    (`test_layer1_kills_the_whole_tree` covers that one by the processes' command lines)."""
    return _mode(request.param, monkeypatch)


@pytest.fixture
def kit(root: Path, sandbox_mode: str) -> ToolKit:
    return build_tool_registry(Workspace([root]), config={"sandbox": sandbox_mode})


def fast_kit(root: Path, mode: str = "full-access", **limits: float) -> ToolKit:
    base = {"command_kill_grace_s": 0.5, "command_drain_grace_s": 0.2}
    return build_tool_registry(Workspace([root]), config={"limits": {**base, **limits}, "sandbox": mode})


async def test_output_exit_code_and_cwd(root: Path, sandbox_mode: str) -> None:
    (root / "sub").mkdir()
    kit = build_tool_registry(Workspace([root], cwd=root / "sub"), config={"sandbox": sandbox_mode})
    outcome = await run_tool(kit, "run_command", {"command": "pwd; echo err >&2; echo héllo 🌍"})
    assert not outcome.is_error
    assert text_of(outcome) == f"{root / 'sub'}\nerr\nhéllo 🌍\n[exit code 0]"
    assert outcome.meta == {"exitCode": 0, "truncated": False}
    failed = await run_tool(kit, "run_command", {"command": "exit 3"})
    assert text_of(failed) == "(no output)\n[exit code 3]"
    assert failed.meta is not None and failed.meta["exitCode"] == 3


async def test_argument_errors(kit: ToolKit) -> None:
    for args in (
        {},
        {"command": ""},
        {"command": "true", "timeout": -1},
        {"command": "true", "timeout": "x"},
    ):
        assert (await run_tool(kit, "run_command", args)).error_code == "INVALID_ARGUMENTS", args


async def test_streamed_output_carries_only_new_text(kit: ToolKit, root: Path) -> None:
    # The command waits for the test to have seen the first chunk, so there are exactly two chunks.
    def release(text: str) -> None:
        (root / "go").touch()

    ctx = FakeContext(on_output=release)
    command = "printf 'one\\n'; while [ ! -f go ]; do sleep 0.01; done; printf 'two\\n'"
    outcome = await run_tool(kit, "run_command", {"command": command}, ctx)
    assert ctx.outputs == ["one\n", "two\n"]
    assert text_of(outcome) == "one\ntwo\n[exit code 0]"


async def test_multibyte_characters_split_across_reads_stay_whole(kit: ToolKit) -> None:
    ctx = FakeContext()
    # The first byte of '🌍' arrives in one write, the rest in the next.
    command = "printf '\\360'; sleep 0.05; printf '\\237\\214\\215\\n'"
    outcome = await run_tool(kit, "run_command", {"command": command}, ctx)
    assert "".join(ctx.outputs) == "🌍\n"
    assert "\ufffd" not in "".join(ctx.outputs)
    assert text_of(outcome).startswith("🌍\n")


async def test_output_cap_keeps_head_and_tail(root: Path, sandbox_mode: str) -> None:
    kit = fast_kit(root, sandbox_mode, command_output_chars=100, command_stream_chars=50)
    ctx = FakeContext()
    outcome = await run_tool(kit, "run_command", {"command": "seq 1 1000"}, ctx)
    text = text_of(outcome)
    assert text.startswith("1\n2\n3\n") and text.endswith("999\n1000\n[exit code 0]")
    found = re.search(
        r"\n\[… ([\d,]+) characters \(([\d,]+) lines\) elided here; re-run with a narrower", text
    )
    assert found, text
    full = "".join(f"{i}\n" for i in range(1, 1001))
    head, tail = text[: found.start() + 1], text[text.index("…]\n") + 3 : text.index("[exit code")]
    assert full.startswith(head) and full.endswith(tail) and len(head) + len(tail) <= 100
    chars, lines = (int(g.replace(",", "")) for g in found.groups())
    assert chars == len(full) - len(head) - len(tail)
    assert lines == 1000 - head.count("\n") - tail.count("\n")
    assert outcome.meta is not None and outcome.meta["truncated"] is True
    # Live output stops at its own cap, with one notice.
    assert "".join(ctx.outputs[:-1]) == full[:50]
    assert "live output stopped" in ctx.outputs[-1]


async def test_timeout_kills_the_whole_group(root: Path, pid_mode: str) -> None:
    kit = fast_kit(root, pid_mode)
    outcome = await run_tool(
        kit, "run_command", {"command": "sh -c 'sleep 30 & echo PID=$!; wait'", "timeout": 0.5}
    )
    assert outcome.is_error and outcome.error_code == "TIMEOUT"
    assert "timed out after 0.5 s" in text_of(outcome)
    assert await gone(pid_in(text_of(outcome)))


async def test_grandchildren_ignoring_sigterm_are_killed_too(root: Path, pid_mode: str) -> None:
    kit = fast_kit(root, pid_mode)
    command = "trap '' TERM; sh -c 'trap \"\" TERM; sleep 30 & echo PID=$!; wait'"
    outcome = await run_tool(kit, "run_command", {"command": command, "timeout": 0.5})
    assert outcome.error_code == "TIMEOUT"
    assert await gone(pid_in(text_of(outcome)))


async def test_cancel_kills_the_whole_group(root: Path, pid_mode: str) -> None:
    kit = fast_kit(root, pid_mode)
    started = asyncio.Event()
    ctx = FakeContext(on_output=lambda text: started.set())
    task = asyncio.create_task(
        run_tool(kit, "run_command", {"command": "sh -c 'sleep 30 & echo PID=$!; wait'"}, ctx)
    )
    await asyncio.wait_for(started.wait(), 10)
    pid = pid_in("".join(ctx.outputs))
    assert alive(pid)
    ctx.signal.abort("user")
    outcome = await asyncio.wait_for(task, 10)
    assert outcome.is_error and outcome.error_code == "CANCELLED"
    assert await gone(pid)


async def test_an_aborted_signal_starts_nothing(kit: ToolKit, root: Path) -> None:
    ctx = FakeContext()
    ctx.signal.abort("user")
    from dsh_daemon.agent.signal import AbortedError

    with pytest.raises(AbortedError):
        await run_tool(kit, "run_command", {"command": "touch made"}, ctx)
    assert not (root / "made").exists()


async def test_task_cancellation_kills_the_group(root: Path, pid_mode: str) -> None:
    kit = fast_kit(root, pid_mode)
    started = asyncio.Event()
    ctx = FakeContext(on_output=lambda text: started.set())
    task = asyncio.create_task(
        run_tool(kit, "run_command", {"command": "sh -c 'sleep 30 & echo PID=$!; wait'"}, ctx)
    )
    await asyncio.wait_for(started.wait(), 10)
    pid = pid_in("".join(ctx.outputs))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await gone(pid)


async def test_leftovers_holding_the_output_are_killed_after_exit(root: Path, pid_mode: str) -> None:
    kit = fast_kit(root, pid_mode)
    outcome = await run_tool(kit, "run_command", {"command": "sleep 30 & echo PID=$!"})
    assert not outcome.is_error and outcome.meta is not None and outcome.meta["exitCode"] == 0
    assert await gone(pid_in(text_of(outcome)))


async def test_detached_output_lets_a_background_process_live(root: Path, pid_mode: str) -> None:
    kit = fast_kit(root, pid_mode)
    outcome = await run_tool(kit, "run_command", {"command": "sleep 30 >/dev/null 2>&1 & echo PID=$!"})
    pid = pid_in(text_of(outcome))
    try:
        assert alive(pid)  # the documented way to keep a server running
    finally:
        os.kill(pid, 9)


@pytest.mark.skipif(shutil.which("setsid") is None, reason="needs setsid")
async def test_a_process_that_left_the_group_cannot_hold_the_call(root: Path, pid_mode: str) -> None:
    kit = fast_kit(root, pid_mode)
    call = run_tool(kit, "run_command", {"command": "setsid sleep 1000 & echo PID=$!"})
    outcome = await asyncio.wait_for(call, 60)  # would hang for 1000 s if the pipe were waited for
    pid = pid_in(text_of(outcome))
    assert outcome.meta is not None and outcome.meta["exitCode"] == 0
    assert await gone(pid)  # it held the output after the command exited: killed like any leftover


async def test_layer1_kills_the_whole_tree(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In layer 1 a command's pids are its PID namespace's: its processes are found by a marker in
    their command line instead, after a timeout and after a cancel."""
    if not probe_level().namespaces:
        pytest.skip(f"no namespaces here: {probe_level().describe()}")
    kit = fast_kit(root, "workspace-write")
    marker = f"{os.getpid()}{id(kit)}"
    # Three processes (one setsid, one double-forked orphan, the shell's own) whose argv holds the marker.
    command = f"setsid sleep 30{marker} & (sleep 31{marker} &); sleep 0.2; echo up; sleep 32{marker}"
    seen: list[int] = []
    ctx = FakeContext(on_output=lambda text: seen.extend(_running_with(marker)))
    outcome = await run_tool(kit, "run_command", {"command": command, "timeout": 1}, ctx)
    assert len(seen) >= 2  # they ran (seen from outside the namespace) …
    assert outcome.error_code == "TIMEOUT"
    for _ in range(100):
        if not _running_with(marker):
            break
        await asyncio.sleep(0.05)
    assert not _running_with(marker)  # … and are gone
    await kit.sandbox.aclose()


def _running_with(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as handle:
                    if marker.encode() in handle.read():
                        found.append(int(entry))
            except OSError:
                continue
    return found


async def test_off_linux_only_full_access_runs_and_confined_modes_refuse(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the fork server cannot run (not Linux), the stand-in runs full-access; a confined mode
    refuses and says why, never running the command unconfined."""
    monkeypatch.setattr(sandboxing, "ON_LINUX", False)
    kit = build_tool_registry(Workspace([root]), config={"sandbox": "full-access"})
    assert text_of(await run_tool(kit, "run_command", {"command": "echo hi"})) == "hi\n[exit code 0]"
    confined = build_tool_registry(Workspace([root]))
    refused = await run_tool(confined, "run_command", {"command": "touch made"})
    assert refused.error_code == "SANDBOX_UNAVAILABLE" and "full-access" in text_of(refused)
    assert not (root / "made").exists()
    status = confined.sandbox.status()
    assert status["available"] is False and status["level"].startswith("unconfined")


async def test_many_commands_hold_no_descriptor_each(root: Path, sandbox_mode: str) -> None:
    """A finished command's handle is let go once its tree is gone (the sandbox closes a kept
    command's socket then): a long session must not run out of file descriptors."""
    kit = build_tool_registry(Workspace([root]), config={"sandbox": sandbox_mode})
    await run_tool(kit, "run_command", {"command": "true"})  # the sandbox started
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(30):
        assert (await run_tool(kit, "run_command", {"command": "true"})).error_code is None
    for _ in range(100):
        if len(os.listdir("/proc/self/fd")) <= before + 2:
            break
        await asyncio.sleep(0.02)
    assert len(os.listdir("/proc/self/fd")) <= before + 2
    await kit.sandbox.aclose()
