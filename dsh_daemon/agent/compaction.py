"""Compaction: the history before a kept tail is replaced by a model-written summary (docs/design.md
§11, protocol.md §14).

Pure functions only, shared by the loop (which decides when and where to cut) and the derivation
(which rebuilds the compaction request and the compacted history from the log alone):

- a **cut** is the seq of a `turn/start` or `step/start`: every tool call before it is answered before
  it, so the kept tail never starts with an orphaned tool result;
- the **compaction request** is built from the current `request/header` (provider and model), the
  messages before the cut rendered as a plain-text transcript (tool outputs elided first: each to
  `toolOutputChars`; then the whole transcript to `transcriptChars`, head and tail kept), and the
  texts logged in its `llm/request` (`system`, `prompt`), so it rebuilds byte for byte;
- after `context/compacted`, the history is the summary message (logged verbatim in the event) followed
  by every message at or after `keptFromSeq`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dsh_daemon.agent.budget import elide_middle
from dsh_daemon.model.jsonvalue import FrozenDict, freeze_json
from dsh_daemon.model.messages import (
    AssistantMessage,
    Message,
    MessageId,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    UserMessage,
)
from dsh_daemon.model.provider import ModelRequest

PURPOSE = "compaction"
SOURCE: FrozenDict = FrozenDict({"kind": "plugin", "plugin": "compaction"})

# Defaults of the knobs logged in each compaction `llm/request` (a rebuild reads them from the log).
KEEP_TURNS = 2  # the kept tail: at least the last turns (fewer when they do not fit TAIL_SHARE)
TAIL_SHARE = 0.3  # of the window, at most, for the kept tail
TRANSCRIPT_SHARE = 0.5  # of the window, at most, for the transcript sent to be summarised
TOOL_OUTPUT_CHARS = 2_000  # each tool output in the transcript
ARGUMENT_CHARS = 1_000  # each tool call's arguments in the transcript
SUMMARY_MAX_TOKENS = 16_000
CHARS_PER_TOKEN = 3.0  # until a request's usage tells the real ratio

SYSTEM = """\
You summarise a conversation between a person and dsh, a coding agent working in their editor, so \
that the agent can continue the work with only your summary and the most recent messages.

Write a dense, factual summary in the conversation's language, with these sections:
1. Goal: what the person asked for, in their words where it matters, and any constraints or \
preferences they stated.
2. Done so far: the changes made (files, functions, commands run and their outcome), decisions taken \
and why.
3. Current state: what works, what fails (exact error messages, failing tests), open questions.
4. Next steps: what remains to be done, in order.
5. Key facts: file paths, names, identifiers, commands and values the work depends on.

