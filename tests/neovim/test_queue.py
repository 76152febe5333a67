"""The queue editor (:DshQueue): dd removes, editing + :w replaces, reordering + :w moves."""

from __future__ import annotations

from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.neovim.harness import Editor


def texts(inbox: dict, key: str = "nextTurn") -> list[str]:
    return [m["content"][0]["text"] if isinstance(m["content"], list) else m["content"] for m in inbox[key]]


def test_queue_buffer_remove_replace_move_add(editor: Editor, fake: FakeDeepSeek) -> None:
    fake.script(Reply.stream(text_stream(["busy"])[:2], tail="stall"))
    editor.cmd("Dsh keep busy")
    editor.wait_text("busy")
    for prompt in ("one", "two", "three"):
        editor.cmd(f"Dsh {prompt}")  # busy: each is queued
    editor.lua("require('dsh').send(T.chat(), 'inject', 'line1\\nline2')")
    editor.wait(lambda: editor.pending() == 4, what="four queued items")
    editor.cmd("DshQueue")
    assert editor.lua("return vim.bo.buftype") == "acwrite"
    assert editor.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)")[1:] == [
        "# next turn: prompts, each its own turn, in order",
        "#1 one",
        "#2 two",
        "#3 three",
        "# next step: steering and context for the next model request",
        "#4 line1\\nline2",
    ]
    # dd on "#2 two" removes it at once.
    editor.keys("/^#2<CR>dd")
    editor.wait(lambda: texts(editor.lua("return T.inbox()")) == ["one", "three"], what="two removed")
    lines = editor.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)")
    assert lines[2:4] == ["#1 one", "#2 three"] and editor.lua("return vim.bo.modified") is False
    # Reword "one" and move "three" above it (K); both wait for :w.
    editor.keys("/^#1<CR>A, reworded<Esc>")
    editor.keys("/^#2<CR>K")
    editor.keys("/^#3<CR>dd")  # an item line: removed at once (dd never just cuts an item)
    editor.wait(lambda: editor.pending() == 2, what="the note removed")
    editor.keys("Gonew prompt<Esc>")  # a new line in the next-step section
    editor.cmd("write")
    editor.wait(
        lambda: (
            texts(editor.lua("return T.inbox()")) == ["three", "one, reworded"]
            and texts(editor.lua("return T.inbox()"), "nextStep") == ["new prompt"]
        ),
        what="replaced, moved and added",
    )
    # :w says what it saved (issue 37.8: it was silent).
    editor.wait(
        lambda: "queue saved: 1 reworded, 1 added, order changed" in editor.lua("return T.messages()"),
        what="the :w message",
    )
    editor.wait(lambda: editor.lua("return vim.bo.modified") is False, what="the buffer redrawn")
    assert editor.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)")[2:] == [
        "#1 three",
        "#2 one, reworded",
        "# next step: steering and context for the next model request",
        "#3 new prompt",
    ]
    assert editor.snapshot()["queue"] == [
        "  ⧗ next step · send  new prompt",
        "  ⧗ queued 1 · followup  three",
        "  ⧗ queued 2 · followup  one, reworded",
    ]
    # K over the heading moves the step item into the next-turn list.
    editor.keys("/^#3<CR>K")
    editor.cmd("write")
    editor.wait(
        lambda: (
            texts(editor.lua("return T.inbox()")) == ["three", "one, reworded", "new prompt"]
            and texts(editor.lua("return T.inbox()"), "nextStep") == []
        ),
        what="moved across lists",
    )
    assert len(fake.requests) == 1  # queue edits never wake anything


def test_checkhealth(editor: Editor) -> None:
    editor.cmd("Dsh")
    editor.wait(editor.snapshot, what="the chat")
    editor.cmd("checkhealth dsh")
    text = "\n".join(editor.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)"))
    assert "- ✅ OK Neovim 0.11" in text
    assert "- ✅ OK the transcript: tree-sitter markdown" in text
    assert "- ✅ OK daemon found: " in text
    assert "- ✅ OK daemon version: dsh-daemon " in text
    assert "- ✅ OK API key set (setup{ init_options })" in text
    assert "protocol 1, version " in text
