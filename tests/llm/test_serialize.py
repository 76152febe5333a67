"""The request body (provider.md §1.2): messages, tools, settings; unset fields omitted."""

from __future__ import annotations

from typing import Any

from dsh_daemon.llm.serialize import request_body
from dsh_daemon.model.jsonvalue import FrozenDict, freeze_json
from dsh_daemon.model.messages import (
    AssistantMessage,
    OtherBlock,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    UserMessage,
    tool_result_message,
)
from dsh_daemon.model.provider import ModelRequest, ToolSpec


def request(config: dict[str, Any], messages: tuple[Any, ...] = (), **kw: Any) -> ModelRequest:
    base = {"provider": "deepseek", "model": "deepseek-v4-flash"}
    return ModelRequest(freeze_json({**base, **config}), kw.get("system"), kw.get("tools", ()), messages)


def assistant(*blocks: Any) -> AssistantMessage:
    return AssistantMessage.create(blocks, provider="deepseek", model="deepseek-v4-flash")


def test_minimal_body_omits_every_unset_field() -> None:
    body = request_body(request({}, (UserMessage.create("hi"),)), default_model="x")
    assert body == {
        "model": "deepseek-v4-flash",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def test_settings_map_to_wire_names() -> None:
    config = {
        "thinking": True,
        "reasoningEffort": "max",
        "maxTokens": 256000,
        "temperature": 0.7,
        "stop": ["END"],
    }
    body = request_body(request(config), default_model="x")
    assert body["thinking"] == {"type": "enabled"}
    assert body["reasoning_effort"] == "max"
    assert body["max_tokens"] == 256000
    assert body["temperature"] == 0.7
    assert body["stop"] == ["END"]  # a frozen tuple goes out as a JSON array


def test_thinking_disabled_drops_effort_and_off_disables_thinking() -> None:
    body = request_body(request({"thinking": False, "reasoningEffort": "high"}), default_model="x")
    assert body["thinking"] == {"type": "disabled"} and "reasoning_effort" not in body
    body = request_body(request({"thinking": True, "reasoningEffort": "off"}), default_model="x")
    assert body["thinking"] == {"type": "disabled"} and "reasoning_effort" not in body


def test_system_and_tools() -> None:
    tool = ToolSpec("get_weather", "Weather for a city", FrozenDict({"type": "object"}))
    body = request_body(
        request({}, (UserMessage.create("q"),), system="be brief", tools=(tool,)), default_model="x"
    )
    assert body["messages"][0] == {"role": "system", "content": "be brief"}
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather for a city",
                "parameters": {"type": "object"},
            },
        }
    ]


def test_history_with_reasoning_tool_calls_and_results() -> None:
    calls = (
        ToolCallBlock("call_00_Qk3v8mZ1", "get_weather", '{"city": "Paris"}'),
        ToolCallBlock("call_01_Wn7pR2cX", "get_weather", '{"city": "Berlin"}'),
    )
    messages = (
        UserMessage.create("weather?"),
        assistant(ReasoningBlock("Need weather for both cities."), *calls),
        tool_result_message("call_00_Qk3v8mZ1", "sunny"),
        tool_result_message("call_01_Wn7pR2cX", ""),
        assistant(ReasoningBlock("Both known."), TextBlock("Sunny and ")),
        UserMessage.create("thanks"),
        UserMessage.create(
            [{"type": "text", "text": "ctx "}, {"type": "image", "url": "x"}, {"type": "text", "text": "2"}]
        ),
        assistant(TextBlock("ok")),
    )
    body = request_body(request({}, messages), default_model="x")
    assert body["messages"] == [
        {"role": "user", "content": "weather?"},
        {
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
        },
        {"role": "tool", "tool_call_id": "call_00_Qk3v8mZ1", "content": "sunny"},
        {"role": "tool", "tool_call_id": "call_01_Wn7pR2cX", "content": "(no output)"},
        {"role": "assistant", "content": "Sunny and ", "reasoning_content": "Both known."},
        {"role": "user", "content": "thanks"},  # consecutive user messages stay separate (D11)
        {"role": "user", "content": "ctx 2"},
        {"role": "assistant", "content": "ok"},
    ]


def test_reasoning_only_assistant_has_empty_string_content_never_null() -> None:
    body = request_body(request({}, (assistant(ReasoningBlock("thinking...")),)), default_model="x")
    assert body["messages"] == [{"role": "assistant", "content": "", "reasoning_content": "thinking..."}]


def test_unknown_assistant_blocks_are_skipped_and_model_falls_back() -> None:
    message = assistant(OtherBlock(FrozenDict({"type": "citation", "x": 1})), TextBlock("t"))
    body = request_body(request({"model": ""}, (message,)), default_model="fallback-model")
    assert body["model"] == "fallback-model"
    assert body["messages"] == [{"role": "assistant", "content": "t"}]


