"""An agent edit to a file the person has no buffer for (or a hidden one), in a real headless Neovim
with a real language server (basedpyright): the model hears of the type error it made, and of no error
the file already had; the file is loaded for the language server only and let go afterwards (no
listed buffer, no window); what the agent edited is what its commands see, on disk and in a buffer
the person has (modified or not)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.fakes.deepseek_server import FakeDeepSeek
from tests.neovim.harness import Editor, Paths
from tests.neovim.test_editor_abilities import call, extra_init, langserver, tool_text, wait_analyzed
from tests.server.harness import text_reply

LIB = 'OLD: int = "old"\n\n\ndef helper() -> int:\n    return 1\n'
OLD_ERROR = "Literal['old']"  # the error lib.py has before any edit
NEW_ERROR = 'lib.py:5:12: error: Type "Literal[\'one\']" is not assignable to return type "int"'


def init(server: str, work: Path) -> str:
    """The waits bounded only by the test's own timeout: an answer comes when basedpyright has
    checked the file, never because a cap ran out on a loaded machine."""
    return extra_init(server, work) + (
        "require('dsh.config').options.init_options.tools.limits.editor_request_timeout_s = 600\n"
        "require('dsh.config').options.editor_timeout_ms = 600000\n"
    )


def buffers(editor: Editor) -> dict[str, dict[str, bool]]:
    """Every buffer with a file name: listed, loaded, modified, shown in a window."""
    return editor.lua(
        "local out = vim.empty_dict() for _, b in ipairs(vim.api.nvim_list_bufs()) do"
        " local name = vim.api.nvim_buf_get_name(b) if name ~= '' and not name:match('^dsh://') then"
        " out[vim.fn.fnamemodify(name, ':t')] = {listed = vim.bo[b].buflisted, loaded = vim.api.nvim_buf_is_loaded(b),"
        " modified = vim.bo[b].modified, shown = #vim.fn.win_findbuf(b) > 0} end end return out"
    )


def content(fake: FakeDeepSeek, request: int) -> str:
    return str(json.loads(tool_text(fake, request))["content"])


def card(editor: Editor, title: str) -> str:
    lines, cards = editor.lines(), {c["row"]: c["text"].strip() for c in editor.snapshot()["cards"]}
    return str(cards[lines.index(title)])


def test_an_edit_to_a_file_with_no_buffer_tells_the_model_its_new_type_error_only(
    nvim_bin: str, paths: Paths, fake: FakeDeepSeek
) -> None:
    server = langserver()
    work = paths.work
    (work / "lib.py").write_text(LIB)
    (work / "app.py").write_text("from lib import helper\n\nvalue: int = helper()\n")
    (work / "notes.txt").write_text("draft\n")
    fake.script(
        call("c0", "diagnostics", path="lib.py"),
        call("c1", "edit_file", path="lib.py", old_string="return 1", new_string='return "one"'),
        call("c2", "edit_file", path="notes.txt", old_string="draft", new_string="final"),
        call("c3", "run_command", command="cat lib.py notes.txt"),
        text_reply("Done."),
    )
    editor = Editor(nvim_bin, paths, fake.base_url, extra=init(server, work))
    try:
        wait_analyzed(editor, work / "app.py", 0, 17)  # the server runs; lib.py has no buffer
        assert set(buffers(editor)) == {"app.py"}
        editor.cmd("Dsh check lib.py, make helper return a string, finalise the notes, show both")
        editor.wait_footers(1, timeout=300)
        # Asked, the editor's language server tells the problem lib.py has (not "No problems").
        problems = content(fake, 1)
        assert problems.startswith("lib.py:1:12: error: Type \"Literal['old']\" is not assignable"), problems
        # The model hears of the error its edit made, and not of the one lib.py already had.
        edited = content(fake, 2)
        assert edited.startswith(
            "Edited lib.py: replaced 1 occurrence (+1 -1 lines)\n1 new error in lib.py"
        ), edited
        assert NEW_ERROR in edited and OLD_ERROR not in edited, edited
        assert card(editor, "⚙ edit_file  lib.py") == "✓ ok +1 −1 · 1 new error"
        # A file no language server checks: no note, answered without waiting for one.
        plain = content(fake, 3)
        assert plain == "Edited notes.txt: replaced 1 occurrence (+1 -1 lines)", plain
        # Both were re-checked (or had nothing to check) before the cap: the log says so each time.
        log = (paths.tmp / "daemon.log").read_text()
        assert log.count("diagnostics after an edit: re-checked by the editor's language servers") == 2, log
        # What the agent edited is what its command saw, and what is on disk.
        ran = content(fake, 4)
        assert 'return "one"' in ran and "final" in ran and "unsaved changes" not in ran, ran
        assert (work / "lib.py").read_text() == LIB.replace("return 1", 'return "one"')
        assert (work / "notes.txt").read_text() == "final\n"
        # The agent's own edits are the new read state, also in files it never had a buffer for.
        sent = json.dumps([r.json for r in fake.requests])
        assert "changed on disk (or in the editor) since you read it" not in sent
        # The files were loaded for the language server only and let go: no listed or loaded buffer,
        # no window (an unlisted, unloaded entry may remain where a late report named the file).
        left = buffers(editor)
        assert left["app.py"] == {"listed": True, "loaded": True, "modified": False, "shown": True}
        for name in ("lib.py", "notes.txt"):
            assert name not in left or not (left[name]["listed"] or left[name]["loaded"]), left
        # :DshEdits still lists both edits, by file name.
        editor.cmd("DshEdits")
        entries = editor.lua(
            "return vim.tbl_map(function(e) return vim.fn.bufname(e.bufnr) end, vim.fn.getqflist())"
        )
        assert [Path(e).name for e in entries] == ["lib.py", "notes.txt"], entries
    finally:
        editor.quit(timeout=20)


def test_an_edit_to_hidden_buffers_lands_in_the_buffer_and_on_disk_and_tells_only_new_errors(
    nvim_bin: str, paths: Paths, fake: FakeDeepSeek
) -> None:
    """The person opened lib.py (it has an error) and other.py (typed a line, not saved), then went
    back to app.py: both buffers are loaded but hidden. The agent edits both."""
    server = langserver()
    work = paths.work
    (work / "lib.py").write_text(LIB)
    (work / "app.py").write_text("from lib import helper\n\nvalue: int = helper()\n")
    (work / "other.py").write_text("SAVED = True\n")
    fake.script(
        call("c1", "edit_file", path="lib.py", old_string="return 1", new_string='return "one"'),
        call("c2", "edit_file", path="other.py", old_string="SAVED = True", new_string="SAVED = False"),
        call("c3", "run_command", command="cat lib.py other.py"),
        text_reply("Done."),
    )
    editor = Editor(nvim_bin, paths, fake.base_url, extra=init(server, work))
    try:
        wait_analyzed(editor, work / "lib.py", 3, 5)
        editor.wait(
            lambda: editor.lua("return #vim.diagnostic.get(0, {severity = 1})") == 1,
            timeout=120,
            what="the old error",
        )
        editor.cmd("edit other.py")
        editor.keys("GoUNSAVED = 1<Esc>")
        editor.cmd("edit app.py")
        assert buffers(editor) == {
            "lib.py": {"listed": True, "loaded": True, "modified": False, "shown": False},
            "other.py": {"listed": True, "loaded": True, "modified": True, "shown": False},
            "app.py": {"listed": True, "loaded": True, "modified": False, "shown": True},
        }
        editor.cmd("Dsh make helper return a string, unset SAVED, show both")
        editor.wait_footers(1, timeout=300)
        edited = content(fake, 1)
        assert NEW_ERROR in edited and OLD_ERROR not in edited and "1 new error in lib.py" in edited, edited
        told = content(fake, 2)
        assert told.startswith("Edited other.py: replaced 1 occurrence (+1 -1 lines)"), told
        assert "other.py has unsaved changes in the editor that are not yours" in told, told
        # Issue 37.1: the person's unsaved line is never written by the agent's edit. The buffer has
        # the edit on top of their draft (still modified); the disk has the saved text plus the
        # agent's change only, and the command sees that.
        other = "SAVED = False\nUNSAVED = 1\n"
        assert (work / "other.py").read_text() == "SAVED = False\n"
        assert (work / "lib.py").read_text() == LIB.replace("return 1", 'return "one"')
        ran = content(fake, 3)
        output, _, note = ran.partition("[exit code 0]")
        assert "SAVED = False" in output and "UNSAVED = 1" not in output, ran
        assert "other.py has unsaved changes in the editor; the command saw the saved file" in note, ran
        text = editor.lua(
            "local o = {} for _, n in ipairs({...}) do"
            " o[n] = table.concat(vim.api.nvim_buf_get_lines(vim.fn.bufnr(n), 0, -1, false), '\\n') .. '\\n' end return o",
            "lib.py",
            "other.py",
        )
        assert text == {"lib.py": LIB.replace("return 1", 'return "one"'), "other.py": other}
        # The person's buffers stay theirs: loaded, listed, still hidden, the draft still unsaved;
        # undo reverts the edit.
        assert buffers(editor) == {
            "lib.py": {"listed": True, "loaded": True, "modified": False, "shown": False},
            "other.py": {"listed": True, "loaded": True, "modified": True, "shown": False},
            "app.py": {"listed": True, "loaded": True, "modified": False, "shown": True},
        }
        editor.cmd("buffer lib.py")
        editor.keys("u")
        assert editor.lua("return vim.fn.getline(5)") == "    return 1"
    finally:
        editor.quit(timeout=20)


def test_a_buffer_loaded_for_the_agent_is_let_go_unless_the_person_took_it(
    editor: Editor, paths: Paths
) -> None:
    """borrowed.lua's rules, without a language server: what is let go, and how."""
    for name in ("a.py", "b.py", "c.py", "d.py"):
        (paths.work / name).write_text(f"# {name}\n")
    editor.cmd("badd d.py")  # listed, not loaded: the person's, from before
    state = editor.lua(
        """
        local borrowed = require('dsh.borrowed')
        local function uri(n) return vim.uri_from_fname(vim.fn.getcwd() .. '/' .. n) end
        local function st(n)
          local b = vim.fn.bufnr(n)
          if b < 0 then return 'gone' end
          return (vim.api.nvim_buf_is_loaded(b) and 'loaded' or 'unloaded') .. (vim.bo[b].buflisted and ' listed' or '')
            .. (vim.bo[b].modified and ' modified' or '')
        end
        local out = {}
        -- Loaded hidden and unlisted; two uses: let go when the last ends.
        local a = borrowed.take(uri('a.py'), true)
        borrowed.take(uri('a.py'), true)
        out.a_held = st('a.py')
        borrowed.done(a, true)
        out.a_one_use_left = st('a.py')
        borrowed.done(a, true)
        out.a = st('a.py')
        -- The person opened it meanwhile: theirs.
        local b = borrowed.take(uri('b.py'), true)
        vim.cmd('edit b.py')
        borrowed.done(b, true)
        out.b = st('b.py')
        vim.cmd('buffer #')
        -- Text no file has: kept, and listed so the person finds it.
        local c = borrowed.take(uri('c.py'), true)
        vim.api.nvim_buf_set_lines(c, 0, -1, false, {'changed'})
        borrowed.done(c, true)
        out.c = st('c.py')
        -- A listed, unloaded buffer of the person's: unloaded again, still listed.
        local d = borrowed.take(uri('d.py'), true)
        out.d_held = st('d.py')
        borrowed.done(d, true)
        out.d = st('d.py')
        -- No such file: no buffer is made.
        out.none = borrowed.take(uri('none.py'), true) == nil and st('none.py')
        -- Let go after a while when nothing let it go.
        borrowed.hold_ms = 10
        borrowed.done(borrowed.take(uri('a.py'), true), false)
        return out
        """
    )
    assert state == {
        "a_held": "loaded",
        "a_one_use_left": "loaded",
        "a": "gone",
        "b": "loaded listed",
        "c": "loaded listed modified",
        "d_held": "loaded listed",
        "d": "unloaded listed",
        "none": "gone",
    }
    editor.wait(lambda: editor.lua("return vim.fn.bufnr('a.py')") == -1, what="a.py let go after a while")
