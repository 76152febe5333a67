"""What the transcript shows: the queue always in view (issue 22 item 4), tool cards that expand to
their output (item 5), code blocks highlighted, jumped, yanked and applied (item 6), and a stream
written in few buffer changes with very long lines continued (item 9)."""

from __future__ import annotations

import json
import os

from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.fakes.tool_events import tool_call_events
from tests.neovim.harness import Editor
from tests.neovim.test_permissions import review_state
from tests.neovim.test_tools import answer, edit_call, permission_float
from tests.server.harness import text_reply, tool_call_stream


def chat_column(rows: list[str]) -> list[str]:
    """The chat's side of a screen split beside the code window (the text after the split bar)."""
    return [r.split("│")[-1] for r in rows]


def docked(editor: Editor) -> dict | None:
    return next((f for f in editor.floats() if f["kind"] == "queue"), None)


def test_the_queue_stays_in_view_when_the_transcript_fills_the_window(
    editor: Editor, fake: FakeDeepSeek
) -> None:
    long_reply = "".join(f"line {i} of a long answer\n" for i in range(80))
    fake.script(Reply.stream(text_stream([long_reply, "still going"])[:3], tail="stall"))
    editor.cmd("Dsh a long one")
    editor.wait_text("still going")
    editor.cmd("Dsh then the tests, please")
    editor.cmd("Dsh and lint")
    editor.wait(lambda: editor.pending() == 2, what="two queued")
    queue = [
        "  ⧗ queued 1 · followup  then the tests, please",
        "  ⧗ queued 2 · followup  and lint",
    ]
    assert editor.snapshot()["queue"] == queue  # the virtual lines under the last line...
    # ...are on screen under the newest line, which the window following the reply scrolled to show:
    # no dock covers that line (issue 37.2).
    screen = chat_column(editor.screen())
    at = screen.index("still going")
    assert screen[at + 1 : at + 3] == queue and docked(editor) is None
    # Scrolled up, the newest lines are out of view: the same lines are docked above the input.
    editor.lua("vim.api.nvim_win_set_cursor(vim.fn.win_findbuf(T.chat().buf)[1], {1, 0})")
    f = editor.wait(lambda: docked(editor), what="the docked queue")
    assert f["lines"] == queue and f["title"] == " ⧗ 2 queued " and not f["focusable"] and not f["current"]
    geometry = editor.lua(
        """
        local t = vim.fn.win_findbuf(T.chat().buf)[1]
        local f
        for _, w in ipairs(vim.api.nvim_list_wins()) do
          if vim.b[vim.api.nvim_win_get_buf(w)].dsh_float == 'queue' then f = w end
        end
        local tp = vim.fn.win_screenpos(t)
        -- the transcript is full of one-row lines: its last one shown is on its last text row
        local last_text_row = vim.fn.screenpos(t, vim.fn.line('w$', t), 1).row
        return {float_last = vim.fn.screenpos(f, 2, 1).row, last_text_row = last_text_row,
                float_col = vim.fn.screenpos(f, 1, 1).col, col = tp[2]}
        """
    )
    # Its last line is the transcript's last text line (the status line stays visible).
    assert geometry["float_last"] == geometry["last_text_row"] and geometry["float_col"] == geometry["col"]
    # Removing an item updates it; back at the end (G), the dock goes and the tail shows; an empty
    # queue removes it.
    first = editor.lua("return T.inbox()")["nextTurn"][0]["id"]
    editor.lua("T.request('dsh/inbox/remove', {sessionId = T.chat().id, messageId = ...})", first)
    editor.wait(
        lambda: (d := docked(editor)) and d["lines"] == [queue[1].replace("queued 2", "queued 1")],
        what="updated",
    )
    assert docked(editor)["title"] == " ⧗ 1 queued "
    editor.lua("vim.api.nvim_set_current_win(vim.fn.win_findbuf(T.chat().buf)[1])")
    editor.keys("G")
    editor.wait(lambda: docked(editor) is None, what="the dock gone at the end")
    screen = chat_column(editor.screen())
    assert screen[screen.index("still going") + 1] == queue[1].replace("queued 2", "queued 1")
    editor.cmd("DshStop!")
    editor.wait(lambda: editor.snapshot()["queue"] == [], what="the queue emptied")
    assert docked(editor) is None


