"""The whole agent loop (session manager, store, loop, retries) driving the adapter against the fake."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from dsh_daemon.agent.derive import rebuild_requests
from dsh_daemon.agent.loop import Agent, AgentOptions
from dsh_daemon.agent.retry import RetryPolicy
from dsh_daemon.agent.tools import ToolContext, ToolOutcome, ToolRegistry
from dsh_daemon.host.manager import SessionManager
from dsh_daemon.llm.deepseek import DeepSeekProvider
from dsh_daemon.llm.serialize import encode_body, request_body
from dsh_daemon.model.events import Event
from dsh_daemon.model.jsonvalue import FrozenDict, thaw
from dsh_daemon.model.messages import UserMessage
from dsh_daemon.model.provider import ToolSpec
from tests.fakes.deepseek_server import (
    STREAM_A,
    STREAM_B,
    STREAM_C,
    STREAM_F,
    FakeDeepSeek,
    Reply,
    text_stream,
)
from tests.llm.support import TEST_KEY, make_config


@dataclass
class WeatherTool:
    spec: ToolSpec = field(
        default_factory=lambda: ToolSpec(
            "get_weather",
            "Current weather for a city",
            FrozenDict(
                {"type": "object", "properties": FrozenDict({"city": FrozenDict({"type": "string"})})}
            ),
        )
    )
    parallel_safe: bool = True

    async def execute(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        return ToolOutcome.text(f"{args['city']}: sunny, 21 C")


@dataclass
class Harness:
    fake: FakeDeepSeek
    manager: SessionManager
    provider: DeepSeekProvider

    async def run(self, prompt: str = "hi") -> Agent:
        agent = self.manager.create()
        agent.followup(UserMessage.create(prompt))
        await agent.when_idle()
        return agent


def events_of(agent: Agent, kind: str) -> list[Event]:
    return [e for e in agent.log.events if e.type == kind]


def turn_end(agent: Agent) -> Mapping[str, Any]:
    ends = events_of(agent, "turn/end")
    assert len(ends) == 1
    return ends[0].data["reason"]


@contextlib.asynccontextmanager
async def make_harness(tmp_path: Path, fake: FakeDeepSeek, **config: Any) -> AsyncIterator[Harness]:
    provider = DeepSeekProvider(make_config(fake, **config))
    registry = ToolRegistry()
    registry.add(WeatherTool())
    manager = SessionManager(
        tmp_path / "state",
        provider=provider,
        options=lambda: AgentOptions(model="deepseek-v4-flash", retry=RetryPolicy(base_s=0.01)),
        tools=lambda _sid: registry,
    )
    try:
        yield Harness(fake, manager, provider)
    finally:
        await manager.close()
        await provider.aclose()


@pytest.fixture
async def harness(tmp_path: Path, fake: FakeDeepSeek) -> AsyncIterator[Harness]:
    async with make_harness(tmp_path, fake) as h:
        yield h


async def test_text_turn_with_reasoning_and_usage(harness: Harness) -> None:
    harness.fake.script(Reply.stream(STREAM_B))
    agent = await harness.run()
    assert turn_end(agent) == {"kind": "completed"}
    [message] = events_of(agent, "assistant/message")
    assert thaw(message.data["message"]["content"]) == [
        {"type": "reasoning", "text": "The user greets me."},
        {"type": "text", "text": "Hi!"},
    ]
    [usage] = events_of(agent, "turn/usage")
    assert usage.data["usage"]["inputTokens"] == 20
    assert usage.data["usage"]["reasoningTokens"] == 6
    assert usage.data["usage"]["costUsd"] == pytest.approx((20 * 0.14 + 9 * 0.28) / 1e6)
    body = harness.fake.requests[0].json
    # Adapter defaults were materialised into the durable header and sent from there.
    assert body["max_tokens"] == 256000 and body["thinking"] == {"type": "enabled"}
    [header] = events_of(agent, "request/header")
    assert header.data["header"]["config"]["maxTokens"] == 256000


async def test_retries_after_server_errors_then_success(harness: Harness) -> None:
    harness.fake.fail_next(2, 503)
    harness.fake.script(Reply.stream(STREAM_A))
    agent = await harness.run()
    assert turn_end(agent) == {"kind": "completed"}
    retries = events_of(agent, "llm/retry")
    assert [r.data["retry"] for r in retries] == [1, 2]
    assert {r.data["error"]["code"] for r in retries} == {"SERVER"}
    assert all("Server Overloaded" in r.data["error"]["message"] for r in retries)
    assert len(harness.fake.requests) == 3
    assert len({r.body for r in harness.fake.requests}) == 1  # the same request each attempt
    assert [thaw(e.data["message"]["content"]) for e in events_of(agent, "assistant/message")] == [
        [{"type": "text", "text": "Hello there!"}]
    ]


async def test_retry_after_from_the_provider_sets_the_delay(harness: Harness) -> None:
    harness.fake.fail_next(1, 429, retry_after="0.05")
    agent = await harness.run()
    [retry] = events_of(agent, "llm/retry")
    assert retry.data["delayMs"] == 50
    assert retry.data["error"]["retryAfterMs"] == 50
    assert turn_end(agent) == {"kind": "completed"}


async def test_truncated_stream_is_retried_and_its_prefix_discarded(harness: Harness) -> None:
    harness.fake.script(Reply.stream(STREAM_F, tail="reset"), Reply.stream(STREAM_A))
    agent = await harness.run()
    [retry] = events_of(agent, "llm/retry")
    assert retry.data["error"]["code"] == "STREAM_CLOSED"
    messages = events_of(agent, "assistant/message")
    assert [thaw(m.data["message"]["content"]) for m in messages] == [
        [{"type": "text", "text": "Hello there!"}]
    ]
    assert turn_end(agent) == {"kind": "completed"}


async def test_stall_times_out_and_is_retried(tmp_path: Path, fake: FakeDeepSeek) -> None:
    async with make_harness(tmp_path, fake, idle_timeout_s=0.3) as harness:
        fake.script(Reply.stream(STREAM_F, tail="stall"), Reply.stream(STREAM_A))
        agent = await harness.run()
        assert [r.data["error"]["code"] for r in events_of(agent, "llm/retry")] == ["TIMEOUT"]
        assert turn_end(agent) == {"kind": "completed"}
        assert fake.requests[0].disconnected.is_set()


@pytest.mark.parametrize(
    ("status", "code"), [(401, "AUTH"), (402, "QUOTA"), (400, "CONTEXT_WINDOW_EXCEEDED")]
)
async def test_non_retryable_errors_end_the_turn(harness: Harness, status: int, code: str) -> None:
    harness.fake.fail_next(1, status)
    agent = await harness.run()
    reason = turn_end(agent)
    assert reason["kind"] == "error"
    assert reason["error"]["code"] == code
    assert reason["error"]["status"] == status
    assert events_of(agent, "llm/retry") == []
    assert len(harness.fake.requests) == 1


async def test_tool_loop_echoes_reasoning_and_tool_results(harness: Harness) -> None:
    harness.fake.script(Reply.stream(STREAM_C), Reply.stream(STREAM_B))
    agent = await harness.run("weather in Paris and Berlin?")
    assert turn_end(agent) == {"kind": "completed"}
    assert len(harness.fake.requests) == 2  # the fake is strict: a missing reasoning echo would be a 400
    first, second = (r.json for r in harness.fake.requests)
    assert first["tools"][0]["function"]["name"] == "get_weather"
    assert second["messages"][0] == {"role": "user", "content": "weather in Paris and Berlin?"}
    assert second["messages"][1] == {
        "role": "assistant",
        "content": "",
        "reasoning_content": "Need weather for both cities.",
        "tool_calls": [
            {
                "id": "call_00_Qk3v8mZ1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            },
            {
                "id": "call_01_Wn7pR2cX",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Berlin"}'},
            },
        ],
    }
    assert second["messages"][2:] == [
        {"role": "tool", "tool_call_id": "call_00_Qk3v8mZ1", "content": "Paris: sunny, 21 C"},
        {"role": "tool", "tool_call_id": "call_01_Wn7pR2cX", "content": "Berlin: sunny, 21 C"},
    ]
    # Every request the fake received is rebuilt byte for byte from the durable log.
    rebuilt = rebuild_requests(agent.log.events)
    assert [encode_body(request_body(r, default_model="")) for r in rebuilt] == [
        r.body for r in harness.fake.requests
    ]
    usage = events_of(agent, "turn/usage")[0].data["usage"]
    assert usage["cacheReadTokens"] == 128 and usage["inputTokens"] == 52 + 20


async def test_cancel_mid_stream_closes_the_connection_and_keeps_the_prefix(harness: Harness) -> None:
    harness.fake.script(Reply.stream(text_stream(["tick "] * 500), delay=0.02))
    agent = harness.manager.create()
    first_delta = asyncio.Event()
    agent.subscribe(lambda e: first_delta.set() if e.type == "assistant/delta" else None)
    agent.followup(UserMessage.create("count"))
    await first_delta.wait()
    agent.cancel("user")
    await agent.when_idle()
    assert await harness.fake.wait_disconnect()
    assert turn_end(agent) == {"kind": "aborted", "cause": "user"}
    [message] = events_of(agent, "assistant/message")
    assert message.data["interrupted"] is True
    assert message.data["message"]["content"][0]["text"].startswith("tick")


async def test_the_key_never_reaches_events_or_the_store(harness: Harness) -> None:
    echoed = f'{{"error":{{"message":"Authentication Fails, Your api key: {TEST_KEY} is invalid"}}}}'
    harness.fake.fail_next(1, 401, echoed)
    agent = harness.manager.create()
    published: list[str] = []
    agent.subscribe(lambda e: published.append(json.dumps({"type": e.type, "data": e.data})))
    agent.followup(UserMessage.create("hi"))
    await agent.when_idle()
    assert turn_end(agent)["error"]["code"] == "AUTH"
    assert "[redacted]" in turn_end(agent)["error"]["message"]
    assert published and not [p for p in published if TEST_KEY in p]
    assert TEST_KEY not in json.dumps([{"type": e.type, "data": e.data} for e in agent.log.events])
    await harness.manager.close()
    files = list(harness.manager.store.state_dir.iterdir())
    assert files
    for path in files:
        assert TEST_KEY.encode() not in path.read_bytes(), path.name


async def test_a_cancelled_stream_drops_its_connection_and_the_next_turn_opens_a_new_one(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """Issue 38.1: the turn ends on a cancel without waiting for the stream to close; the stream
    still closes its response as it unwinds, so the fake sees the client go and the connection is
    never pooled (the next request comes on a new one)."""
    async with make_harness(tmp_path, fake) as harness:
        fake.script(Reply.stream(text_stream(["partial"])[:-2], tail="stall"), Reply.stream(STREAM_A))
        agent = harness.manager.create()
        agent.followup(UserMessage.create("first"))
        for _ in range(3000):  # (a bound on a failure)
            if events_of(agent, "assistant/chunk"):
                break
            await asyncio.sleep(0.01)
        agent.cancel(keep_inbox=True)
        await agent.when_idle()
        assert turn_end(agent) == {"kind": "aborted", "cause": "user"}
        await asyncio.to_thread(fake.requests[0].disconnected.wait, 30)
        assert fake.requests[0].disconnected.is_set()
        agent.followup(UserMessage.create("second"))
        await agent.when_idle()
        assert events_of(agent, "turn/end")[-1].data["reason"] == {"kind": "completed"}
        assert fake.connections == 2
