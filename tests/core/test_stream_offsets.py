"""Streams reconcile (issue 10): each live delta says where its text starts in its block, and a tool
result names its call at top level."""

from __future__ import annotations

from pathlib import Path

from dsh_daemon.llm.scripted import reply, usage
from dsh_daemon.model import events as ev
from dsh_daemon.model.provider import Finish, ReasoningDelta, TextDelta, ToolCallDelta
from tests.core.harness import Harness, echo_tool, msg


async def test_delta_offsets_count_utf16_units_per_block(tmp_path: Path) -> None:
    stream = [
        ReasoningDelta("think"),
        TextDelta("ab"),
        ReasoningDelta("ing"),
        TextDelta("c\U0001f600"),  # an astral char is two UTF-16 code units
        TextDelta("d"),
        ToolCallDelta(0, "c1", "echo", ""),
        ToolCallDelta(0, None, None, '{"x":'),
        ToolCallDelta(1, "c2", "echo", "{}"),
        ToolCallDelta(0, None, None, "1}"),
        Finish("tool-calls", usage()),
    ]
    h = Harness(tmp_path, [stream, reply("done")], tools=[echo_tool()])
    h.agent.followup(msg("go"))
    await h.idle()
    deltas = [e.data for e in h.live(ev.ASSISTANT_DELTA) if e.data["step"] == 1]
    got = [(d["delta"]["type"], d["delta"].get("index"), d["offset"]) for d in deltas]
    assert got == [
        ("reasoning", None, 0),
        ("text", None, 0),
        ("reasoning", None, 5),
        ("text", None, 2),
        ("text", None, 5),
        ("tool-call", 0, 0),
        ("tool-call", 0, 0),
        ("tool-call", 1, 0),
        ("tool-call", 0, 5),
    ]
    results = h.durable(ev.TOOL_RESULT)
    assert [(h.provider_id(r.data["callId"]), r.data["name"]) for r in results] == [
        ("c1", "echo"),
        ("c2", "echo"),
    ]
    h.check()
