"""The editor as the agent's eyes and hands (issue 26) in a real headless Neovim with a real language
server (basedpyright, installed from PyPI by scripts/setup-neovim.sh): `definition` finds a symbol in
another file, an edit that introduces a type error gets that error into the next model request, a
command after an allowed edit sees the edit, and the person's unsaved change in another buffer is
neither written nor hidden from the model."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from tests.fakes.deepseek_server import FakeDeepSeek, Reply
from tests.neovim.harness import Editor, Paths
from tests.server.harness import text_reply, tool_call_stream


def langserver() -> str:
    found = shutil.which("basedpyright-langserver") or str(
        Path(sys.executable).parent / "basedpyright-langserver"
    )
    if not Path(found).exists():
        pytest.skip("basedpyright is not installed (bash scripts/setup-neovim.sh)")
    return found


def wait_analyzed(editor: Editor, path: Path, line: int, character: int) -> None:
    """Until basedpyright answers a hover in `path` (0-based place): it has analyzed the project, as a
    person would see from hovering before asking the agent (an answer before that can be empty)."""
    editor.cmd(f"edit {path}")
    editor.wait(
        lambda: editor.lua(
            "local r = vim.lsp.buf_request_sync(0, 'textDocument/hover', {textDocument = {uri = vim.uri_from_bufnr(0)},"
            " position = {line = select(1, ...), character = select(2, ...)}}, 5000) or {};"
            " for _, x in pairs(r) do if x.result and x.result.contents then return true end end; return false",
            line,
            character,
        ),
        timeout=120,
        what=f"basedpyright analyzed {path.name}",
    )


def call(call_id: str, name: str, **args: object) -> Reply:
    return Reply.stream(tool_call_stream([(call_id, name, args)]))


def tool_text(fake: FakeDeepSeek, request: int) -> str:
    """The tool results the model got in request `request` (0-based), as sent."""
    return json.dumps([m for m in fake.requests[request].json["messages"] if m["role"] == "tool"][-1])


# The most an edit waits for the language server to re-check the file. Far beyond the turn's wait
# below: the edit's result comes when basedpyright has re-checked the file (Neovim answers
# `settleMs` then), never by running out this cap.
SETTLE_CAP_S = 600


def extra_init(server: str, work: Path) -> str:
    return f"""
