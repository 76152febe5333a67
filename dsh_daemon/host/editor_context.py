"""How editor context reads to the model: one wording for every front end.

The LSP server (`dsh/context/add`, `context` on a send) and ACP mode (resource blocks in a prompt)
find the text differently, but the `editor` message they enter is written here, so the model sees
the same "File …" / "Selection in …, lines a-b" / "Diagnostics in …" blocks whichever editor sent it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dsh_daemon.model.messages import UserMessage

MAX_CONTEXT_CHARS = 200_000  # of a file or a selection, per message
MAX_CONTEXT_READ_BYTES = 8 * 1024 * 1024  # read from disk at most (a selection may lie this deep)
SEVERITY = {1: "error", 2: "warning", 3: "info", 4: "hint"}


def fence(text: str, language: str | None = None) -> str:
    """`text` in a code fence long enough that nothing inside can close it."""
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}{language or ''}\n{text}{'' if text.endswith(chr(10)) else chr(10)}{ticks}"


def editor_source(
    uri: str,
    kind: str,
    *,
    rng: Mapping[str, Any] | None = None,
    language: str | None = None,
    version: int | None = None,
) -> dict[str, Any]:
    source: dict[str, Any] = {"kind": "editor", "uri": uri, "contextKind": kind}
    if language:
        source["languageId"] = language
    if version is not None:
        source["version"] = version
    if rng is not None:
        source["range"] = rng
    return source


def file_message(
    uri: str, path: str, text: str, source: dict[str, Any], *, unsaved: bool = False, truncated: bool = False
) -> UserMessage:
    note = ""
    if len(text) > MAX_CONTEXT_CHARS or truncated:
        text = text[:MAX_CONTEXT_CHARS]
        note = f"\n[truncated: first {len(text)} characters]"
    state = " (unsaved editor buffer)" if unsaved else ""
    return UserMessage.create(f"File {path}{state}:\n{fence(text, source.get('languageId'))}{note}", source)


def selection_message(
    path: str, text: str, first_line: int, last_line: int, source: dict[str, Any], *, unsaved: bool = False
) -> UserMessage:
    """`first_line`/`last_line` count from 1 and name the lines that hold selected text."""
    state = " (unsaved editor buffer)" if unsaved else ""
    body = fence(text[:MAX_CONTEXT_CHARS], source.get("languageId"))
    return UserMessage.create(f"Selection in {path}{state}, lines {first_line}-{last_line}:\n{body}", source)


def format_diagnostics(diagnostics: Sequence[Mapping[str, Any]], limit: int = 50) -> list[str]:
    lines = []
    for diag in list(diagnostics)[:limit]:
        rng = diag.get("range", {}).get("start", {})
        severity = SEVERITY.get(diag.get("severity", 1), "error")
        source = f" [{diag['source']}]" if diag.get("source") else ""
        lines.append(f"- line {int(rng.get('line', 0)) + 1}: {severity}{source}: {diag.get('message', '')}")
    return lines


def diagnostics_message(
    path: str, diagnostics: Sequence[Mapping[str, Any]], source: dict[str, Any]
) -> UserMessage:
    lines = format_diagnostics(diagnostics)
    return UserMessage.create(f"Diagnostics in {path}:\n" + ("\n".join(lines) if lines else "(none)"), source)
