"""The new errors after an edit are read once (`reported_problem`): the lines the model reads and the
`newErrorList` clients show (EditMeta, protocol.md §9) are made from the same values, also for
diagnostics a client sends off the LSP shape."""

from __future__ import annotations

from typing import Any

from dsh_daemon.tools.editor_tools import NEW_ERRORS_SHOWN, NewErrors

DIAGNOSTICS: list[dict[str, Any]] = [
    {  # a code that is an object (VS Code's `{value, target}`, not LSP's)
        "range": {"start": {"line": 2, "character": 4}},
        "message": "bad\n   thing",
        "severity": 1,
        "source": "pyright",
        "code": {"value": "reportX"},
    },
    {"message": "no range", "source": 7, "code": 5},  # a source that is no string
    {"range": {"start": {"line": 0, "character": 0}}, "message": "m", "source": "ts", "code": True},
    {"range": {"start": {"line": 9, "character": 1}}, "message": "m2", "source": "ts", "code": ""},
    {"range": {"start": {"line": 3, "character": 2}}, "message": "typed", "source": "ts", "code": 2322},
    {"range": {"start": {"line": 4, "character": 0}}, "message": "no source", "code": "E1"},
]


def said(problem: dict[str, Any]) -> str:
    """What the model must read for one entry of `newErrorList`: its values and no others."""
    tag = ""
    if "source" in problem:
        code = f" {problem['code']}" if "code" in problem else ""
        tag = f" [{problem['source']}{code}]"
    where = f"{problem['path']}:{problem['line']}:{problem['col']}"
    return f"  {where}: {problem['severity']}: {problem['message']}{tag}"


def test_the_models_lines_and_the_clients_list_come_from_the_same_values() -> None:
    found = NewErrors("app.py", tuple(DIAGNOSTICS))
    listed = found.note().splitlines()[1:]
    meta = found.meta()
    assert meta["newErrors"] == len(DIAGNOSTICS)
    assert listed == [said(p) for p in meta["newErrorList"]]
    assert listed == [
        "  app.py:3:5: error: bad thing [pyright]",
        "  app.py:1:1: error: no range",
        "  app.py:1:1: error: m [ts]",
        "  app.py:10:2: error: m2 [ts]",
        "  app.py:4:3: error: typed [ts 2322]",
        "  app.py:5:1: error: no source",
    ]


def test_past_the_shown_ones_both_count_the_rest_alike() -> None:
    many = tuple({"range": {"start": {"line": n, "character": 0}}, "message": f"e{n}"} for n in range(15))
    found = NewErrors("app.py", many)
    lines = found.note().splitlines()
    meta = found.meta()
    assert meta["newErrors"] == 15
    assert lines[1 : 1 + NEW_ERRORS_SHOWN] == [said(p) for p in meta["newErrorList"]]
    assert lines[-1] == "  … and 5 more (the diagnostics tool lists them)"
