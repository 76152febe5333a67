"""The shapes of the editor's answers (server/editor_answers.py): what real clients send passes (VS
Code's and Neovim's, whose empty tables encode as `{}`), and each wrong field is named."""

from __future__ import annotations

from typing import Any

import pytest

from dsh_daemon.server.editor_answers import (
    apply_edit_problem,
    diagnostics_problem,
    hover_problem,
    locations_problem,
    save_problem,
    symbols_problem,
)

RANGE = {"start": {"line": 2, "character": 8}, "end": {"line": 2, "character": 22}}
URI = "file:///home/ann/project/app.py"


@pytest.mark.parametrize(
    ("check", "answer"),
    [
        (apply_edit_problem, {"applied": True}),
        (apply_edit_problem, {"applied": False, "failureReason": "read-only", "failedChange": 0}),
        (save_problem, {"saved": [URI]}),
        (save_problem, {"saved": {}, "failed": [{"uri": URI, "message": "not loaded in Neovim"}]}),
        (diagnostics_problem, {"items": []}),
        (diagnostics_problem, {"items": [{"uri": URI, "diagnostics": {}, "settled": False}]}),
        (
            diagnostics_problem,
            {
                "items": [
                    {"uri": URI, "diagnostics": [{"range": RANGE, "message": "m", "severity": 1, "code": 7}]}
                ]
            },
        ),
        (locations_problem, {"locations": [{"uri": URI, "range": RANGE}]}),
        (locations_problem, {"locations": [{"targetUri": URI, "targetSelectionRange": RANGE}]}),
        (locations_problem, {"locations": [], "noLanguageServer": True}),
        (symbols_problem, {"symbols": [{"name": "f", "kind": 12, "location": {"uri": URI, "range": RANGE}}]}),
        (hover_problem, {"contents": "`int`"}),
        (hover_problem, {"contents": "", "noLanguageServer": True}),
    ],
)
def test_what_clients_send_passes(check: Any, answer: dict[str, Any]) -> None:
    assert check(answer) is None


@pytest.mark.parametrize(
    ("check", "answer", "problem"),
    [
        (apply_edit_problem, {}, "'applied' must be a boolean, not null"),
        (apply_edit_problem, {"applied": 1}, "'applied' must be a boolean, not a number"),
        (
            apply_edit_problem,
            {"applied": True, "failureReason": []},
            "'failureReason' must be a string, not an array",
        ),
        (save_problem, {"failed": []}, "'saved' must be an array, not null"),
        (save_problem, {"saved": [1]}, "'saved[0]' must be a string, not a number"),
        (
            save_problem,
            {"saved": [], "failed": [{"uri": None}]},
            "'failed[0].uri' must be a string, not null",
        ),
        (diagnostics_problem, {"items": [{"uri": URI}]}, "'items[0].diagnostics' must be an array, not null"),
        (
            diagnostics_problem,
            {"items": [{"uri": URI, "diagnostics": [{"range": RANGE, "message": "m", "severity": 9}]}]},
            "'items[0].diagnostics[0].severity' must be an integer from 1 to 4, not a number",
        ),
        (
            diagnostics_problem,
            {"items": [{"uri": URI, "diagnostics": [{"range": {"start": {"line": -1, "character": 0}}}]}]},
            "'items[0].diagnostics[0].range.start.line' must be a non-negative integer, not a number",
        ),
        (
            locations_problem,
            {"locations": [{"uri": URI}]},
            "'locations[0].range' must be an object, not null",
        ),
        (
            locations_problem,
            {"locations": [], "noLanguageServer": "yes"},
            "'noLanguageServer' must be a boolean",
        ),
        (symbols_problem, {"symbols": [{"name": 3}]}, "'symbols[0].name' must be a string, not a number"),
        (hover_problem, {"contents": {"kind": "markdown"}}, "'contents' must be a string, not an object"),
    ],
)
def test_a_wrong_field_is_named(check: Any, answer: dict[str, Any], problem: str) -> None:
    found = check(answer)
    assert found is not None and found.startswith(problem), found
