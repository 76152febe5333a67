"""Layout stability (issue 22 item 8): closing the queue or the :DshEdits list neither grows the input
nor moves focus to the code window, and the input's key hints survive :DshNew and :DshResume."""

from __future__ import annotations

from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.neovim.harness import Editor
from tests.neovim.test_tools import answer, edit_call, permission_float
from tests.server.harness import text_reply

LAYOUT = """
local c = T.chat()
local input = vim.fn.win_findbuf(c.input)[1]
local cur = vim.api.nvim_get_current_buf()
return {input_height = input and vim.api.nvim_win_get_height(input) or -1,
        current = vim.b[cur].dsh_kind or vim.fn.expand('%:t'),
        hints = input and vim.wo[input].winbar or ''}
"""


def layout(editor: Editor) -> dict:
    return editor.lua(LAYOUT)


def test_closing_the_queue_or_the_edits_list_keeps_the_input_and_focus(
    editor: Editor, fake: FakeDeepSeek
) -> None:
    editor.lua("vim.o.lines = 40; vim.o.columns = 140")
    target = editor.paths.work / "app.py"
    target.write_text("x = 1\n")
    fake.script(edit_call(target, "x = 1", "x = 2"), text_reply("Done."))
    editor.cmd("edit app.py")
    editor.cmd("Dsh change x")
    permission_float(editor)
    answer(editor, "gy")
    editor.wait_footers(1)
    editor.type_in_input("")  # the person is in the input
    start = layout(editor)
    assert start["input_height"] == 4 and start["current"] == "input"
    # The queue opens in the chat's column; q closes it: same input, focus back in the input.
    editor.cmd("DshQueue")
    editor.wait(lambda: editor.lua("return vim.bo.filetype") == "dshqueue", what="the queue")
    assert layout(editor)["input_height"] == 4
    editor.keys("q")
    editor.wait(lambda: layout(editor) == start, what="the layout as it was")
    # :DshEdits (the quickfix list, at the bottom); :cclose from it: the same.
    editor.cmd("DshEdits")
    editor.wait(lambda: editor.lua("return vim.bo.buftype") == "quickfix", what="the list")
    editor.cmd("cclose")
    editor.wait(lambda: layout(editor) == start, what="the layout as it was")
    # Opened from the input, closed from the code window: focus stays where the person is.
    editor.cmd("DshEdits")
    editor.cmd("wincmd t")
    editor.cmd("cclose")
    editor.wait(lambda: layout(editor)["input_height"] == 4, what="the input's height")
    assert layout(editor)["current"] == "app.py"
    # A height the person gives the input stays.
    editor.lua("vim.api.nvim_win_set_height(vim.fn.win_findbuf(T.chat().input)[1], 7)")
    editor.cmd("DshQueue")
    editor.keys("q")
    editor.wait(lambda: layout(editor)["input_height"] == 7, what="7 lines kept")


def test_key_hints_survive_new_and_resume(editor: Editor, fake: FakeDeepSeek) -> None:
    fake.script(Reply.stream(text_stream(["first"])))
    editor.cmd("Dsh one")
    editor.wait_footers(1)
    hints = layout(editor)["hints"]
    assert hints.startswith(" <CR> send · <M-CR> steer · <C-c> stop · \\q queue · ? keys")
    first = editor.snapshot()["id"]
    editor.lua("vim.wo[vim.fn.win_findbuf(T.chat().input)[1]].winbar = ''")  # lost somehow
    editor.cmd("DshNew")
    editor.wait(lambda: editor.snapshot()["id"] is None, what="a new chat")
    assert layout(editor)["hints"] == hints and layout(editor)["input_height"] == 4
    editor.cmd(f"DshResume {first}")
    editor.wait_text("first")
    assert layout(editor)["hints"] == hints and layout(editor)["input_height"] == 4
    assert editor.lua("return #vim.api.nvim_tabpage_list_wins(0)") == 3