def test_the_dock_never_covers_a_streaming_replys_newest_lines_at_24_rows(
    editor: Editor, fake: FakeDeepSeek
) -> None:
    editor.lua("vim.o.lines = 24; vim.o.columns = 100")
    pieces = ["first words\n"] + [f"streamed line {i} of the reply\n" for i in range(60)]
    fake.script(Reply.stream(text_stream(pieces)[:-2], delay=0.12, tail="stall"))
    editor.cmd("Dsh busy")
    editor.wait_text("first words")
    for i in range(3):
        editor.cmd(f"Dsh queued prompt {i}")
    editor.wait(lambda: editor.pending() == 3, what="three queued")
    # The reply grows past the window while the three prompts wait: the screen, checked as it streams.
    samples = 0
    while "streamed line 59 of the reply" not in editor.lines():
        where = editor.lua("return T.tail_and_dock()")
        assert where["tail_row"] > 0, where  # the newest line is on screen...
        assert where["dock_top"] == 0 or where["tail_row"] < where["dock_top"], where  # ...uncovered
        samples += 1
    assert samples > 10
    where = editor.lua("return T.tail_and_dock()")
    assert where["tail_row"] > 0 and where["dock_top"] == 0
    rows = editor.screen(capture="37.2-dock-24-rows")
    print("\n".join(rows))
    column = chat_column(rows)
    at = column.index("streamed line 59 of the reply")
    assert column[at + 2 : at + 5] == [f"  ⧗ queued {i + 1} · followup  queued prompt {i}" for i in range(3)]
    editor.cmd("DshStop!")


def test_a_short_transcript_shows_its_queue_without_a_dock(editor: Editor, fake: FakeDeepSeek) -> None:
    fake.script(Reply.stream(text_stream(["short"])[:2], tail="stall"))
    editor.cmd("Dsh short")
    editor.wait_text("short")
    editor.cmd("Dsh queued behind it")
    editor.wait(
        lambda: editor.snapshot()["queue"] == ["  ⧗ queued 1 · followup  queued behind it"], what="queued"
    )
    assert docked(editor) is None  # the virtual lines are on screen: nothing covers the transcript
    editor.cmd("DshStop!")


SLOW_COMMAND = "for i in 1 2 3; do echo line $i; sleep 0.6; done; echo oops >&2; exit 3"


def test_a_command_card_expands_to_its_output_streamed_and_its_exit_code(
    editor: Editor, fake: FakeDeepSeek
) -> None:
    fake.script(
        Reply.stream(tool_call_stream([("call_cmd", "run_command", {"command": SLOW_COMMAND})])),
        text_reply("It failed with 3."),
    )
    editor.cmd("Dsh run it")
    permission_float(editor)
    answer(editor, "gy")
    editor.wait_text("⚙ run_command")
    # K on the card while the command runs: the output so far, following as it streams.
    editor.lua(
        "local w = vim.fn.win_findbuf(T.chat().buf)[1]; vim.api.nvim_set_current_win(w);"
        " for i, l in ipairs(vim.api.nvim_buf_get_lines(0, 0, -1, false)) do"
        " if l:find('^⚙ run_command') then vim.api.nvim_win_set_cursor(w, {i, 0}) end end"
    )
    editor.wait(
        lambda: "line 1" in editor.text() or any("line 1" in c["text"] for c in editor.snapshot()["cards"])
    )
    editor.keys("K")

    def details() -> dict | None:
        return next((f for f in editor.floats() if f["title"] == " run_command "), None)

    f = editor.wait(details, what="the card's float")
    assert f["current"] and f["lines"][:2] == ["⚙ run_command  running…", f"$ {SLOW_COMMAND}"]
    editor.wait(
        lambda: (d := details()) and "line 2" in d["lines"] and d["lines"][0].endswith("running…"),
        what="output streaming in while the command runs",
    )
    editor.wait_footers(1)
    f = editor.wait(lambda: (d := details()) and "[exit code 3]" in d["lines"] and d, what="the exit code")
    assert f["lines"][0] == "⚙ run_command  ✓ ok · exit 3"
    assert f["lines"][3:8] == ["line 1", "line 2", "line 3", "oops", "[exit code 3]"]
    editor.keys("q")
    editor.wait(lambda: details() is None, what="closed")
    row = next(i for i, line in enumerate(editor.lines()) if line.startswith("⚙ run_command"))
    (card,) = [c for c in editor.snapshot()["cards"] if c["row"] == row]
    assert card["text"].strip() == "✓ ok · exit 3"