Do not invent anything; say so when something is unclear. Do not address the person and do not \
continue the work: write only the summary."""

PROMPT = "Summarise the conversation below (the part of the session before the kept recent messages)."

SUMMARY_HEADING = (
    "[Summary of the earlier conversation, written when the context was compacted; the messages "
    "after this one are the most recent part of the session, verbatim.]"
)


def summary_message(summary: str, seq: int) -> UserMessage:
    """The message that stands for everything before the cut (its id is stable: `compaction-<seq>`)."""
    return UserMessage(
        MessageId(f"compaction-{seq}"), (TextBlock(f"{SUMMARY_HEADING}\n\n{summary}"),), SOURCE
    )


def request_data(kept_from: int, *, transcript_chars: int, max_tokens: int) -> dict[str, Any]:
    """What a compaction `llm/request` logs besides turn/step/attempt: everything its rebuild needs."""
    return {
        "purpose": PURPOSE,
        "keptFromSeq": kept_from,
        "system": SYSTEM,
        "prompt": PROMPT,
        "maxTokens": max_tokens,
        "toolOutputChars": TOOL_OUTPUT_CHARS,
        "transcriptChars": transcript_chars,
    }


def compaction_request(
    header: Mapping[str, Any], before: Sequence[Message], data: Mapping[str, Any]
) -> ModelRequest:
    """The summarising request: the transcript of `before` under the logged `system` and `prompt`."""
    config: dict[str, Any] = {
        "provider": header["config"].get("provider", ""),
        "model": header["config"].get("model", ""),
        "purpose": PURPOSE,
        "maxTokens": data["maxTokens"],
    }
    if "thinking" in header["config"]:
        config["thinking"] = False  # a summary needs no reasoning tokens
    transcript = render_transcript(before, int(data["toolOutputChars"]))
    transcript = elide_middle(
        transcript, int(data["transcriptChars"]), "this part of the conversation is not available"
    ).text
    text = f"{data['prompt']}\n\n<conversation>\n{transcript}\n</conversation>"
    message = UserMessage(MessageId("compaction-input"), (TextBlock(text),), SOURCE)
    return ModelRequest(freeze_json(config), str(data["system"]), (), (message,))


def render_transcript(messages: Sequence[Message], tool_output_chars: int) -> str:
    """The messages as plain text, one heading per message; reasoning left out, tool outputs and
    arguments elided to their budgets (head and tail kept)."""
    parts: list[str] = []
    for message in messages:
        if isinstance(message, AssistantMessage):
            lines = [message.text.strip()] if message.text.strip() else []
            for block in message.content:
                if isinstance(block, ToolCallBlock):
                    arguments = elide_middle(block.arguments, ARGUMENT_CHARS, "arguments elided").text
                    lines.append(f"-> {block.name}({arguments})  [call {block.id}]")
            if lines:
                parts.append("## Assistant\n" + "\n".join(lines))
            continue
        results = [b for b in message.content if isinstance(b, ToolResultBlock)]
        if results:
            for result in results:
                status = " (error)" if result.is_error else ""
                output = elide_middle(result.text, tool_output_chars, "tool output elided").text
                parts.append(f"## Tool result{status} [call {result.tool_call_id}]\n{output}")
            continue
        parts.append(f"## {_speaker(message.source)}\n{message.text}")
    return "\n\n".join(parts)


def _speaker(source: Mapping[str, Any]) -> str:
    kind = source.get("kind")
    if kind == "user":
        return "Person"
    if kind == "editor":
        return f"Editor context ({source.get('contextKind', 'context')})"
    if source == SOURCE:
        return "Summary of the conversation before this point"
    if kind == "plugin":
        return f"Notice ({source.get('plugin')})"
    return str(kind)


def choose_cut(
    entries: Sequence[tuple[int, Message]],
    cuts: Sequence[int],
    turn_starts: Sequence[int],
    end: int,
    *,
    keep_turns: int,
    tail_chars: int,
    summary: Message | None = None,
) -> int | None:
    """Where the kept tail starts: the earliest cut at or after the last `keep_turns` turns whose tail
    fits `tail_chars`, with something new before it to summarise; else `end` (the latest cut allowed).
    None when nothing new lies before `end`."""
    if not any(pos < end and m is not summary for pos, m in entries):
        return None
    desired = turn_starts[-keep_turns] if len(turn_starts) >= keep_turns else -1
    sizes = [(pos, message_chars(m)) for pos, m in entries]
    for cut in [*cuts, end]:
        if cut < desired:
            continue
        if not any(pos < cut and m is not summary for pos, m in entries):
            continue
        if sum(size for pos, size in sizes if pos >= cut) <= tail_chars:
            return cut
    return end


def message_chars(message: Message) -> int:
    """A message's size as the request carries it (its JSON), for estimates."""
    total = 0
    for block in message.content:
        if isinstance(block, TextBlock):
            total += len(block.text)
        elif isinstance(block, ToolCallBlock):
            total += len(block.arguments) + len(block.name) + 40
        elif isinstance(block, ToolResultBlock):
            total += len(block.text) + 40
        elif isinstance(block, ReasoningBlock):
            total += len(block.text)  # sent back as reasoning_content
    return total + 20
