"""Chunk translation (provider.md §1.7) and usage mapping (§1.4), fed from the §3.2 streams."""

from __future__ import annotations

import json

import pytest

from dsh_daemon.agent.assembler import Assembler
from dsh_daemon.llm.config import DEFAULT_PRICES, ModelPrice
from dsh_daemon.llm.translate import ChunkTranslator, map_usage
from dsh_daemon.model.messages import ReasoningBlock, TextBlock, ToolCallBlock
from dsh_daemon.model.provider import (
    EMPTY_RESPONSE,
    MALFORMED_RESPONSE,
    QUOTA,
    SERVER,
    Delta,
    Finish,
    ProviderFailure,
    ReasoningDelta,
    TextDelta,
)
from tests.fakes.deepseek_server import STREAM_A, STREAM_B, STREAM_C, STREAM_D, STREAM_EMPTY, stream_e


def translate(lines: tuple[str, ...], price: ModelPrice | None = None) -> tuple[list[Delta], Finish]:
    translator = ChunkTranslator(price=price)
    deltas: list[Delta] = []
    for line in lines:
        if not line.startswith("data: "):
            continue
        payload = line.removeprefix("data: ")
        if payload == "[DONE]":
            return deltas, translator.finish()
        deltas.extend(translator.feed(payload))
    raise AssertionError("stream without [DONE]")


def test_stream_a_text_and_usage_on_last_chunk() -> None:
    deltas, finish = translate(STREAM_A)
    assert deltas == [TextDelta("Hello"), TextDelta(" there"), TextDelta("!")]
    assert finish.reason == "stop"
    assert finish.usage == {"inputTokens": 12, "cacheReadTokens": 0, "outputTokens": 3, "reasoningTokens": 0}


def test_stream_b_first_empty_reasoning_opens_nothing() -> None:
    deltas, finish = translate(STREAM_B)
    assert deltas == [
        ReasoningDelta("The user"),
        ReasoningDelta(" greets me."),
        TextDelta("Hi"),
        TextDelta("!"),
    ]
    assert finish.reason == "stop"
    assert finish.usage is not None and finish.usage["reasoningTokens"] == 6


def test_stream_c_assembles_two_parallel_calls_and_disjoint_cache_counts() -> None:
    deltas, finish = translate(STREAM_C, DEFAULT_PRICES["deepseek-v4-flash"])
    assembler = Assembler()
    for delta in deltas:
        assembler.add(delta)
    blocks = assembler.blocks()
    paris, berlin = (assembler.call_id(0), assembler.call_id(1))
    assert blocks == [
        ReasoningBlock("Need weather for both cities."),
        ToolCallBlock(paris, "get_weather", '{"city": "Paris"}', "call_00_Qk3v8mZ1"),
        ToolCallBlock(berlin, "get_weather", '{"city": "Berlin"}', "call_01_Wn7pR2cX"),
    ]
    # The daemon's own ids: never the provider's, one per call.
    assert paris != berlin and all(i.startswith("call-") for i in (paris, berlin))
    assert finish.reason == "tool-calls"
    assert finish.usage is not None
    assert finish.usage["inputTokens"] == 52
    assert finish.usage["cacheReadTokens"] == 128
    assert finish.usage["outputTokens"] == 41
    assert finish.usage["reasoningTokens"] == 12
    # 128 hits at 0.028, 52 misses at 0.14, 41 out at 0.28 (USD per 1M tokens)
    assert finish.usage["costUsd"] == pytest.approx((128 * 0.028 + 52 * 0.14 + 41 * 0.28) / 1e6)


def test_stream_d_trailing_usage_only_chunk() -> None:
    deltas, finish = translate(STREAM_D)
    assert deltas == [TextDelta("Hello")]
    assert finish == Finish("stop", finish.usage)
    assert finish.usage is not None and finish.usage["inputTokens"] == 12


def test_latest_usage_wins() -> None:
    translator = ChunkTranslator()
    translator.feed('{"choices":[{"index":0,"delta":{"content":"x"}}],"usage":{"prompt_tokens":1}}')
    translator.feed('{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":2}}')
    usage = translator.finish().usage
    assert usage is not None and (usage["inputTokens"], usage["outputTokens"]) == (7, 2)


def test_no_usage_gives_finish_without_usage() -> None:
    translator = ChunkTranslator()
    translator.feed('{"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"stop"}]}')
    assert translator.finish() == Finish("stop", None)


