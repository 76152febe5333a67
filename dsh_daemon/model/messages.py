"""Model-facing values: content blocks, message sources and frozen messages.

Invariants kept here:
- A message is frozen from creation; its id is minted when it is created (or supplied by the caller)
  and survives the inbox, claim, pre-step rewrites, the log, derivation and the provider request.
- Everything a message holds is lossless JSON; anything else is rejected at creation, before it can be
  queued or logged.
- "Is this a human prompt?" is `message.source["kind"] == "user"`, never the event type.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, TypeAlias

from dsh_daemon.model.errors import ModelError
from dsh_daemon.model.jsonvalue import FrozenDict, NotJsonError, freeze_json

MessageId: TypeAlias = str
Source: TypeAlias = FrozenDict

MAX_ID_LENGTH = 200
EDITOR_CONTEXT_KINDS = frozenset({"file", "selection", "diagnostics", "snapshot", "gitDiff", "terminal"})


class InvalidMessageError(ModelError):
    """A message, block or source that does not satisfy the message model."""


def mint_message_id() -> MessageId:
    return str(uuid.uuid4())


def mint_call_id() -> str:
    """A tool call's id on the wire. The daemon mints it, never the provider: OpenAI-compatible
    servers reuse ids such as `call_0` across turns, and clients key cards, permissions and ACP tool
    calls by it. Random, so it is unique across sessions too (a crash can never hand it out twice)."""
    return f"call-{uuid.uuid4().hex}"


# --------------------------------------------------------------------------------------------------
# content blocks


@dataclass(frozen=True, slots=True)
class TextBlock:
    text: str
    type: ClassVar[str] = "text"

    def to_json(self) -> dict[str, Any]:
        return {"type": "text", "text": self.text}


@dataclass(frozen=True, slots=True)
class ReasoningBlock:
    text: str
    type: ClassVar[str] = "reasoning"

    def to_json(self) -> dict[str, Any]:
        return {"type": "reasoning", "text": self.text}


@dataclass(frozen=True, slots=True)
class ToolCallBlock:
    """A model's tool call; `arguments` is the raw JSON text the model produced (never parsed here).

    `id` is the daemon's (`mint_call_id`): every event, result, permission and transcript names the
    call by it. `provider_id` is the id the provider gave the call, kept only to send the provider its
    history exactly as it wrote it; None in blocks logged before the daemon minted ids, whose `id` is
    the provider's."""

    id: str
    name: str
    arguments: str
    provider_id: str | None = None
    type: ClassVar[str] = "tool-call"

    @property
    def provider_call_id(self) -> str:
        return self.id if self.provider_id is None else self.provider_id

    def to_json(self) -> dict[str, Any]:
        out = {"type": "tool-call", "id": self.id, "name": self.name, "arguments": self.arguments}
        if self.provider_id is not None:
            out["providerId"] = self.provider_id
        return out


@dataclass(frozen=True, slots=True)
class ToolResultBlock:
    tool_call_id: str
    content: tuple[ContentBlock, ...]
    is_error: bool = False
    type: ClassVar[str] = "tool-result"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": "tool-result",
            "toolCallId": self.tool_call_id,
            "content": [b.to_json() for b in self.content],
        }
        if self.is_error:
            out["isError"] = True
        return out

    @property
    def text(self) -> str:
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))


@dataclass(frozen=True, slots=True)
class OtherBlock:
    """A block of a type this build does not interpret (open union): stored and replayed verbatim."""

    data: FrozenDict

    @property
    def type(self) -> str:
        return str(self.data["type"])

    def to_json(self) -> dict[str, Any]:
        return dict(self.data)


ContentBlock: TypeAlias = TextBlock | ReasoningBlock | ToolCallBlock | ToolResultBlock | OtherBlock


