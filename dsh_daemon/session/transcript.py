"""A compact transcript for UIs, rendered from the durable log (protocol.md §3 `dsh/session/transcript`).

Pure functions over events: no store, no wire. `page_events` picks the events of one page of turns
from the log read newest first (so only the tail is read); `render_turns` folds them, in log order,
into rendered turns; `transcript_page` does both.

A rendered turn is `{turn, startSeq, startedAt, items, endSeq?, endedAt?, end?, usage?, cut?, retries?}`;
`end` is the `turn/end` reason (absent while the turn is open); `cut: true` when a later
`conversation/cut` took it out of the model's history; `retries`: a turn that ended in error after its
failing request was retried, how many times (the last `llm/retry`'s `retry`). Items, in log order:
- `{type: "message", seq, step, id, source, text, queued?}`: a `user/message` the turn entered (a
  person's prompt, editor context, a plugin's notice); `text` is its text blocks joined; `queued`: a
  person's prompt that waited behind a running turn (or for Run queue) before its own turn took it,
  told by the inbox splices (those of the turn before the page's first are read for it);
- `{type: "assistant", seq, step, text, reasoning?, interrupted?, finishReason?}`: an
  `assistant/message` with text or reasoning; while a step streams and its message is not written yet,
  the chunks so far as `{type: "assistant", seq (of its last chunk), step, text, reasoning?,
  partial: true}`;
- `{type: "tool", seq, step, callId, name, arguments, synthetic?, result?}`: a call of an assistant
  message; `result = {seq, output, isError?, error?, meta?}` once its `tool/result` is logged;
- `{type: "event", seq, step, event, data}`: a durable event a client shows as a line of its own
  (`LINE_EVENTS`: a background process started or ended, words about the session, a subagent
  started or finished), its payload as logged. One logged between turns is an item of the turn
  before it (of the first turn when the session has none before), so a page still shows it.
  A `session/settings` is such an item only when it changed the model or the reasoning effort (a
  change of the sandbox alone is no line): compared with the settings before it, which
  `settings_before` reads for the first one on a page (an earlier page's or none).
Long texts are cut to `TEXT_CAP` characters, flagged with the full length beside them: a tool
result's `output` and a non-user message's `text` get `truncated: true` and `length`; a call's
`arguments` and an edit's `meta.diff` get `argumentsTruncated`/`argumentsLength` and
`diffTruncated`/`diffLength`. A person's prompt and the assistant's text and reasoning are never cut.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from dsh_daemon.model.codec import unstructure
from dsh_daemon.model.events import (
    ASSISTANT_CHUNK,
    ASSISTANT_MESSAGE,
    CONVERSATION_CUT,
    INBOX_SPLICED,
    LLM_RETRY,
    PROCESS_EXITED,
    PROCESS_STARTED,
    SESSION_MODE,
    SESSION_NOTICE,
    SESSION_SETTINGS,
    STEP_END,
    STEP_START,
    SUBAGENT_FINISHED,
    SUBAGENT_STARTED,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    USAGE,
    USER_MESSAGE,
    Event,
)
from dsh_daemon.model.jsonvalue import dumps, thaw
from dsh_daemon.model.messages import join_prompt_text
from dsh_daemon.model.payloads import (
    AssistantChunk,
    AssistantMessageLogged,
    ConversationCut,
    InboxSpliced,
    StepStarted,
    ToolCalled,
    ToolResulted,
    TurnEnded,
    TurnStarted,
    TurnUsage,
)
from dsh_daemon.model.wire import TextDelta

# Durable events the clients draw as lines of the transcript (live, and from a page after a reload).
LINE_EVENTS = frozenset(
    {PROCESS_STARTED, PROCESS_EXITED, SESSION_NOTICE, SESSION_MODE, SUBAGENT_STARTED, SUBAGENT_FINISHED}
)

# The fields of `session/settings` a client shows as "Model: …" (the rest: the sandbox, thinking).
MODEL_FIELDS = ("model", "reasoningEffort")

DEFAULT_LIMIT = 20
MAX_LIMIT = 100
TEXT_CAP = 4_000


@dataclass(frozen=True, slots=True)
class TranscriptPage:
    """Turns newest first; `last_seq`: the newest event the page reflects; `has_more`: older turns exist."""

    turns: tuple[dict[str, Any], ...]
    last_seq: int
    has_more: bool

    def to_json(self) -> dict[str, Any]:
        return {"turns": list(self.turns), "lastSeq": self.last_seq, "hasMore": self.has_more}


SettingsBefore = Callable[[int], Mapping[str, Any] | None]


def no_settings_before(_seq: int) -> Mapping[str, Any] | None:
    return None


def transcript_page(
    events_newest_first: Iterable[Event],
    last_seq: int,
    before_turn: int | None,
    limit: int,
    settings_before: SettingsBefore = no_settings_before,
) -> TranscriptPage:
    """The page of at most `limit` turns numbered below `before_turn` (None: the newest ones).
    `settings_before(seq)`: the data of the session's last `session/settings` below `seq` (None: none)."""
    cuts: list[tuple[int, int]] = []
    events, has_more = page_events(events_newest_first, before_turn, limit, cuts, lead=True)
    turns = render_turns(events, settings_before)
    if has_more and len(turns) > limit:
        turns = turns[1:]  # the turn before the page: read only for the prompts queued during it
    turns = [t for t in turns if before_turn is None or t["turn"] < before_turn]
    mark_cut(turns, cuts)
    turns.reverse()
    return TranscriptPage(tuple(turns), last_seq, has_more)


