"""agent-semantics §8 scenarios 31-34 and 41-61: cancel, keepInbox, latch, dispose, boundaries."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from dsh_daemon.agent.hooks import (
    Hooks,
    PreStepContext,
    PreStepDecision,
    RequestConfig,
    RequestContext,
    TurnStoppingContext,
)
from dsh_daemon.agent.tools import PostExecuteDecision, ToolCall, ToolContext, ToolOutcome
from dsh_daemon.llm.scripted import Call, Hang, Sleep, reply, usage
from dsh_daemon.model import events as ev
from dsh_daemon.model.events import Event
from dsh_daemon.model.provider import Finish, ReasoningDelta, TextDelta, ToolCallDelta
from tests.core.harness import FnTool, Harness, echo_tool, msg


async def started(h: Harness, kind: str = ev.LLM_REQUEST) -> None:
    for _ in range(200):
        if h.durable(kind):
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"no {kind}")


async def test_31_cancel_keeps_the_streamed_prefix_as_interrupted(tmp_path: Path) -> None:
    h = Harness(tmp_path, [[TextDelta("partial"), Hang()], reply("next")])
    h.agent.followup(msg("A"))
    await started(h, ev.ASSISTANT_CHUNK)
    h.agent.cancel()
    await h.idle()
    (message,) = h.durable(ev.ASSISTANT_MESSAGE)
    assert message.data["interrupted"] is True
    assert [b["text"] for b in message.data["message"]["content"]] == ["partial"]
    assert list(message.data["sourceEventSeqs"]) == [e.seq for e in h.durable(ev.ASSISTANT_CHUNK)]
    step_end = h.durable(ev.STEP_END)[0]
    assert message.seq < step_end.seq < h.durable(ev.TURN_END)[0].seq
    assert h.turn_ends() == [{"kind": "aborted", "cause": "user"}]
    h.agent.followup(msg("B"))
    await h.idle()
    assert "partial" in h.request_texts(1)
    h.check()


async def test_32_reasoning_only_prefix_keeps_reasoning(tmp_path: Path) -> None:
    h = Harness(tmp_path, [[ReasoningDelta("thinking..."), Hang()]])
    h.agent.followup(msg("A"))
    await started(h, ev.ASSISTANT_CHUNK)
    h.agent.cancel()
    await h.idle()
    (message,) = h.durable(ev.ASSISTANT_MESSAGE)
    assert [(b["type"], b["text"]) for b in message.data["message"]["content"]] == [
        ("reasoning", "thinking...")
    ]
    h.check()


async def test_33_half_tool_call_is_dropped_from_the_prefix(tmp_path: Path) -> None:
    h = Harness(tmp_path, [[TextDelta("let me"), ToolCallDelta(0, "c1", "echo", '{"x"'), Hang()]])
    h.agent.followup(msg("A"))
    await started(h, ev.ASSISTANT_CHUNK)
    await asyncio.sleep(0.01)
    h.agent.cancel()
    await h.idle()
    (message,) = h.durable(ev.ASSISTANT_MESSAGE)
    assert [b["type"] for b in message.data["message"]["content"]] == ["text"]
    assert h.durable(ev.TOOL_CALL) == []
    h.check()


async def test_34_cancel_before_visible_content_logs_no_message(tmp_path: Path) -> None:
    h = Harness(tmp_path, [[TextDelta("   "), Hang()]])
    h.agent.followup(msg("A"))
    await started(h)
    await asyncio.sleep(0.01)
    h.agent.cancel()
    await h.idle()
    assert h.durable(ev.ASSISTANT_MESSAGE) == []
    h.check()


async def test_41_idle_cancel_with_empty_inbox_logs_nothing(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.agent.cancel()
    assert h.log == []
    h.agent.followup(msg("A"))
    await h.idle()
    assert h.turn_ends() == [{"kind": "completed"}]
    h.check()


async def test_42_idle_cancel_discards_parked_items_next_step_first(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.agent.send(msg("T"), target="next-turn", wakeup=False)
    h.agent.inject(msg("S"))
    h.agent.cancel()
    splices = h.durable(ev.INBOX_SPLICED)[2:]
    assert [(s.data["target"], s.data["outcome"]) for s in splices] == [
        ("next-step", "canceled"),
        ("next-turn", "canceled"),
    ]
    assert [e.data["message"]["content"][0]["text"] for e in h.live(ev.INBOX_DISCARDED)] == ["S", "T"]
    h.agent.wake()
    await h.idle()
    assert h.durable(ev.TURN_START) == []
    h.check()


async def test_43_cancel_running_turn_discards_the_tail(tmp_path: Path) -> None:
    h = Harness(tmp_path, [[Hang()]])
    h.agent.followup(msg("A"))
    h.agent.followup(msg("B"))
    await started(h)
    h.agent.cancel()
    await h.idle()
    assert h.turn_ends() == [{"kind": "aborted", "cause": "user"}]
    assert len(h.durable(ev.TURN_START)) == 1
    assert len(h.agent.inbox) == 0
    h.check()


async def test_44_followups_then_cancel_in_one_tick(tmp_path: Path) -> None:
    # Adapted (issue 8): A was claimed but never entered, so the clearing cancel discards it too,
    # durably and visibly, instead of letting the aborted claim swallow it.
    h = Harness(tmp_path)
    h.agent.followup(msg("A"))
    h.agent.followup(msg("B"))
    h.agent.cancel()
    await h.idle()
    assert len(h.durable(ev.TURN_START)) == 1
    assert h.durable(ev.STEP_START) == []
    assert h.turn_ends() == [{"kind": "aborted", "cause": "user"}]
    assert [e.data["message"]["content"][0]["text"] for e in h.live(ev.INBOX_DISCARDED)] == ["B", "A"]
    assert len(h.agent.inbox) == 0
    h.check()


async def test_44b_followup_then_keep_inbox_cancel_in_one_tick_parks_the_claimed_prompt(
    tmp_path: Path,
) -> None:
    h = Harness(tmp_path)
    h.agent.inject(msg("ctx"))
    h.agent.followup(msg("A"))
    h.agent.followup(msg("B"))
    h.agent.cancel(keep_inbox=True)
    await h.idle()
    assert h.turn_ends() == [{"kind": "aborted", "cause": "user"}]
    assert h.durable(ev.STEP_START) == []
    # claimed at the boundary, never entered: back at the front of their lists, in order
    assert [m.content[0].text for m in h.agent.inbox.next_turn] == ["A", "B"]
    assert [m.content[0].text for m in h.agent.inbox.next_step] == ["ctx"]
    assert h.live(ev.INBOX_DISCARDED) == []
    h.check()


async def test_45_keep_inbox_parks_the_queue_for_the_next_waking_send(tmp_path: Path) -> None:
    h = Harness(tmp_path, [[Hang()]])
    h.agent.followup(msg("A"))
    h.agent.followup(msg("P"))
    await started(h)
    h.agent.cancel(keep_inbox=True)
    await h.idle()
    assert [m.text for m in h.agent.inbox.next_turn] == ["P"]
    assert len(h.durable(ev.TURN_START)) == 1  # the aborted driver does not continue
    h.agent.followup(msg("W"))
    await h.idle()
    assert h.user_messages()[-2:] == [(2, "P"), (3, "W")]
    h.check()


async def test_keep_inbox_then_wake_runs_the_parked_queue(tmp_path: Path) -> None:
    h = Harness(tmp_path, [[Hang()]])
    h.agent.followup(msg("A"))
    h.agent.followup(msg("P"))
    await started(h)
    h.agent.cancel(keep_inbox=True)
    await h.idle()
    assert h.agent.wake() is True
    await h.idle()
    assert h.user_messages()[-1] == (2, "P")
    assert h.agent.wake() is False  # nothing pending: no-op
    h.check()


async def test_46_send_during_abort_is_latched_and_replayed(tmp_path: Path) -> None:
    h = Harness(tmp_path, [[Hang()]])
    h.agent.followup(msg("A"))
    await started(h)
    h.agent.cancel(keep_inbox=True)
    h.agent.followup(msg("B"))  # before convergence
    await h.idle()
    assert [r["kind"] for r in h.turn_ends()] == ["aborted", "completed"]
    assert h.user_messages() == [(1, "A"), (2, "B")]
    h.check()


async def test_47_plain_cancel_clears_the_latch(tmp_path: Path) -> None:
    h = Harness(tmp_path, [[Hang()]])
    h.agent.followup(msg("A"))
    await started(h)
    h.agent.cancel(keep_inbox=True)
    h.agent.followup(msg("B"))
    h.agent.cancel()
    await h.idle()
    assert [r["kind"] for r in h.turn_ends()] == ["aborted"]
    assert len(h.agent.inbox) == 0
    h.check()


async def test_48_removed_latched_item_means_no_replay(tmp_path: Path) -> None:
    h = Harness(tmp_path, [[Hang()]])
    h.agent.followup(msg("A"))
    await started(h)
    h.agent.cancel(keep_inbox=True)
    b = msg("B")
    h.agent.followup(b)
    assert h.agent.inbox.remove(b.id) is True
    await h.idle()
    assert len(h.durable(ev.TURN_START)) == 1
    h.check()


async def test_49_steer_after_cancel_becomes_a_new_turn(tmp_path: Path) -> None:
    h = Harness(tmp_path, [[Hang()]])
    h.agent.followup(msg("A"))
    await started(h)
    h.agent.cancel(keep_inbox=True)
    h.agent.steer(msg("S"))
    assert [m.text for m in h.agent.inbox.next_turn] == ["S"]
    await h.idle()
    assert h.user_messages() == [(1, "A"), (2, "S")]
    h.check()


async def test_50_followup_during_dispose_is_refused_not_latched(tmp_path: Path) -> None:
    # Adapted (D6): dispose is a shutdown; a send arriving while it is in progress is refused
    # with a clear error instead of being queued, and dispose finishes without another request.
    from dsh_daemon.agent.loop import AgentDisposedError

    h = Harness(tmp_path, [[Hang()]])
    h.agent.followup(msg("A"))
    await started(h)
    disposing = asyncio.ensure_future(h.agent.dispose())
    await asyncio.sleep(0)
    try:
        h.agent.followup(msg("B"))
        raise AssertionError("send during dispose must fail")
    except AgentDisposedError:
        pass
    await disposing
    assert len(h.provider.requests) == 1
    assert h.turn_ends() == [{"kind": "aborted", "cause": "shutdown"}]
    h.check()


async def test_51_status_listener_cancel_means_no_turn(tmp_path: Path) -> None:
    h = Harness(tmp_path)

    def on_status(event: Event) -> None:
        if event.type == ev.STATUS and event.data["status"] == "running":
            h.agent.cancel()

    h.agent.subscribe(on_status)
    h.agent.followup(msg("A"))
    await h.idle()
    assert h.durable(ev.TURN_START) == []
    assert len(h.live(ev.INBOX_DISCARDED)) == 1
    assert h.statuses() == ["running", "idle"]
    h.check()


async def test_52_cancel_from_step_start_observer(tmp_path: Path) -> None:
    h = Harness(tmp_path)

    def on_step(event: Event) -> None:
        if event.type == ev.STEP_START:
            h.agent.cancel(keep_inbox=True)  # nothing pending to clear: no append from the observer

    h.agent.subscribe(on_step)
    h.agent.followup(msg("A"))
    await h.idle()
    assert len(h.durable(ev.STEP_END)) == 1
    assert h.provider.requests == []
    assert h.turn_ends() == [{"kind": "aborted", "cause": "user"}]
    h.check()


async def test_53_first_cause_wins(tmp_path: Path) -> None:
    h = Harness(tmp_path, [[Hang()]])
    h.agent.followup(msg("A"))
    await started(h)
    h.agent.cancel("hook")
    h.agent.cancel("user")
    await h.agent.dispose()
    assert h.turn_ends() == [{"kind": "aborted", "cause": "hook"}]
    h.check()


async def test_54_pending_steer_is_discarded_by_cancel(tmp_path: Path) -> None:
    h = Harness(tmp_path, [[Hang()]])
    h.agent.followup(msg("A"))
    await started(h)
    h.agent.steer(msg("S"))
    h.agent.cancel()
    await h.idle()
    assert len(h.durable(ev.TURN_START)) == 1
    assert [e.data["message"]["content"][0]["text"] for e in h.live(ev.INBOX_DISCARDED)] == ["S"]
    h.check()


async def test_55_cancel_in_assistant_message_observer_skips_the_tool(tmp_path: Path) -> None:
    ran: list[str] = []

    async def body(args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        ran.append("ran")
        return ToolOutcome.text("x")

    h = Harness(tmp_path, [reply("", tool_calls=[("c1", "t", "{}")]), reply("ok")], tools=[FnTool("t", body)])

    def on_message(event: Event) -> None:
        if event.type == ev.ASSISTANT_MESSAGE:
            h.agent.cancel(keep_inbox=True)

    unsubscribe = h.agent.subscribe(on_message)
    h.agent.followup(msg("A"))
    await h.idle()
    unsubscribe()
    assert ran == []
    (call,) = h.durable(ev.TOOL_CALL)
    assert call.data["synthetic"] is True
    (result,) = h.durable(ev.TOOL_RESULT)
    assert result.data["error"]["code"] == "ABORTED_BEFORE_DISPATCH"
    h.agent.followup(msg("B"))
    await h.idle()
    assert "result:Error: tool call aborted before dispatch" in h.request_texts(1)
    h.check()


async def test_56_inject_before_cancel_is_cleared_context_after_cancel_parks(tmp_path: Path) -> None:
    async def body(args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        ctx.agent.inject(msg("before-cancel"))
        ctx.agent.cancel()
        return ToolOutcome.text("x")

    async def post(call: ToolCall, outcome: ToolOutcome) -> PostExecuteDecision:
        return PostExecuteDecision(additional_contexts=(msg("after-cancel"),))

    h = Harness(
        tmp_path,
        [reply("", tool_calls=[("c1", "t", "{}")]), reply("ok")],
        tools=[FnTool("t", body)],
        hooks=Hooks(post_execute=[post]),
    )
    h.agent.followup(msg("A"))
    await h.idle()
    assert h.turn_ends() == [{"kind": "aborted", "cause": "user"}]
    assert [m.text for m in h.agent.inbox.next_step] == ["after-cancel"]
    h.agent.followup(msg("B"))
    await h.idle()
    assert h.request_texts(1)[-2:] == ["after-cancel", "B"]
    h.check()


async def test_57_every_cooperative_boundary_honours_cancel(tmp_path: Path) -> None:
    gate_names = ["pre-step", "request", "turn-stopping", "tool"]
    for name in gate_names:
        entered = asyncio.Event()

        async def wait_forever(*_: Any, entered: asyncio.Event = entered) -> Any:
            entered.set()
            await asyncio.Event().wait()

        async def pre_step(ctx: PreStepContext, next: Callable[[], Awaitable[PreStepDecision]]) -> Any:
            await ctx.signal.race(wait_forever())

        async def request(ctx: RequestContext, next: Callable[[], Awaitable[RequestConfig]]) -> Any:
            await ctx.signal.race(wait_forever())

        async def stopping(ctx: TurnStoppingContext) -> None:
            await ctx.signal.race(wait_forever())

        async def tool_body(args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
            await ctx.signal.race(wait_forever())
            return ToolOutcome.text("unreachable")

        hooks = Hooks(
            pre_step=[pre_step] if name == "pre-step" else [],
            request=[request] if name == "request" else [],
            turn_stopping=[stopping] if name == "turn-stopping" else [],
        )
        script = [reply("", tool_calls=[("c1", "t", "{}")])] if name == "tool" else []
        h = Harness(tmp_path / name, script, hooks=hooks, tools=[FnTool("t", tool_body)])
        h.agent.followup(msg("A"))
        await asyncio.wait_for(entered.wait(), 2)
        h.agent.cancel()
        await asyncio.wait_for(h.idle(), 2)
        assert h.turn_ends() == [{"kind": "aborted", "cause": "user"}], name
        h.check()


async def test_58_dispose_mid_turn_keeps_the_queued_tail(tmp_path: Path) -> None:
    # Adapted (D6): dispose is a shutdown; the tail stays parked instead of being cancelled.
    h = Harness(tmp_path, [[Hang()]])
    h.agent.followup(msg("A"))
    h.agent.followup(msg("tail"))
    await started(h)
    await h.agent.dispose()
    assert h.statuses() == ["running", "idle"]
    assert h.turn_ends() == [{"kind": "aborted", "cause": "shutdown"}]
    assert [m.text for m in h.agent.inbox.next_turn] == ["tail"]
    assert h.live(ev.INBOX_DISCARDED) == []
    assert len(h.provider.requests) == 1
    h.check()


async def test_59_wake_runs_parked_work_and_respects_edits(tmp_path: Path) -> None:
    # Adapted: dsh has no maintenance tasks; the latch/replay rules are exercised through wake().
    h = Harness(tmp_path)
    a = msg("A")
    h.agent.send(a, target="next-turn", wakeup=False)
    assert h.agent.inbox.remove(a.id)
    assert h.agent.wake() is False
    assert h.durable(ev.TURN_START) == []
    h.agent.send(msg("B"), target="next-turn", wakeup=False)
    h.agent.cancel()
    assert h.agent.wake() is False
    h.agent.send(msg("C"), target="next-turn", wakeup=False)
    assert h.agent.wake() is True
    await h.idle()
    assert h.user_messages() == [(1, "C")]
    h.check()


async def test_60_when_idle_resolves_after_a_pre_step_cancel(tmp_path: Path) -> None:
    async def pre_step(ctx: PreStepContext, next: Callable[[], Awaitable[PreStepDecision]]) -> Any:
        ctx.agent.cancel()
        return await next()

    h = Harness(tmp_path, hooks=Hooks(pre_step=[pre_step]))
    h.agent.followup(msg("A"))
    waiter = asyncio.ensure_future(h.idle())
    await asyncio.wait_for(waiter, 2)
    assert h.turn_ends() == [{"kind": "aborted", "cause": "user"}]
    h.check()


async def test_61_throwing_status_listeners_do_not_stop_transitions(tmp_path: Path) -> None:
    h = Harness(tmp_path)

    def bad(event: Event) -> None:
        raise RuntimeError("listener bug")

    h.agent.subscribe(bad)
    h.agent.followup(msg("A"))
    await h.idle()
    assert h.statuses() == ["running", "idle"]
    await h.agent.dispose()
    h.check()


async def test_cancel_during_retry_backoff_wins(tmp_path: Path) -> None:
    from dsh_daemon.llm.scripted import Fail
    from dsh_daemon.model.provider import SERVER, LlmFailure

    h = Harness(tmp_path, [[Fail(LlmFailure(SERVER, "down", retry_after_ms=5000))]])
    h.agent.options.retry = type(h.agent.options.retry)(cap_s=10.0)
    h.agent.followup(msg("A"))
    await started(h, ev.LLM_RETRY)
    h.agent.cancel()
    await asyncio.wait_for(h.idle(), 2)
    assert h.turn_ends() == [{"kind": "aborted", "cause": "user"}]
    assert len(h.provider.requests) == 1
    h.check()


async def test_usage_is_summed_per_turn(tmp_path: Path) -> None:
    h = Harness(
        tmp_path,
        [reply("", tool_calls=[("c1", "echo", "{}")], use=usage(10, 2)), reply("ok", use=usage(30, 4))],
        tools=[echo_tool()],
    )
    h.agent.followup(msg("A"))
    await h.idle()
    (total,) = h.durable(ev.USAGE)
    assert total.data["usage"] == {"inputTokens": 40, "outputTokens": 6}
    h.check()


async def test_slow_stream_steer_lands_in_the_next_step(tmp_path: Path) -> None:
    slow = [TextDelta("a"), Sleep(0.02), TextDelta("b"), Sleep(0.02), Finish("stop")]
    h = Harness(tmp_path, [slow, reply("second")])
    h.agent.followup(msg("A"))
    await started(h, ev.ASSISTANT_CHUNK)
    h.agent.steer(msg("S"))
    await h.idle()
    assert h.user_messages() == [(1, "A"), (1, "S")]
    assert len(h.durable(ev.TURN_START)) == 1
    assert h.request_texts(1) == ["A", "ab", "S"]
    h.check()


async def test_idle_inject_reaches_the_next_request_verbatim(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    context = msg("file contents", {"kind": "editor", "uri": "file:///x.py", "contextKind": "selection"})
    h.agent.inject(context)
    await asyncio.sleep(0.01)
    assert h.durable(ev.TURN_START) == []
    h.agent.followup(msg("explain"))
    await h.idle()
    assert h.provider.requests[0].messages[0] == context
    h.check()


async def test_call_step_can_cancel_mid_stream(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.provider.push([TextDelta("x"), Call(lambda: h.agent.cancel()), Hang()])
    h.agent.followup(msg("A"))
    await h.idle()
    assert h.turn_ends() == [{"kind": "aborted", "cause": "user"}]
    h.check()


async def test_a_cancel_ends_the_turn_without_waiting_for_the_provider_stream_to_close(
    tmp_path: Path,
) -> None:
    """Issue 38.1: the turn's end (and so the `turn/end` a client shows as cancelled) waited for the
    cancelled provider stream to close its connection. The stream still closes, after the turn ended."""
    h = Harness(tmp_path, [[TextDelta("partial"), Hang()], reply("next")])
    network = asyncio.Event()  # the connection's close waits on it, as a close can wait on the peer
    closed = asyncio.Event()
    play = h.provider.stream

    async def slow_to_close(request: Any) -> Any:
        try:
            async for item in play(request):
                yield item
        finally:
            await network.wait()
            closed.set()

    h.provider.stream = slow_to_close  # type: ignore[assignment,method-assign]
    h.agent.followup(msg("A"))
    await started(h, ev.ASSISTANT_CHUNK)
    h.agent.cancel()
    await asyncio.wait_for(h.idle(), 30)  # (a bound on a failure: before, it waited for the close)
    assert h.turn_ends() == [{"kind": "aborted", "cause": "user"}]
    assert not closed.is_set()
    network.set()
    await asyncio.wait_for(closed.wait(), 30)  # the stream is closed all the same
    h.agent.followup(msg("B"))
    await h.idle()
    assert h.turn_ends()[-1] == {"kind": "completed"}
    h.check()