def _require_str(obj: Mapping[str, Any], key: str, where: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        raise InvalidMessageError(f"{where}: '{key}' must be a string")
    return value


def block_from_json(obj: object, where: str = "content block") -> ContentBlock:
    if isinstance(obj, TextBlock | ReasoningBlock | ToolCallBlock | ToolResultBlock | OtherBlock):
        return obj
    if not isinstance(obj, Mapping):
        raise InvalidMessageError(f"{where}: must be an object with a 'type'")
    kind = obj.get("type")
    if kind == "text":
        return TextBlock(_require_str(obj, "text", where))
    if kind == "reasoning":
        return ReasoningBlock(_require_str(obj, "text", where))
    if kind == "tool-call":
        provider_id = obj.get("providerId")
        if "providerId" in obj and not isinstance(provider_id, str):
            raise InvalidMessageError(f"{where}: 'providerId' must be a string")
        return ToolCallBlock(
            _require_str(obj, "id", where),
            _require_str(obj, "name", where),
            _require_str(obj, "arguments", where),
            provider_id,
        )
    if kind == "tool-result":
        inner = obj.get("content", ())
        if not isinstance(inner, list | tuple):
            raise InvalidMessageError(f"{where}: 'content' must be an array")
        is_error = obj.get("isError", False)
        if not isinstance(is_error, bool):
            raise InvalidMessageError(f"{where}: 'isError' must be a boolean")
        return ToolResultBlock(
            _require_str(obj, "toolCallId", where),
            tuple(block_from_json(b, f"{where}.content[{i}]") for i, b in enumerate(inner)),
            is_error,
        )
    if not isinstance(kind, str) or not kind:
        raise InvalidMessageError(f"{where}: 'type' must be a non-empty string")
    try:
        return OtherBlock(freeze_json(obj))
    except NotJsonError as exc:
        raise InvalidMessageError(f"{where}: {exc}") from exc


def content_from_json(content: object) -> tuple[ContentBlock, ...]:
    """Accept a string (one text block) or an array of blocks."""
    if isinstance(content, str):
        return (TextBlock(content),)
    if isinstance(content, list | tuple):
        return tuple(block_from_json(b, f"content[{i}]") for i, b in enumerate(content))
    raise InvalidMessageError("content must be a string or an array of content blocks")


def content_text(content: Iterable[ContentBlock]) -> str:
    return "".join(b.text for b in content if isinstance(b, TextBlock))


def join_prompt_text(texts: Iterable[str]) -> str:
    """The text blocks of one user message as the single text a model (or a replay) reads. Blocks are
    separate pieces a client chose to send apart (CodeCompanion re-sends earlier text as a block of its
    own), so they are joined with a line break wherever neither side already has whitespace: words of
    two blocks never merge ("a long answer" + "still there?" is not "answerstill")."""
    out = ""
    for text in texts:
        if out and text and not out[-1].isspace() and not text[0].isspace():
            out += "\n"
        out += text
    return out


# --------------------------------------------------------------------------------------------------
# sources (open union on "kind")

USER_SOURCE: Source = FrozenDict({"kind": "user"})


def make_source(obj: object) -> Source:
    """Validate and freeze a message source. Known kinds are checked; other kinds pass verbatim."""
    if obj is None:
        return USER_SOURCE
    if not isinstance(obj, Mapping):
        raise InvalidMessageError("source must be an object with a 'kind'")
    try:
        source: FrozenDict = freeze_json(obj, path="source")
    except NotJsonError as exc:
        raise InvalidMessageError(str(exc)) from exc
    kind = source.get("kind")
    if not isinstance(kind, str) or not kind:
        raise InvalidMessageError("source.kind must be a non-empty string")
    if kind == "editor":
        # D9's editor `kind` would collide with the discriminator, so on the wire it is `contextKind`
        # (optional for client-built editor messages; the daemon always sets it).
        _require_str(source, "uri", "editor source")
        context_kind = source.get("contextKind")
        if context_kind is not None and context_kind not in EDITOR_CONTEXT_KINDS:
            raise InvalidMessageError(
                f"editor source: 'contextKind' must be one of {sorted(EDITOR_CONTEXT_KINDS)}"
            )
    elif kind == "plugin":
        _require_str(source, "plugin", "plugin source")
    elif kind == "tool":
        _require_str(source, "callId", "tool source")
    elif kind == "model":
        _require_str(source, "provider", "model source")
        _require_str(source, "model", "model source")
    elif kind == "hook":
        _require_str(source, "event", "hook source")
        _require_str(source, "hook", "hook source")
    return source


# --------------------------------------------------------------------------------------------------
# messages


def _check_id(message_id: object) -> MessageId:
    if not isinstance(message_id, str) or not message_id or len(message_id) > MAX_ID_LENGTH:
        raise InvalidMessageError(f"message id must be a non-empty string of at most {MAX_ID_LENGTH} chars")
    return message_id


@dataclass(frozen=True, slots=True)
class UserMessage:
    """Every model-facing input: prompts, steering, injected context, tool results."""

    id: MessageId
    content: tuple[ContentBlock, ...]
    source: Source = field(default=USER_SOURCE)
    role: ClassVar[Literal["user"]] = "user"

    @classmethod
    def create(cls, content: object, source: object = None, *, id: str | None = None) -> UserMessage:
        """Validate everything now: a bad message never reaches the inbox or the log."""
        message_id = mint_message_id() if id is None else _check_id(id)
        message = cls(message_id, content_from_json(content), make_source(source))
        freeze_json(message.to_json())  # content blocks must be lossless too
        return message

    @classmethod
    def from_json(cls, obj: object) -> UserMessage:
        if not isinstance(obj, Mapping):
            raise InvalidMessageError("message must be an object")
        if obj.get("role", "user") != "user":
            raise InvalidMessageError("a user message must have role 'user'")
        return cls.create(obj.get("content"), obj.get("source"), id=obj.get("id"))

    @classmethod
    def from_log(cls, obj: Mapping[str, Any]) -> UserMessage:
        """Rebuild a message this program logged (validated when it was created): no re-validation."""
        return cls(obj["id"], tuple(block_from_json(b) for b in obj["content"]), obj["source"])

    def with_content(self, content: object) -> UserMessage:
        """A rewrite keeps the id (it is the same message, edited)."""
        return UserMessage.create(content, self.source, id=self.id)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "role": "user",
            "content": [b.to_json() for b in self.content],
            "source": dict(self.source),
        }

    @property
    def text(self) -> str:
        return join_prompt_text(b.text for b in self.content if isinstance(b, TextBlock))