def mark_cut(turns: list[dict[str, Any]], cuts: Iterable[tuple[int, int]]) -> None:
    """`cut: true` on each turn a `conversation/cut` (seq, beforeTurn) after its start took out of the
    model's history: the turns numbered from `beforeTurn` that had started by then (protocol.md §15).
    A UI shows them as cut, in the session and in a fork that copied them."""
    for seq, before in cuts:
        for turn in turns:
            if turn["turn"] >= before and turn["startSeq"] < seq:
                turn["cut"] = True


def page_events(
    events_newest_first: Iterable[Event],
    before_turn: int | None,
    limit: int,
    cuts: list[tuple[int, int]] | None = None,
    lead: bool = False,
) -> tuple[list[Event], bool]:
    """The events from the `turn/start` of the page's oldest turn to the end, in log order, reading
    newest first and stopping there; and whether an older turn exists (turns are numbered 1, 2, …).
    `cuts` collects (seq, beforeTurn) of every `conversation/cut` read, on this page or after it.
    `lead`: from the `turn/start` of the turn before the page's oldest instead, when there is one."""
    taken: list[Event] = []
    found = 0
    oldest: int | None = None
    for event in events_newest_first:
        taken.append(event)
        if cuts is not None and event.type == CONVERSATION_CUT:
            cuts.append((event.seq or 0, ConversationCut.of(event).before_turn))
        if event.type != TURN_START:
            continue
        turn = TurnStarted.of(event).turn
        if before_turn is not None and turn >= before_turn:
            taken.clear()  # that turn and everything after it are not on this page
            continue
        found += 1
        if found <= limit:
            oldest = turn
        if found >= limit + (1 if lead else 0):
            break
    taken.reverse()
    return taken, oldest is not None and oldest > 1


def render_turns(
    events: Iterable[Event], settings_before: SettingsBefore = no_settings_before
) -> list[dict[str, Any]]:
    """Every turn the events hold (those starting with their `turn/start`), oldest first."""
    builder = _Builder(settings_before)
    for event in events:
        builder.feed(event)
    return builder.turns


