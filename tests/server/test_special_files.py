"""Every tool, built-in and editor, over special files, through the real daemon process (issue 32
item 3): a FIFO, a device, a symlink to /dev/zero and a 1 GiB sparse file, named by the model or
pointed at by the editor's answer. Reading a FIFO blocks until a writer comes (here: never), so a
read on the event loop would freeze every session: each call must end with a typed error, and
another session must be answered while the first one's turn is still running.

Sparse files cost no disk; the 9 MiB text file is real, to reach the read cap with text."""

from __future__ import annotations

import asyncio
import os
import signal
import stat
from pathlib import Path
from typing import Any

from pytest_lsp import LanguageClient

from tests.fakes.deepseek_server import FakeDeepSeek, Reply
from tests.server.harness import Daemon, start_daemon, stop_daemon, text_reply, tool_call_stream
from tests.server.test_coherence import EditorModel, result_text, results

EDITOR_TOOLS = {"diagnostics": True, "languageFeatures": ["definition", "references", "symbols", "hover"]}
OPTIONS = {"thinking": False, "tools": {"limits": {"editor_request_timeout_s": 300}}}
CAP = 8 * 1024 * 1024  # editor_tools.CONTEXT_READ_BYTES
BIG_LINES = 1_600_000  # "x = 1\n" each: 9.6 MB, over the cap


