"""What a stored session must look like before anything reads it (issue 18 item 9).

Rows this daemon wrote are well formed by construction; rows edited by hand, written by a broken
build or damaged on disk used to load without complaint and fail later, deep inside a turn (a
KeyError on the next prompt, answered -32603), or silently change meaning (a queued item without an
id got a fresh one). So every row is checked where the session's rows are loaded
(`SessionStore.load_events`), and a bad one makes the whole session `session_unreadable`, with a
message naming the seq, the type and the field; nothing is repaired or rewritten (the rows stay as
they are, for a person or a newer build to look at).

The check is one SQL expression (`ROW_IS_WELL_FORMED`) over `type` and `data`, generated from the
rule table below and evaluated by SQLite in C, so a resume of a long session does not have to parse
every row in Python (the log parses rows lazily). Only the first flagged row is parsed again here,
with the same rules, to say what is wrong with it. The rules cover every field the daemon reads.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from dsh_daemon.model import events as ev
from dsh_daemon.model.messages import InvalidMessageError, block_from_json
from dsh_daemon.session.gaps import LOG_GAP


@dataclass(frozen=True, slots=True)
class Field:
    """`path` holds a value of one of `kinds` (SQLite's json_type names); absent is allowed when
    `optional` (a JSON null is not)."""

    path: tuple[str, ...]
    kinds: tuple[str, ...]
    optional: bool = False


@dataclass(frozen=True, slots=True)
class Blocks:
    """`path` is an array of content blocks (`model.messages.block_from_json` reads each)."""

    path: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Each:
    """Every item of the array at `path` (when there is one) is an object following `rules`."""

    path: tuple[str, ...]
    rules: tuple[Rule, ...]


Rule: TypeAlias = Field | Blocks | Each

INT = ("integer",)
TEXT = ("text",)
OBJECT = ("object",)
ARRAY = ("array",)
NUMBER = ("integer", "real")


def _message(*at: str) -> tuple[Rule, ...]:
    """A logged message (user or assistant): id, content blocks, source."""
    return (
        Field((*at, "id"), TEXT),
        Field((*at, "content"), ARRAY),
        Blocks((*at, "content")),
        Field((*at, "source"), OBJECT),
        Field((*at, "source", "kind"), TEXT),
    )


_TURN = Field(("turn",), INT)
_STEP = (_TURN, Field(("step",), INT))
_INBOX_ITEM = (*_message(), Each(("context",), _message()))

RULES: Mapping[str, tuple[Rule, ...]] = {
    ev.INBOX_SPLICED: (
        Field(("target",), TEXT),
        Field(("start",), INT),
        Field(("inserted",), ARRAY),
        Each(("inserted",), _INBOX_ITEM),
        Field(("removedCount",), INT, optional=True),
        Field(("removedIds",), ARRAY, optional=True),
        Field(("outcome",), TEXT, optional=True),
    ),
    ev.TURN_START: (_TURN,),
    ev.TURN_END: (_TURN, Field(("reason",), OBJECT), Field(("reason", "kind"), TEXT)),
    ev.STEP_START: _STEP,
    ev.STEP_END: _STEP,
    ev.USER_MESSAGE: _message(),
    ev.REQUEST_HEADER: (Field(("header",), OBJECT), Field(("header", "config"), OBJECT)),
    ev.LLM_REQUEST: (*_STEP, Field(("keptFromSeq",), INT, optional=True)),
    ev.ASSISTANT_CHUNK: (*_STEP, Field(("deltas",), ARRAY)),
    ev.ASSISTANT_MESSAGE: (*_STEP, Field(("message",), OBJECT), *_message("message")),
    ev.TOOL_CALL: (*_STEP, Field(("callId",), TEXT), Field(("name",), TEXT)),
    ev.TOOL_RESULT: (
        *_STEP,
        Field(("callId",), TEXT),
        Field(("name",), TEXT),
        Field(("message",), OBJECT),
        *_message("message"),
    ),
    ev.LLM_RETRY: (*_STEP, Field(("error",), OBJECT)),
    ev.USAGE: (_TURN, Field(("usage",), OBJECT)),
    ev.CONTEXT_USAGE: (Field(("used",), INT),),
    ev.CONTEXT_COMPACTED: (
        Field(("keptFromSeq",), INT),
        Field(("tokensAfter",), NUMBER),
        Field(("message",), OBJECT),
        *_message("message"),
    ),
    ev.SESSION_TITLE: (Field(("title",), TEXT),),
    ev.REWIND_FILES: (Field(("rewindId",), TEXT), Field(("phase",), TEXT), Field(("beforeTurn",), INT)),
    ev.CONVERSATION_CUT: (Field(("beforeTurn",), INT),),
    ev.SESSION_MODE: (Field(("mode",), TEXT),),
    ev.SESSION_NOTICE: (Field(("message",), TEXT),),
    ev.SANDBOX_WIDENED: (Field(("callId",), TEXT), Field(("reason",), TEXT)),
    ev.PLAN_UPDATED: (
        _TURN,
        Field(("steps",), ARRAY),
        Each(("steps",), (Field(("title",), TEXT), Field(("status",), TEXT))),
        Field(("note",), TEXT, optional=True),
    ),
    ev.PROCESS_STARTED: (Field(("processId",), TEXT), Field(("command",), TEXT)),
    ev.PROCESS_EXITED: (Field(("processId",), TEXT),),
    ev.REVIEW_FINDING: (
        Field(("reviewId",), TEXT),
        Field(("findingId",), TEXT),
        _TURN,
        Field(("path",), TEXT),
        Field(("startLine",), INT),
        Field(("endLine",), INT),
        Field(("severity",), TEXT),
        Field(("title",), TEXT),
        Field(("body",), TEXT),
    ),
    ev.REVIEW_COMPLETED: (
        Field(("reviewId",), TEXT),
        _TURN,
        Field(("target",), OBJECT),
        Field(("findings",), INT),
    ),
    ev.REVIEW_DISMISSED: (Field(("findingId",), TEXT),),
    LOG_GAP: (Field(("from",), INT), Field(("to",), INT)),
}

# ---- the SQL form (evaluated by SQLite over `type` and `data`) ----------------------------------------


def _sql_path(path: Sequence[str]) -> str:
    return "'$" + "".join(f".{key}" for key in path) + "'"


def _sql_rules(rules: Sequence[Rule], doc: str, depth: int) -> str:
    parts = []
    for rule in rules:
        if isinstance(rule, Field):
            # `IS`, never `=` / `IN`: a missing path gives NULL, which must fail the check, not make
            # the whole expression NULL (`NOT NULL` is NULL too, and would hide the row).
            test = f"json_type({doc}, {_sql_path(rule.path)})"
            kinds = [f"{test} IS '{k}'" for k in rule.kinds] + ([f"{test} IS NULL"] if rule.optional else [])
            parts.append(f"({' OR '.join(kinds)})")
        elif isinstance(rule, Blocks):
            alias = f"b{depth}"
            parts.append(
                f"NOT EXISTS (SELECT 1 FROM json_each({doc}, {_sql_path(rule.path)}) AS {alias} "
                f"WHERE NOT ({_sql_block(alias)}))"
            )
        else:
            alias = f"i{depth}"
            inner = _sql_rules(rule.rules, f"{alias}.value", depth + 1)
            parts.append(
                f"(json_type({doc}, {_sql_path(rule.path)}) IS NOT 'array' OR NOT EXISTS ("
                f"SELECT 1 FROM json_each({doc}, {_sql_path(rule.path)}) AS {alias} "
                f"WHERE NOT (CASE WHEN {alias}.type = 'object' THEN ({inner}) ELSE 0 END)))"
            )
    return " AND ".join(parts) or "1"


def _sql_block(alias: str) -> str:
    value = f"{alias}.value"

    def has(key: str, kind: str = "text") -> str:
        return f"json_type({value}, '$.{key}') IS '{kind}'"

    return (
        f"CASE WHEN {alias}.type IS NOT 'object' THEN 0 ELSE CASE json_extract({value}, '$.type') "
        f"WHEN 'text' THEN {has('text')} WHEN 'reasoning' THEN {has('text')} "
        f"WHEN 'tool-call' THEN {has('id')} AND {has('name')} AND {has('arguments')} "
        f"AND coalesce(json_type({value}, '$.providerId'), 'text') IS 'text' "
        f"WHEN 'tool-result' THEN {has('toolCallId')} AND {has('content', 'array')} "
        f"ELSE {has('type')} AND json_extract({value}, '$.type') IS NOT '' END END"
    )


def _row_sql() -> str:
    cases = " ".join(
        f"WHEN '{kind}' THEN ({_sql_rules(rules, 'data', 0)})" for kind, rules in sorted(RULES.items())
    )
    return f"coalesce(CASE WHEN NOT json_valid(data) THEN 0 ELSE (CASE type {cases} ELSE 1 END) END, 0)"


ROW_IS_WELL_FORMED = _row_sql()

# ---- the Python form (says what is wrong with a row the SQL flagged) -----------------------------------

_NAMES = {"integer": "an integer", "real": "a number", "text": "a string", "object": "an object",
          "array": "an array", "null": "null", "true": "a boolean", "false": "a boolean"}  # fmt: skip


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "real"
    if isinstance(value, str):
        return "text"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list):
        return "array"
    return "null"


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:59] + "…"


_MISSING = object()


def _at(doc: Any, path: Sequence[str]) -> Any:
    for key in path:
        if not isinstance(doc, Mapping) or key not in doc:
            return _MISSING
        doc = doc[key]
    return doc


def _name(prefix: str, path: Sequence[str]) -> str:
    return ".".join([prefix, *path]) if prefix else ".".join(path)


def _problem(doc: Any, rules: Sequence[Rule], prefix: str = "") -> str | None:
    for rule in rules:
        value = _at(doc, rule.path)
        where = _name(prefix, rule.path)
        if isinstance(rule, Field):
            if value is _MISSING:
                if not rule.optional:
                    return f"'{where}' is missing"
            elif _kind(value) not in rule.kinds:
                wanted = " or ".join(dict.fromkeys(_NAMES[k] for k in rule.kinds))
                return f"'{where}' must be {wanted}, not {_shown(value)}"
        elif isinstance(rule, Blocks):
            if isinstance(value, list):
                for index, block in enumerate(value):
                    try:
                        block_from_json(block, f"'{where}[{index}]'")
                    except InvalidMessageError as exc:
                        return str(exc)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                if not isinstance(item, Mapping):
                    return f"'{where}[{index}]' must be an object, not {_shown(item)}"
                found = _problem(item, rule.rules, f"{where}[{index}]")
                if found is not None:
                    return found
    return None


def describe_row(kind: str, data: str) -> str:
    """What is wrong with a stored row the SQL check flagged, in words."""
    try:
        doc = json.loads(data)
    except ValueError as exc:
        return f"its data is not JSON ({exc})"
    if not isinstance(doc, Mapping):
        return "its data is not a JSON object"
    found = _problem(doc, RULES.get(kind, ()))
    return found or "its data does not have the shape of a stored event of this type"


def summary_row_problem(last_seq: int, loaded_last: int) -> str | None:
    """The sessions row's `last_seq` must be the log's last seq: appends continue from it."""
    if last_seq == loaded_last:
        return None
    return (
        f"the sessions row says the log ends at seq {last_seq}, but its last stored event is seq "
        f"{loaded_last}"
    )
