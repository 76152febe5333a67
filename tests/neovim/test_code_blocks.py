"""Issue 37.7: a code block in a language tree-sitter has no parser for is highlighted with Vim's
regex syntax for that language inside the block; one with a parser by tree-sitter; :checkhealth
says which is which and how to add parsers."""

from __future__ import annotations

from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.neovim.harness import Editor

REPLY = (
    'Two ways:\n\n```ruby\ndef greet(name)\n  puts "hi #{name}"\nend\n```\n\n'
    "```lua\nlocal function greet(name)\n  print('hi ' .. name)\nend\n```\n"
)


def at(editor: Editor, needle: str) -> dict:
    """What colours the first character of the line `needle` in the transcript: the syntax items
    (Vim's regex syntax) and the tree-sitter highlights painted there (highlight.lua's extmarks)."""
    return editor.lua(
        """
        local buf = T.chat().buf
        for i, l in ipairs(vim.api.nvim_buf_get_lines(buf, 0, -1, false)) do
          if l == ... then
            local p = vim.inspect_pos(buf, i - 1, 0, {syntax = true, treesitter = true, extmarks = true, semantic_tokens = false})
            local ts = {}
            for _, m in ipairs(p.extmarks) do
              if m.ns == 'dsh.markdown' then ts[#ts + 1] = m.opts.hl_group:gsub('^@', '') end
            end
            return {syntax = vim.tbl_map(function(s) return s.hl_group end, p.syntax), ts = ts}
          end
        end
        """,
        needle,
    )


def test_a_code_block_without_a_parser_gets_the_languages_regex_syntax(
    editor: Editor, fake: FakeDeepSeek
) -> None:
    first = "Two ways:\n\n```ruby\ndef greet(name)\n"
    fake.script(Reply.stream(text_stream([first, REPLY[len(first) :]])))
    editor.cmd("Dsh greet in two languages")
    editor.wait_footers(1)
    assert editor.lua("return require('dsh.fences').has_parser('ruby')") is False  # none bundled
    editor.wait(lambda: at(editor, "local function greet(name)")["ts"], what="tree-sitter back")
    ruby = at(editor, "def greet(name)")
    print(ruby)
    assert "dshFence_ruby" in ruby["syntax"] and "rubyDefine" in ruby["syntax"]
    assert "markup.raw.block" not in ruby["ts"]  # nothing paints over it
    # (a streamed segment is painted by tree-sitter once it ends: highlight.lua)
    lua = editor.wait(
        lambda: (x := at(editor, "local function greet(name)"))["ts"] and x, what="tree-sitter back"
    )
    print(lua)
    assert "keyword" in " ".join(lua["ts"]) and "markup.raw.block" not in lua["ts"]  # tree-sitter's lua
    rows = editor.screen(capture="37.7-code-blocks")
    assert sum("def greet(name)" in r for r in rows) == 1 and not any(r.endswith("│name)") for r in rows)
    editor.cmd("checkhealth dsh")
    text = "\n".join(editor.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)"))
    print(text)
    assert "code blocks shown so far: lua: tree-sitter; ruby: Vim's regex syntax" in text
    assert ":TSInstall <lang>" in text
