""":DshFork and :DshRewind in a real headless Neovim (issue 25 item 4): the fork is shown in the chat
with the turns it kept, the rewind previews the files first, restores the edit in the buffer through
workspace/applyEdit, notes the cut in the transcript, and the next request leaves the cut turn out."""

from __future__ import annotations

from tests.fakes.deepseek_server import FakeDeepSeek
from tests.neovim.harness import Editor
from tests.neovim.test_tools import answer, edit_call, permission_float, permission_floats
from tests.server.harness import text_reply


def buffer_lines(editor: Editor, path: str) -> list[str]:
    return editor.lua("return vim.api.nvim_buf_get_lines(vim.fn.bufnr(...), 0, -1, false)", path)


def test_fork_then_rewind_with_a_preview(editor: Editor, fake: FakeDeepSeek) -> None:
    target = editor.paths.work / "b.py"
    target.write_text("x = 1\ny = 2\n")
    fake.script(edit_call(target, "x = 1", "x = 2"), text_reply("Changed x."), text_reply("Fresh."))
    editor.lua(
        "_G.asked, _G.answer = {}, 1;"
        " vim.fn.confirm = function(msg, choices) table.insert(_G.asked, {msg, choices}); return _G.answer end"
    )
    editor.cmd("edit b.py")
    editor.cmd("Dsh set x to 2")
    permission_float(editor)
    answer(editor, "gy")
    editor.wait(lambda: permission_floats(editor) == [], what="the float to close")
    editor.wait_footers(1)
    assert buffer_lines(editor, str(target)) == ["x = 2", "y = 2"]
    original = editor.snapshot()["id"]

    editor.cmd("DshFork")  # at the latest turn: the fork is shown in the chat, its turn replayed
    editor.wait(lambda: editor.snapshot().get("id") not in (None, original), what="the fork shown")
    editor.wait_text("Changed x.")
    forked = editor.snapshot()["id"]
    assert "forked at turn 1" in editor.lua("return T.messages()")
    sessions = editor.lua("return T.request('dsh/session/list', vim.empty_dict())")["sessions"]
    assert {s["sessionId"] for s in sessions} == {original, forked}

    editor.cmd("DshRewind")  # before the latest turn: the preview names the file first
    editor.wait(lambda: editor.lua("return #_G.asked") == 1, what="the preview")
    question, choices = editor.lua("return _G.asked[1]")
    print(question)
    assert question.startswith("Rewind the dsh session to before turn 1?") and "Restored: b.py" in question
    assert "Files only" in choices and "onversation only" in choices
    editor.wait(lambda: buffer_lines(editor, str(target)) == ["x = 1", "y = 2"], what="the buffer restored")
    lines = editor.wait_text("── rewound to before turn 1: the turns since are out of the model's history ──")
    print("\n".join(lines))
    assert "── files rewound to before turn 1: b.py ──" in lines
    assert "rewound to before turn 1: restored b.py; the conversation cut" in editor.lua(
        "return T.messages()"
    )

    editor.type_in_input("again")
    editor.keys("<CR>")
    editor.wait_text("Fresh.")
    users = [m["content"] for m in fake.requests[-1].json["messages"] if m["role"] == "user"]
    assert users == ["again"]


def cut_turns(editor: Editor) -> list[int]:
    return editor.lua("return require('dsh.cuts').cut(T.chat())")


def test_a_fork_after_a_rewind_shows_the_rewound_turn_cut_as_the_model_leaves_it_out(
    editor: Editor, fake: FakeDeepSeek
) -> None:
    """Issue 37.4: the screen and the model agree on what a rewind cut, live, and in a fork of the
    session (whose transcript comes from dsh/session/transcript's `cut`); the fork is named."""
    fake.script(text_reply("One."), text_reply("Two."), text_reply("Three."), text_reply("Fork reply."))
    editor.lua("vim.fn.confirm = function() return 3 end")  # the rewind: the conversation only
    first = "please look at the whole project layout and tell me what to change first"
    editor.cmd(f"Dsh {first}")
    editor.wait_footers(1)
    editor.cmd("Dsh second")
    editor.wait_footers(2)
    original = editor.snapshot()["id"]
    editor.cmd("DshRewind 2")
    editor.wait_text("── rewound to before turn 2: the turns since are out of the model's history ──")
    assert cut_turns(editor) == [2]  # live: the cut turn is shown cut where it stands
    editor.cmd("Dsh third")
    editor.wait_footers(4)  # (the rewind's note is a footer line too)
    assert cut_turns(editor) == [2]

    editor.cmd("DshFork")  # at the latest turn (3): the copied log holds turn 2 and the cut
    editor.wait(lambda: editor.snapshot().get("id") not in (None, original), what="the fork shown")
    editor.wait_text("Three.")
    assert cut_turns(editor) == [2]
    winbar = editor.snapshot()["winbar"]
    assert "(fork)" in winbar, winbar  # the fork is named, its title shortened before the suffix
    # The transcript's top on screen (the fork's notice line below the turns can push turn 2 off it).
    editor.lua(
        "local w = vim.fn.bufwinid(T.chat().buf) vim.api.nvim_win_call(w, function() vim.cmd('normal! gg') end)"
    )
    rows = editor.screen(capture="37.4-fork-after-rewind")
    print("\n".join(rows))
    cut_rows = [r for r in rows if "✂ cut: not in the model's history (rewound) · turn 2" in r]
    assert len(cut_rows) == 1 and "## You" in cut_rows[0]
    editor.type_in_input("in the fork")
    editor.keys("<CR>")
    editor.wait_text("Fork reply.")
    users = [m["content"] for m in fake.requests[-1].json["messages"] if m["role"] == "user"]
    assert users == [first, "third", "in the fork"]  # the model's history: turn 2 left out too
    assert cut_turns(editor) == [2]
