"""Issue 37.3: the transcript is highlighted by tree-sitter markdown without a parser that follows
the whole buffer: each finished part is parsed once, on its own, and painted as extmarks
(highlight.lua); the segment still streaming waits for its end. A streamed reply leaves the
transcript highlighted, earlier turns included."""

from __future__ import annotations

from typing import Any

from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.neovim.harness import Editor

PAGE = """
local n = ...
local turns = {}
for i = n, 1, -1 do -- newest first, as dsh/session/transcript sends them
  turns[#turns + 1] = {
    turn = i, startSeq = i * 10, startedAt = 0,
    items = {
      { type = 'message', seq = i * 10 + 1, step = 1, id = 'q' .. i, source = { kind = 'user' }, text = 'question ' .. i },
      { type = 'assistant', seq = i * 10 + 2, step = 1, finishReason = 'stop',
        text = ('Answer %d:\\n\\n```lua\\nlocal step_%d = %d\\n```\\n\\nDone.'):format(i, i, i) },
    },
    ['end'] = { kind = 'completed' }, usage = { inputTokens = 10, outputTokens = 5 },
  }
end
T.chat():render_page({ turns = turns })
-- every string tree-sitter parses from now on, by its line count
_G.parsed = {}
local get = vim.treesitter.get_string_parser
vim.treesitter.get_string_parser = function(text, ...)
  table.insert(_G.parsed, select(2, text:gsub('\\n', '')))
  return get(text, ...)
end
"""

# The tree-sitter highlights painted on the first line that is `line` (the last such line when
# `last`), as highlight group names.
PAINTED = """
local line, last = ...
local c = T.chat()
local row
for i, l in ipairs(c:lines()) do
  if l == line then row = i - 1; if not last then break end end
end
if not row then return nil end
local out = {}
local marks = vim.api.nvim_buf_get_extmarks(c.buf, require('dsh.highlight').ns_md, {row, 0}, {row, -1},
  {details = true, overlap = true})
for _, m in ipairs(marks) do
  local d = m[4]
  if d.end_row > row or (d.end_row == row and d.end_col > 0) then -- (not one that ends where the row starts)
    out[#out + 1] = d.hl_group
  end
end
return out
"""


def painted(editor: Editor, line: str, last: bool = False) -> list[str] | None:
    result: Any = editor.lua(PAINTED, line, last)
    return result


def has(groups: list[str] | None, prefix: str, lang: str) -> bool:
    return any(g.startswith(prefix) and g.endswith("." + lang) for g in groups or [])


def test_a_streamed_reply_is_painted_when_it_ends_and_the_transcript_stays_highlighted(
    editor: Editor, fake: FakeDeepSeek
) -> None:
    editor.cmd("DshNew")
    editor.wait(lambda: editor.lua("return vim.b.dsh_kind") == "input", what="the chat")
    editor.lua(PAGE, 300)
    # A page of 300 turns is painted (over several steps), the first turn's code in lua.
    editor.wait(
        lambda: editor.lua("local c = T.chat(); return c.painted >= vim.api.nvim_buf_line_count(c.buf) - 1"),
        what="the page painted",
    )
    assert has(painted(editor, "local step_1 = 1"), "@keyword", "lua")
    assert has(painted(editor, "## dsh"), "@markup.heading", "markdown")
    # No tree-sitter parser follows the transcript buffer (it would parse it all again per change).
    assert editor.lua("return vim.treesitter.highlighter.active[T.chat().buf] == nil") is True
    assert max(editor.lua("return _G.parsed")) <= 201  # painted in steps of about 200 rows

    editor.lua("_G.parsed = {}")
    reply = ["Here:\n\n", "```lua\nlocal streamed = ", "true\n```\n\nThat **is** all.\n"]
    fake.script(Reply.stream(text_stream(reply), gate_after=(3, "rest")))
    editor.cmd("Dsh one more")
    editor.wait_text("local streamed = ")
    editor.lua("T.chat():flush()")
    # While the reply streams its rows wait for Vim's syntax alone; what came before stays painted.
    assert painted(editor, "Here:") == []
    assert has(painted(editor, "## dsh", last=True), "@markup.heading", "markdown")
    assert has(painted(editor, "local step_300 = 300"), "@keyword", "lua")
    fake.open_gate("rest")
    editor.wait_footers(301)
    groups = editor.wait(
        lambda: has(x := painted(editor, "local streamed = true"), "@keyword", "lua") and x,
        what="the reply painted",
    )
    assert has(groups, "@boolean", "lua"), groups
    # The earlier turns keep their highlighting, and nothing but the new rows was parsed again.
    assert has(painted(editor, "local step_1 = 1"), "@keyword", "lua")
    assert has(painted(editor, "local step_300 = 300"), "@keyword", "lua")
    assert editor.lua("return vim.treesitter.highlighter.active[T.chat().buf] == nil") is True
    sizes = editor.lua("return _G.parsed")
    assert sizes and max(sizes) < 20, sizes
