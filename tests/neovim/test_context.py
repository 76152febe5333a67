"""Editor context from Neovim: exact visual selections (UTF-16 ranges), steer / inject / attach."""

from __future__ import annotations

import json

from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.neovim.harness import Editor
from tests.server.harness import text_reply, tool_call_stream

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
    editor.keys("ggVj\\Ds")  # linewise selection of lines 1-2, <leader>Ds: steer (from idle: a turn)
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
    assert "```python\n" in content  # the buffer was attached after its filetype was known
    assert app.read_text() == "def f():\n    return 1\n\nprint(f())\n"  # nothing saved


def test_block_selection_inject_and_attach_to_the_next_prompt(editor: Editor, fake: FakeDeepSeek) -> None:
    table = editor.paths.work / "table.txt"
    table.write_text("id | name | qty\n1  | nut  | 10\n2  | bolt | 20\n")
    fake.script(Reply.stream(text_stream(["Got the names."])))
    editor.cmd("edit table.txt")
    editor.keys("gg05l<C-v>jjlll\\Di")  # block: the name column, <leader>Di: inject (parked, no turn)
    editor.wait(lambda: editor.pending() == 1, what="the injected block pending")
    snap = editor.snapshot()
    assert snap["status"] == "idle" and snap["queue"] == [
        "  ⧗ next step · inject  📎 selection table.txt:1-3"
    ]
    editor.keys("2GV\\Da")  # <leader>Da: attach line 2 to the next prompt
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


def test_add_file_and_pick_a_session_with_gr(editor: Editor, fake: FakeDeepSeek) -> None:
    notes = editor.paths.work / "notes.md"
    notes.write_text("saved text\n")
    fake.script(Reply.stream(text_stream(["first session"])), Reply.stream(text_stream(["read it"])))
    editor.cmd("Dsh first")
    editor.wait_footers(1)
    first_id = editor.snapshot()["id"]
    editor.cmd("DshNew")
    editor.wait(lambda: editor.snapshot()["id"] != first_id, what="a new session")
    assert editor.lua("return #vim.api.nvim_tabpage_list_wins(0)") == 3  # shown in the same windows
    editor.cmd("wincmd t")  # back to the file window
    editor.cmd("edit notes.md")
    editor.keys("Goadded, not saved<Esc>")
    editor.cmd("DshAddFile")  # the current buffer, attached to the next prompt (read when it is sent)
    editor.wait(
        lambda: editor.snapshot()["queue"] == ["  ⧗ with next prompt  📎 file notes.md"],
        what="the file attached",
    )
    assert editor.pending() == 0
    editor.keys("Goand this too<Esc>")  # still unsaved, typed after attaching: read at send time
    editor.cmd("Dsh what is in it?")
    editor.wait_footers(1)
    texts = [m["content"] for m in fake.requests[1].json["messages"] if m["role"] == "user"]
    assert texts[0].startswith("File ") and "saved text\nadded, not saved\nand this too\n" in texts[0]
    assert texts[1] == "what is in it?"
    assert editor.snapshot()["queue"] == []
    # \r (<localleader>r): the picker lists both sessions, newest first, with a preview of the one
    # under the cursor; <CR> on the older one resumes it.
    editor.lua("local c = T.chat(); vim.api.nvim_set_current_win(vim.fn.win_findbuf(c.buf)[1])")
    editor.keys("\\r")
    picker = editor.wait(
        lambda: next((f for f in editor.floats() if f["kind"] == "picker"), None), what="the picker"
    )
    assert len(picker["lines"]) == 2 and picker["current"]
    assert picker["lines"][1].startswith(first_id[:8]) and picker["lines"][1].endswith("first")
    editor.keys("j")
    editor.wait(
        lambda: any(f["kind"] == "picker-preview" and "first session" in f["lines"] for f in editor.floats()),
        what="the preview of the first session",
    )
    editor.keys("<CR>")
    editor.wait(lambda: editor.snapshot()["id"] == first_id, what="the first session resumed")
    editor.wait_text("first session")
    assert not any(f["kind"].startswith("picker") for f in editor.floats())


def test_range_command_injects_the_last_selection(editor: Editor, fake: FakeDeepSeek) -> None:
    src = editor.paths.work / "src.txt"
    src.write_text("alpha\nbeta\ngamma\n")
    editor.cmd("edit src.txt")
    editor.keys("2GvE:DshInject<CR>")  # charwise "beta" through the command line: :'<,'>DshInject
    editor.wait(lambda: editor.pending() == 1, what="the selection injected")
    (message,) = editor.lua("return T.inbox()")["nextStep"]
    assert message["source"]["range"] == {
        "start": {"line": 1, "character": 0},
        "end": {"line": 1, "character": 4},
    }
    assert (
        message["source"]["contextKind"] == "selection"
        and "```text\nbeta\n```" in message["content"][0]["text"]
    )
    assert editor.status() == "idle" and fake.requests == []


