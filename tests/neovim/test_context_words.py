"""Issue 37.6: the context words CodeCompanion users type — #diagnostics, #problems, #viewport,
#quickfix, #symbols — complete in the input like #buffer, and each sends what it names: the
problems and symbols from a real language server (basedpyright, as a person runs it), the visible
lines of the code window, the quickfix list."""

from __future__ import annotations

from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.neovim.harness import Editor, Paths
from tests.neovim.test_editor_abilities import extra_init, langserver, wait_analyzed
from tests.neovim.test_sessions import user_texts

APP = (
    "class Greeter:\n"
    "    def hello(self, name: str) -> str:\n"
    "        return 'hi ' + name\n"
    "\n"
    "\n"
    "count: int = 'three'\n" + "".join(f"line_{i} = {i}\n" for i in range(40))
)


def test_context_words_complete_and_send_what_they_name(
    nvim_bin: str, paths: Paths, fake: FakeDeepSeek
) -> None:
    server = langserver()
    (paths.work / "app.py").write_text(APP)
    (paths.work / "lib.py").write_text("A = 1\nB = 2\n")
    fake.script(Reply.stream(text_stream(["Seen."])), Reply.stream(text_stream(["Again."])))
    editor = Editor(nvim_bin, paths, fake.base_url, extra=extra_init(server, paths.work))
    try:
        wait_analyzed(editor, paths.work / "app.py", 0, 7)  # `Greeter`
        editor.wait(
            lambda: editor.lua("return #vim.diagnostic.get(vim.fn.bufnr('app.py'))") > 0,
            timeout=120,
            what="basedpyright's diagnostics",
        )
        editor.lua("vim.api.nvim_win_set_height(0, 12); vim.cmd('normal! gg')")  # lines 1-N visible
        first, last = editor.lua("return {vim.fn.line('w0'), vim.fn.line('w$')}")
        editor.lua(
            "vim.fn.setqflist({}, ' ', {title = 'mine', items = {"
            "{filename = 'lib.py', lnum = 2, col = 1, text = 'B is two'},"
            "{filename = 'app.py', lnum = 6, col = 1, text = 'count is a str'}}})"
        )
        editor.cmd("Dsh")
        editor.wait(lambda: editor.lua("return vim.b.dsh_kind") == "input", what="the chat input")
        # Completion offers each word, as it does #buffer.
        words = editor.lua(
            "return vim.tbl_map(function(i) return i.word end, require('dsh.complete').items('.', '#'))"
        )
        for word in (
            "#buffer",
            "#selection",
            "#diagnostics",
            "#problems",
            "#viewport",
            "#quickfix",
            "#symbols",
        ):
            assert word in words
        editor.keys("i#sy<C-x><C-o><Esc>")
        assert editor.snapshot()["input"] == ["#symbols"]
        editor.keys("A #diagnostics #viewport #quickfix #problems: what now?<Esc>")
        editor.keys("<CR>")
        editor.wait_footers(1, timeout=60)
        texts = user_texts(fake)
        print("\n---\n".join(texts))
        assert texts[-1] == "#symbols #diagnostics #viewport #quickfix #problems: what now?"
        symbols = next(t for t in texts if t.startswith("Symbols of app.py"))
        assert (
            "class Greeter  (line 1)" in symbols
            and "  method hello" in symbols
            and "variable count" in symbols
        )
        diags = next(t for t in texts if t.startswith("Problems in app.py"))
        assert "app.py:6:14: error:" in diags and "[basedpyright]" in diags
        problems = next(t for t in texts if t.startswith("Problems in the open files"))
        assert "app.py:6:14: error:" in problems
        quickfix = next(t for t in texts if t.startswith('The quickfix list "mine" (2 entries)'))
        assert "lib.py:2:1: B is two" in quickfix and "app.py:6:1: count is a str" in quickfix
        viewport = next(t for t in texts if t.startswith("Selection in "))
        assert f"lines {first}-{last}" in viewport and "class Greeter:" in viewport
        assert f"line_{last - 7} = {last - 7}" in viewport and f"line_{last - 6} =" not in viewport
        lines = editor.lines()
        assert f"📎 selection app.py:{first}-{last}" in lines
        editor.screen(capture="37.6-context-words")
        # A word with nothing to name stops the send and says why; the input is kept.
        editor.lua("vim.fn.setqflist({}, 'r', {items = {}})")
        editor.type_in_input("again #quickfix")
        editor.keys("<CR>")
        editor.wait(
            lambda: "#quickfix: the quickfix list is empty" in editor.lua("return T.messages()"), what="why"
        )
        assert editor.snapshot()["input"] == ["again #quickfix"]
    finally:
        editor.quit()


def test_slash_symbols_attaches_the_buffers_symbols_without_blocking(
    nvim_bin: str, paths: Paths, fake: FakeDeepSeek
) -> None:
    """`/symbols` opening the input asks the buffer's language server (vim.lsp.buf_request_all, the
    editor never waits on it) and attaches its document symbols to the next prompt; `/symbols text`
    sends the text with them at once. Completed before the daemon's custom commands."""
    server = langserver()
    (paths.work / "app.py").write_text(APP)
    fake.script(Reply.stream(text_stream(["Seen."])), Reply.stream(text_stream(["Again."])))
    editor = Editor(nvim_bin, paths, fake.base_url, extra=extra_init(server, paths.work))
    try:
        wait_analyzed(editor, paths.work / "app.py", 0, 7)  # `Greeter`
        editor.cmd("Dsh")
        editor.wait(lambda: editor.lua("return vim.b.dsh_kind") == "input", what="the chat input")
        items = editor.lua("return require('dsh.complete').omnifunc(0, '/sy')")
        assert [i["word"] for i in items] == ["/symbols"] and items[0]["menu"] == "[dsh]"
        # The request must not be a synchronous one (the editor would wait on the server).
        editor.lua(
            "_G.sync_asked = 0"
            " for _, c in ipairs(vim.lsp.get_clients()) do"
            "   local orig = c.request_sync"
            "   c.request_sync = function(...) _G.sync_asked = _G.sync_asked + 1 return orig(...) end"
            " end"
        )
        editor.type_in_input("/symbols")
        editor.keys("<CR>")
        editor.wait(
            lambda: "attached symbols app.py to the next prompt" in editor.lua("return T.messages()"),
            timeout=60,
            what="the symbols attached",
        )
        assert editor.lua("return vim.tbl_map(function(a) return a.label end, T.chat().attachments)") == [
            "symbols app.py"
        ]
        assert editor.snapshot()["input"] == [""]
        assert fake.requests == []  # nothing sent yet
        editor.type_in_input("what is here?")
        editor.keys("<CR>")
        editor.wait_footers(1, timeout=60)
        texts = user_texts(fake)
        assert texts[-1] == "what is here?"
        symbols = next(t for t in texts if t.startswith("Symbols of app.py (basedpyright)"))
        assert "class Greeter  (line 1)" in symbols and "  method hello" in symbols
        # With text after it, the text is sent at once with the symbols.
        editor.type_in_input("/symbols and the count?")
        editor.keys("<CR>")
        editor.wait_footers(2, timeout=60)
        texts = user_texts(fake)
        assert texts[-1] == "and the count?"
        assert sum(t.startswith("Symbols of app.py") for t in texts) == 2
        assert editor.lua("return _G.sync_asked") == 0
    finally:
        editor.quit()