class _Builder:
    def __init__(self, settings_before: SettingsBefore) -> None:
        self.settings_before = settings_before
        self.settings: Mapping[str, Any] | None = None  # the last `session/settings` data fed
        self.settings_fed = False
        self.turns: list[dict[str, Any]] = []
        self.current: dict[str, Any] | None = None
        self.step: int | None = None
        self.tools: dict[str, dict[str, Any]] = {}  # callId → item, in the current turn
        self.placed: set[str] = set()  # callIds whose item is in the turn's items
        self.partial: dict[str, Any] | None = None  # the streaming step's chunks so far
        self.early: list[dict[str, Any]] = []  # line events logged before the first turn
        self.waiting: dict[str, tuple[bool, str | None]] = {}  # pending id → (it waited, its verb)
        self.queued: set[str] = set()  # prompts a turn claimed after they waited
        self.retry: int | None = None  # the open retry of the turn's request (no reply since)

    def feed(self, event: Event) -> None:
        kind = event.type
        if kind == TURN_START:
            self.current = {
                "turn": TurnStarted.of(event).turn,
                "startSeq": event.seq,
                "startedAt": event.time,
                "items": [],
            }
            if not self.turns:
                self.current["items"], self.early = self.early, []
            self.turns.append(self.current)
            self.step, self.tools, self.placed, self.partial, self.retry = None, {}, set(), None, None
            return
        if kind in LINE_EVENTS or (kind == SESSION_SETTINGS and self._model_changed(event)):
            line = {
                "type": "event",
                "seq": event.seq,
                "step": self.step,
                "event": kind,
                "data": thaw(event.data),
            }
            (self.turns[-1]["items"] if self.turns else self.early).append(line)
            return
        if kind == INBOX_SPLICED:
            self._splice(event)
            return
        turn = self.current
        if turn is None:
            return  # between turns: titles, headers of no turn
        items: list[dict[str, Any]] = turn["items"]
        if kind == LLM_RETRY:
            self.retry = int(event.data["retry"])
        elif kind in (ASSISTANT_CHUNK, STEP_START):
            self.retry = None  # the request went through (or a new step began): it recovered
        if kind == STEP_START:
            self.step, self.partial = StepStarted.of(event).step, None
        elif kind == STEP_END:
            self.step, self.partial = None, None
        elif kind == USER_MESSAGE:
            items.append(self._message(event))
        elif kind == ASSISTANT_CHUNK:
            self._chunk(event, items)
        elif kind == ASSISTANT_MESSAGE:
            self._assistant(event, items)
        elif kind == TOOL_CALL:
            call = ToolCalled.of(event)
            item = self._place(event, call.call_id, call.name, call.arguments, items)
            if call.synthetic:
                item["synthetic"] = True
        elif kind == TOOL_RESULT:
            result = ToolResulted.of(event)
            item = self._place(event, result.call_id, result.name, None, items)
            item["result"] = self._result(event, result)
        elif kind == USAGE:
            turn["usage"] = thaw(TurnUsage.of(event).usage)
        elif kind == TURN_END:
            turn["endSeq"], turn["endedAt"] = event.seq, event.time
            turn["end"] = thaw(unstructure(TurnEnded.of(event).reason))
            if self.retry is not None and turn["end"].get("kind") == "error":
                turn["retries"] = self.retry  # how many times the failing request was retried
            self.current, self.step, self.partial = None, None, None

    def _model_changed(self, event: Event) -> bool:
        """Whether this `session/settings` changed the model or the effort (the first on a page is
        compared with the one before the page, read then)."""
        before = self.settings if self.settings_fed else self.settings_before(event.seq or 0)
        self.settings, self.settings_fed = event.data, True
        return any(event.data.get(k) != (before or {}).get(k) for k in MODEL_FIELDS)

    def _message(self, event: Event) -> dict[str, Any]:
        data = event.data  # a user/message's payload is the message itself
        source = thaw(data.get("source")) or {}
        item: dict[str, Any] = {"type": "message", "seq": event.seq, "step": self.step, "id": data.get("id")}
        item["source"] = source
        text = _text(data.get("content"), join=join_prompt_text)
        if source.get("kind") == "user":
            item["text"] = text
            if item["id"] in self.queued:
                self.queued.discard(item["id"])
                item["queued"] = True
        else:
            item.update(_capped("text", text, "truncated", "length"))
        return item

    def _splice(self, event: Event) -> None:
        """Which prompts waited: one inserted while a turn ran (or sent not to wake a turn) that a later
        turn claims from the next-turn list, as the clients' reducers tag it live."""
        splice = InboxSpliced.of(event)
        claimed = splice.outcome is None
        kept = splice.outcome in ("moved", "replaced")  # the same prompt, put back: it keeps its wait
        carried: dict[str, tuple[bool, str | None]] = {}
        for message_id in splice.removed_ids or ():
            waited, verb = self.waiting.pop(message_id, (False, None))
            if kept:
                carried[message_id] = (waited, verb)
            elif claimed and waited and verb not in ("steer", "inject") and splice.target == "next-turn":
                self.queued.add(message_id)
        for item in splice.inserted:
            data = thaw(item)
            message_id = str(data.get("id"))
            # A replaced prompt may come back under a new id: one for one, it is the same prompt.
            same = carried.get(message_id)
            if same is None and len(carried) == 1 == len(splice.inserted):
                same = next(iter(carried.values()))
            before = same[0] if same else False
            waited = before or self.current is not None or data.get("wakeup") is False
            verb = data.get("verb")
            self.waiting[message_id] = (waited, verb if isinstance(verb, str) else None)

    def _chunk(self, event: Event, items: list[dict[str, Any]]) -> None:
        if self.partial is None:
            self.partial = {
                "type": "assistant",
                "seq": event.seq,
                "step": self.step,
                "text": "",
                "partial": True,
            }
            items.append(self.partial)
        partial = self.partial
        partial["seq"] = event.seq
        for delta in AssistantChunk.of(event).deltas:
            if isinstance(delta, TextDelta) and delta.type == "text":
                partial["text"] += delta.text
            elif isinstance(delta, TextDelta):
                partial["reasoning"] = partial.get("reasoning", "") + delta.text

    def _assistant(self, event: Event, items: list[dict[str, Any]]) -> None:
        logged = AssistantMessageLogged.of(event)
        if self.partial is not None:  # the finished message replaces what streamed
            if self.partial in items:
                items.remove(self.partial)
            self.partial = None
        blocks = [b for b in logged.message.get("content") or () if isinstance(b, Mapping)]
        text = "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
        reasoning = "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "reasoning")
        step = logged.step
        if text or reasoning or logged.interrupted:
            item: dict[str, Any] = {"type": "assistant", "seq": event.seq, "step": step, "text": text}
            if reasoning:
                item["reasoning"] = reasoning
            if logged.interrupted:
                item["interrupted"] = True
            if logged.finish_reason is not None:
                item["finishReason"] = logged.finish_reason
            items.append(item)
        for block in blocks:
            if block.get("type") == "tool-call":
                call_id = str(block.get("id", ""))
                tool = self._place(event, call_id, str(block.get("name", "")), block.get("arguments"), items)
                tool["step"] = step

    def _place(
        self, event: Event, call_id: str, name: str, arguments: Any, items: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """The call's item (made on first mention, at that point of the turn)."""
        item = self.tools.get(call_id)
        if item is None:
            item = {"type": "tool", "seq": event.seq, "step": self.step, "callId": call_id, "name": name}
            self.tools[call_id] = item
        if call_id not in self.placed:
            self.placed.add(call_id)
            items.append(item)
        if name and not item.get("name"):
            item["name"] = name
        if arguments is not None and "arguments" not in item:
            raw = arguments if isinstance(arguments, str) else dumps(thaw(arguments))
            item.update(_capped("arguments", raw))
        return item

    def _result(self, event: Event, logged: ToolResulted) -> dict[str, Any]:
        blocks = [b for b in logged.message.get("content") or () if isinstance(b, Mapping)]
        output = "".join(_text(b.get("content")) for b in blocks if b.get("type") == "tool-result")
        result: dict[str, Any] = {"seq": event.seq, **_capped("output", output, "truncated", "length")}
        if any(b.get("isError") for b in blocks):
            result["isError"] = True
        if logged.error is not None:
            result["error"] = {"name": logged.error.name, "code": logged.error.code}
        meta = logged.meta
        if isinstance(meta, Mapping):
            shown = thaw(meta)
            if isinstance(shown.get("diff"), str):
                shown.update(_capped("diff", shown.pop("diff")))
            result["meta"] = shown
        return result


def _capped(key: str, text: str, flag: str | None = None, length: str | None = None) -> dict[str, Any]:
    """`{key: text}`, or the first `TEXT_CAP` characters with a truncation flag and the full length."""
    if len(text) <= TEXT_CAP:
        return {key: text}
    return {key: text[:TEXT_CAP], flag or f"{key}Truncated": True, length or f"{key}Length": len(text)}


def _text(content: Any, join: Callable[[Iterable[str]], str] = "".join) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, Iterable):
        return ""
    return join(str(b.get("text", "")) for b in content if isinstance(b, Mapping) and b.get("type") == "text")
