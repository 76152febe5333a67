"""Streams reconcile: `assistant/delta` offsets drop duplicates and fill gaps after a reattach;
`tool/result` names its call at the top level."""

from __future__ import annotations

from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.neovim.harness import Editor

REDUCE = """
local S = require('dsh.session')
local st = S.new('x')
local out = {}
local function ev(t, d, seq)
  for _, op in ipairs(S.reduce(st, { sessionId = 'x', type = t, data = d, seq = seq })) do
    if op.op == 'tool_result' then
      out[#out + 1] = 'tool_result:' .. op.callId .. ':' .. op.name
    elseif op.text then
      out[#out + 1] = op.op .. ':' .. op.text
    end
  end
end
local function delta(offset, text, kind)
  ev('assistant/delta', { turn = 1, step = 1, offset = offset, delta = { type = kind or 'text', text = text } })
end
-- a replayed chunk (5 UTF-16 units: the emoji counts two), then the live deltas of a reattach
ev('assistant/chunk', { turn = 1, step = 1, deltas = { { type = 'text', text = 'Hé😀l' } } }, 5)
delta(0, 'Hé')     -- already shown: dropped
delta(2, '😀lo')   -- overlaps: only 'o'
delta(9, '!')      -- past a gap (8..9 unseen): held
delta(6, ' w')     -- 6..8
ev('assistant/chunk', { turn = 1, step = 1, deltas = { { type = 'text', text = 'o wX!' } } }, 6) -- fills the gap
delta(10, '?')
delta(0, 'hm', 'reasoning')
ev('assistant/chunk', { turn = 1, step = 1, deltas = { { type = 'reasoning', text = 'hm' }, { type = 'text', text = '?' } } }, 7)
ev('tool/call', { turn = 1, step = 1, callId = 'c1', name = 'grep', arguments = '{}' }, 8)
ev('tool/result', { turn = 1, step = 1, callId = 'c1', name = 'grep', message = { content = {} } }, 9)
ev('tool/result', { turn = 1, step = 1, callId = 'c2', name = 'list_dir', message = { content = {} } }, 10)
return out
"""


def test_delta_offsets_drop_duplicates_and_wait_for_gaps(editor: Editor) -> None:
    assert editor.lua(REDUCE) == [
        "text:Hé😀l",
        "text:o",
        "text: w",
        "text:X!",
        "text:?",
        "reasoning:hm",
        "tool_result:c1:grep",
        "tool_result:c2:list_dir",  # a call never announced still gets its name
    ]


def test_reattaching_mid_stream_shows_the_text_once(editor: Editor, fake: FakeDeepSeek) -> None:
    pieces = ["one ", "two ", "three ", "four ", "five ", "six."]
    fake.script(Reply.stream(text_stream(pieces), delay=0.4))
    editor.cmd("Dsh count")
    editor.wait_text("two")
    session_id = editor.snapshot()["id"]
    editor.cmd(f"DshResume {session_id}")  # attach again: the page holds the step so far, then live deltas
    editor.wait(lambda: editor.lua("return T.chat().state.rendered_seq") is not None, what="the page")
    editor.wait_footers(1)
    lines = editor.lines()
    assert "one two three four five six." in lines
    assert lines.count("## dsh") == 1 and lines.count("## You") == 1


def test_a_burst_reaches_neovim_as_few_merged_notifications(editor: Editor, fake: FakeDeepSeek) -> None:
    """Issue 37.3: the plugin asks the daemon to merge streamed deltas for about a frame
    (deltaCoalesceMs), so a 3,000-delta burst is a few notifications for Neovim's LSP client to
    handle, not 3,000; the text arrives whole."""
    pieces = [f"w{i} " for i in range(3000)]
    fake.script(Reply.stream(text_stream(pieces)))
    editor.cmd("DshNew")
    editor.wait(editor.snapshot, what="the chat")
    editor.lua(
        "_G.deltas = 0; local c = T.chat(); local on_event = c.on_event;"
        " c.on_event = function(self, ev) if ev.type == 'assistant/delta' then _G.deltas = _G.deltas + 1 end"
        " return on_event(self, ev) end"
    )
    editor.type_in_input("burst")
    editor.keys("<CR>")
    editor.wait_footers(1)
    assert (
        editor.lua("return vim.lsp.get_clients({name = 'dsh'})[1].config.init_options.deltaCoalesceMs") == 16
    )
    editor.lua("T.chat():flush()")
    assert "".join(pieces).strip() in "\n".join(editor.lines())
    deltas = editor.lua("return _G.deltas")
    print("assistant/delta notifications for 3,000 deltas:", deltas)
    assert 0 < deltas < 300
