"""Context window accounting (issue 14 item 3): a durable `context/usage {used, window}` after each
step's usage is known, from the provider's window or the options'."""

from __future__ import annotations

from pathlib import Path

from dsh_daemon.agent.derive import Derivation
from dsh_daemon.llm.scripted import reply, usage
from dsh_daemon.model import events as ev
from dsh_daemon.model.jsonvalue import FrozenDict
from tests.core.harness import Harness, echo_tool, msg


async def test_context_usage_after_each_step(tmp_path: Path) -> None:
    h = Harness(
        tmp_path,
        [
            reply("", tool_calls=[("c1", "echo", '{"x": 1}')], use=usage(100, 7)),
            reply("done", use=FrozenDict({"inputTokens": 30, "cacheReadTokens": 120, "outputTokens": 4})),
        ],
        tools=[echo_tool()],
    )
    h.provider.window = 1000
    h.agent.followup(msg("go"))
    await h.idle()
    h.check()
    usages = h.durable(ev.CONTEXT_USAGE)
    assert [dict(e.data) for e in usages] == [
        {"turn": 1, "step": 1, "used": 100, "window": 1000},
        {"turn": 1, "step": 2, "used": 150, "window": 1000},
    ]
    # Each right after its step's assistant message, inside the step; informational, so ignorable.
    for event in usages:
        assert h.log[event.seq - 1].type == ev.ASSISTANT_MESSAGE  # type: ignore[operator]
        assert event.ignorable
    derivation = Derivation()
    for event in h.log:
        derivation.feed(event)
    assert derivation.context_used == 150


async def test_unknown_window_is_null_and_options_override(tmp_path: Path) -> None:
    h = Harness(tmp_path, [reply("a", use=usage(10, 1))])
    h.agent.followup(msg("go"))
    await h.idle()
    assert [dict(e.data) for e in h.durable(ev.CONTEXT_USAGE)] == [
        {"turn": 1, "step": 1, "used": 10, "window": None}
    ]
    h.agent.options.context_window = 4096
    h.provider.window = 1000
    assert h.agent.context_window() == 4096
    h.check()


async def test_no_usage_no_event(tmp_path: Path) -> None:
    from dsh_daemon.model.provider import Finish, TextDelta

    h = Harness(tmp_path, [[TextDelta("hi"), Finish("stop")]])
    h.agent.followup(msg("go"))
    await h.idle()
    assert h.durable(ev.CONTEXT_USAGE) == []
    h.check()


async def test_context_usage_survives_reopen(tmp_path: Path) -> None:
    h = Harness(tmp_path, [reply("a", use=usage(42, 1))])
    h.provider.window = 500
    h.agent.followup(msg("go"))
    await h.idle()
    h2 = await h.reopen()
    assert [dict(e.data) for e in h2.durable(ev.CONTEXT_USAGE)] == [
        {"turn": 1, "step": 1, "used": 42, "window": 500}
    ]
    await h2.manager.close()