def test_an_edit_card_expands_to_its_diff(editor: Editor, fake: FakeDeepSeek) -> None:
    target = editor.paths.work / "b.py"
    target.write_text("x = 1\n")
    fake.script(edit_call(target, "x = 1", "x = 2", call_id="call_ed"), text_reply("Changed."))
    editor.cmd("Dsh change it")
    permission_float(editor)
    answer(editor, "gy")
    editor.wait_footers(1)
    editor.lua(
        "local w = vim.fn.win_findbuf(T.chat().buf)[1]; vim.api.nvim_set_current_win(w);"
        " for i, l in ipairs(vim.api.nvim_buf_get_lines(0, 0, -1, false)) do"
        " if l:find('^⚙ edit_file') then vim.api.nvim_win_set_cursor(w, {i, 0}) end end"
    )
    editor.keys("K")
    f = editor.wait(
        lambda: next((f for f in editor.floats() if f["title"] == " edit_file "), None), what="the float"
    )
    assert f["filetype"] == "diff" and f["lines"][:2] == ["⚙ edit_file  ✓ ok", "b.py"]
    assert "-x = 1" in f["lines"] and "+x = 2" in f["lines"]


CODE_REPLY = (
    "Two blocks:\n\n```lua\nlocal function greet(name)\n  return 'hello ' .. name\nend\n```\n\n"
    "and the file:\n\n```python app.py\ndef add(a, b):\n    return a + b\n```\n"
)


def test_code_blocks_are_highlighted_jumped_yanked_and_applied(editor: Editor, fake: FakeDeepSeek) -> None:
    app = editor.paths.work / "app.py"
    app.write_text("def add(a, b):\n    return a - b\n")
    fake.script(Reply.stream(text_stream([CODE_REPLY])))
    editor.cmd("edit app.py")
    editor.cmd("Dsh show me")
    editor.wait_footers(1)
    # Tree-sitter markdown, the lua block in lua (Neovim ships both parsers), painted as extmarks.
    caps = editor.wait(
        lambda: editor.lua(
            """
            local c = T.chat()
            local row
            for i, l in ipairs(c:lines()) do if l == 'local function greet(name)' then row = i - 1 end end
            local ns = require('dsh.highlight').ns_md
            local out = {}
            for _, m in ipairs(vim.api.nvim_buf_get_extmarks(c.buf, ns, {row, 0}, {row, 0}, {details = true, overlap = true})) do
              out[#out + 1] = m[4].hl_group
            end
            return #out > 0 and out or nil
            """
        ),
        what="tree-sitter on the transcript",
    )
    assert any(c.startswith("@keyword") and c.endswith(".lua") for c in caps), caps
    # ]k / [k move between blocks; \y yanks the one under the cursor.
    editor.lua("vim.api.nvim_set_current_win(vim.fn.win_findbuf(T.chat().buf)[1]); vim.cmd('normal! gg')")
    editor.keys("]k")
    assert editor.lua("return vim.api.nvim_get_current_line()") == "local function greet(name)"
    editor.keys("\\y")
    assert (
        editor.lua("return vim.fn.getreg('\"')")
        == "local function greet(name)\n  return 'hello ' .. name\nend\n"
    )
    editor.keys("]k")
    assert editor.lua("return vim.api.nvim_get_current_line()") == "def add(a, b):"
    editor.keys("[k")
    assert editor.lua("return vim.api.nvim_get_current_line()") == "local function greet(name)"
    # \a applies the block to the file its fence names, through the hunk review.
    editor.keys("]k\\a")
    editor.wait(lambda: review_state(editor)["tab"] == 2, what="the review")
    rv = review_state(editor)
    assert rv["wins"][0]["name"] == str(app) and rv["wins"][1]["lines"] == [
        "def add(a, b):",
        "    return a + b",
    ]
    editor.keys("\\A")
    editor.wait(lambda: review_state(editor)["tab"] == 1, what="applied")
    buf = editor.lua("return vim.api.nvim_buf_get_lines(vim.fn.bufnr(...), 0, -1, false)", str(app))
    assert (
        buf == ["def add(a, b):", "    return a + b"]
        and app.read_text() == "def add(a, b):\n    return a - b\n"
    )


