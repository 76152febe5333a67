"""agent-semantics §8 scenarios 17-30 and 35-40: pre-step, turn-stopping, tools, max-tokens, failures."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from dsh_daemon.agent.hooks import (
    Enter,
    Hooks,
    PreStepContext,
    PreStepDecision,
    Reject,
    RequestConfig,
    RequestContext,
    RequestErrorContext,
    Retry,
    TurnStoppingContext,
)
from dsh_daemon.agent.tools import Deny, ToolCall, ToolContext, ToolOutcome
from dsh_daemon.llm.scripted import Fail, reply
from dsh_daemon.model import events as ev
from dsh_daemon.model.jsonvalue import FrozenDict
from dsh_daemon.model.provider import RATE_LIMIT, SERVER, LlmFailure, TextDelta, ToolCallDelta
from dsh_daemon.model.provider import Finish as FinishEv
from tests.core.harness import FnTool, Harness, echo_tool, msg, plugin_msg

Next = Callable[[], Awaitable[PreStepDecision]]


def reject_first(times: int = 1) -> Callable[[PreStepContext, Next], Awaitable[PreStepDecision]]:
    left = [times]

    async def hook(ctx: PreStepContext, next: Next) -> PreStepDecision:
        if left[0] > 0:
            left[0] -= 1
            return Reject()
        return await next()

    return hook


async def test_17_pre_step_reject_blocks_with_no_step(tmp_path: Path) -> None:
    h = Harness(tmp_path, hooks=Hooks(pre_step=[reject_first()]))
    h.agent.followup(msg("A"))
    await h.idle()
    assert h.types() == [ev.INBOX_SPLICED, ev.TURN_START, ev.INBOX_SPLICED, ev.TURN_END]
    assert h.turn_ends() == [{"kind": "blocked"}]
    assert h.provider.requests == [] and len(h.agent.inbox) == 0
    assert h.agent.status == "idle"
    h.check()


async def test_18_rejected_turn_leaves_the_queue_parked(tmp_path: Path) -> None:
    h = Harness(tmp_path, hooks=Hooks(pre_step=[reject_first()]))
    h.agent.followup(msg("A"))
    h.agent.followup(msg("B"))
    await h.idle()
    assert [m.text for m in h.agent.inbox.next_turn] == ["B"]
    h.agent.followup(msg("C"))
    await h.idle()
    assert h.user_messages() == [(2, "B"), (3, "C")]
    h.check()


async def test_19_pre_step_throw_is_an_error_turn_and_parks_the_queue(tmp_path: Path) -> None:
    calls = [0]

    async def boom(ctx: PreStepContext, next: Next) -> PreStepDecision:
        calls[0] += 1
        if calls[0] == 1:
            raise RuntimeError("pre-step exploded")
        return await next()

    h = Harness(tmp_path, hooks=Hooks(pre_step=[boom]))
    h.agent.followup(msg("A"))
    h.agent.followup(msg("B"))
    await h.idle()
    (end,) = h.turn_ends()
    assert end["kind"] == "error" and end["error"]["code"] == "UNKNOWN"
    assert "pre-step exploded" in end["error"]["message"]
    assert len(h.live(ev.AGENT_ERROR)) == 1
    assert h.statuses() == ["running", "idle"]
    assert [m.text for m in h.agent.inbox.next_turn] == ["B"]
    h.check()


async def test_20_pre_step_inserts_then_rejects_both_park_ahead_of_next_prompt(tmp_path: Path) -> None:
    done = [False]

    async def hook(ctx: PreStepContext, next: Next) -> PreStepDecision:
        if not done[0]:
            done[0] = True
            ctx.agent.inject(msg("I"))
            ctx.agent.steer(msg("S"))
            return Reject()
        return await next()

    h = Harness(tmp_path, hooks=Hooks(pre_step=[hook]))
    h.agent.followup(msg("A"))
    await h.idle()
    assert [m.text for m in h.agent.inbox.next_step] == ["I", "S"]
    h.agent.followup(msg("W"))
    await h.idle()
    assert h.user_messages() == [(2, "I"), (2, "S"), (2, "W")]
    h.check()


async def test_21_pre_step_rewrite_keeps_the_id(tmp_path: Path) -> None:
    async def hook(ctx: PreStepContext, next: Next) -> PreStepDecision:
        decision = await next()
        assert isinstance(decision, Enter)
        return Enter(tuple(m.with_content(m.text.upper()) for m in decision.messages))

    h = Harness(tmp_path, hooks=Hooks(pre_step=[hook]))
    a = msg("quiet")
    h.agent.followup(a)
    await h.idle()
    assert h.user_messages() == [(1, "QUIET")]
    assert h.provider.requests[0].messages[0].id == a.id
    assert h.request_texts(0) == ["QUIET"]
    h.check()


async def test_22_pre_step_adds_a_plugin_message(tmp_path: Path) -> None:
    async def hook(ctx: PreStepContext, next: Next) -> PreStepDecision:
        decision = await next()
        assert isinstance(decision, Enter)
        return Enter((*decision.messages, plugin_msg("extra", "p1")))

    h = Harness(tmp_path, hooks=Hooks(pre_step=[hook]))
    h.agent.followup(msg("A"))
    await h.idle()
    assert h.request_texts(0) == ["A", "extra"]
    assert h.provider.requests[0].messages[1].source == {"kind": "plugin", "plugin": "p1"}
    h.check()


async def test_23_enter_empty_on_step_1_completes_without_a_step(tmp_path: Path) -> None:
    async def hook(ctx: PreStepContext, next: Next) -> PreStepDecision:
        return Enter(())

    h = Harness(tmp_path, hooks=Hooks(pre_step=[hook]))
    h.agent.followup(msg("A"))
    await h.idle()
    assert h.types() == [ev.INBOX_SPLICED, ev.TURN_START, ev.INBOX_SPLICED, ev.TURN_END]
    assert h.turn_ends() == [{"kind": "completed"}]
    h.check()


async def test_24_turn_stopping_inject_then_empty_step_2(tmp_path: Path) -> None:
    injected = [False]

    async def stopping(ctx: TurnStoppingContext) -> None:
        if not injected[0]:
            injected[0] = True
            ctx.agent.inject(msg("N"))

    async def drop_step_2(ctx: PreStepContext, next: Next) -> PreStepDecision:
        return Enter(()) if ctx.step == 2 else await next()

    h = Harness(tmp_path, hooks=Hooks(turn_stopping=[stopping], pre_step=[drop_step_2]))
    h.agent.followup(msg("A"))
    await h.idle()
    assert len(h.provider.requests) == 1
    assert len(h.durable(ev.STEP_START)) == 1
    assert h.turn_ends() == [{"kind": "completed"}]
    h.check()


async def test_25_turn_stopping_steers_until_three_steps(tmp_path: Path) -> None:
    async def stopping(ctx: TurnStoppingContext) -> None:
        if len(ctx.agent.provider.requests) < 3:  # type: ignore[union-attr]
            ctx.agent.steer(msg("again"))

    h = Harness(tmp_path, hooks=Hooks(turn_stopping=[stopping]))
    h.agent.followup(msg("A"))
    await h.idle()
    assert len(h.provider.requests) == 3
    assert len(h.durable(ev.TURN_START)) == 1
    h.check()


async def test_26_turn_stopping_inject_then_rejected_step_is_blocked(tmp_path: Path) -> None:
    async def stopping(ctx: TurnStoppingContext) -> None:
        if ctx.agent.inbox.next_step == () and len(ctx.agent.provider.requests) == 1:  # type: ignore[union-attr]
            ctx.agent.inject(msg("N"))

    async def reject_step_2(ctx: PreStepContext, next: Next) -> PreStepDecision:
        return Reject() if ctx.step == 2 else await next()

    h = Harness(tmp_path, hooks=Hooks(turn_stopping=[stopping], pre_step=[reject_step_2]))
    h.agent.followup(msg("A"))
    await h.idle()
    assert h.turn_ends() == [{"kind": "blocked"}]
    h.check()


def concluding_tool(steer: bool = False) -> FnTool:
    async def body(args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        ctx.conclude_turn()
        if steer:
            ctx.agent.steer(msg("racing steer"))
        return ToolOutcome.text("concluded")

    return FnTool("conclude", body)


async def test_27_concluding_tool_means_no_second_request(tmp_path: Path) -> None:
    h = Harness(tmp_path, [reply("", tool_calls=[("c1", "conclude", "{}")])], tools=[concluding_tool()])
    h.agent.followup(msg("A"))
    await h.idle()
    assert len(h.provider.requests) == 1
    assert len(h.durable(ev.TOOL_RESULT)) == 1
    assert h.turn_ends() == [{"kind": "completed"}]
    h.check()


async def test_28_concluding_tool_that_steers_gets_a_second_request(tmp_path: Path) -> None:
    h = Harness(
        tmp_path,
        [reply("", tool_calls=[("c1", "conclude", "{}")]), reply("ok")],
        tools=[concluding_tool(True)],
    )
    h.agent.followup(msg("A"))
    await h.idle()
    assert len(h.provider.requests) == 2
    assert h.request_texts(1)[-1] == "racing steer"
    assert len(h.durable(ev.TURN_START)) == 1
    h.check()


async def test_29_max_tokens_drops_the_partial_call_and_stays_sticky(tmp_path: Path) -> None:
    truncated = [TextDelta("so"), ToolCallDelta(0, "c1", "echo", '{"x": '), FinishEv("max-tokens")]
    forced = [False]

    async def stopping(ctx: TurnStoppingContext) -> None:
        if not forced[0]:
            forced[0] = True
            ctx.agent.steer(msg("continue"))

    h = Harness(
        tmp_path, [truncated, reply("done")], tools=[echo_tool()], hooks=Hooks(turn_stopping=[stopping])
    )
    h.agent.followup(msg("A"))
    await h.idle()
    assert h.durable(ev.TOOL_CALL) == []
    first = h.durable(ev.ASSISTANT_MESSAGE)[0].data
    assert [b["type"] for b in first["message"]["content"]] == ["text"]
    assert first["finishReason"] == "max-tokens"
    assert len(h.durable(ev.STEP_START)) == 2
    assert h.turn_ends() == [{"kind": "max-tokens"}]
    h.check()


async def test_30_empty_successful_reply_is_logged_but_not_in_history(tmp_path: Path) -> None:
    h = Harness(tmp_path, [reply("")])
    h.agent.followup(msg("A"))
    await h.idle()
    h.agent.followup(msg("B"))
    await h.idle()
    (first, _second) = h.durable(ev.ASSISTANT_MESSAGE)
    assert list(first.data["message"]["content"]) == []
    assert h.request_texts(1) == ["A", "B"]
    h.check()


def retry_listener(action: Callable[[RequestErrorContext], Any]) -> Any:
    async def hook(ctx: RequestErrorContext, next: Callable[[], Awaitable[Retry | None]]) -> Retry | None:
        return action(ctx)

    return hook


async def test_35_error_after_partial_text_then_listener_cancels(tmp_path: Path) -> None:
    def cancel(ctx: RequestErrorContext) -> None:
        ctx.agent.cancel()

    h = Harness(
        tmp_path,
        [[TextDelta("partial"), Fail(LlmFailure(SERVER, "boom"))]],
        hooks=Hooks(request_error=[retry_listener(cancel)]),
    )
    h.agent.followup(msg("A"))
    await h.idle()
    assert h.durable(ev.ASSISTANT_MESSAGE) == []
    assert h.turn_ends() == [{"kind": "aborted", "cause": "user"}]
    h.check()


async def test_36_two_failures_then_success_in_one_turn_and_step(tmp_path: Path) -> None:
    h = Harness(
        tmp_path,
        [
            [TextDelta("bad1"), Fail(LlmFailure(SERVER, "503"))],
            [Fail(LlmFailure(RATE_LIMIT, "slow down", retry_after_ms=1))],
            reply("good"),
        ],
    )
    h.agent.followup(msg("A"))
    await h.idle()
    retries = h.durable(ev.LLM_RETRY)
    assert [(r.data["turn"], r.data["step"]) for r in retries] == [(1, 1), (1, 1)]
    assert [r.data["error"]["code"] for r in retries] == [SERVER, RATE_LIMIT]
    assert retries[1].data["delayMs"] == 1  # Retry-After replaces the backoff
    (message,) = h.durable(ev.ASSISTANT_MESSAGE)
    final_chunks = [e.seq for e in h.durable(ev.ASSISTANT_CHUNK) if e.seq > retries[-1].seq]
    assert list(message.data["sourceEventSeqs"]) == final_chunks
    assert h.turn_ends() == [{"kind": "completed"}]
    assert len(h.provider.requests) == 3
    h.check()


async def test_37_listener_cancels_then_returns_retry(tmp_path: Path) -> None:
    def cancel_and_retry(ctx: RequestErrorContext) -> Retry:
        ctx.agent.cancel()
        return Retry(0.0)

    h = Harness(
        tmp_path,
        [[Fail(LlmFailure(SERVER, "x"))]],
        hooks=Hooks(request_error=[retry_listener(cancel_and_retry)]),
    )
    h.agent.followup(msg("A"))
    await h.idle()
    assert len(h.provider.requests) == 1
    assert h.turn_ends() == [{"kind": "aborted", "cause": "user"}]
    h.check()


async def test_38_listener_throws_or_declines_means_error_with_facts(tmp_path: Path) -> None:
    def explode(ctx: RequestErrorContext) -> None:
        raise RuntimeError("listener bug")

    for action in (explode, lambda ctx: None):
        h = Harness(
            tmp_path / str(id(action)),
            [[Fail(LlmFailure(SERVER, "upstream down", status=503))]],
            hooks=Hooks(request_error=[retry_listener(action)]),
        )
        h.agent.followup(msg("A"))
        await h.idle()
        (end,) = h.turn_ends()
        assert end["kind"] == "error"
        assert end["error"]["code"] == SERVER and end["error"]["status"] == 503
        assert len(h.provider.requests) == 1
        h.check()


async def test_non_retryable_failure_ends_the_turn_at_once(tmp_path: Path) -> None:
    h = Harness(tmp_path, [[Fail(LlmFailure("AUTH", "Authentication Fails", status=401))]])
    h.agent.followup(msg("A"))
    await h.idle()
    assert h.turn_ends()[0]["error"]["code"] == "AUTH"
    assert h.durable(ev.LLM_RETRY) == []
    assert len(h.live(ev.AGENT_ERROR)) == 1
    h.check()


async def test_retry_budget_is_bounded(tmp_path: Path) -> None:
    h = Harness(tmp_path, [[Fail(LlmFailure(SERVER, "down"))]] * 10)
    h.agent.followup(msg("A"))
    await h.idle()
    assert len(h.durable(ev.LLM_RETRY)) == 5
    assert len(h.provider.requests) == 6
    assert h.turn_ends()[0]["kind"] == "error"
    h.check()


async def test_39_request_hook_throw_is_an_error_without_a_request(tmp_path: Path) -> None:
    async def boom(ctx: RequestContext, next: Callable[[], Awaitable[RequestConfig]]) -> RequestConfig:
        raise RuntimeError("bad request hook")

    h = Harness(tmp_path, hooks=Hooks(request=[boom]))
    h.agent.followup(msg("A"))
    await h.idle()
    assert h.provider.requests == []
    assert h.turn_ends()[0]["kind"] == "error"
    h.check()


async def test_40_missing_model_is_a_clear_error_and_a_request_hook_fixes_it(tmp_path: Path) -> None:
    supply = [False]

    async def config(ctx: RequestContext, next: Callable[[], Awaitable[RequestConfig]]) -> RequestConfig:
        base = await next()
        model = "m2" if supply[0] else ""
        return RequestConfig(FrozenDict({**base.config, "model": model}), base.system, base.tools)

    h = Harness(tmp_path, hooks=Hooks(request=[config]))
    h.agent.followup(msg("A"))
    await h.idle()
    assert "no model configured" in h.turn_ends()[0]["error"]["message"]
    supply[0] = True
    h.agent.followup(msg("B"))
    await h.idle()
    assert h.turn_ends()[1] == {"kind": "completed"}
    assert h.provider.requests[0].model == "m2"
    h.check()


async def test_pre_execute_deny_gives_an_error_result(tmp_path: Path) -> None:
    async def deny(call: ToolCall, signal: Any) -> Deny:
        return Deny("not allowed here")

    h = Harness(
        tmp_path,
        [reply("", tool_calls=[("c1", "echo", "{}")]), reply("ok")],
        tools=[echo_tool()],
        hooks=Hooks(pre_execute=[deny]),
    )
    h.agent.followup(msg("A"))
    await h.idle()
    (result,) = h.durable(ev.TOOL_RESULT)
    assert result.data["error"]["code"] == "DENIED"
    assert h.request_texts(1)[-1] == "result:Error: not allowed here"
    h.check()


async def test_parallel_safe_calls_run_concurrently_and_commit_in_model_order(tmp_path: Path) -> None:
    running: list[str] = []
    overlap = [0]

    async def body(args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        running.append(ctx.call.call_id)
        overlap[0] = max(overlap[0], len(running))
        await asyncio.sleep(0.03 if h.provider_id(ctx.call.call_id) == "c1" else 0.001)
        running.remove(ctx.call.call_id)
        return ToolOutcome.text(ctx.call.call_id)

    h = Harness(
        tmp_path,
        [reply("", tool_calls=[("c1", "p", "{}"), ("c2", "p", "{}"), ("c3", "x", "{}")]), reply("ok")],
        tools=[FnTool("p", body), FnTool("x", body, parallel_safe=False)],
    )
    h.agent.followup(msg("A"))
    await h.idle()
    assert overlap[0] == 2  # c1 and c2 together; the exclusive c3 alone
    results = [h.provider_id(e.data["message"]["source"]["callId"]) for e in h.durable(ev.TOOL_RESULT)]
    assert results == ["c1", "c2", "c3"]
    h.check()


async def test_invalid_and_unknown_tool_calls_get_error_results(tmp_path: Path) -> None:
    h = Harness(
        tmp_path,
        [
            reply("", tool_calls=[("c1", "echo", "{not json"), ("c2", "nope", "{}"), ("c3", "echo", "")]),
            reply(),
        ],
        tools=[echo_tool()],
    )
    h.agent.followup(msg("A"))
    await h.idle()
    codes = [e.data.get("error", {}).get("code") for e in h.durable(ev.TOOL_RESULT)]
    assert codes == ["INVALID_ARGUMENTS", "UNKNOWN_TOOL", None]  # empty arguments mean {}
    h.check()