def test_ambient_editor_state_is_opt_in(editor: Editor, fake: FakeDeepSeek) -> None:
    (editor.paths.work / "main.py").write_text("import os\n\nprint(os.getcwd())\n")
    fake.script(Reply.stream(text_stream(["one"])), Reply.stream(text_stream(["two"])))
    editor.cmd("Dsh first")
    editor.wait_footers(1)
    editor.cmd("wincmd t | edit main.py")
    # P pushes the state now (the debounced pushes on cursor moves are slowed down for the test).
    editor.lua(
        "require('dsh.config').options.ambient_debounce = 600000;"
        "vim.keymap.set('x', 'P', function() require('dsh.ambient').push() end)"
    )
    editor.keys("3G0wvEP<Esc>")  # a selection while ambient is off: nothing is pushed
    editor.lua("require('dsh.config').options.ambient = true")
    editor.keys("3G0wvEP<Esc>")  # select "os.getcwd())"
    editor.cmd("Dsh what is selected?")
    editor.wait_footers(2)
    first = [m["content"] for m in fake.requests[0].json["messages"] if m["role"] == "user"]
    second = [m["content"] for m in fake.requests[1].json["messages"] if m["role"] == "user"]
    assert not any("Editor state:" in t for t in first)
    (snapshot,) = [t for t in second if t.startswith("Editor state:")]
    assert f"- active file: {editor.paths.work / 'main.py'}" in snapshot
    assert "- cursor/selection: line 3 to 3" in snapshot and "os.getcwd())" in snapshot
    assert second[-1] == "what is selected?"
    assert "📎 editor snapshot (main.py)" in editor.lines()


def _user_texts(request) -> list[str]:  # type: ignore[no-untyped-def]
    return [
        m["content"] if isinstance(m["content"], str) else json.dumps(m["content"])
        for m in request.json["messages"]
        if m["role"] == "user"
    ]


def _focus_buffer(editor: Editor, name: str) -> None:
    editor.lua(
        "for _, w in ipairs(vim.api.nvim_tabpage_list_wins(0)) do"
        " if vim.fs.basename(vim.api.nvim_buf_get_name(vim.api.nvim_win_get_buf(w))) == ... then"
        " vim.api.nvim_set_current_win(w) end end",
        name,
    )


def test_an_attached_selection_waits_with_its_queued_prompt(editor: Editor, fake: FakeDeepSeek) -> None:
    app = editor.paths.work / "app.py"
    app.write_text("import os\n\ndef main():\n    return os.getcwd()\n")
    fake.script(
        Reply.stream(tool_call_stream([("call_1", "run_command", {"command": "true"})])),
        text_reply("ran it"),
        text_reply("explained"),
    )
    editor.cmd("edit app.py")
    editor.cmd("Dsh run it")
    editor.wait(lambda: editor.floats(), what="the permission float")  # turn 1 waits at its first step
    _focus_buffer(editor, "app.py")
    editor.keys("3GVj\\Da")  # <leader>Da: lines 3-4 for the next prompt
    editor.wait(
        lambda: editor.snapshot()["queue"] == ["  ⧗ with next prompt  📎 lines app.py:3-4"], what="attached"
    )
    editor.type_in_input("explain this")
    editor.keys("<CR>")  # busy: queued, with the selection as its own context
    editor.wait(
        lambda: editor.snapshot()["queue"] == ["  ⧗ queued 1 · followup  explain this  + sel app.py:3-4"],
        what="the queued prompt with its context",
    )
    (item,) = editor.lua("return T.inbox()")["nextTurn"]
    assert item["verb"] == "followup" and item["wakeup"] is True and isinstance(item["queuedAt"], int)
    (ctx,) = item["context"]
    assert ctx["source"]["contextKind"] == "selection" and "return os.getcwd()" in ctx["content"][0]["text"]
    # :DshQueue labels the line with its verb and context; rewording it keeps the context.
    editor.cmd("DshQueue")
    lines = editor.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)")
    assert lines[1:] == [
        "# next turn: prompts, each its own turn, in order",
        "#1 explain this",
        "# next step: steering and context for the next model request",
    ]
    labels = editor.lua(
        "local out = {} for _, m in ipairs(vim.api.nvim_buf_get_extmarks(0, require('dsh.queue').ns, 0, -1,"
        " {details = true})) do out[#out + 1] = {m[2], table.concat(vim.tbl_map(function(c) return c[1] end,"
        " m[4].virt_text))} end return out"
    )
    assert labels == [[2, "  followup  + sel app.py:3-4"]]
    editor.keys("/^#1<CR>A, briefly<Esc>")
    editor.cmd("write")
    editor.wait(
        lambda: (
            [m["content"][0]["text"] for m in editor.lua("return T.inbox()")["nextTurn"]]
            == ["explain this, briefly"]
        ),
        what="the prompt reworded",
    )
    (item,) = editor.lua("return T.inbox()")["nextTurn"]
    assert item["verb"] == "followup" and [c["id"] for c in item["context"]] == [ctx["id"]]
    editor.wait(
        lambda: (
            editor.snapshot()["queue"] == ["  ⧗ queued 1 · followup  explain this, briefly  + sel app.py:3-4"]
        ),
        what="the reworded line",
    )
    # Allow the command: turn 1 goes on to its second step, which must not see the queued selection.
    editor.cmd("DshPermission")
    editor.keys("gy")
    editor.wait_footers(2)
    assert len(fake.requests) == 3
    assert not any("Selection in" in t for t in _user_texts(fake.requests[1]))
    second_turn = _user_texts(fake.requests[2])
    assert second_turn[-1] == "explain this, briefly"
    assert second_turn[-2].startswith("Selection in ") and "lines 3-4" in second_turn[-2]
    assert sum("Selection in" in t for t in second_turn) == 1
    lines = editor.lines()
    at = lines.index("📎 selection app.py:3-4")
    assert lines.index("ran it") < at and lines[at + 1 :][:3] == ["", "## You", "explain this, briefly"]


