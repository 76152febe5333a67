"""The provider seam: one model request in, a stream of deltas out, ending in one `Finish` or a typed
`ProviderFailure`.

A provider makes exactly one HTTP (or scripted) attempt per `stream()` call; retries belong to the
loop (D8). Cancelling the consumer (task cancellation or `aclose()`) must close the underlying stream
at once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeAlias

from dsh_daemon.model.jsonvalue import FrozenDict, freeze_json
from dsh_daemon.model.messages import Message


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    description: str
    parameters: FrozenDict  # JSON schema

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """Everything sent to the model. `config` holds `provider`, `model` and call settings
    (`maxTokens`, `thinking`, `reasoningEffort`, `temperature`, `stop`, ...; unset keys absent)."""

    config: FrozenDict
    system: str | None
    tools: tuple[ToolSpec, ...]
    messages: tuple[Message, ...]

    @property
    def provider(self) -> str:
        return str(self.config.get("provider", ""))

    @property
    def model(self) -> str:
        return str(self.config.get("model", ""))

    def header_json(self) -> FrozenDict:
        """The durable `request/header` form: everything except the messages."""
        header: dict[str, Any] = {"config": self.config}
        if self.system is not None:
            header["system"] = self.system
        if self.tools:
            header["tools"] = [t.to_json() for t in self.tools]
        frozen: FrozenDict = freeze_json(header)
        return frozen

    def to_json(self) -> dict[str, Any]:
        return {**self.header_json(), "messages": [m.to_json() for m in self.messages]}


# ---- stream events -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str

    def to_json(self) -> dict[str, Any]:
        return {"type": "text", "text": self.text}


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    text: str

    def to_json(self) -> dict[str, Any]:
        return {"type": "reasoning", "text": self.text}


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """A fragment of the tool call at `index`: id and name when present, arguments to concatenate."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "tool-call", "index": self.index, "arguments": self.arguments}
        if self.id is not None:
            out["id"] = self.id
        if self.name is not None:
            out["name"] = self.name
        return out


FinishReason: TypeAlias = Literal["stop", "tool-calls", "max-tokens"]


@dataclass(frozen=True, slots=True)
class Finish:
    reason: FinishReason
    usage: FrozenDict | None = None  # {inputTokens, outputTokens, cacheReadTokens?, reasoningTokens?}


StreamEvent: TypeAlias = TextDelta | ReasoningDelta | ToolCallDelta | Finish
Delta: TypeAlias = TextDelta | ReasoningDelta | ToolCallDelta


# ---- failures ------------------------------------------------------------------------------------

# Typed failure codes. The loop's retry policy (D8) decides which ones are retried.
AUTH = "AUTH"
QUOTA = "QUOTA"
INVALID_REQUEST = "INVALID_REQUEST"
CONTEXT_WINDOW_EXCEEDED = "CONTEXT_WINDOW_EXCEEDED"
RATE_LIMIT = "RATE_LIMIT"
SERVER = "SERVER"
TIMEOUT = "TIMEOUT"
TRANSPORT = "TRANSPORT"
STREAM_CLOSED = "STREAM_CLOSED"  # EOF before `data: [DONE]`: a truncated stream
MALFORMED_RESPONSE = "MALFORMED_RESPONSE"
EMPTY_RESPONSE = "EMPTY_RESPONSE"
CONTENT_FILTER = "CONTENT_FILTER"
INSUFFICIENT_SYSTEM_RESOURCE = "INSUFFICIENT_SYSTEM_RESOURCE"
CONFIG = "CONFIG"  # e.g. no API key configured
UNKNOWN = "UNKNOWN"

RETRYABLE_CODES = frozenset(
    {RATE_LIMIT, SERVER, TIMEOUT, TRANSPORT, STREAM_CLOSED, EMPTY_RESPONSE, INSUFFICIENT_SYSTEM_RESOURCE}
)


@dataclass(frozen=True)
class LlmFailure:
    code: str
    message: str
    status: int | None = None
    retry_after_ms: int | None = None
    request_id: str | None = None
    # The provider's answer body as it came (secrets redacted, cut short: llm/errors.py), for a
    # person reading the log; `message` is what the daemon made of it.
    provider_body: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.status is not None:
            out["status"] = self.status
        if self.retry_after_ms is not None:
            out["retryAfterMs"] = self.retry_after_ms
        if self.request_id is not None:
            out["requestId"] = self.request_id
        if self.provider_body is not None:
            out["providerBody"] = self.provider_body
        return out


class ProviderFailure(Exception):
    """Raised by a provider stream for any failure of the model call, already classified."""

    def __init__(self, failure: LlmFailure) -> None:
        super().__init__(f"{failure.code}: {failure.message}")
        self.failure = failure


class Provider(Protocol):
    """A model backend. `name` goes into `model` sources and request headers.

    `compact_at_ratio`: how full the context window may get before the history is compacted (None:
    never by ratio, only after an overflow)."""

    name: str

    @property
    def compact_at_ratio(self) -> float | None: ...

    def default_config(self, model: str) -> Mapping[str, Any]:
        """Adapter defaults (e.g. `maxTokens`) materialised into the durable request header."""
        ...

    def context_window(self, model: str) -> int | None:
        """The model's context window in tokens; None when unknown."""
        ...

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """One attempt. Yields deltas, then exactly one `Finish`, or raises `ProviderFailure`."""
        ...

    def reconfigure(self, config: Any) -> None:
        """Use `config` (the provider's own configuration type) from the next request on; a request
        under way finishes on the old one."""
        ...

    async def aclose(self) -> None:
        """Release pooled connections (the daemon is shutting down)."""
        ...