@pytest.mark.parametrize(
    ("reason", "expected"),
    [("length", "max-tokens"), ("stop", "stop"), ("tool_calls", "tool-calls")],
)
def test_stream_e_normal_finishes(reason: str, expected: str) -> None:
    _, finish = translate(stream_e(reason))
    assert finish.reason == expected


@pytest.mark.parametrize(
    ("reason", "code"),
    [
        ("content_filter", "CONTENT_FILTER"),
        ("insufficient_system_resource", "INSUFFICIENT_SYSTEM_RESOURCE"),
        ("weird-new.reason", "WEIRD_NEW_REASON"),
    ],
)
def test_stream_e_abnormal_finishes_are_failures(reason: str, code: str) -> None:
    with pytest.raises(ProviderFailure) as caught:
        translate(stream_e(reason))
    assert caught.value.failure.code == code
    assert reason in caught.value.failure.message


def test_stop_without_any_block_is_empty_response() -> None:
    with pytest.raises(ProviderFailure) as caught:
        translate(STREAM_EMPTY)
    assert caught.value.failure.code == EMPTY_RESPONSE


def test_reasoning_only_is_not_empty() -> None:
    translator = ChunkTranslator()
    translator.feed('{"choices":[{"index":0,"delta":{"reasoning_content":"hmm"},"finish_reason":"stop"}]}')
    assert translator.finish().reason == "stop"


def test_llama_cpp_python_repeats_id_and_name_on_every_fragment() -> None:
    # llama-cpp-python sends id, type and name on every fragment, plus the legacy `function_call`.
    translator = ChunkTranslator()
    assembler = Assembler()
    for piece in ('{"city"', ': "Oslo"}'):
        call = {
            "index": 0,
            "id": "call_x",
            "type": "function",
            "function": {"name": "get_weather", "arguments": piece},
        }
        delta = {"tool_calls": [call], "function_call": {"name": "get_weather", "arguments": piece}}
        for item in translator.feed(json.dumps({"choices": [{"index": 0, "delta": delta}]})):
            assembler.add(item)
    assert assembler.blocks() == [
        ToolCallBlock(assembler.call_id(0), "get_weather", '{"city": "Oslo"}', "call_x")
    ]


def test_stop_with_tool_calls_reports_tool_calls() -> None:
    translator = ChunkTranslator()
    call = {"index": 0, "id": "c1", "function": {"name": "f", "arguments": "{}"}}
    translator.feed(
        json.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": "stop"}]})
    )
    assert translator.finish().reason == "tool-calls"


@pytest.mark.parametrize(
    "payload",
    [
        "{not json",
        "[1, 2]",
        '{"choices": 3}',
        '{"choices": [7]}',
        '{"choices":[{"delta":{"tool_calls":[{"index":-1}]}}]}',
    ],
)
def test_malformed_payloads(payload: str) -> None:
    with pytest.raises(ProviderFailure) as caught:
        ChunkTranslator().feed(payload)
    assert caught.value.failure.code == MALFORMED_RESPONSE


def test_error_event_inside_the_stream() -> None:
    with pytest.raises(ProviderFailure) as caught:
        ChunkTranslator().feed('{"error":{"message":"upstream died","type":"server_error"}}')
    assert caught.value.failure.code == SERVER
    assert "upstream died" in caught.value.failure.message
    with pytest.raises(ProviderFailure) as caught:
        ChunkTranslator().feed('{"error":{"message":"You exceeded your current quota","code":429}}')
    assert caught.value.failure.code == QUOTA


def test_map_usage_prefers_deepseek_hit_field_and_clamps() -> None:
    usage = map_usage(
        {
            "prompt_tokens": 100,
            "completion_tokens": 5,
            "prompt_cache_hit_tokens": 40,
            "prompt_tokens_details": {"cached_tokens": 10},
        },
        None,
    )
    assert dict(usage) == {"inputTokens": 60, "cacheReadTokens": 40, "outputTokens": 5, "reasoningTokens": 0}
    odd = map_usage({"prompt_tokens": 3, "prompt_cache_hit_tokens": 9, "completion_tokens": "x"}, None)
    assert (odd["inputTokens"], odd["cacheReadTokens"], odd["outputTokens"]) == (0, 3, 0)


def test_text_block_order_follows_stream_order() -> None:
    deltas, _ = translate(STREAM_B)
    assembler = Assembler()
    for delta in deltas:
        assembler.add(delta)
    assert assembler.blocks() == [ReasoningBlock("The user greets me."), TextBlock("Hi!")]