def special_files(work: Path) -> dict[str, Path]:
    """name -> path of each special file made in `work` (the device only where mknod is allowed)."""
    made = {"pipe": work / "pipe", "zero": work / "zero", "huge": work / "huge.py"}
    os.mkfifo(made["pipe"])
    made["zero"].symlink_to("/dev/zero")
    made["huge"].write_bytes(b"def helper(): ...\n")
    os.truncate(made["huge"], 1 << 30)
    try:
        os.mknod(work / "null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        made["null"] = work / "null"
    except PermissionError:
        pass  # not root: the FIFO and the symlink still cover files that are not regular
    return made


class PointingEditor(EditorModel):
    """An editor whose language server answers with locations in the special files (and one real
    line), and holds its `definition` answer for app.py until `release` is set."""

    def __init__(self, pointed: list[Path], app: Path) -> None:
        super().__init__(change_delay_s=0.0)
        self.pointed = pointed
        self.app = app
        self.asked: list[tuple[str, Any]] = []
        self.holding = asyncio.Event()  # the held definition request arrived
        self.release = asyncio.Event()

    def locations(self) -> list[dict[str, Any]]:
        start = {"line": 0, "character": 0}
        here = [{"uri": p.as_uri(), "range": {"start": start, "end": start}} for p in self.pointed] * 10
        line = {"line": 0, "character": 16}
        return [*here, {"uri": self.app.as_uri(), "range": {"start": line, "end": line}}]

    def setup(self, client: LanguageClient, daemon: Daemon) -> None:
        super().setup(client, daemon)

        @client.feature("dsh/editor/definition")
        async def on_definition(params: Any) -> Any:
            self.asked.append(("definition", params))
            if params["uri"] == self.app.as_uri():
                self.holding.set()
                await self.release.wait()
            return {"locations": self.locations()}

        @client.feature("dsh/editor/references")
        def on_references(params: Any) -> Any:
            self.asked.append(("references", params))
            return {"locations": self.locations()}

        @client.feature("dsh/editor/symbols")
        def on_symbols(params: Any) -> Any:
            self.asked.append(("symbols", params))
            return {"symbols": [{"name": "helper", "kind": 12, "location": loc} for loc in self.locations()]}

        @client.feature("dsh/editor/hover")
        def on_hover(params: Any) -> Any:
            self.asked.append(("hover", params))
            return {"contents": "def helper() -> None"}

        @client.feature("dsh/editor/diagnostics")
        def on_diagnostics(params: Any) -> Any:
            self.asked.append(("diagnostics", params))
            return {"items": []}


def batch(*calls: tuple[str, str, dict[str, Any]]) -> Reply:
    return Reply.stream(tool_call_stream(calls))


async def test_every_tool_over_special_files_answers_typed_errors_and_other_sessions_keep_answering(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    app, big = work / "app.py", work / "big.py"
    app.write_text("from lib import helper\n")
    big.write_text("x = 1\n" * BIG_LINES)
    special = special_files(work)
    pointed = [p for name, p in special.items() if name != "zero"] + [special["zero"]]
    editor = PointingEditor(pointed, app)
    d = await start_daemon(
        tmp_path / "state", fake, root=work, init_options=OPTIONS, dsh_client=EDITOR_TOOLS, setup=editor.setup
    )
    named: list[tuple[str, str, dict[str, Any]]] = []  # the model names each special file to each tool
    for name, path in special.items():
        place = {"path": path.name, "line": 1, "symbol": "helper"}
        named += [
            (f"{name}-read", "read_file", {"path": path.name}),
            (f"{name}-grep", "grep", {"pattern": "helper", "path": path.name}),
            (f"{name}-edit", "edit_file", {"path": path.name, "old_string": "a", "new_string": "b"}),
            (f"{name}-write", "write_file", {"path": path.name, "content": "overwritten\n"}),
            (f"{name}-list", "list_dir", {"path": path.name}),
            (f"{name}-find", "find_files", {"pattern": "*", "path": path.name}),
            (f"{name}-definition", "definition", place),
            (f"{name}-references", "references", place),
            (f"{name}-hover", "hover", place),
            (f"{name}-symbols", "symbols", {"path": path.name}),
            (f"{name}-diagnostics", "diagnostics", {"path": path.name}),
        ]
    past_cap = ("big-hover", "hover", {"path": "big.py", "line": BIG_LINES, "symbol": "x"})
    pointing = [  # the editor's answers point at every special file
        ("app-references", "references", {"path": "app.py", "line": 1, "symbol": "helper"}),
        ("app-symbols", "symbols", {"query": "helper"}),
        ("app-definition", "definition", {"path": "app.py", "line": 1, "symbol": "helper"}),  # held
    ]
    fake.script(
        batch(*named, past_cap, *pointing),
        text_reply("the other session answers"),
        text_reply("done"),
        text_reply("and answers again"),
    )
    try:
        first = await d.new_session(cwd=str(work))
        other = await d.new_session(cwd=str(work))
        await d.request("dsh/followup", {"sessionId": first, "message": {"content": "look"}})
        # The first session's turn is at its last call (the editor holds it): every special file has
        # been named to every tool by now, and the daemon still answers another session.
        await asyncio.wait_for(editor.holding.wait(), 120)
        await d.request("dsh/followup", {"sessionId": other, "message": {"content": "hello"}})
        await d.wait_idle_turn(other)
        assert not d.of(first, "turn/end")  # the first turn was still running meanwhile
        editor.release.set()
        await d.wait_idle_turn(first)
    except BaseException:
        # A daemon stuck reading the FIFO (the bug) ends only with SIGKILL: leave no frozen process.
        os.kill(d.client._server.pid, signal.SIGKILL)  # type: ignore[union-attr]
        raise
    out = results(d, first)

    def code(call_id: str) -> str | None:
        return (out[call_id].get("error") or {}).get("code")

    for name in special:
        refused = "OUTSIDE_WORKSPACE" if name == "zero" else "BINARY" if name == "huge" else "NOT_A_FILE"
        for tool in ("read", "definition", "references", "hover"):
            assert code(f"{name}-{tool}") == refused, (name, tool, result_text(out[f"{name}-{tool}"]))
        for tool in ("edit", "grep"):
            expected = {"NOT_A_FILE", "OUTSIDE_WORKSPACE", "TOO_LARGE", "BINARY"}
            assert code(f"{name}-{tool}") in expected | {None}, (name, tool, out[f"{name}-{tool}"])
        for tool in ("list", "find"):
            assert code(f"{name}-{tool}") in {"NOT_A_DIRECTORY", "OUTSIDE_WORKSPACE"}, (name, tool)
    # a huge sparse file is a regular file: rg searches it (its first line matches), the Python
    # search skips a file over grep_file_bytes; editing it is refused by its size
    assert result_text(out["huge-grep"]) in {"huge.py:1:def helper(): ...\n", "No matches."}
    assert code("huge-edit") == "TOO_LARGE" and f"{1 << 30} bytes" in result_text(out["huge-edit"])
    for name in ("pipe", "null"):
        if name in special:
            assert code(f"{name}-grep") == code(f"{name}-edit") == code(f"{name}-write") == "NOT_A_FILE"
    # nothing was written through: the FIFO and the device are what they were
    assert stat.S_ISFIFO(special["pipe"].lstat().st_mode) and special["zero"].is_symlink()
    # a line past the part the cap lets it read: TOO_LARGE, with the file's size and the cap
    assert code("big-hover") == "TOO_LARGE"
    assert f"big.py is {big.stat().st_size} bytes, over the {CAP}-byte limit" in result_text(out["big-hover"])
    # The editor's answers: the special files are shown without a line (never read), the real
    # file with its line, the symlink to /dev/zero counted as outside the workspace.
    for call_id in ("app-references", "app-definition"):
        lines = result_text(out[call_id]).splitlines()
        assert code(call_id) is None
        assert "app.py:1:17: from lib import helper" in lines
        assert {line for line in lines if not line.startswith(("app.py", "("))} == {
            f"{p.name}:1:1: " for p in pointed if p != special["zero"]
        }
        assert lines[-1] == "(10 outside the workspace: libraries or other projects, not shown)"
    assert "function helper app.py:1:17: from lib import helper" in result_text(out["app-symbols"])
    # the tools that find a line in the file were refused before asking the editor; those that only
    # pass the path on (an outline, diagnostics) asked it
    assert {(kind, p["uri"]) for kind, p in editor.asked if "position" in p} == {
        ("definition", app.as_uri()),
        ("references", app.as_uri()),
    }
    assert {kind for kind, _ in editor.asked} == {"definition", "references", "symbols", "diagnostics"}
    # and the daemon keeps answering the other session afterwards
    await d.request("dsh/followup", {"sessionId": other, "message": {"content": "still there?"}})
    await d.wait_idle_turn(other, turns=2)
    await stop_daemon(d)
