"""The adapter over real HTTP against the fake DeepSeek server: streams, failures, timeouts, cancel."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Sequence

import pytest

from dsh_daemon.llm.deepseek import DeepSeekProvider
from dsh_daemon.model.jsonvalue import freeze_json
from dsh_daemon.model.messages import UserMessage
from dsh_daemon.model.provider import (
    Finish,
    ModelRequest,
    ProviderFailure,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
)
from tests.fakes.deepseek_server import (
    REASONING_MISSING_400,
    STREAM_A,
    STREAM_B,
    STREAM_C,
    STREAM_D,
    STREAM_EMPTY,
    STREAM_F,
    FakeDeepSeek,
    Reply,
    Stall,
    stream_e,
    text_stream,
    wire,
)
from tests.llm.support import TEST_KEY, make_config


def hello_request(**config: object) -> ModelRequest:
    base = {"provider": "deepseek", "model": "deepseek-v4-flash", **config}
    return ModelRequest(freeze_json(base), None, (), (UserMessage.create("hi"),))


async def collect(provider: DeepSeekProvider, request: ModelRequest | None = None) -> list[StreamEvent]:
    return [event async for event in provider.stream(request or hello_request())]


async def failure_of(provider: DeepSeekProvider, request: ModelRequest | None = None) -> ProviderFailure:
    with pytest.raises(ProviderFailure) as caught:
        await collect(provider, request)
    return caught.value


def texts(events: Sequence[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


# ---- streams A-F ----------------------------------------------------------------------------------


async def test_stream_a(fake: FakeDeepSeek, adapter: DeepSeekProvider) -> None:
    fake.script(Reply.stream(STREAM_A))
    events = await collect(adapter)
    assert events[:-1] == [TextDelta("Hello"), TextDelta(" there"), TextDelta("!")]
    finish = events[-1]
    assert isinstance(finish, Finish) and finish.reason == "stop"
    assert finish.usage is not None
    assert (finish.usage["inputTokens"], finish.usage["outputTokens"]) == (12, 3)
    assert finish.usage["costUsd"] > 0  # deepseek-v4-flash has a shipped default price


async def test_stream_b_reasoning_then_text(fake: FakeDeepSeek, adapter: DeepSeekProvider) -> None:
    fake.script(Reply.stream(STREAM_B))
    events = await collect(adapter, hello_request(thinking=True))
    assert events[:-1] == [
        ReasoningDelta("The user"),
        ReasoningDelta(" greets me."),
        TextDelta("Hi"),
        TextDelta("!"),
    ]
    assert isinstance(events[-1], Finish) and events[-1].usage is not None
    assert events[-1].usage["reasoningTokens"] == 6


async def test_stream_c_keep_alives_and_parallel_tool_calls(
    fake: FakeDeepSeek, adapter: DeepSeekProvider
) -> None:
    fake.script(Reply.stream(STREAM_C))
    events = await collect(adapter)
    calls = [e for e in events if isinstance(e, ToolCallDelta)]
    assert [(c.index, c.id, c.name) for c in calls if c.id] == [
        (0, "call_00_Qk3v8mZ1", "get_weather"),
        (1, "call_01_Wn7pR2cX", "get_weather"),
    ]
    assert "".join(c.arguments for c in calls if c.index == 0) == '{"city": "Paris"}'
    assert "".join(c.arguments for c in calls if c.index == 1) == '{"city": "Berlin"}'
    finish = events[-1]
    assert isinstance(finish, Finish) and finish.reason == "tool-calls"
    assert finish.usage is not None
    assert (finish.usage["inputTokens"], finish.usage["cacheReadTokens"]) == (52, 128)


async def test_stream_d_trailing_usage_chunk(fake: FakeDeepSeek, adapter: DeepSeekProvider) -> None:
    fake.script(Reply.stream(STREAM_D))
    events = await collect(adapter)
    assert events[0] == TextDelta("Hello")
    assert isinstance(events[-1], Finish) and events[-1].usage is not None
    assert events[-1].usage["inputTokens"] == 12


@pytest.mark.parametrize(
    ("reason", "outcome"),
    [
        ("length", "max-tokens"),
        ("content_filter", "CONTENT_FILTER"),
        ("insufficient_system_resource", "INSUFFICIENT_SYSTEM_RESOURCE"),
    ],
)
async def test_stream_e_abnormal_finishes(
    fake: FakeDeepSeek, adapter: DeepSeekProvider, reason: str, outcome: str
) -> None:
    fake.script(Reply.stream(stream_e(reason)))
    if outcome == "max-tokens":
        events = await collect(adapter)
        assert isinstance(events[-1], Finish) and events[-1].reason == "max-tokens"
    else:
        assert (await failure_of(adapter)).failure.code == outcome


@pytest.mark.parametrize("tail", ["end", "close", "reset"])
async def test_stream_f_truncation_is_stream_closed(
    fake: FakeDeepSeek, adapter: DeepSeekProvider, tail: str
) -> None:
    fake.script(Reply.stream(STREAM_F, tail=tail, request_id="req-f"))  # type: ignore[arg-type]
    seen: list[StreamEvent] = []
    with pytest.raises(ProviderFailure) as caught:
        async for event in adapter.stream(hello_request()):
            seen.append(event)
    assert seen == [TextDelta("Hello")]  # deltas before the break were delivered
    assert caught.value.failure.code == "STREAM_CLOSED"
    assert caught.value.failure.request_id == "req-f"


async def test_done_without_its_blank_line_is_truncation(
    fake: FakeDeepSeek, adapter: DeepSeekProvider
) -> None:
    fake.script(Reply.stream(wire(STREAM_A)[:-1]))
    assert (await failure_of(adapter)).failure.code == "STREAM_CLOSED"


async def test_reset_before_headers_is_transport(fake: FakeDeepSeek, adapter: DeepSeekProvider) -> None:
    fake.script(Reply.reset_before_headers())
    assert (await failure_of(adapter)).failure.code == "TRANSPORT"


async def test_connection_refused_is_transport() -> None:
    with socket.socket() as probe:  # a port that was free a moment ago and has no listener now
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    provider = DeepSeekProvider(make_config(FakeDeepSeek(), base_url=f"http://127.0.0.1:{port}"))
    failure = (await failure_of(provider)).failure
    assert failure.code == "TRANSPORT"
    assert f"127.0.0.1:{port}" in failure.message


async def test_malformed_event_and_empty_response(fake: FakeDeepSeek, adapter: DeepSeekProvider) -> None:
    fake.script(Reply.stream([STREAM_A[0], "data: {oops", "data: [DONE]"]), Reply.stream(STREAM_EMPTY))
    assert (await failure_of(adapter)).failure.code == "MALFORMED_RESPONSE"
    assert (await failure_of(adapter)).failure.code == "EMPTY_RESPONSE"


async def test_json_error_body_with_status_200(fake: FakeDeepSeek, adapter: DeepSeekProvider) -> None:
    fake.script(Reply(200, (("content-type", "application/json"),), Reply.error(503).actions, chunked=False))
    failure = (await failure_of(adapter)).failure
    assert failure.code == "SERVER" and "Server Overloaded" in failure.message


# ---- split writes, drip, keep-alives, timeouts ----------------------------------------------------


@pytest.mark.parametrize(("split", "delay"), [(1, 0.0), (3, 0.0005), (7, 0.0005)])
async def test_split_writes_mid_utf8(
    fake: FakeDeepSeek, adapter: DeepSeekProvider, split: int, delay: float
) -> None:
    # Every write is its own chunk frame; the pauses make the client's reads end mid-character too.
    pieces = ["héllo ", "wörld ", "你好", "🙂"]
    fake.script(Reply.stream(text_stream(pieces), split=split, delay=delay))
    events = await collect(adapter)
    assert events[:-1] == [TextDelta(p) for p in pieces]
    assert isinstance(events[-1], Finish)


async def test_slow_drip_delivers_deltas_before_the_reply_ends(
    fake: FakeDeepSeek, adapter: DeepSeekProvider
) -> None:
    fake.script(Reply.stream(STREAM_B, delay=0.05))
    stream = adapter.stream(hello_request())
    first = await anext(stream)
    assert first == ReasoningDelta("The user")
    assert not fake.requests[0].completed.is_set()  # streamed, not buffered until the end
    rest = [event async for event in stream]
    assert texts(rest) == "Hi!"


async def test_keep_alives_longer_than_the_idle_timeout_do_not_time_out(fake: FakeDeepSeek) -> None:
    # 12 comments 0.15 s apart: the silence never reaches 0.5 s, but the whole wait is well past it.
    fake.script(Reply.stream(STREAM_A, keepalives=12, keepalive_every=0.15))
    provider = DeepSeekProvider(make_config(fake, idle_timeout_s=0.5))
    events = await collect(provider)
    assert texts(events) == "Hello there!"
    await provider.aclose()


async def test_stall_mid_stream_times_out_and_drops_the_connection(fake: FakeDeepSeek) -> None:
    fake.script(Reply.stream(STREAM_F, tail="stall"))
    provider = DeepSeekProvider(make_config(fake, idle_timeout_s=0.3))
    seen: list[StreamEvent] = []
    with pytest.raises(ProviderFailure) as caught:
        async for event in provider.stream(hello_request()):
            seen.append(event)
    assert seen == [TextDelta("Hello")]
    assert caught.value.failure.code == "TIMEOUT"
    assert await fake.wait_disconnect()
    await provider.aclose()


async def test_stall_before_headers_times_out(fake: FakeDeepSeek) -> None:
    fake.script(Reply(0, (), (Stall(),)))
    provider = DeepSeekProvider(make_config(fake, idle_timeout_s=0.3))
    assert (await failure_of(provider)).failure.code == "TIMEOUT"
    await provider.aclose()


# ---- HTTP errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "code", "text"),
    [
        (400, "CONTEXT_WINDOW_EXCEEDED", "maximum context length"),
        (413, "INVALID_REQUEST", "error 413"),
        (401, "AUTH", "Authentication Fails"),
        (402, "QUOTA", "Insufficient Balance"),
        (422, "HTTP_422", "deserialize"),
        (429, "RATE_LIMIT", "Rate Limit Reached"),
        (500, "SERVER", "Internal Server Error"),
        (502, "SERVER", "Bad Gateway"),
        (503, "SERVER", "Server Overloaded"),
    ],
)
async def test_error_bodies(
    fake: FakeDeepSeek, adapter: DeepSeekProvider, status: int, code: str, text: str
) -> None:
    fake.fail_next(1, status)
    failure = (await failure_of(adapter)).failure
    assert (failure.code, failure.status) == (code, status)
    assert text in failure.message


async def test_other_400_is_invalid_request(fake: FakeDeepSeek, adapter: DeepSeekProvider) -> None:
    fake.fail_next(1, 400, REASONING_MISSING_400)
    failure = (await failure_of(adapter)).failure
    assert failure.code == "INVALID_REQUEST"
    assert "reasoning_content in the thinking mode must be passed back" in failure.message


async def test_unusable_base_url_is_a_config_failure(fake: FakeDeepSeek) -> None:
    provider = DeepSeekProvider(make_config(fake, base_url="ftp://example.invalid"))
    failure = (await failure_of(provider)).failure
    assert failure.code == "CONFIG" and "ftp://example.invalid" in failure.message
    assert fake.requests == []


async def test_retry_after_and_request_id_are_kept(fake: FakeDeepSeek, adapter: DeepSeekProvider) -> None:
    fake.script(Reply.error(429, retry_after=3, request_id="req-429"))
    failure = (await failure_of(adapter)).failure
    assert (failure.retry_after_ms, failure.request_id) == (3000, "req-429")


async def test_fail_next_counts_then_scripted_replies_follow(
    fake: FakeDeepSeek, adapter: DeepSeekProvider
) -> None:
    fake.script(Reply.stream(STREAM_B))
    fake.fail_next(2, 500)
    assert (await failure_of(adapter)).failure.code == "SERVER"
    assert (await failure_of(adapter)).failure.code == "SERVER"
    assert texts(await collect(adapter)) == "Hi!"
    assert len(fake.requests) == 3


# ---- request, headers, key --------------------------------------------------------------------------


async def test_request_headers_and_body(fake: FakeDeepSeek, adapter: DeepSeekProvider) -> None:
    await collect(adapter, hello_request(thinking=False, maxTokens=1000, purpose="session-title"))
    request = fake.requests[0]
    assert (request.method, request.path) == ("POST", "/chat/completions")
    headers = request.headers
    assert headers["authorization"] == f"Bearer {TEST_KEY}"
    assert headers["content-type"] == "application/json"
    assert headers["accept"] == "text/event-stream"
    assert headers["accept-encoding"] == "identity"
    assert headers["user-agent"].startswith("dsh-daemon/")
    assert headers["x-dsh-purpose"] == "session-title"
    assert not [name for name in headers if "harness" in name]
    assert request.json == {
        "model": "deepseek-v4-flash",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "thinking": {"type": "disabled"},
        "max_tokens": 1000,
    }


@pytest.mark.parametrize("base_url", ["https://api.deepseek.com", "https://api.deepseek.com/beta"])
async def test_missing_key_for_deepseek_fails_with_guidance_before_any_request(
    fake: FakeDeepSeek, base_url: str
) -> None:
    provider = DeepSeekProvider(make_config(fake, api_key=None, base_url=base_url))
    failure = (await failure_of(provider)).failure
    assert failure.code == "CONFIG"
    assert "DEEPSEEK_API_KEY" in failure.message
    assert fake.requests == []


async def test_a_local_endpoint_needs_no_key_and_gets_no_authorization_header(fake: FakeDeepSeek) -> None:
    """llama.cpp, Ollama, vLLM and LM Studio take no key: the request goes out without one."""
    fake.script(Reply.stream(text_stream(["local"])))
    provider = DeepSeekProvider(make_config(fake, api_key=None))
    assert texts(await collect(provider)) == "local"
    (request,) = fake.requests
    assert "authorization" not in request.headers


async def test_key_echoed_by_the_provider_is_redacted(fake: FakeDeepSeek, adapter: DeepSeekProvider) -> None:
    body = f'{{"error":{{"message":"Authentication Fails, Your api key: {TEST_KEY} is invalid"}}}}'
    fake.fail_next(1, 401, body)
    fake.script(Reply.stream([f'data: {{"error":{{"message":"bad key {TEST_KEY}"}}}}', "data: [DONE]"]))
    for _ in range(2):
        caught = await failure_of(adapter)
        assert TEST_KEY not in caught.failure.message
        assert TEST_KEY not in str(caught)
        assert "[redacted]" in caught.failure.message
    assert TEST_KEY not in repr(adapter)


async def test_default_config_materialises_adapter_defaults(fake: FakeDeepSeek) -> None:
    provider = DeepSeekProvider(make_config(fake, reasoning_effort="max"))
    assert provider.default_config("deepseek-v4-flash") == {
        "maxTokens": 256000,
        "thinking": True,
        "reasoningEffort": "max",
    }
    assert DeepSeekProvider(make_config(fake, thinking=None)).default_config("m") == {"maxTokens": 256000}


async def test_finished_streams_reuse_the_connection(fake: FakeDeepSeek, adapter: DeepSeekProvider) -> None:
    await collect(adapter)
    await collect(adapter)
    assert [r.connection for r in fake.requests] == [1, 1]


# ---- cancellation -----------------------------------------------------------------------------------


async def test_cancelling_the_consumer_task_closes_the_connection(
    fake: FakeDeepSeek, adapter: DeepSeekProvider
) -> None:
    fake.script(Reply.stream(STREAM_F, tail="stall"))
    got_first = asyncio.Event()

    async def consume() -> None:
        async for _ in adapter.stream(hello_request()):
            got_first.set()

    task = asyncio.create_task(consume())
    await got_first.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await fake.wait_disconnect()


async def test_aclose_mid_stream_closes_the_connection(fake: FakeDeepSeek, adapter: DeepSeekProvider) -> None:
    fake.script(Reply.stream(text_stream(["tick "] * 200), delay=0.02))
    stream = adapter.stream(hello_request())
    assert await anext(stream) == TextDelta("tick ")
    await stream.aclose()  # type: ignore[attr-defined]
    assert await fake.wait_disconnect()
    assert not fake.requests[0].completed.is_set()
