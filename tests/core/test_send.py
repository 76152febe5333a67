"""agent-semantics §8 scenarios 1-16: send, presets, parked items, claims, validation."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from dsh_daemon.agent.inbox import DuplicateMessageIdError
from dsh_daemon.agent.tools import ToolContext, ToolOutcome
from dsh_daemon.llm.scripted import Call, Hang, Sleep, reply
from dsh_daemon.model import events as ev
from dsh_daemon.model.messages import InvalidMessageError, UserMessage
from dsh_daemon.session.log import ReentrantAppendError
from tests.core.harness import FnTool, Harness, msg


async def test_01_idle_followup_opens_turn_before_send_returns(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    a = msg("A")
    returned = h.agent.followup(a)
    assert returned == a.id
    # Before any await: the insert splice, turn/start 1, the claim splice.
    assert [e.type for e in h.log] == [ev.INBOX_SPLICED, ev.TURN_START, ev.INBOX_SPLICED]
    assert h.log[0].data["inserted"][0]["id"] == a.id
    assert h.log[2].data["removedCount"] == 1 and "outcome" not in h.log[2].data
    assert [e.type for e in h.live()] == [ev.INBOX_INSERTED, ev.STATUS, ev.INBOX_CLAIMED]
    claimed = h.live(ev.INBOX_CLAIMED)[0].data
    assert claimed["message"]["id"] == a.id and claimed["turn"] == 1
    await h.idle()
    h.check()


async def test_02_turn_finishes_in_canonical_order(tmp_path: Path) -> None:
    h = Harness(tmp_path, [reply("hello", chunk=2)])
    h.agent.followup(msg("A"))
    await h.idle()
    assert h.types() == [
        ev.INBOX_SPLICED,
        ev.TURN_START,
        ev.INBOX_SPLICED,
        ev.STEP_START,
        ev.USER_MESSAGE,
        ev.REQUEST_HEADER,
        ev.LLM_REQUEST,
        ev.ASSISTANT_MESSAGE,
        ev.CONTEXT_USAGE,
        ev.STEP_END,
        ev.USAGE,
        ev.TURN_END,
    ]
    assert h.durable(ev.REQUEST_HEADER)[0].data["reason"] == "initial"
    chunks = h.durable(ev.ASSISTANT_CHUNK)
    assert chunks, "streamed deltas are logged as chunks"
    message = h.durable(ev.ASSISTANT_MESSAGE)[0].data
    assert list(message["sourceEventSeqs"]) == [c.seq for c in chunks]
    assert "".join(d["text"] for c in chunks for d in c.data["deltas"]) == "hello"
    assert h.turn_ends() == [{"kind": "completed"}]
    assert h.statuses() == ["running", "idle"]
    assert "".join(e.data["delta"]["text"] for e in h.live(ev.ASSISTANT_DELTA)) == "hello"
    h.check()


async def test_03_burst_of_followups_runs_one_turn_each_in_order(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    for text in "ABC":
        h.agent.followup(msg(text))
    await h.idle()
    assert h.user_messages() == [(1, "A"), (2, "B"), (3, "C")]
    assert h.statuses() == ["running", "idle"]
    h.check()


async def test_04_followup_from_chunk_observer_runs_as_next_turn(tmp_path: Path) -> None:
    h = Harness(tmp_path, [reply("first reply"), reply("second")])
    sent: list[str] = []

    def observer(event: Any) -> None:
        # Deferred like a client request would be: the send lands on the loop, not inside the append.
        if event.type == ev.ASSISTANT_DELTA and not sent:
            sent.append("B")
            asyncio.get_running_loop().call_soon(lambda: h.agent.followup(msg("B")))

    h.agent.subscribe(observer)
    h.agent.followup(msg("A"))
    await asyncio.sleep(0.01)
    await h.idle()
    assert h.user_messages() == [(1, "A"), (2, "B")]
    assert "first reply" in h.request_texts(1)
    h.check()


async def test_05_idle_inject_logs_one_splice_and_opens_no_turn(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.agent.inject(msg("X"))
    await asyncio.sleep(0.01)
    assert h.types() == [ev.INBOX_SPLICED]
    assert h.provider.requests == []
    assert h.agent.status == "idle" and h.statuses() == []
    assert [m.text for m in h.agent.inbox.next_step] == ["X"]
    h.check()


async def test_06_parked_inject_rides_in_front_of_the_next_prompt(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    x = msg("X", {"kind": "editor", "uri": "file:///a.py", "contextKind": "file"})
    h.agent.inject(x)
    h.agent.followup(msg("A"))
    await h.idle()
    assert h.user_messages() == [(1, "X"), (1, "A")]
    assert h.request_texts(0) == ["X", "A"]
    # verbatim: the same id and source reach the request
    assert h.provider.requests[0].messages[0] == x
    h.check()


async def test_07_idle_steer_starts_a_turn_synchronously(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.agent.steer(msg("S"))
    assert h.agent.status == "running"
    assert ev.TURN_START in h.types()
    await h.idle()
    assert h.user_messages() == [(1, "S")]
    h.check()


async def test_08_two_idle_steers_make_one_turn_of_two_steps(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.agent.steer(msg("S1"))
    h.agent.steer(msg("S2"))
    await h.idle()
    assert h.user_messages() == [(1, "S1"), (1, "S2")]
    assert len(h.durable(ev.TURN_START)) == 1
    assert len(h.durable(ev.STEP_START)) == 2
    assert "S2" not in h.request_texts(0)
    assert "S2" in h.request_texts(1)
    h.check()


async def test_09_steer_from_a_tool_body_lands_in_step_2_of_the_same_turn(tmp_path: Path) -> None:
    async def body(args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        ctx.agent.steer(msg("S"))
        return ToolOutcome.text("done")

    h = Harness(
        tmp_path, [reply("", tool_calls=[("c1", "t", "{}")]), reply("final")], tools=[FnTool("t", body)]
    )
    h.agent.followup(msg("A"))
    await h.idle()
    assert h.user_messages() == [(1, "A"), (1, "S")]
    types = h.types()
    s_index = [i for i, e in enumerate(h.durable()) if e.type == ev.USER_MESSAGE][1]
    step2 = next(e for e in h.durable(ev.STEP_START) if e.data["step"] == 2)
    assert step2.seq < h.log[s_index].seq
    assert types.count(ev.TURN_START) == 1
    h.check()


async def test_10_tool_injects_enter_after_the_batch_and_are_frozen(tmp_path: Path) -> None:
    content = [{"type": "text", "text": "N1"}]

    async def body(args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        ctx.agent.inject(UserMessage.create(content, {"kind": "plugin", "plugin": "p"}))
        ctx.agent.inject(msg("N2"))
        return ToolOutcome.text("r")

    h = Harness(
        tmp_path,
        [reply("", tool_calls=[("c1", "t", "{}"), ("c2", "t", "{}")]), reply("end")],
        tools=[FnTool("t", body, parallel_safe=False)],
    )
    h.agent.followup(msg("A"))
    await h.idle()
    content[0]["text"] = "mutated"  # a later change to the caller's object has no effect
    kinds = [e.type for e in h.log if e.type in (ev.TOOL_RESULT, ev.USER_MESSAGE, ev.STEP_START)]
    assert kinds == [
        ev.STEP_START,
        ev.USER_MESSAGE,
        ev.TOOL_RESULT,
        ev.TOOL_RESULT,
        ev.STEP_START,
        ev.USER_MESSAGE,
        ev.USER_MESSAGE,
        ev.USER_MESSAGE,
        ev.USER_MESSAGE,
    ]
    assert [t for _, t in h.user_messages()] == ["A", "N1", "N2", "N1", "N2"]
    assert h.request_texts(1)[-4:] == ["N1", "N2", "N1", "N2"]
    h.check()


async def test_11_post_execute_contexts_follow_all_results_in_call_order(tmp_path: Path) -> None:
    from dsh_daemon.agent.hooks import Hooks
    from dsh_daemon.agent.tools import PostExecuteDecision, ToolCall

    async def post(call: ToolCall, outcome: ToolOutcome) -> PostExecuteDecision:
        return PostExecuteDecision(additional_contexts=(msg(f"ctx-{h.provider_id(call.call_id)}"),))

    async def slow_first(args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        if h.provider_id(ctx.call.call_id) == "c1":
            await asyncio.sleep(0.02)  # finishes last, still commits first
        return ToolOutcome.text(h.provider_id(ctx.call.call_id))

    h = Harness(
        tmp_path,
        [reply("", tool_calls=[("c1", "t", "{}"), ("c2", "t", "{}")]), reply("end")],
        tools=[FnTool("t", slow_first)],
        hooks=Hooks(post_execute=[post]),
    )
    h.agent.followup(msg("A"))
    await h.idle()
    assert h.request_texts(1)[-4:] == ["result:c1", "result:c2", "ctx-c1", "ctx-c2"]
    h.check()


async def test_12_parked_next_turn_waits_for_a_waking_send(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.agent.send(msg("X"), target="next-turn", wakeup=False)
    h.agent.inject(msg("I"))
    await asyncio.sleep(0.01)
    assert h.durable(ev.TURN_START) == []
    h.agent.followup(msg("B"))
    await h.idle()
    assert h.user_messages() == [(1, "I"), (1, "X"), (2, "B")]
    h.check()


async def test_13_non_waking_next_turn_while_running_runs_next(tmp_path: Path) -> None:
    h = Harness(tmp_path, [[Sleep(0.02), *reply("one")]])
    h.agent.followup(msg("A"))
    h.agent.send(msg("X"), target="next-turn", wakeup=False)
    await h.idle()
    assert h.user_messages() == [(1, "A"), (2, "X")]
    h.check()


async def test_14_duplicate_pending_id_raises_and_changes_nothing(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.agent.inject(msg("one", id="dup"))
    before = list(h.log)
    with pytest.raises(DuplicateMessageIdError):
        h.agent.followup(msg("two", id="dup"))
    assert h.log == before
    assert h.agent.status == "idle"
    h.check()


async def test_15_non_json_content_is_rejected_before_logging(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    with pytest.raises(InvalidMessageError):
        h.agent.inject(UserMessage.create([{"type": "image", "data": float("nan")}]))
    with pytest.raises(InvalidMessageError):
        UserMessage.create("x", {"kind": "plugin", "plugin": "p", "bad": {1, 2}})
    assert h.log == []


async def test_16_send_from_durable_observer_fails_contained(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    errors: list[BaseException] = []

    def observer(event: Any) -> None:
        if event.type == ev.INBOX_SPLICED and not errors:
            try:
                h.agent.followup(msg("nested"))
            except ReentrantAppendError as exc:
                errors.append(exc)
                raise

    h.agent.subscribe(observer)
    h.agent.followup(msg("outer"))
    await h.idle()
    assert len(errors) == 1
    assert h.user_messages() == [(1, "outer")]
    h.check()


async def test_hang_then_cancel_is_clean(tmp_path: Path) -> None:
    h = Harness(tmp_path, [[Hang()]])
    h.agent.followup(msg("A"))
    await asyncio.sleep(0.01)
    h.agent.cancel()
    await h.idle()
    assert h.turn_ends() == [{"kind": "aborted", "cause": "user"}]
    assert h.provider.closed == 1
    h.check()


async def test_call_step_runs_code_mid_stream(tmp_path: Path) -> None:
    seen: list[str] = []
    h = Harness(tmp_path, [[Call(lambda: seen.append("mid")), *reply("x")]])
    h.agent.followup(msg("A"))
    await h.idle()
    assert seen == ["mid"]