@dataclass(frozen=True, slots=True)
class AssistantMessage:
    id: MessageId
    content: tuple[ContentBlock, ...]
    source: Source
    role: ClassVar[Literal["assistant"]] = "assistant"

    @classmethod
    def create(cls, content: Iterable[ContentBlock], *, provider: str, model: str) -> AssistantMessage:
        return cls(
            mint_message_id(),
            tuple(content),
            FrozenDict({"kind": "model", "provider": provider, "model": model}),
        )

    @classmethod
    def from_log(cls, obj: Mapping[str, Any]) -> AssistantMessage:
        return cls(obj["id"], tuple(block_from_json(b) for b in obj["content"]), obj["source"])

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> AssistantMessage:
        return cls(
            _check_id(obj.get("id")), content_from_json(obj.get("content")), make_source(obj.get("source"))
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "role": "assistant",
            "content": [b.to_json() for b in self.content],
            "source": dict(self.source),
        }

    @property
    def text(self) -> str:
        return content_text(self.content)

    @property
    def tool_calls(self) -> tuple[ToolCallBlock, ...]:
        return tuple(b for b in self.content if isinstance(b, ToolCallBlock))

    @property
    def is_empty(self) -> bool:
        return not self.content


Message: TypeAlias = UserMessage | AssistantMessage


def tool_result_message(call_id: str, text: str, *, is_error: bool = False) -> UserMessage:
    return UserMessage(
        mint_message_id(),
        (ToolResultBlock(call_id, (TextBlock(text),), is_error),),
        FrozenDict({"kind": "tool", "callId": call_id}),
    )