def test_without_a_markdown_parser_the_transcript_keeps_vim_syntax(
    editor: Editor, fake: FakeDeepSeek
) -> None:
    fake.script(Reply.stream(text_stream(["```lua\nprint(1)\n```\n"])))
    editor.lua("vim.treesitter.get_string_parser = function() error('no parser for markdown') end")
    editor.cmd("Dsh code")
    editor.wait_footers(1)
    state = editor.lua(
        "local c = T.chat(); return {c.treesitter, vim.bo[c.buf].syntax,"
        " #vim.api.nvim_buf_get_extmarks(c.buf, require('dsh.highlight').ns_md, 0, -1, {})}"
    )
    assert state == [False, "markdown", 0]
    editor.lua("vim.api.nvim_set_current_win(vim.fn.win_findbuf(T.chat().buf)[1]); vim.cmd('normal! gg')")
    editor.keys("]k")
    assert editor.lua("return vim.api.nvim_get_current_line()") == "print(1)"


def test_a_burst_is_written_in_few_buffer_changes_and_long_lines_are_continued(
    editor: Editor, fake: FakeDeepSeek
) -> None:
    pieces = [f"w{i} " for i in range(400)]  # 400 deltas, written as fast as the daemon sends them
    long_line = "x" * 4999 + " " + "y" * 4999  # one 10,000-character line
    fake.script(
        Reply.stream(text_stream(pieces)),
        Reply.stream(text_stream(["```text\n", long_line[:3000], long_line[3000:], "\n```\n"])),
    )
    editor.lua("require('dsh.config').options.max_line = 2000")
    editor.cmd("Dsh")
    editor.wait(editor.snapshot, what="the chat")
    editor.lua(
        "_G.changes = 0; vim.api.nvim_buf_attach(T.chat().buf, false,"
        " {on_lines = function() _G.changes = _G.changes + 1 end})"
    )
    editor.cmd("Dsh burst")
    editor.wait_footers(1)
    lines = editor.lines()
    assert "".join(pieces) in lines  # every delta, in order
    changes = editor.lua("return _G.changes")
    assert changes < 100, changes  # coalesced: not one buffer change per delta
    editor.cmd("Dsh long")
    editor.wait_footers(2)
    lines = editor.lines()
    at = lines.index("```text")
    body = lines[at + 1 : lines.index("```", at + 1)]
    assert len(body) > 1 and all(len(line.encode()) <= 2000 for line in body)
    assert "".join(body) == long_line  # continued, not changed
    soft = editor.lua(
        "return #vim.api.nvim_buf_get_extmarks(T.chat().buf, require('dsh.render').ns_soft, 0, -1, {})"
    )
    assert soft == len(body) - 1
    editor.lua("vim.api.nvim_set_current_win(vim.fn.win_findbuf(T.chat().buf)[1])")
    editor.lua("vim.api.nvim_win_set_cursor(0, {..., 0})", at + 2)
    editor.keys("\\y")
    assert editor.lua("return vim.fn.getreg('\"')") == long_line + "\n"  # yanked joined again


