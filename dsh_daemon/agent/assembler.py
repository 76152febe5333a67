"""Assembles streamed deltas into content blocks, in the order the blocks opened.

Consecutive text (or reasoning) deltas extend one block; a change of kind opens a new block. Tool-call
fragments are keyed by `index`: id and name are taken when present, arguments are concatenated raw.
Each tool call gets the daemon's own id when its first fragment arrives (`mint_call_id`); the
provider's id is kept beside it, for the provider's history only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dsh_daemon.model.messages import ContentBlock, ReasoningBlock, TextBlock, ToolCallBlock, mint_call_id
from dsh_daemon.model.provider import Delta, ReasoningDelta, TextDelta, ToolCallDelta


@dataclass
class _Open:
    kind: str  # "text" | "reasoning" | "tool-call"
    parts: list[str] = field(default_factory=list)
    call_id: str | None = None  # the provider's
    name: str | None = None
    wire_id: str = ""  # the daemon's (tool calls only)
    index: int = -1


class Assembler:
    def __init__(self) -> None:
        self._blocks: list[_Open] = []
        self._calls: dict[int, _Open] = {}

    def add(self, delta: Delta) -> None:
        if isinstance(delta, TextDelta | ReasoningDelta):
            if not delta.text:
                return
            kind = "text" if isinstance(delta, TextDelta) else "reasoning"
            last = self._blocks[-1] if self._blocks else None
            if last is None or last.kind != kind:
                last = _Open(kind)
                self._blocks.append(last)
            last.parts.append(delta.text)
        elif isinstance(delta, ToolCallDelta):
            call = self._calls.get(delta.index)
            if call is None:
                call = _Open("tool-call", index=delta.index, wire_id=mint_call_id())
                self._calls[delta.index] = call
                self._blocks.append(call)
            if delta.id:
                call.call_id = delta.id
            if delta.name:
                call.name = delta.name
            if delta.arguments:
                call.parts.append(delta.arguments)

    def call_id(self, index: int) -> str:
        """The daemon's id of the tool call at `index` (after one of its fragments was added)."""
        return self._calls[index].wire_id

    def blocks(self, *, drop_tool_calls: bool = False) -> list[ContentBlock]:
        out: list[ContentBlock] = []
        for block in self._blocks:
            text = "".join(block.parts)
            if block.kind == "text":
                out.append(TextBlock(text))
            elif block.kind == "reasoning":
                out.append(ReasoningBlock(text))
            elif not drop_tool_calls:
                provider_id = block.call_id or f"call_{block.index}"
                out.append(ToolCallBlock(block.wire_id, block.name or "", text, provider_id))
        return out

    def prefix_blocks(self) -> list[ContentBlock]:
        """What a cancelled stream keeps: text and reasoning with visible content; never tool calls."""
        return [
            b
            for b in self.blocks(drop_tool_calls=True)
            if isinstance(b, TextBlock | ReasoningBlock) and b.text.strip()
        ]