def test_thinking_mode_gives_every_tool_call_reply_a_reasoning_content() -> None:
    """A tool-call reply logged without reasoning (the session began without thinking, or the model
    skipped it) must still carry `reasoning_content` in thinking mode, or DeepSeek refuses every later
    request with a 400."""
    from dsh_daemon.llm.serialize import request_body
    from dsh_daemon.model.jsonvalue import FrozenDict
    from dsh_daemon.model.messages import AssistantMessage, ToolCallBlock, UserMessage
    from dsh_daemon.model.provider import ModelRequest

    reply = AssistantMessage.create([ToolCallBlock("c1", "run_command", "{}")], provider="p", model="m")
    messages = (UserMessage.create("go"), reply)
    for thinking, expected in ((True, {"reasoning_content": ""}), (False, {})):
        request = ModelRequest(
            FrozenDict({"provider": "p", "model": "m", "thinking": thinking}), None, (), messages
        )
        assistant = request_body(request, default_model="m")["messages"][1]
        assert {k: v for k, v in assistant.items() if k == "reasoning_content"} == expected


def test_a_user_message_without_text_names_what_it_held() -> None:
    from dsh_daemon.llm.serialize import messages_json
    from dsh_daemon.model.messages import UserMessage

    only_image = UserMessage.create([{"type": "image", "ref": "r1"}])
    assert messages_json(None, (only_image,)) == [{"role": "user", "content": "[image content omitted]"}]


def test_tool_calls_and_results_carry_the_providers_ids_even_when_it_reused_one() -> None:
    """The daemon names calls by its own ids (`call-…`); the provider gets back the ids it wrote,
    `call_0` in two turns included, and a call logged before the daemon minted ids (no provider id)
    goes out with its id as it always did."""
    from dsh_daemon.llm.serialize import messages_json
    from dsh_daemon.model.messages import AssistantMessage, ToolCallBlock, UserMessage, tool_result_message

    def turn(call: ToolCallBlock) -> tuple[AssistantMessage | UserMessage, ...]:
        reply = AssistantMessage.create([call], provider="p", model="m")
        return UserMessage.create("go"), reply, tool_result_message(call.id, f"ran {call.id}")

    old = ToolCallBlock("call_0", "run_command", "{}")  # logged before: its id is the provider's
    first = ToolCallBlock("call-aaa", "run_command", "{}", "call_0")
    second = ToolCallBlock("call-bbb", "read_file", "{}", "call_0")
    out = messages_json(None, (*turn(old), *turn(first), *turn(second)))
    calls = [c["id"] for m in out if m["role"] == "assistant" for c in m["tool_calls"]]
    results = [(m["tool_call_id"], m["content"]) for m in out if m["role"] == "tool"]
    assert calls == ["call_0", "call_0", "call_0"]
    assert results == [("call_0", "ran call_0"), ("call_0", "ran call-aaa"), ("call_0", "ran call-bbb")]


def test_the_body_encoder_sends_what_encode_body_would_and_serialises_only_new_messages(
    monkeypatch: Any,
) -> None:
    """Issue 40.3: a long session's requests each carry the whole history; the provider's encoder builds
    on the text of the requests before, so a request serialises only its new messages, and sends
    exactly the bytes `encode_body(request_body(...))` gives, for every setting that changes a
    message's text (thinking, an effort of "off", a tool result whose call left the history), a system
    prompt and tools, and two sessions' requests interleaved."""
    import dsh_daemon.llm.serialize as serialize
    from dsh_daemon.llm.serialize import BodyEncoder, encode_body

    encoder = BodyEncoder()
    built: list[object] = []
    assistant_wire, user_wire = serialize._assistant, serialize._user

    def counted_assistant(message: AssistantMessage, echo: bool = False) -> dict[str, Any]:
        built.append(message)
        return assistant_wire(message, echo)

    def counted_user(message: UserMessage, ids: Any) -> list[dict[str, Any]]:
        built.append(message)
        return user_wire(message, ids)

    monkeypatch.setattr(serialize, "_assistant", counted_assistant)
    monkeypatch.setattr(serialize, "_user", counted_user)
    tools = (ToolSpec("run", "runs", freeze_json({"type": "object"})),)

    def check(config: dict[str, Any], messages: tuple[Any, ...], **kw: Any) -> None:
        sent = request(config, messages, **kw)
        expected = encode_body(request_body(sent, default_model="x"))
        built.clear()
        assert encoder.encode(sent, default_model="x") == expected

    history: tuple[Any, ...] = ()
    for turn in range(30):
        call = ToolCallBlock(f"call-{turn}", "run", "{}", "call_0")
        history += (
            UserMessage.create(f"question {turn} é"),
            assistant(ReasoningBlock("hm"), TextBlock("let me run it"), call),
            tool_result_message(call.id, f"ran {turn}"),
            assistant(TextBlock(f"answer {turn}")),
        )
        check({"thinking": True}, history, system="be brief", tools=tools)
        assert len(built) == 4  # only the turn's own messages
    check({"thinking": True}, history, system="be brief", tools=tools)
    assert built == []  # the same history again: nothing built
    check({"thinking": False, "temperature": 0.5}, history)  # reasoning no longer echoed
    check({"thinking": True, "reasoningEffort": "off"}, history)
    assert built == []  # that history, echoing no reasoning, was just sent
    without_call = history[:1] + history[2:]  # a tool result whose call is no longer sent
    check({"thinking": True}, without_call)
    check({"thinking": True}, (*without_call, UserMessage.create("and then")))
    assert len(built) == 1
    other = (UserMessage.create("another session"), assistant(TextBlock("hi")))
    check({}, other)
    check({"thinking": True}, history, system="be brief", tools=tools)
    assert built == []  # both sessions' texts are kept
    check({}, ())