def _tool_turn(
    sid: str, seq: int, turn: int, calls: list[tuple[str, str, dict, str, dict | None]]
) -> list[dict]:
    """A turn's events as the daemon sends them: per call (id, tool, arguments, result text, meta)."""
    events: list[dict] = [{"sessionId": sid, "seq": seq, "type": "turn/start", "data": {"turn": turn}}]
    for call_id, name, arguments, text, meta in calls:
        events += tool_call_events(sid, seq + len(events), call_id, name, arguments, text, meta, turn=turn)
    reason = {"kind": "completed"}
    events.append(
        {
            "sessionId": sid,
            "seq": seq + len(events),
            "type": "turn/end",
            "data": {"turn": turn, "reason": reason},
        }
    )
    return events


def test_a_tool_card_says_what_the_results_meta_says_never_what_its_words_say(
    editor: Editor, fake: FakeDeepSeek
) -> None:
    """What the language server told the agent is read from `meta` (protocol.md §9): an edit whose
    meta counts new errors says so however the model was told; words that look like the note, without
    the meta, show nothing."""
    fake.script(text_reply("Hello."))
    editor.cmd("Dsh hi")
    editor.wait_footers(1)
    chat = editor.lua("local c = T.chat(); return {id = c.id, seq = c.state.last_seq}")
    diff = "--- a/app.py\n+++ b/app.py\n@@ -1 +1 @@\n-a = 1\n+a = b\n"
    edit = {"path": "/w/app.py", "diff": diff, "beforeHash": "h0", "afterHash": "h1", "created": False}
    problem = {"path": "app.py", "line": 1, "col": 5, "severity": "error", "message": '"b" is not defined'}
    told = "Edited app.py (+1 -1 lines)\n1 new error in app.py after this edit (from the editor's language server):"
    events = _tool_turn(chat["id"], chat["seq"] + 1, 2, [
        ("e1", "edit_file", {"path": "app.py"}, "Edited app.py (+1 -1 lines)\nThe checker is unhappy.",
         {**edit, "newErrors": 2, "newErrorList": [problem, {**problem, "col": 1}]}),
        ("e2", "edit_file", {"path": "app.py"}, told, edit),
        ("d1", "definition", {"path": "notes.txt", "line": 1, "symbol": "b"}, "Ask grep.", {"noLanguageServer": True}),
        ("d2", "definition", {"path": "app.py", "line": 1, "symbol": "b"}, "No language server for this file in the editor; use grep and read_file instead.", None),
    ])  # fmt: skip
    editor.lua(
        "for _, ev in ipairs(vim.json.decode(..., {luanil = {object = true}})) do T.dsh().on_event(T.chat().root, ev) end",
        json.dumps(events),
    )
    editor.wait_footers(2)
    lines = editor.lines()
    cards = {c["row"]: c["text"].strip() for c in editor.snapshot()["cards"]}
    shown = [(lines[row].split()[1], cards[row]) for row in sorted(cards) if lines[row].startswith("⚙ ")]
    assert shown == [
        ("edit_file", "✓ ok +1 −1 · 2 new errors"),
        ("edit_file", "✓ ok +1 −1"),
        ("definition", "✓ ok · no language server"),
        ("definition", "✓ ok"),
    ], shown
    if os.environ.get("DSH_NVIM_SHOW"):
        for row in sorted(cards):
            print(f"{lines[row]}  {cards[row]}")
