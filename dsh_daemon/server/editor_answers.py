"""The shapes of the editor's answers (protocol.md §9), checked before anything reads them: each
check returns the path of the first field that is not what the method promises (`failed[0].uri must
be a string`), or None. A malformed answer is then one typed failure naming that field, never a
Python exception somewhere inside a tool.

Members the protocol does not name are let through (a newer client may send more); the ones it names
must have their type. An empty object stands for an empty array: a Lua client (Neovim) cannot tell
the two apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

INSPECTED_ITEMS = 10_000  # a longer list is checked this far (the tools read fewer)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object" if isinstance(value, Mapping) else type(value).__name__


def _wrong(where: str, expected: str, value: Any) -> str:
    return f"'{where}' must be {expected}, not {_kind(value)}"


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _severity(value: Any) -> bool:
    """An LSP `DiagnosticSeverity`: 1 (error) to 4 (hint)."""
    return _integer(value) and 1 <= int(value) <= 4


def _position(value: Any, where: str) -> str | None:
    if not isinstance(value, Mapping):
        return _wrong(where, "an object", value)
    for key in ("line", "character"):
        if not _integer(value.get(key)) or value[key] < 0:
            return _wrong(f"{where}.{key}", "a non-negative integer", value.get(key))
    return None


def _range(value: Any, where: str) -> str | None:
    if not isinstance(value, Mapping):
        return _wrong(where, "an object", value)
    return _position(value.get("start"), f"{where}.start") or _position(value.get("end"), f"{where}.end")


def _optional(value: Any, where: str, expected: str, ok: bool) -> str | None:
    return None if value is None or ok else _wrong(where, expected, value)


def array(value: Any) -> list[Any] | None:
    """`value` as a list (an empty object is an empty array); None when it is neither."""
    if isinstance(value, Mapping) and not value:
        return []
    return value if isinstance(value, list) else None


def _items(answer: Mapping[str, Any], key: str, required: bool = True) -> tuple[list[Any] | None, str | None]:
    value = answer.get(key)
    if value is None and not required:
        return [], None
    items = array(value)
    if items is None:
        return None, _wrong(key, "an array", value)
    return items[:INSPECTED_ITEMS], None


def apply_edit_problem(answer: Mapping[str, Any]) -> str | None:
    """`workspace/applyEdit` → `ApplyWorkspaceEditResult {applied, failureReason?}`."""
    if not isinstance(answer.get("applied"), bool):
        return _wrong("applied", "a boolean", answer.get("applied"))
    reason = answer.get("failureReason")
    return _optional(reason, "failureReason", "a string", isinstance(reason, str))


def save_problem(answer: Mapping[str, Any]) -> str | None:
    """`dsh/document/save` → `{saved: [uri], failed?: [{uri, message}]}`."""
    saved, problem = _items(answer, "saved")
    if problem is not None:
        return problem
    for i, uri in enumerate(saved or []):
        if not isinstance(uri, str):
            return _wrong(f"saved[{i}]", "a string", uri)
    failed, problem = _items(answer, "failed", required=False)
    if problem is not None:
        return problem
    for i, entry in enumerate(failed or []):
        if not isinstance(entry, Mapping):
            return _wrong(f"failed[{i}]", "an object", entry)
        if not isinstance(entry.get("uri"), str):
            return _wrong(f"failed[{i}].uri", "a string", entry.get("uri"))
        message = entry.get("message")
        if (
            problem := _optional(message, f"failed[{i}].message", "a string", isinstance(message, str))
        ) is not None:
            return problem
    return None


def diagnostic_problem(value: Any, where: str) -> str | None:
    """An LSP `Diagnostic`: the members the tools read (`range`, `message`, `severity`, `source`, `code`)."""
    if not isinstance(value, Mapping):
        return _wrong(where, "an object", value)
    problem = _range(value.get("range"), f"{where}.range")
    if problem is not None:
        return problem
    if not isinstance(value.get("message"), str):
        return _wrong(f"{where}.message", "a string", value.get("message"))
    severity, source, code = value.get("severity"), value.get("source"), value.get("code")
    return (
        _optional(severity, f"{where}.severity", "an integer from 1 to 4", _severity(severity))
        or _optional(source, f"{where}.source", "a string", isinstance(source, str))
        or _optional(code, f"{where}.code", "a string or an integer", isinstance(code, str) or _integer(code))
    )


def diagnostics_problem(answer: Mapping[str, Any]) -> str | None:
    """`dsh/editor/diagnostics` → `{items: [{uri, diagnostics: Diagnostic[], settled?}]}`."""
    items, problem = _items(answer, "items")
    if problem is not None:
        return problem
    for i, item in enumerate(items or []):
        where = f"items[{i}]"
        if not isinstance(item, Mapping):
            return _wrong(where, "an object", item)
        if not isinstance(item.get("uri"), str):
            return _wrong(f"{where}.uri", "a string", item.get("uri"))
        settled = item.get("settled")
        if (
            problem := _optional(settled, f"{where}.settled", "a boolean", isinstance(settled, bool))
        ) is not None:
            return problem
        found = array(item.get("diagnostics"))
        if found is None:
            return _wrong(f"{where}.diagnostics", "an array", item.get("diagnostics"))
        for j, diagnostic in enumerate(found[:INSPECTED_ITEMS]):
            if (problem := diagnostic_problem(diagnostic, f"{where}.diagnostics[{j}]")) is not None:
                return problem
    return None


def _location(value: Any, where: str) -> str | None:
    """An LSP `Location {uri, range}` or `LocationLink {targetUri, targetSelectionRange}`."""
    if not isinstance(value, Mapping):
        return _wrong(where, "an object", value)
    if "targetUri" in value and "uri" not in value:
        if not isinstance(value.get("targetUri"), str):
            return _wrong(f"{where}.targetUri", "a string", value.get("targetUri"))
        key = "targetSelectionRange" if "targetSelectionRange" in value else "targetRange"
        return _range(value.get(key), f"{where}.{key}")
    if not isinstance(value.get("uri"), str):
        return _wrong(f"{where}.uri", "a string", value.get("uri"))
    return _range(value.get("range"), f"{where}.range")


def _no_language_server(answer: Mapping[str, Any]) -> str | None:
    flag = answer.get("noLanguageServer")
    return _optional(flag, "noLanguageServer", "a boolean", isinstance(flag, bool))


def locations_problem(answer: Mapping[str, Any]) -> str | None:
    """`dsh/editor/definition` and `dsh/editor/references` → `{locations: Location[]}`."""
    if (problem := _no_language_server(answer)) is not None:
        return problem
    locations, problem = _items(answer, "locations", required=answer.get("noLanguageServer") is not True)
    if problem is not None:
        return problem
    for i, location in enumerate(locations or []):
        if (problem := _location(location, f"locations[{i}]")) is not None:
            return problem
    return None


def symbols_problem(answer: Mapping[str, Any]) -> str | None:
    """`dsh/editor/symbols` → `{symbols: [{name, kind, location, containerName?}]}`."""
    if (problem := _no_language_server(answer)) is not None:
        return problem
    symbols, problem = _items(answer, "symbols", required=answer.get("noLanguageServer") is not True)
    if problem is not None:
        return problem
    for i, symbol in enumerate(symbols or []):
        where = f"symbols[{i}]"
        if not isinstance(symbol, Mapping):
            return _wrong(where, "an object", symbol)
        if not isinstance(symbol.get("name"), str):
            return _wrong(f"{where}.name", "a string", symbol.get("name"))
        kind, container = symbol.get("kind"), symbol.get("containerName")
        problem = (
            _optional(kind, f"{where}.kind", "an integer", _integer(kind))
            or _optional(container, f"{where}.containerName", "a string", isinstance(container, str))
            or _location(symbol.get("location"), f"{where}.location")
        )
        if problem is not None:
            return problem
    return None


def hover_problem(answer: Mapping[str, Any]) -> str | None:
    """`dsh/editor/hover` → `{contents: string}`."""
    if (problem := _no_language_server(answer)) is not None:
        return problem
    contents = answer.get("contents")
    if contents is None and answer.get("noLanguageServer") is True:
        return None
    return None if isinstance(contents, str) else _wrong("contents", "a string", contents)


LANGUAGE_ANSWER_CHECKS = {
    "definition": locations_problem,
    "references": locations_problem,
    "symbols": symbols_problem,
    "hover": hover_problem,
}
