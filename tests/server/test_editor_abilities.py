"""Diagnostics and language features the editor answers (issue 26.2, 26.3; protocol.md §9), through the
real daemon process. The client is the editor model of test_coherence with a toy language server: a
line using `undefined_name` is an error, and `helper` is defined in lib.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pytest_lsp import LanguageClient

from tests.fakes.deepseek_server import FakeDeepSeek
from tests.server.harness import Daemon, start_daemon, stop_daemon, text_reply
from tests.server.test_coherence import EditorModel, call, result_text, results

OPTIONS = {"thinking": False, "tools": {"limits": {"diagnostics_settle_s": 0.05}}}


class ToyLanguageServer(EditorModel):
    def __init__(self) -> None:
        super().__init__(change_delay_s=0.0)
        self.asked: list[tuple[str, Any]] = []

    def setup(self, client: LanguageClient, daemon: Daemon) -> None:
        super().setup(client, daemon)

        @client.feature("dsh/editor/diagnostics")
        def on_diagnostics(params: Any) -> Any:
            self.asked.append(("diagnostics", params))
            uris = params.get("uris") or list(self.buffers)
            items = []
            for uri in uris:
                found = [
                    {
                        "range": {"start": {"line": n, "character": 4}, "end": {"line": n, "character": 18}},
                        "message": '"undefined_name" is not defined',
                        "severity": 1,
                        "source": "toy",
                    }
                    for n, line in enumerate(self.buffers.get(uri, "").splitlines())
                    if "undefined_name" in line
                ]
                if found:
                    items.append({"uri": uri, "diagnostics": found})
            return {"items": items}

        @client.feature("dsh/editor/definition")
        def on_definition(params: Any) -> Any:
            self.asked.append(("definition", params))
            lib = next(u for u in self.buffers if u.endswith("/lib.py"))
            start = {"line": 2, "character": 4}
            return {"locations": [{"uri": lib, "range": {"start": start, "end": start}}]}


async def test_new_errors_after_an_edit_reach_the_model_and_definition_finds_another_file(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    app, lib = work / "app.py", work / "lib.py"
    app.write_text("from lib import helper\n\nvalue = helper()\n")
    lib.write_text("import os\n\ndef helper():\n    return 1\n")
    editor = ToyLanguageServer()
    d = await start_daemon(
        tmp_path / "state",
        fake,
        root=work,
        init_options=OPTIONS,
        dsh_client={"documentSave": True, "diagnostics": True, "languageFeatures": ["definition"]},
        setup=editor.setup,
    )
    editor.open(app)
    editor.open(lib)
    fake.script(
        call(
            "c1",
            "edit_file",
            path="app.py",
            old_string="value = helper()",
            new_string="value = undefined_name",
        ),
        call("c2", "definition", path="app.py", line=1, symbol="helper"),
        text_reply("done"),
    )
    sid = await d.new_session(cwd=str(work))
    await d.request("dsh/followup", {"sessionId": sid, "message": {"content": "go"}})
    await d.wait_idle_turn(sid)
    out = results(d, sid)
    edited = result_text(out["c1"])
    assert "1 new error in app.py after this edit" in edited
    assert 'app.py:3:5: error: "undefined_name" is not defined [toy]' in edited
    # The model's next request carries it.
    assert "1 new error in app.py after this edit" in json.dumps(fake.requests[1].json["messages"][-1])
    # Clients get it as data (EditMeta), never by reading the words above.
    assert out["c1"]["meta"]["newErrors"] == 1
    assert out["c1"]["meta"]["newErrorList"] == [
        {
            "path": "app.py",
            "line": 3,
            "col": 5,
            "severity": "error",
            "message": '"undefined_name" is not defined',
            "source": "toy",
        }
    ]
    assert "meta" not in out["c2"]  # an answer from a language server needs no mark
    # Kept in the log: a client opening the session later reads the same (dsh/session/transcript).
    page = await d.request("dsh/session/transcript", {"sessionId": sid, "limit": 10})
    tools = {
        d.provider_id(sid, i["callId"]): i for t in page["turns"] for i in t["items"] if i["type"] == "tool"
    }
    assert tools["c1"]["result"]["meta"] == out["c1"]["meta"]
    assert result_text(out["c2"]) == "lib.py:3:5: def helper():"
    (asked,) = [p for kind, p in editor.asked if kind == "definition"]
    assert asked == {"uri": app.as_uri(), "position": {"line": 0, "character": 16}}
    offered = {t["function"]["name"] for t in fake.requests[0].json["tools"]}
    assert {"diagnostics", "definition"} <= offered and "references" not in offered
    system = fake.requests[0].json["messages"][0]["content"]
    assert "prefer them to grep" in system
    # A client that did not offer diagnosticsSettle is asked after the fixed settle time, plainly.
    assert [p for kind, p in editor.asked if kind == "diagnostics"] == [{"uris": [app.as_uri()]}] * 2
    await stop_daemon(d)


async def test_an_editor_offering_diagnostics_settle_answers_after_the_edit_when_it_has_rechecked(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """The settle time is a cap sent to the editor (`settleMs`), not a sleep: the edit's result comes
    when the editor answers (the toy re-checks at once), and the new error is in it."""
    work = tmp_path / "work"
    work.mkdir()
    app = work / "app.py"
    app.write_text("value = 1\n")
    editor = ToyLanguageServer()
    cap_s = 600  # a sleep of this long would outlast the turn's wait below
    d = await start_daemon(
        tmp_path / "state",
        fake,
        root=work,
        init_options={"thinking": False, "tools": {"limits": {"diagnostics_settle_s": cap_s}}},
        dsh_client={"documentSave": True, "diagnostics": True, "diagnosticsSettle": True},
        setup=editor.setup,
    )
    editor.open(app)
    fake.script(
        call("c1", "edit_file", path="app.py", old_string="value = 1", new_string="value = undefined_name"),
        text_reply("done"),
    )
    sid = await d.new_session(cwd=str(work))
    await d.request("dsh/followup", {"sessionId": sid, "message": {"content": "go"}})
    await d.wait_idle_turn(sid)  # 15 s at most, far below the cap
    edited = result_text(results(d, sid)["c1"])
    assert 'app.py:1:5: error: "undefined_name" is not defined [toy]' in edited
    # Before the edit: as it is now; after: once re-checked, the cap in milliseconds.
    assert [p for kind, p in editor.asked if kind == "diagnostics"] == [
        {"uris": [app.as_uri()]},
        {"uris": [app.as_uri()], "settleMs": cap_s * 1000},
    ]
    await stop_daemon(d)


async def test_without_the_capabilities_no_editor_tools_are_offered(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    d = await start_daemon(tmp_path / "state", fake, root=work, init_options=OPTIONS)
    fake.script(text_reply("hi"))
    sid = await d.new_session(cwd=str(work))
    await d.request("dsh/followup", {"sessionId": sid, "message": {"content": "go"}})
    await d.wait_idle_turn(sid)
    offered = {t["function"]["name"] for t in fake.requests[0].json["tools"]}
    assert not offered & {"diagnostics", "definition", "references", "symbols", "hover"}
    await stop_daemon(d)


class ToyNavigator(EditorModel):
    """Answers references, symbols and hover as a language server would, one location outside the
    workspace among them, and says it has no server for `notes.txt`."""

    def __init__(self, outside: Path) -> None:
        super().__init__(change_delay_s=0.0)
        self.outside = outside
        self.asked: list[tuple[str, Any]] = []

    def setup(self, client: LanguageClient, daemon: Daemon) -> None:
        super().setup(client, daemon)

        def uri_of(name: str) -> str:
            return next(u for u in self.buffers if u.endswith("/" + name))

        def at(uri: str, line: int, character: int) -> dict[str, Any]:
            point = {"line": line, "character": character}
            return {"uri": uri, "range": {"start": point, "end": point}}

        @client.feature("dsh/editor/references")
        def on_references(params: Any) -> Any:
            self.asked.append(("references", params))
            if params["uri"] == uri_of("notes.txt"):
                return {"locations": [], "noLanguageServer": True}
            return {
                "locations": [
                    at(uri_of("lib.py"), 2, 4),
                    at(uri_of("app.py"), 2, 8),
                    at(self.outside.as_uri(), 0, 0),
                ]
            }

        @client.feature("dsh/editor/symbols")
        def on_symbols(params: Any) -> Any:
            self.asked.append(("symbols", params))
            return {
                "symbols": [
                    {"name": "helper", "kind": 12, "location": at(uri_of("lib.py"), 2, 4)},
                    {"name": "Box", "kind": 5, "location": at(self.outside.as_uri(), 0, 0)},
                ]
            }

        @client.feature("dsh/editor/hover")
        def on_hover(params: Any) -> Any:
            self.asked.append(("hover", params))
            return {"contents": "```python\ndef helper() -> int\n```"}


async def test_references_symbols_and_hover_are_the_editors_answers_confined_to_the_workspace(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    outside = tmp_path / "elsewhere.py"
    outside.write_text("class Box: ...\n")
    app, lib, notes = work / "app.py", work / "lib.py", work / "notes.txt"
    app.write_text("from lib import helper\n\nvalue = helper()\n")
    lib.write_text("import os\n\ndef helper():\n    return 1\n")
    notes.write_text("helper is mentioned here\n")
    editor = ToyNavigator(outside)
    d = await start_daemon(
        tmp_path / "state",
        fake,
        root=work,
        init_options=OPTIONS,
        dsh_client={"languageFeatures": ["references", "symbols", "hover"]},
        setup=editor.setup,
    )
    for path in (app, lib, notes):
        editor.open(path)
    fake.script(
        call("r1", "references", path="app.py", line=3, symbol="helper"),
        call("s1", "symbols", query="helper"),
        call("s2", "symbols", path="lib.py"),
        call("h1", "hover", path="app.py", line=3, symbol="helper"),
        call("r2", "references", path="notes.txt", line=1, symbol="helper"),
        call("s3", "symbols", path="lib.py", query="helper"),
        text_reply("done"),
    )
    sid = await d.new_session(cwd=str(work))
    await d.request("dsh/followup", {"sessionId": sid, "message": {"content": "go"}})
    await d.wait_idle_turn(sid)
    out = results(d, sid)
    assert result_text(out["r1"]) == (
        "lib.py:3:5: def helper():\n"
        "app.py:3:9: value = helper()\n"
        "(1 outside the workspace: libraries or other projects, not shown)"
    )
    assert result_text(out["s1"]) == "function helper lib.py:3:5: def helper():"
    assert result_text(out["s2"]) == "function helper lib.py:3:5: def helper():"
    assert result_text(out["h1"]) == "```python\ndef helper() -> int\n```"
    assert "No language server for this file" in result_text(out["r2"])
    assert out["r2"]["meta"] == {"noLanguageServer": True}
    page = await d.request("dsh/session/transcript", {"sessionId": sid, "limit": 10})
    tools = {
        d.provider_id(sid, i["callId"]): i for t in page["turns"] for i in t["items"] if i["type"] == "tool"
    }
    assert tools["r2"]["result"]["meta"] == {"noLanguageServer": True}
    assert all("meta" not in out[c] for c in ("r1", "s1", "s2", "h1"))
    assert "give exactly one of 'path'" in result_text(out["s3"])
    assert "elsewhere" not in json.dumps([result_text(r) for r in out.values()])  # never shown
    # What the editor was asked: UTF-16 positions of the named symbol, the declaration included.
    refs = [p for kind, p in editor.asked if kind == "references"]
    assert refs[0] == {
        "uri": app.as_uri(),
        "position": {"line": 2, "character": 8},
        "includeDeclaration": True,
    }
    symbols = [p for kind, p in editor.asked if kind == "symbols"]
    assert symbols == [{"query": "helper"}, {"uri": lib.as_uri()}]
    (hover,) = [p for kind, p in editor.asked if kind == "hover"]
    assert hover == {"uri": app.as_uri(), "position": {"line": 2, "character": 8}}
    offered = {t["function"]["name"] for t in fake.requests[0].json["tools"]}
    assert {"references", "symbols", "hover"} <= offered and "definition" not in offered
    await stop_daemon(d)
