"""Builds the `/chat/completions` request body from a `ModelRequest` (DeepSeek's request format, D11).

Rules kept here:
- Unset settings are omitted, never sent as null.
- Every user message is its own provider message, in order, never merged with a neighbour; its text
  blocks are joined so that words of two blocks never merge (`join_prompt_text`).
- A tool result becomes a `role: tool` message; empty output is sent as "(no output)".
- Tool calls and results carry the provider's own call id (`ToolCallBlock.provider_call_id`), never the
  daemon's: the provider gets its history back exactly as it wrote it, ids it reused across turns
  (`call_0`) included. A result names its call by the daemon's id; the call's message, earlier in the
  same request, says which provider id that is.
- Assistant `content` is never null ("" instead: DeepSeek answers 400 to a null-content message
  without tool calls, and such a message would sit in the log and break every later turn).
- `reasoning_content` is echoed on every assistant message that had reasoning: thinking mode requires
  it after tool calls, ignores it elsewhere, and keeping it keeps the cacheable prefix byte-stable.
"""

from __future__ import annotations

import dataclasses
import json
import operator
from collections import deque
from collections.abc import Mapping
from typing import Any

from dsh_daemon.model.messages import (
    AssistantMessage,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    UserMessage,
)
from dsh_daemon.model.provider import ModelRequest

NO_OUTPUT = "(no output)"


def request_body(request: ModelRequest, *, default_model: str) -> dict[str, Any]:
    config = request.config
    thinking = config.get("thinking")
    effort = config.get("reasoningEffort")
    if effort == "off":  # "off" is our spelling of "no thinking", not a DeepSeek effort level
        thinking, effort = False, None
    body: dict[str, Any] = {
        "model": request.model or default_model,
        "messages": messages_json(request.system, request.messages, echo_reasoning=thinking is True),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if isinstance(thinking, bool):
        body["thinking"] = {"type": "enabled" if thinking else "disabled"}
    if isinstance(effort, str) and effort and thinking is not False:
        body["reasoning_effort"] = effort
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
            }
            for t in request.tools
        ]
    _copy(config, body, "temperature", "temperature")
    _copy(config, body, "maxTokens", "max_tokens")
    _copy(config, body, "stop", "stop")
    return body


def encode_body(body: dict[str, Any]) -> bytes:
    """The exact bytes sent: compact, UTF-8, keys in build order (so a rebuilt request compares equal)."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


@dataclasses.dataclass(frozen=True)
class _Sent:
    """A request's messages as text: the system prompt, whether reasoning was echoed, the history
    (its own tuple: kept alive, so identity compares), the text, and the provider ids of its calls."""

    system: str | None
    echo_reasoning: bool
    messages: tuple[Message, ...]
    text: str
    provider_ids: Mapping[str, str]


class BodyEncoder:
    """`encode_body(request_body(...))`, byte for byte, building on the requests before (issue 40.3):
    a long session's every request carries its whole history, and building and dumping thousands of
    messages again took tens of milliseconds before its first byte could leave. Between compactions
    a session's history only grows, and messages are frozen values, so a request whose history
    starts with the very message objects of one sent before (same system prompt, same reasoning
    echo) is that request's text plus its new messages'. The last `KEEP` requests are kept (sessions
    sharing a provider interleave theirs); any other request is serialised whole, as before."""

    KEEP = 8

    def __init__(self) -> None:
        self._sent: deque[_Sent] = deque(maxlen=self.KEEP)

    def encode(self, request: ModelRequest, *, default_model: str) -> bytes:
        body = request_body(dataclasses.replace(request, messages=()), default_model=default_model)
        thinking = request.config.get("thinking")
        if request.config.get("reasoningEffort") == "off":
            thinking = False
        echo, system, messages = thinking is True, request.system, request.messages
        before = self._before(system, echo, messages)
        provider_ids: dict[str, str] = {} if before is None else dict(before.provider_ids)
        if before is None:
            text = _dumps(messages_json(system, messages, echo_reasoning=echo, provider_ids=provider_ids))[
                1:-1
            ]
        else:
            added = messages[len(before.messages) :]
            new = messages_json(None, added, echo_reasoning=echo, provider_ids=provider_ids) if added else []
            text = before.text + ("," if before.text and new else "") + _dumps(new)[1:-1]
        self._sent.appendleft(_Sent(system, echo, messages, text, provider_ids))
        head = _dumps({"model": body.pop("model")})[:-1]
        del body["messages"]
        rest = _dumps(body)[1:-1]
        return f'{head},"messages":[{text}]{"," if rest else ""}{rest}}}'.encode()

    def _before(self, system: str | None, echo: bool, messages: tuple[Message, ...]) -> _Sent | None:
        """The longest request sent before whose history `messages` extends, compared by identity."""
        best: _Sent | None = None
        for sent in self._sent:
            count = len(sent.messages)
            if (
                sent.system == system
                and sent.echo_reasoning == echo
                and count <= len(messages)
                and (best is None or count > len(best.messages))
                and (count == 0 or messages[count - 1] is sent.messages[-1])
                and all(map(operator.is_, sent.messages, messages))  # (at C speed)
            ):
                best = sent
        return best


def _copy(config: Mapping[str, Any], body: dict[str, Any], key: str, wire: str) -> None:
    value = config.get(key)
    if value is not None:
        body[wire] = list(value) if isinstance(value, tuple) else value


def messages_json(
    system: str | None,
    messages: tuple[Message, ...],
    *,
    echo_reasoning: bool = False,
    provider_ids: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """`echo_reasoning`: thinking mode, where DeepSeek requires `reasoning_content` on an assistant
    message with tool calls. A reply that carried none (a session begun without thinking, a model that
    skipped it) then gets `""`, or the next request would be refused with a 400 forever after.
    `provider_ids`: the calls of the messages before these (the daemon's call id -> the provider's),
    which it goes on filling."""
    out: list[dict[str, Any]] = []
    if system:
        out.append({"role": "system", "content": system})
    if provider_ids is None:
        provider_ids = {}
    for message in messages:
        if isinstance(message, AssistantMessage):
            out.append(_assistant(message, echo_reasoning))
            for block in message.content:
                if isinstance(block, ToolCallBlock) and block.provider_id is not None:
                    provider_ids[block.id] = block.provider_id
        else:
            out.extend(_user(message, provider_ids))
    return out


def _user(message: UserMessage, provider_ids: Mapping[str, str]) -> list[dict[str, Any]]:
    results = [b for b in message.content if isinstance(b, ToolResultBlock)]
    if results:
        return [
            {
                "role": "tool",
                "tool_call_id": provider_ids.get(r.tool_call_id, r.tool_call_id),
                "content": r.text or NO_OUTPUT,
            }
            for r in results
        ]
    # Other block types (images, payloads the core keeps verbatim) have no wire form here yet. Text is
    # sent verbatim; a message with no text at all names what it held rather than going out empty.
    text = message.text
    if not text and message.content:
        text = " ".join(f"[{b.type} content omitted]" for b in message.content)
    return [{"role": "user", "content": text}]


def _assistant(message: AssistantMessage, echo_reasoning: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {
        "role": "assistant",
        "content": "".join(b.text for b in message.content if isinstance(b, TextBlock)),
    }
    reasoning = [b.text for b in message.content if isinstance(b, ReasoningBlock)]
    calls = [b for b in message.content if isinstance(b, ToolCallBlock)]
    if reasoning or (echo_reasoning and calls):
        out["reasoning_content"] = "".join(reasoning)
    if calls:
        out["tool_calls"] = [
            {
                "id": c.provider_call_id,
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments},
            }
            for c in calls
        ]
    return out