def test_steer_with_a_selection_and_words_is_one_steer(editor: Editor, fake: FakeDeepSeek) -> None:
    src = editor.paths.work / "src.txt"
    src.write_text("alpha\nbeta\ngamma\n")
    fake.script(text_reply("using beta"), text_reply("gamma it is"))
    editor.cmd("Dsh")
    editor.wait(editor.snapshot, what="the chat")
    editor.lua(
        "_G.inserted = {}; local d = require('dsh.events'); local on_event = d.event;"
        " d.event = function(root, ev) if ev.type == 'agent/inbox/inserted' then"
        " table.insert(_G.inserted, ev.data) end return on_event(root, ev) end"
    )
    editor.type_in_input("use this one")
    editor.cmd("wincmd t | edit src.txt")
    editor.keys("2GV\\Ds")  # <leader>Ds with words typed in the chat input: they go with it
    editor.wait_footers(1)
    assert editor.snapshot()["input"] == [""]
    texts = _user_texts(fake.requests[0])
    assert texts[-1] == "use this one" and texts[-2].startswith("Selection in ") and "beta" in texts[-2]
    # :'<,'>DshSteer words: the range's selection with the words, again one request.
    editor.keys("3GvE:DshSteer this instead<CR>")
    editor.wait_footers(2)
    texts = _user_texts(fake.requests[1])
    assert texts[-1] == "this instead" and "\ngamma\n```" in texts[-2]
    inserted = editor.lua("return _G.inserted")
    assert [(d["message"]["verb"], len(d["message"].get("context", []))) for d in inserted] == [
        ("steer", 1),
        ("steer", 1),
    ]
    lines = editor.lines()
    assert lines[lines.index("📎 selection src.txt:3") + 1 :][:3] == ["", "## You", "this instead"]


def test_an_older_daemon_gets_attachments_as_injects_and_a_full_replay(
    editor: Editor, fake: FakeDeepSeek
) -> None:
    (editor.paths.work / "a.txt").write_text("alpha\nbeta\n")
    fake.script(text_reply("seen"))
    editor.cmd("edit a.txt")
    editor.cmd("Dsh")
    editor.wait(editor.snapshot, what="the chat")
    # As if the daemon advertised none of the protocol additions (sendContext, transcript, detach).
    editor.lua("for _, e in pairs(require('dsh.client').roots) do e.info = {protocolVersion = 1} end")
    editor.cmd("wincmd t")
    editor.keys("2GV\\Da")
    editor.cmd("DshAddFile")  # no context on sends: added at once
    editor.wait(lambda: editor.pending() == 1, what="the file injected")
    editor.cmd("Dsh what now?")
    editor.wait_footers(1)
    texts = _user_texts(fake.requests[0])
    assert (
        texts[-3].startswith("File ") and texts[-2].startswith("Selection in ") and texts[-1] == "what now?"
    )
    editor.lua("T.chat():note('shown before the resume')")
    editor.cmd("DshResume")  # the whole history replayed as events
    editor.wait(lambda: "shown before the resume" not in editor.lines(), what="the chat reset")
    editor.wait_footers(1)
    assert editor.lua("return T.chat().state.rendered_seq") is None
    lines = editor.lines()
    assert lines.index("📎 file a.txt") < lines.index("📎 selection a.txt:2") < lines.index("what now?")


def test_a_file_opened_after_the_daemon_started_keeps_its_language(
    editor: Editor, fake: FakeDeepSeek
) -> None:
    fake.script(Reply.stream(text_stream(["hi"])))
    editor.cmd("Dsh hello")  # the daemon is up before the file is read
    editor.wait_footers(1)
    (editor.paths.work / "late.py").write_text("x = 1\ny = 2\n")
    editor.cmd("edit late.py")
    editor.keys("ggVj\\Di")  # <leader>Di: inject lines 1-2
    editor.wait(lambda: editor.pending() == 1, what="the selection injected")
    (message,) = editor.lua("return T.inbox()")["nextStep"]
    assert message["source"].get("languageId") == "python"
    assert "```python\nx = 1\ny = 2\n```" in message["content"][0]["text"]