require('dsh.config').options.init_options.tools = {{
  permissions = {{ edit_file = 'allow', run_command = 'allow' }},
  limits = {{ diagnostics_settle_s = {SETTLE_CAP_S} }},
}}
vim.api.nvim_create_autocmd('FileType', {{
  pattern = 'python',
  callback = function(ev)
    vim.lsp.start({{
      name = 'basedpyright',
      cmd = {{ {json.dumps(server)}, '--stdio' }},
      root_dir = {json.dumps(str(work))},
      settings = {{ basedpyright = {{ analysis = {{ typeCheckingMode = 'standard' }} }} }},
    }}, {{ bufnr = ev.buf }})
  end,
}})
"""


def test_definition_new_type_errors_and_a_command_after_an_edit_in_real_neovim(
    nvim_bin: str, paths: Paths, fake: FakeDeepSeek
) -> None:
    server = langserver()
    work = paths.work
    (work / "lib.py").write_text("def helper() -> int:\n    return 1\n")
    (work / "app.py").write_text("from lib import helper\n\nvalue: int = helper()\n")
    (work / "other.py").write_text("SAVED = True\n")
    fake.script(
        call("c1", "definition", path="app.py", line=1, symbol="helper"),
        call("c2", "edit_file", path="app.py", old_string="value: int", new_string="value: str"),
        call("c3", "run_command", command="cat app.py other.py"),
        text_reply("Done."),
    )
    editor = Editor(nvim_bin, paths, fake.base_url, extra=extra_init(server, work))
    try:
        editor.cmd("edit other.py")
        editor.keys("GoUNSAVED = 1<Esc>")  # the person's own change, not saved
        wait_analyzed(editor, work / "app.py", 0, 17)  # `helper`, imported from lib.py
        editor.cmd("Dsh find helper, then make value a string and show the file")
        editor.wait_footers(1, timeout=180)
        # definition: the symbol is defined in another file, found by the language server.
        assert "lib.py:1:5: def helper() -> int:" in tool_text(fake, 1)
        # The edit's new type error reached the next request.
        edited = tool_text(fake, 2)
        assert "new error in app.py after this edit" in edited, edited
        assert "app.py:3:" in edited and "str" in edited
        # The command after the allowed edit saw it; the other buffer was named, not written.
        ran = tool_text(fake, 3)
        assert "value: str = helper()" in ran and "value: int" not in ran
        assert "other.py has unsaved changes in the editor" in ran and "UNSAVED" not in ran
        assert (work / "other.py").read_text() == "SAVED = True\n"
        assert (work / "app.py").read_text() == "from lib import helper\n\nvalue: str = helper()\n"
        state = editor.lua(
            "local a, o = vim.fn.bufnr(...), vim.fn.bufnr(select(2, ...));"
            " return {app = vim.bo[a].modified, other = vim.bo[o].modified}",
            str(work / "app.py"),
            str(work / "other.py"),
        )
        assert state == {"app": False, "other": True}
        # What the person sees: the edit's card says it broke a type, and K on it shows the error
        # as the agent was told it, under the diff.
        row = next(i for i, line in enumerate(editor.lines()) if line.startswith("⚙ edit_file"))
        (card,) = [c for c in editor.snapshot()["cards"] if c["row"] == row]
        assert card["text"].strip() == "✓ ok +1 −1 · 1 new error", card
        editor.lua(
            "local w = vim.fn.win_findbuf(T.chat().buf)[1]; vim.api.nvim_set_current_win(w);"
            " vim.api.nvim_win_set_cursor(w, {..., 0})",
            row + 1,
        )
        editor.keys("K")
        float = editor.wait(
            lambda: next((f for f in editor.floats() if f["title"] == " edit_file "), None), what="the card"
        )
        assert float["lines"][1] == "app.py" and "+value: str = helper()" in float["lines"]
        assert "1 new error in app.py after this edit (from the editor's language server):" in float["lines"]
        if os.environ.get("DSH_NVIM_SHOW"):
            print("--- K on the edit card:", *float["lines"], sep="\n")
        editor.keys("q")
        # Undo still reverts the agent's edit in the buffer.
        editor.cmd("buffer app.py")
        editor.keys("u")
        assert editor.lua("return vim.fn.getline(3)") == "value: int = helper()"
        sent = json.dumps([r.json for r in fake.requests])
        assert "app.py changed on disk (or in the editor) since you read it" not in sent
        # The edit's diagnostics were asked with the cap as `settleMs`, and answered on the re-check.
        log = (paths.tmp / "daemon.log").read_text()
        assert "diagnostics after an edit: re-checked by the editor's language servers" in log
        if os.environ.get("DSH_NVIM_SHOW"):  # what a person sees in the chat, and what the model got
            print("\n".join(editor.lines()))
            for card in editor.snapshot().get("cards", []):
                print(f"[card row {card['row']}] {card['text']}")
            print("--- model got:", edited, ran, sep="\n")
    finally:
        editor.quit(timeout=20)


def test_references_symbols_and_hover_from_basedpyright_in_real_neovim(
    nvim_bin: str, paths: Paths, fake: FakeDeepSeek
) -> None:
    """What the model gets from `references`, `symbols` (a file's outline and the workspace's) and
    `hover` when a real language server answers: paths + line:col + the line, from every file of the
    project, and nothing from outside the roots (the standard library's stubs are counted, not shown)."""
    server = langserver()
    work = paths.work
    (work / "lib.py").write_text(
        "from pathlib import Path\n"
        "\n"
        "\n"
        "class Greeter:\n"
        '    """Says hello to someone."""\n'
        "\n"
        "    def greet(self, name: str) -> str:\n"
        '        return f"hello {name}"\n'
        "\n"
        "\n"
        "def helper() -> int:\n"
        '    """The number one, for the tests."""\n'
        "    return 1\n"
        "\n"
        "\n"
        'HOME = Path("/")\n'
    )
    (work / "app.py").write_text(
        'from lib import Greeter, helper\n\nvalue: int = helper()\ngreeting = Greeter().greet("ann")\n'
    )
    (work / "use.py").write_text("from lib import helper\n\nTWICE = helper() + helper()\n")
    (work / "notes.txt").write_text("helper is mentioned here\n")
    fake.script(
        call("c1", "references", path="lib.py", line=11, symbol="helper"),
        call("c2", "symbols", path="lib.py"),
        call("c3", "symbols", query="Greeter"),
        call("c4", "hover", path="app.py", line=3, symbol="helper"),
        call("c5", "references", path="lib.py", line=16, symbol="Path"),
        call("c6", "definition", path="notes.txt", line=1, symbol="helper"),
        call("c7", "edit_file", path="use.py", old_string="helper() + helper()", new_string="2 * helper()"),
        text_reply("Done."),
    )
    editor = Editor(nvim_bin, paths, fake.base_url, extra=extra_init(server, work))
    try:
        editor.cmd("edit use.py")
        wait_analyzed(editor, work / "lib.py", 10, 5)  # `def helper`
        editor.cmd(
            "Dsh who calls helper, what is in lib.py, where is Greeter, what is helper, who uses Path; tidy use.py"
        )
        editor.wait_footers(1, timeout=180)
        # references: every use in every file of the project, each with its line.
        refs = json.loads(tool_text(fake, 1))["content"]
        for expected in (
            "lib.py:11:5: def helper() -> int:",
            "app.py:1:26: from lib import Greeter, helper",
            "app.py:3:14: value: int = helper()",
            "use.py:1:17: from lib import helper",
            "use.py:3:9: TWICE = helper() + helper()",
            "use.py:3:20: TWICE = helper() + helper()",
        ):
            assert expected in refs, refs
        # The document's outline, nested names with their container.
        outline = json.loads(tool_text(fake, 2))["content"]
        for expected in (
            "class Greeter lib.py:4:7: class Greeter:",
            "method Greeter.greet lib.py:7:9: def greet(self, name: str) -> str:",
            "function helper lib.py:11:5: def helper() -> int:",
            'HOME lib.py:16:1: HOME = Path("/")',
        ):
            assert expected in outline, outline
        # The workspace's symbols matching a query.
        found = json.loads(tool_text(fake, 3))["content"]
        assert "class Greeter lib.py:4:7: class Greeter:" in found, found
        # hover: the signature and the docstring, from the other file.
        hover = json.loads(tool_text(fake, 4))["content"]
        assert "def helper() -> int" in hover and "The number one, for the tests." in hover, hover
        # A library symbol: the uses in the project are listed; its declaration in the standard
        # library's stubs (outside the roots) is counted, never shown.
        lib = json.loads(tool_text(fake, 5))["content"]
        assert "lib.py:1:21: from pathlib import Path" in lib and 'lib.py:16:8: HOME = Path("/")' in lib, lib
        assert "outside the workspace" in lib and "pathlib.pyi" not in lib and "typeshed" not in lib, lib
        # The cards say which symbol was looked up, and where.
        transcript = editor.lines()
        assert "⚙ references  helper  lib.py:11" in transcript and "⚙ hover  helper  app.py:3" in transcript
        # A plain-text file has no language server attached: said in words, not "No definition found".
        none = json.loads(tool_text(fake, 6))["content"]
        assert none.startswith("No language server for this file"), none
        # An edit that breaks nothing: no note, and the wait ended when basedpyright re-checked use.py
        # (its report after the didChange), not at the cap.
        clean = json.loads(tool_text(fake, 7))["content"]
        assert clean.startswith("Edited use.py") and "new error" not in clean, clean
        # The cards say so from the results' meta: no language server for notes.txt, the clean edit no note.
        lines, cards = editor.lines(), {c["row"]: c["text"].strip() for c in editor.snapshot()["cards"]}
        assert cards[lines.index("⚙ definition  helper  notes.txt:1")] == "✓ ok · no language server"
        assert cards[lines.index("⚙ edit_file  use.py")] == "✓ ok +1 −1"
        log = (paths.tmp / "daemon.log").read_text()
        assert "diagnostics after an edit: re-checked by the editor's language servers" in log
        assert editor.lua(
            "return #vim.lsp.get_clients({bufnr = vim.fn.bufnr(...), name = 'basedpyright'})",
            str(work / "use.py"),
        )
        if os.environ.get("DSH_NVIM_SHOW"):  # what a person sees in the chat, and what the model got
            print("\n".join(editor.lines()))
            for card in editor.snapshot().get("cards", []):
                print(f"[card row {card['row']}] {card['text']}")
            print("--- model got:", refs, outline, found, hover, lib, none, clean, sep="\n")
    finally:
        editor.quit(timeout=20)
