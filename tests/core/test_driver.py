"""The driver: wake, latch, cancel and shutdown races, retiring after empty turns, retry policy, a
failed durable write. Each test failed before its fix."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from dsh_daemon.agent.hooks import Enter, Hooks, PreStepContext
from dsh_daemon.agent.invariants import check_log
from dsh_daemon.agent.retry import RetryPolicy
from dsh_daemon.llm.scripted import Call, Hang, ScriptedProvider, Sleep, reply, usage
from dsh_daemon.model import events as ev
from dsh_daemon.model.events import Event
from dsh_daemon.model.provider import RATE_LIMIT, Finish, LlmFailure, ModelRequest, StreamEvent, TextDelta
from dsh_daemon.session.log import ReentrantAppendError
from dsh_daemon.session.store import SessionStore
from tests.core.harness import Harness, msg


class SlowCloseProvider:
    """Like the DeepSeek adapter after [DONE]: closing the stream is a real suspension."""

    def __init__(self, inner: ScriptedProvider) -> None:
        self.inner = inner
        self.name = inner.name

    compact_at_ratio = None

    def default_config(self, model: str) -> Mapping[str, Any]:
        return {}

    def context_window(self, model: str) -> int | None:
        return None

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        generator = self.inner.stream(request)

        class Slow:
            def __aiter__(self) -> Slow:
                return self

            async def __anext__(self) -> StreamEvent:
                return await generator.__anext__()

            async def aclose(self) -> None:
                await asyncio.sleep(0.05)
                await generator.aclose()  # type: ignore[attr-defined]

        return Slow()


async def test_keep_inbox_cancel_after_the_stream_leaves_a_steer_parked(tmp_path: Path) -> None:
    box: dict[str, Harness] = {}
    h = Harness(
        tmp_path, [[TextDelta("a"), Call(lambda: box["h"].agent.steer(msg("S"))), Finish("stop", usage())]]
    )
    box["h"] = h

    def on_message(event: Event) -> None:
        if event.type == ev.ASSISTANT_MESSAGE:
            h.agent.cancel("user", keep_inbox=True)

    h.agent.subscribe(on_message)
    h.agent.followup(msg("A"))
    await h.idle()
    assert [m.text for m in h.agent.inbox.next_step] == ["S"]  # not claimed by the aborted driver
    h.check()


async def test_shutdown_while_the_stream_closes_keeps_an_acknowledged_steer(tmp_path: Path) -> None:
    h = Harness(tmp_path, [reply("one")])
    h.agent.provider = SlowCloseProvider(h.provider)
    h.agent.followup(msg("A"))
    for _ in range(200):
        if h.durable(ev.ASSISTANT_CHUNK):
            break
        await asyncio.sleep(0.001)
    await asyncio.sleep(0.01)
    h.agent.steer(msg("S"))
    sid = h.agent.session_id
    await h.manager.close()
    again = Harness(tmp_path, session_id=sid)
    assert [m.text for m in again.agent.inbox.next_step] == ["S"]


async def test_an_idle_listener_and_a_latched_wake_do_not_start_two_drivers(tmp_path: Path) -> None:
    h = Harness(tmp_path, [[Hang()], [Sleep(0.02), *reply("b")], [Sleep(0.02), *reply("c")]])
    sent: list[int] = []

    def on_status(event: Event) -> None:
        if event.type == ev.STATUS and event.data["status"] == "idle" and not sent:
            sent.append(1)
            h.agent.followup(msg("C"))

    h.agent.followup(msg("A"))
    await asyncio.sleep(0.01)
    h.agent.cancel("user", keep_inbox=True)
    h.agent.followup(msg("B"))  # latched
    h.agent.subscribe(on_status)
    await h.idle()
    await asyncio.sleep(0.1)
    await h.idle()
    assert check_log(h.log) == []
    assert [t for t, _ in h.user_messages()] == [1, 2, 3]


async def test_a_failed_turn_end_write_is_retried_not_dropped(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    store = h.agent.log.store
    real = store.append_events
    failed: list[int] = []

    def flaky(sid: str, events: Any, **kw: Any) -> None:
        events = list(events)
        if not failed and any(e.type == ev.TURN_END for e in events):
            failed.append(1)
            raise sqlite3.OperationalError("database is locked")
        real(sid, events, **kw)

    store.append_events = flaky  # type: ignore[method-assign]
    h.agent.followup(msg("A"))
    await h.idle()
    h.agent.followup(msg("B"))
    await h.idle()
    h.agent.log.commit()
    assert failed and check_log(h.log) == []
    assert check_log(SessionStore(tmp_path).load_events(h.agent.session_id)) == []


async def test_wake_from_a_durable_observer_is_refused_and_leaves_the_agent_usable(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    errors: list[BaseException] = []

    def on_splice(event: Event) -> None:
        if event.type == ev.INBOX_SPLICED and not errors:
            try:
                h.agent.wake()
            except ReentrantAppendError as exc:
                errors.append(exc)

    h.agent.subscribe(on_splice)
    h.agent.inject(msg("X"))
    assert errors and h.agent.status == "idle"
    h.agent.followup(msg("A"))
    await asyncio.wait_for(h.idle(), 5)
    assert h.user_messages() == [(1, "X"), (1, "A")]


async def test_an_empty_first_step_retires_the_driver(tmp_path: Path) -> None:
    async def drop_a(ctx: PreStepContext, next: Any) -> Any:
        decision = await next()
        return Enter(tuple(m for m in decision.messages if m.text != "A"))

    h = Harness(tmp_path, hooks=Hooks(pre_step=[drop_a]))
    h.agent.followup(msg("A"))
    h.agent.followup(msg("B"))
    await h.idle()
    assert [m.text for m in h.agent.inbox.next_turn] == ["B"]
    assert h.turn_ends() == [{"kind": "completed"}]


async def test_cancel_aborts_even_when_the_discard_cannot_be_written(tmp_path: Path) -> None:
    h = Harness(tmp_path, [[Hang()]])
    h.agent.followup(msg("A"))
    h.agent.followup(msg("B"))
    await asyncio.sleep(0.02)
    store = h.agent.log.store
    real = store.append_events

    def locked(*args: Any, **kw: Any) -> None:
        raise sqlite3.OperationalError("database is locked")

    store.append_events = locked  # type: ignore[method-assign]
    with pytest.raises(sqlite3.OperationalError):
        h.agent.cancel()
    store.append_events = real  # type: ignore[method-assign]
    await asyncio.wait_for(h.idle(), 5)
    assert h.turn_ends() == [{"kind": "aborted", "cause": "user"}]


def test_a_retry_after_beyond_the_cap_falls_back_to_the_backoff() -> None:
    policy = RetryPolicy()
    assert policy.delay(LlmFailure(RATE_LIMIT, "x", retry_after_ms=2000), 0) == 2.0
    delay = policy.delay(LlmFailure(RATE_LIMIT, "x", retry_after_ms=30_000), 0)
    assert delay is not None and 0.45 <= delay <= 0.55
    assert policy.delay(LlmFailure(RATE_LIMIT, "x"), 5) is None  # budget spent
    assert policy.delay(LlmFailure("AUTH", "x"), 0) is None


async def test_wake_while_a_cancelled_turn_winds_down_reports_the_run(tmp_path: Path) -> None:
    h = Harness(tmp_path, [[Hang()]])
    h.agent.followup(msg("A"))
    await asyncio.sleep(0.01)
    h.agent.cancel(keep_inbox=True)
    h.agent.send(msg("B"), target="next-turn", wakeup=False)
    assert h.agent.wake() is True
    await h.idle()
    assert h.user_messages() == [(1, "A"), (2, "B")]


async def test_a_later_turn_whose_first_batch_enters_empty_retires_the_driver(tmp_path: Path) -> None:
    """Issue 8 item 6: the step count of turn 1 leaked into turn 2, so an empty first batch there
    did not retire the driver (README: the rest of the queue stays parked)."""
    hooks = Hooks()

    async def drop_b(ctx: PreStepContext, inner: Any) -> Any:
        if any(m.content[0].text == "B" for m in ctx.messages):
            return Enter(())
        return await inner()

    hooks.pre_step.append(drop_b)
    h = Harness(tmp_path, [reply("one"), reply("three")], hooks=hooks)
    h.agent.followup(msg("A"))
    h.agent.followup(msg("B"))
    h.agent.followup(msg("C"))
    await h.idle()
    assert len(h.durable(ev.TURN_START)) == 2
    assert [m.content[0].text for m in h.agent.inbox.next_turn] == ["C"]
    h.check()
