"""Tool cards: one readable line per tool call (`⚙ edit_file notes.md (+1 −0)`, `⚙ run_command
pytest -q`), numbered so `/show N` can print the call's diff or whole output on demand."""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from typing import Any

from dsh_daemon.chat.render import clip, diff_stat, sanitize

MINUS = "\u2212"  # a real minus sign: "(+1 −0)"


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _stat(added: int, removed: int) -> str:
    return f"(+{added} {MINUS}{removed})"


def _text_stat(old: str, new: str) -> tuple[int, int]:
    added = removed = 0
    for line in difflib.ndiff(old.splitlines(), new.splitlines()):
        if line.startswith("+ "):
            added += 1
        elif line.startswith("- "):
            removed += 1
    return added, removed


def call_summary(name: str, raw_arguments: Any) -> str:
    """What the call does, in the words a person would use: the tool and its main argument."""
    args = _arguments(raw_arguments)
    path = str(args.get("path") or "")
    if name == "edit_file" and path:
        stat = _text_stat(str(args.get("old_string") or ""), str(args.get("new_string") or ""))
        return f"{name} {clip(path, 70)} {_stat(*stat)}"
    if name == "write_file" and path:
        lines = len(str(args.get("content") or "").splitlines())
        return f"{name} {clip(path, 70)} ({lines} line{'s' if lines != 1 else ''})"
    if isinstance(args.get("symbol"), str) and path:  # definition, references, hover: which, where
        line = args.get("line")
        where = f"{clip(path, 60)}{f':{line}' if isinstance(line, int) else ''}"
        return f"{name} {clip(args['symbol'], 40)}  {where}"
    if name == "run_command" and args.get("command"):
        return f"{name} {clip(str(args['command']), 90)}"
    if name == "read_file" and path:
        offset, limit = args.get("offset"), args.get("limit")
        where = ""
        if isinstance(offset, int) and isinstance(limit, int):
            where = f":{offset}-{offset + limit - 1}"
        elif isinstance(offset, int):
            where = f":{offset}-"
        return f"{name} {clip(path, 80)}{where}"
    if name == "grep" and args.get("pattern"):
        where = f" in {clip(path, 40)}" if path else ""
        return f"{name} {clip(json.dumps(args['pattern'], ensure_ascii=False), 60)}{where}"
    if name == "find_files" and args.get("pattern"):
        return f"{name} {clip(str(args['pattern']), 60)}" + (f" in {clip(path, 40)}" if path else "")
    if name == "list_dir":
        return f"{name} {clip(path or '.', 80)}"
    if name == "update_plan" and isinstance(args.get("steps"), list):
        steps = len(args["steps"])
        return f"{name} ({steps} step{'s' if steps != 1 else ''})"  # the plan's own line shows them
    if not args:
        return f"{name} {clip(str(raw_arguments or ''), 80)}".rstrip()
    shown = ", ".join(
        f"{key}={clip(json.dumps(value, ensure_ascii=False), 30)}" for key, value in args.items()
    )
    return f"{name} {clip(shown, 90)}"


@dataclass
class Card:
    number: int
    call_id: str
    name: str
    arguments: str
    summary: str
    output: str | None = None  # the result text the model saw (None while the call runs)
    diff: str | None = None  # an edit's unified diff (from the result's meta)
    error: bool = False
    exit_code: int | None = None
    truncated: bool = False  # only the first characters of the output are known (a transcript page)
    path: str = ""
    # What the language server told the agent, from the result's meta (protocol.md §9; the words the
    # model got are for the model and are never matched): new errors after an edit, no server.
    new_errors: int = 0
    no_language_server: bool = False

    def result_line(self) -> str:
        """What came of it, in one line (without the mark): `edit_file notes.md (+1 −0)`,
        `run_command pytest -q · exit 1 · 12 lines`."""
        note = self.note()
        if self.diff is not None and not self.error:
            line = f"{self.name} {clip(self.path, 70)} {_stat(*diff_stat(self.diff))}"
            return f"{line} · {note}" if note else line
        if note:
            return f"{self.summary} · {note}"
        output = self.output or ""
        lines = output.rstrip("\n").count("\n") + 1 if output.strip() else 0
        parts = [self.summary]
        if self.exit_code is not None:
            parts.append(f"exit {self.exit_code}")
        if self.error and (self.exit_code is None or self.exit_code == 0):
            first = next((line for line in output.splitlines() if line.strip()), "")
            parts.append(clip(first, 80))
        elif lines:
            parts.append(f"{lines} line{'s' if lines != 1 else ''}")
        return " · ".join(parts)

    def note(self) -> str | None:
        """What the language server told the agent: "2 new errors", "no language server" (None: nothing)."""
        if self.error:
            return None
        if self.new_errors:
            return f"{self.new_errors} new error{'s' if self.new_errors != 1 else ''}"
        return "no language server" if self.no_language_server else None

    @property
    def failed(self) -> bool:
        return self.error or bool(self.exit_code)

    def details(self) -> str:
        """What `/show` prints: the diff of an edit, else the whole output."""
        if self.diff is not None:
            return sanitize(self.diff)
        if self.output is None:
            return "(still running)"
        return sanitize(self.output) or "(no output)"


class CardBook:
    def __init__(self) -> None:
        self.cards: list[Card] = []
        self.by_call: dict[str, Card] = {}

    def call(self, call_id: str, name: str, arguments: Any) -> Card:
        card = self.by_call.get(call_id)
        if card is None:
            raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
            path = str(_arguments(arguments).get("path") or "")
            card = Card(len(self.cards) + 1, call_id, name, raw, call_summary(name, arguments), path=path)
            self.cards.append(card)
            self.by_call[call_id] = card
        return card

    def result(
        self,
        call_id: str,
        name: str,
        output: str,
        *,
        error: bool,
        meta: dict[str, Any] | None,
        truncated: bool = False,
    ) -> Card:
        card = self.by_call.get(call_id) or self.call(call_id, name, "")
        card.output = output
        card.error = error
        card.truncated = truncated
        meta = meta or {}
        if isinstance(meta.get("diff"), str):
            card.diff = meta["diff"]
        if isinstance(meta.get("exitCode"), int):
            card.exit_code = meta["exitCode"]
        count = meta.get("newErrors")
        card.new_errors = count if isinstance(count, int) and not isinstance(count, bool) else 0
        card.no_language_server = meta.get("noLanguageServer") is True
        return card

    def get(self, number: int) -> Card | None:
        return self.cards[number - 1] if 1 <= number <= len(self.cards) else None

    def last(self) -> Card | None:
        return self.cards[-1] if self.cards else None
