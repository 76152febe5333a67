"""Tool batches: every call gets a result whatever a hook or a tool does. Each test failed before
its fix."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dsh_daemon.agent.derive import derive_messages
from dsh_daemon.agent.hooks import Hooks
from dsh_daemon.agent.tools import PostExecuteDecision, ToolCall, ToolContext, ToolOutcome
from dsh_daemon.llm.scripted import reply
from dsh_daemon.model import events as ev
from tests.core.harness import FnTool, Harness, echo_tool, msg


def dangling_calls(h: Harness) -> set[str]:
    calls, results = set(), set()
    for message in derive_messages(h.log):
        for block in message.content:
            if block.type == "tool-call":
                calls.add(block.id)  # type: ignore[union-attr]
            if block.type == "tool-result":
                results.add(block.tool_call_id)  # type: ignore[union-attr]
    return calls - results


async def test_a_pre_execute_hook_that_throws_still_gives_every_call_a_result(tmp_path: Path) -> None:
    ran: list[str] = []

    async def slow(args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        await asyncio.sleep(0.02)
        ran.append(ctx.call.call_id)
        return ToolOutcome.text("done")

    async def boom(call: ToolCall, signal: Any) -> None:
        if h.provider_id(call.call_id) == "c2":
            raise RuntimeError("policy backend down")

    calls = [("c1", "slow", "{}"), ("c2", "slow", "{}"), ("c3", "slow", "{}")]
    h = Harness(
        tmp_path,
        [reply("", tool_calls=calls), reply("x")],
        hooks=Hooks(pre_execute=[boom]),
        tools=[FnTool("slow", slow)],
    )
    h.agent.followup(msg("A"))
    await h.idle()
    assert dangling_calls(h) == set()
    codes = [e.data.get("error", {}).get("code") for e in h.durable(ev.TOOL_RESULT)]
    assert codes == [None, "HOOK_ERROR", None]
    h.check()


async def test_the_same_context_from_two_calls_does_not_fail_the_turn(tmp_path: Path) -> None:
    reminder = msg("remember the style guide")

    async def post(call: ToolCall, outcome: ToolOutcome) -> PostExecuteDecision:
        return PostExecuteDecision(additional_contexts=(reminder,))

    h = Harness(
        tmp_path,
        [reply("", tool_calls=[("c1", "echo", "{}"), ("c2", "echo", "{}")]), reply("x")],
        hooks=Hooks(post_execute=[post]),
        tools=[echo_tool()],
    )
    h.agent.followup(msg("A"))
    await h.idle()
    assert dangling_calls(h) == set() and h.turn_ends() == [{"kind": "completed"}]
    h.check()


async def test_a_tool_result_that_is_not_json_becomes_an_error_result(tmp_path: Path) -> None:
    async def body(args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        return ToolOutcome.text("ok", meta={"path": Path("/x")})

    h = Harness(tmp_path, [reply("", tool_calls=[("c1", "t", "{}")]), reply("x")], tools=[FnTool("t", body)])
    h.agent.followup(msg("A"))
    await h.idle()
    assert dangling_calls(h) == set()
    assert h.durable(ev.TOOL_RESULT)[0].data["error"]["code"] == "TOOL_ERROR"
    h.check()
