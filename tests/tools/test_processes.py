"""Background processes at the tools' level (tools/processes.py, tools/process_tools.py), with real
processes: the model's cursor over the output (only what is new, the newest part past the cap), a
pattern found across chunks, input and end of file, a shell's leftovers killed with it, the bounded
output file, the exit recorded once, the typed errors, and the permission rules for input."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from dsh_daemon.agent.signal import AbortSignal
from dsh_daemon.agent.tools import Allow, Ask, ToolCall, ToolOutcome
from dsh_daemon.model.payloads import Payload, ProcessExited, ProcessStarted
from dsh_daemon.sandbox.level import probe_level
from dsh_daemon.tools.factory import ToolKit, build_tool_registry
from dsh_daemon.tools.policy import PermissionPolicy
from dsh_daemon.tools.processes import tail_text
from dsh_daemon.tools.workspace import Workspace
from tests.server.test_processes import new_marker, with_marker
from tests.tools.conftest import FakeContext

UNCONFINED = {"sandbox": "full-access"}


@dataclass
class Context(FakeContext):
    logged: list[Payload] = field(default_factory=list)

    def log_event(self, payload: Payload, *, ignorable: bool = False) -> None:
        assert ignorable
        self.logged.append(payload)


@pytest.fixture
async def tools(workspace: Workspace, tmp_path: Path) -> Any:
    made: list[ToolKit] = []
    exits: list[ProcessExited] = []

    def make(config: dict[str, Any] | None = None, **limits: Any) -> ToolKit:
        kit = build_tool_registry(workspace, config={**UNCONFINED, "limits": limits, **(config or {})})
        kit.processes.output_dir = tmp_path / "processes"
        kit.processes.on_exited = exits.append
        made.append(kit)
        return kit

    make.exits = exits  # type: ignore[attr-defined]
    yield make
    for kit in made:
        await kit.processes.aclose()
        await kit.sandbox.aclose()


async def run(kit: ToolKit, name: str, args: dict[str, Any], ctx: Context | None = None) -> ToolOutcome:
    tool = kit.registry.get(name)
    assert tool is not None
    return await tool.execute(args, ctx or Context())


def text(outcome: ToolOutcome) -> str:
    return "".join(getattr(block, "text", "") for block in outcome.content)


async def start(kit: ToolKit, command: str, ctx: Context | None = None) -> ToolOutcome:
    outcome = await run(kit, "run_command", {"command": command, "background": True}, ctx)
    assert not outcome.is_error, text(outcome)
    return outcome


async def test_start_records_the_process_and_returns_its_first_output(tools: Any) -> None:
    kit = tools()
    ctx = Context()
    outcome = await start(kit, "echo ready; exec sleep 300", ctx)
    (started,) = ctx.logged
    assert isinstance(started, ProcessStarted) and started.process_id == "p1" and started.pid > 0
    assert started.confined is False and started.call_id == "c1"
    assert text(outcome).startswith("Started p1 in the background") and "ready\n[p1 running]" in text(outcome)
    assert outcome.meta == {"processId": "p1", "running": True}
    # The first output was read: a read now has nothing new.
    assert "(no new output)\n[p1 running]" in text(await run(kit, "process_read", {"process_id": "p1"}))


async def test_the_first_output_is_what_it_wrote_before_a_pause_and_an_exit_is_said(tools: Any) -> None:
    kit = tools(process_first_output_s=30)  # a quiet pause ends the wait, not this limit
    first = text(await start(kit, "echo a; sleep 0.05; echo b; sleep 3; echo late; exec sleep 300"))
    assert first.split("\n", 1)[1].startswith("a\nb\n[p1 running]")  # not "late": that came 3 s after
    ended = text(await start(kit, "echo x; exit 2"))
    assert "x\n[p2 exited (exit code 2)]" in ended and "process_read" not in ended


async def test_a_read_gives_only_new_output_and_past_the_cap_its_newest_part(tools: Any) -> None:
    kit = tools(process_read_chars=100, process_first_output_s=0.05)
    await start(kit, "sleep 0.2; for i in $(seq 1000 1200); do echo line$i; done; exec sleep 300")
    read = await run(kit, "process_read", {"process_id": "p1", "wait_for": "line1200"})
    body = text(read)
    assert "earlier characters of its new output are not shown" in body
    assert "line1200\n[p1 running]" in body and "line1000" not in body
    assert read.meta is not None and read.meta["waited"] == "matched"
    again = text(await run(kit, "process_read", {"process_id": "p1"}))
    assert again == "(no new output)\n[p1 running]"


async def test_wait_for_finds_a_pattern_across_chunks_and_a_timeout_is_not_an_error(tools: Any) -> None:
    kit = tools(process_first_output_s=0.05)
    await start(kit, "sleep 0.3; printf 'abc'; sleep 0.3; printf 'def\\n'; exec sleep 300")
    found = await run(kit, "process_read", {"process_id": "p1", "wait_for": "^abcdef$"})
    assert "abcdef" in text(found) and found.meta is not None and found.meta["waited"] == "matched"
    waited = await run(kit, "process_read", {"process_id": "p1", "wait_for": "nope", "timeout": 0.3})
    assert not waited.is_error
    assert text(waited).endswith("[waited 0.3 s: the pattern 'nope' did not appear]")


async def test_a_cancelled_wait_ends_and_the_process_keeps_running(tools: Any) -> None:
    kit = tools()
    await start(kit, "exec sleep 300")
    ctx = Context()
    waiting = asyncio.ensure_future(run(kit, "process_read", {"process_id": "p1", "wait_for": "x"}, ctx))
    await asyncio.sleep(0.2)
    ctx.signal.abort("user")
    outcome = await asyncio.wait_for(waiting, 10)
    assert outcome.error_code == "CANCELLED" and "the process keeps running" in text(outcome)
    assert kit.processes.get("p1").running


async def test_input_reaches_the_process_and_close_ends_its_input(tools: Any) -> None:
    kit = tools(process_first_output_s=0.05)
    await start(kit, "cat; echo cat ended")
    wrote = await run(kit, "process_write", {"process_id": "p1", "text": "hello\n", "close": True})
    assert text(wrote) == "Wrote 6 characters to p1 and closed its input."
    read = await run(kit, "process_read", {"process_id": "p1", "timeout": 20})
    assert text(read) == "hello\ncat ended\n[p1 exited (exit code 0)]"
    refused = await run(kit, "process_write", {"process_id": "p1", "text": "more"})
    assert refused.error_code == "NOT_RUNNING"
    assert tools.exits == [ProcessExited("p1", 0, None, None)]  # recorded once, by itself


async def test_what_the_shell_leaves_running_dies_with_it(tools: Any) -> None:
    kit = tools(process_first_output_s=0.05)
    marker = new_marker()
    await start(kit, f"sh -c 'sleep {marker}; true' & echo left; exit 3")
    read = await run(kit, "process_read", {"process_id": "p1", "timeout": 20})
    assert text(read).endswith("[p1 exited (exit code 3)]")
    for _ in range(200):
        if not with_marker(marker):
            break
        await asyncio.sleep(0.05)
    assert not with_marker(marker)


async def test_stop_kills_the_whole_tree_and_says_who(tools: Any) -> None:
    kit = tools()
    marker = new_marker()
    await start(kit, f"sh -c 'trap \"\" TERM; sleep {marker}; true' & wait")
    stopped = await run(kit, "process_stop", {"process_id": "p1"})
    assert "stopped by agent" in text(stopped)
    for _ in range(200):
        if not with_marker(marker):
            break
        await asyncio.sleep(0.05)
    assert not with_marker(marker)  # the child ignoring SIGTERM got SIGKILL
    assert [e.stopped_by for e in tools.exits] == ["agent"]


async def test_the_output_file_is_a_bounded_ring(tools: Any, tmp_path: Path) -> None:
    kit = tools(process_log_bytes=1000, process_first_output_s=0.05)
    await start(kit, "for i in $(seq 1 3000); do echo line$i; done")
    await run(kit, "process_read", {"process_id": "p1", "timeout": 20})
    path = tmp_path / "processes" / "p1.log"
    assert 1000 <= path.stat().st_size < 2000
    tail, truncated = tail_text(path, 200)
    assert tail.endswith("line2999\nline3000\n") and truncated
    whole, truncated = tail_text(path, 100_000)  # the whole file: older output was still cut away
    assert whole.endswith("line3000\n") and "line1\n" not in whole and truncated


async def test_typed_errors(tools: Any) -> None:
    kit = tools(process_max_running=1)
    unknown = await run(kit, "process_read", {"process_id": "p7"})
    assert unknown.error_code == "NOT_FOUND" and "it has none now" in text(unknown)
    await start(kit, "exec sleep 300")
    bad = await run(kit, "process_read", {"process_id": "p1", "wait_for": "("})
    assert bad.error_code == "INVALID_ARGUMENTS" and "regular expression" in text(bad)
    unknown = await run(kit, "process_stop", {"process_id": "p7"})
    assert unknown.error_code == "NOT_FOUND" and "p1 (running)" in text(unknown)
    over = await run(kit, "run_command", {"command": "sleep 1", "background": True})
    assert over.error_code == "TOO_MANY_PROCESSES" and "p1" in text(over)


async def test_plan_mode_runs_nothing_in_the_background(tools: Any) -> None:
    kit = tools()
    policy = next(h for h in kit.hooks.pre_execute if isinstance(h, PermissionPolicy))
    policy.session_mode = "plan"
    refused = await run(kit, "run_command", {"command": "sleep 1", "background": True})
    assert refused.error_code == "SANDBOX_DENIED" and kit.processes.all() == []
    offered = {spec.name for spec in kit.registry.specs()}
    assert not offered & {"process_read", "process_write", "process_stop"}


@pytest.mark.skipif(not probe_level().confined, reason="no confinement here")
async def test_input_to_an_unconfined_process_is_asked_to_a_confined_one_allowed(tools: Any) -> None:
    confined = tools({"sandbox": "workspace-write"})
    unconfined = tools()
    for kit in (confined, unconfined):
        await start(kit, "exec cat")
    call = ToolCall("c9", "process_write", "{}", {"process_id": "p1", "text": "rm -rf ~\n"}, 1, 1)

    async def decide(kit: ToolKit) -> Any:
        policy = next(h for h in kit.hooks.pre_execute if isinstance(h, PermissionPolicy))
        return await policy(call, AbortSignal())

    assert isinstance(await decide(confined), Allow)
    asked = await decide(unconfined)
    assert isinstance(asked, Ask) and asked.title == "Write to process p1 (exec cat): rm -rf ~"
    assert isinstance(await decide(unconfined), Ask)  # each text is asked (the scope is the exact text)
