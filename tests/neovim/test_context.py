"""Editor context from Neovim: exact visual selections (UTF-16 ranges), steer / inject / attach."""

from __future__ import annotations

import json

from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.neovim.harness import Editor

SAMPLE = ["héllo wörld", "abc😀def", "xyz"]


def grab(editor: Editor, keys: str) -> dict:
    """Make a selection with `keys`, then read it the way the plugin's mappings do."""
    editor.lua("_G.sel = nil")
    editor.keys(keys + "Q")
    return editor.lua(
        "local s = _G.sel; return {range = s.range, text = s.text, mode = s.mode, label = s.label}"
    )


def test_visual_selections_become_exact_utf16_ranges(editor: Editor) -> None:
    editor.lua(
        "vim.api.nvim_buf_set_lines(0, 0, -1, false, ...);"
        "vim.keymap.set('x', 'Q', function() _G.sel = require('dsh.selection').current() end)",
        SAMPLE,
    )
    s = grab(editor, "gg0lvj")  # charwise over a line break, from a 2-byte character
    assert s["text"] == "éllo wörld\nab"
    assert s["range"] == {"start": {"line": 0, "character": 1}, "end": {"line": 1, "character": 2}}
    s = grab(editor, "2G03lv")  # one astral character: two UTF-16 units
    assert s["text"] == "😀" and s["range"] == {
        "start": {"line": 1, "character": 3},
        "end": {"line": 1, "character": 5},
    }
    s = grab(editor, "gg0lv$")  # to the end of the line: the line break is selected too
    assert s["text"] == "éllo wörld\n" and s["range"]["end"] == {"line": 1, "character": 0}
    s = grab(editor, "ggVj")  # linewise
    assert s["text"] == "héllo wörld\nabc😀def\n"
    assert s["range"] == {"start": {"line": 0, "character": 0}, "end": {"line": 2, "character": 0}}
    s = grab(editor, "gg0l<C-v>jl")  # blockwise
    assert s["mode"] == "\x16" and s["text"] == "él\nbc"
    assert s["range"] == {"start": {"line": 0, "character": 1}, "end": {"line": 1, "character": 3}}
    s = grab(editor, "gg0l<C-v>j$")  # blockwise to the end of each line
    assert s["text"] == "éllo wörld\nbc😀def"
    # From a command range ('< and '>): the last visual selection.
    editor.keys("2G03lv<Esc>")
    assert editor.lua("return require('dsh.selection').last().text") == "😀"


def _requests_text(fake: FakeDeepSeek) -> list[str]:
    return [json.dumps(r.json["messages"], ensure_ascii=False) for r in fake.requests]


def test_steer_with_a_visual_selection_sends_the_unsaved_buffer_text(
    editor: Editor, fake: FakeDeepSeek
) -> None:
    app = editor.paths.work / "app.py"
    app.write_text("def f():\n    return 1\n\nprint(f())\n")
    fake.script(Reply.stream(text_stream(["Looks fine."])))
    editor.cmd("edit app.py")
    editor.keys("2G^Creturn 42<Esc>")  # an unsaved change
    assert editor.lua("return vim.bo.modified") is True
    editor.keys("ggVj\\ds")  # linewise selection of lines 1-2, <leader>ds: steer (from idle: a turn)
    lines = editor.wait_text("Looks fine.")
    assert "📎 selection app.py:1-2" in lines
    editor.wait_footers(1)
    (request,) = fake.requests
    messages = request.json["messages"]
    (editor_msg,) = [m for m in messages if m["role"] == "user" and "Selection in" in str(m["content"])]
    content = (
        editor_msg["content"] if isinstance(editor_msg["content"], str) else json.dumps(editor_msg["content"])
    )
    assert "(unsaved editor buffer), lines 1-2" in content
    assert "def f():\n    return 42\n```" in content and "print(f())" not in content
    assert app.read_text() == "def f():\n    return 1\n\nprint(f())\n"  # nothing saved


def test_block_selection_inject_and_attach_to_the_next_prompt(editor: Editor, fake: FakeDeepSeek) -> None:
    table = editor.paths.work / "table.txt"
    table.write_text("id | name | qty\n1  | nut  | 10\n2  | bolt | 20\n")
    fake.script(Reply.stream(text_stream(["Got the names."])))
    editor.cmd("edit table.txt")
    editor.keys("gg05l<C-v>jjlll\\di")  # block: the name column, <leader>di: inject (parked, no turn)
    editor.wait(lambda: editor.pending() == 1, what="the injected block pending")
    snap = editor.snapshot()
    assert snap["status"] == "idle" and snap["queue"] == ["  ⧗ next step  📎 selection table.txt:1-3"]
    editor.keys("2GV\\da")  # <leader>da: attach line 2 to the next prompt
    editor.wait(
        lambda: any("with next prompt" in q for q in editor.snapshot()["queue"]), what="attachment shown"
    )
    assert len(fake.requests) == 0
    editor.type_in_input("which names?")
    editor.keys("<CR>")
    editor.wait_footers(1)
    (request,) = fake.requests
    texts = [
        m["content"] if isinstance(m["content"], str) else json.dumps(m["content"])
        for m in request.json["messages"]
        if m["role"] == "user"
    ]
    assert len(texts) == 3
    assert texts[0].startswith("Block selection in ") and "lines 1-3, columns 6-9" in texts[0]
    assert "\nname\nnut \nbolt\n" in texts[0]
    assert "Selection in " in texts[1] and "1  | nut  | 10\n" in texts[1]
    assert texts[2] == "which names?"
    lines = editor.lines()
    assert (
        lines.index("📎 selection table.txt:1-3")
        < lines.index("📎 selection table.txt:2")
        < lines.index("which names?")
    )
