"""The permission prompt cannot be answered by accident (issue 22 item 1), and an edit can be
reviewed hunk by hunk as a real Neovim diff (item 3)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.fakes.deepseek_server import FakeDeepSeek, Reply
from tests.neovim.harness import Editor
from tests.neovim.test_tools import LOSE_THE_PROMPT, edit_call, permission_float, permission_floats
from tests.server.harness import text_reply, tool_call_stream


def open_requests(editor: Editor) -> list[str]:
    sid = editor.snapshot()["id"]
    res = editor.lua("return T.request('dsh/permissions/list', {sessionId = ...})", sid)
    return [p["callId"] for p in res["open"]]


def mode(editor: Editor) -> str:
    return editor.lua("return vim.api.nvim_get_mode().mode")


def type_live(editor: Editor, keys: str) -> None:
    """Type `keys` as a person does: they are read when Neovim gets to them (insert mode stays)."""
    editor.nv.feedkeys(editor.nv.replace_termcodes(keys), "mt", False)


def test_keys_typed_anywhere_never_answer_a_permission_request(editor: Editor, fake: FakeDeepSeek) -> None:
    """The accident of issue 22: a person typing `a`, `y`, `n`, `r`, `c`, `q`, <Esc> in another
    buffer, in the chat input, or in the prompt itself approves nothing and cancels nothing."""
    target = editor.paths.work / "app.py"
    target.write_text("x = 1\n")
    notes = editor.paths.work / "notes.txt"
    notes.write_text("")
    fake.script(edit_call(target, "x = 1", "x = 2", call_id="call_acc"), text_reply("Done."))
    editor.cmd("edit notes.txt")
    editor.cmd("Dsh change x")
    editor.wait(lambda: editor.lua("return vim.b.dsh_kind") == "input", what="the chat open")
    editor.cmd("wincmd t")  # back in notes.txt, where the person goes on typing
    type_live(editor, "i")
    editor.wait(lambda: mode(editor) == "i", what="insert mode")
    pf = permission_float(editor)
    (acc,) = open_requests(editor)  # the daemon's id for the call the provider named call_acc
    assert not pf["current"] and mode(editor) == "i"  # announced, focus untouched
    assert editor.lua("return vim.fn.expand('%:t')") == "notes.txt"
    assert "dsh: asks permission: " in editor.lua("return T.messages()")
    assert "⚠ permission: \\p" in editor.snapshot()["winbar"]
    assert editor.lua("return require('dsh').status()").startswith("dsh ● running")
    assert "⚠ permission" in editor.lua("return require('dsh').status()")
    # Insert mode in another buffer: every key is text.
    type_live(editor, "a y n r c q")
    editor.wait(lambda: editor.lua("return vim.api.nvim_get_current_line()") == "a y n r c q", what="typed")
    assert mode(editor) == "i" and open_requests(editor) == [acc]
    editor.keys("<Esc>")
    # Normal mode there: Vim's own meanings, nothing else.
    editor.keys("ayes<Esc>")
    editor.keys("y<Esc>n")
    editor.keys("rx")
    editor.keys("c<Esc>")
    editor.keys("q<Esc>")
    editor.keys("<Esc>")
    assert editor.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)") == ["a y n r c qyex"]
    # The chat input, insert and normal mode.
    editor.type_in_input("a y n r c q")
    editor.keys("<Esc>")
    assert open_requests(editor) == [acc] and editor.status() == "running"
    assert len(permission_floats(editor)) == 1 and not permission_floats(editor)[0]["current"]
    # Going to it on purpose, from insert mode (a mapped <Plug>(dsh-permission)): normal mode.
    editor.cmd("wincmd t")
    editor.lua("vim.keymap.set('i', '<C-g>p', '<Plug>(dsh-permission)')")
    editor.keys("A<C-g>p")
    editor.wait(lambda: permission_floats(editor)[0]["current"], what="the prompt focused")
    assert mode(editor) == "n"
    start = editor.lua("return vim.api.nvim_win_get_cursor(0)[1]")
    assert editor.lua("return vim.api.nvim_get_current_line()").startswith("─")  # below the choices
    # In the prompt: single Vim keys do nothing but Vim's (the buffer is read-only)...
    editor.keys("y")  # (waits for a motion, which never comes)
    editor.keys("n")
    editor.keys("rx")
    editor.keys("c<Esc>")
    editor.keys("ay<Esc>")
    editor.keys("<CR>")  # <CR> on a line that is not a choice
    assert mode(editor) == "n" and open_requests(editor) == [acc]
    assert permission_floats(editor) and permission_floats(editor)[0]["current"]
    assert editor.lua("return vim.api.nvim_win_get_cursor(0)[1]") == start
    # ...and q / <Esc> only hide it: still open, still announced, focus back where it was.
    editor.keys("q")
    editor.wait(lambda: permission_floats(editor) == [], what="the prompt hidden")
    assert editor.lua("return vim.fn.expand('%:t')") == "notes.txt"
    assert open_requests(editor) == [acc] and editor.status() == "running"
    assert "⚠ permission" in editor.snapshot()["winbar"]
    assert "still open" in editor.lua("return T.messages()")
    editor.cmd("DshPermission")
    editor.wait(
        lambda: permission_floats(editor) and permission_floats(editor)[0]["current"], what="shown again"
    )
    editor.keys("<Esc>")
    editor.wait(lambda: permission_floats(editor) == [], what="hidden again")
    assert open_requests(editor) == [acc]
    assert target.read_text() == "x = 1\n" and editor.lua("return vim.fn.bufloaded('app.py')") == 0
    # A deliberate answer: <CR> on the "Allow once" line.
    editor.cmd("DshPermission")
    editor.wait(lambda: permission_floats(editor) and permission_floats(editor)[0]["current"], what="shown")
    editor.keys("gg<CR>")
    editor.wait(lambda: permission_floats(editor) == [], what="answered")
    editor.wait_footers(1)
    # Allowed: the edit is on disk; app.py, which had no buffer, was edited in a hidden one, let go.
    assert target.read_text() == "x = 2\n" and editor.lua("return vim.fn.bufloaded('app.py')") == 0
    # (the harness runs full-access, so "⚠ full-access" stays in the bar)
    assert "⚠ permission" not in editor.snapshot()["winbar"]


def test_a_prompt_this_neovim_lost_comes_back_from_the_daemon_list(
    editor: Editor, fake: FakeDeepSeek
) -> None:
    """:DshPermission asks the daemon (`dsh/permissions/list`) when nothing is open here, and the
    answer goes back as `dsh/permissions/respond`."""
    target = editor.paths.work / "f.txt"
    target.write_text("one\n")
    fake.script(edit_call(target, "one", "two", call_id="call_lost"), text_reply("Left it alone."))
    editor.lua(LOSE_THE_PROMPT)
    editor.cmd("Dsh edit f")
    editor.wait(lambda: editor.lua("return #_G.lost") == 1, what="the request reached Neovim")
    assert permission_floats(editor) == []
    editor.cmd("DshPermission")
    pf = editor.wait(
        lambda: next((f for f in permission_floats(editor) if f["current"]), None),
        what="the prompt from the list",
    )
    assert "-one" in pf["lines"] and "+two" in pf["lines"]
    editor.keys("gn")  # reject
    editor.wait_footers(1)
    assert "Left it alone." in editor.lines()
    assert target.read_text() == "one\n"
    results = [m for m in fake.requests[1].json["messages"] if m["role"] == "tool"]
    assert results and "the user rejected running edit_file" in str(results[-1]["content"])


TWO_HUNKS_BEFORE = (
    "def add(a, b):\n    return a - b\n\n\nX = 1\nY = 2\nZ = 3\n\n\ndef sub(a, b):\n    return a + b\n"
)
TWO_HUNKS_AFTER = (
    "def add(a, b):\n    return a + b\n\n\nX = 1\nY = 2\nZ = 3\n\n\ndef sub(a, b):\n    return a - b\n"
)


def write_call(path: Path, text: str, call_id: str) -> Reply:
    return Reply.stream(tool_call_stream([(call_id, "write_file", {"path": str(path), "content": text})]))


def review_state(editor: Editor) -> dict:
    return editor.lua(
        """
        local out = {tab = vim.fn.tabpagenr(), wins = {}}
        for _, w in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
          local b = vim.api.nvim_win_get_buf(w)
          out.wins[#out.wins + 1] = {name = vim.api.nvim_buf_get_name(b), diff = vim.wo[w].diff,
            lines = vim.api.nvim_buf_get_lines(b, 0, -1, false), current = w == vim.api.nvim_get_current_win()}
        end
        out.cursor = vim.api.nvim_win_get_cursor(0)[1]
        return out
        """
    )


def start_review(editor: Editor, fake: FakeDeepSeek, call_id: str, then: str) -> Path:
    target = editor.paths.work / "calc.py"
    target.write_text(TWO_HUNKS_BEFORE)
    fake.script(write_call(target, TWO_HUNKS_AFTER, call_id), text_reply(then))
    editor.cmd("edit calc.py")
    editor.cmd("Dsh fix both")
    permission_float(editor)
    editor.cmd("DshReview")
    editor.wait(lambda: review_state(editor)["tab"] == 2, what="the review tab")
    return target


def test_review_is_a_real_diff_and_accepting_every_hunk_allows_the_edit(
    editor: Editor, fake: FakeDeepSeek
) -> None:
    target = start_review(editor, fake, "call_rv1", "Both fixed.")
    rv = review_state(editor)
    left, right = rv["wins"]
    assert left["name"] == str(target) and left["diff"]  # the file's own buffer, diffed
    assert right["name"].endswith("(proposed)") and right["diff"] and right["current"]
    assert right["lines"] == TWO_HUNKS_AFTER.rstrip("\n").split("\n")
    assert rv["cursor"] == 2  # on the first hunk
    editor.keys("]c")
    assert review_state(editor)["cursor"] == 11  # ]c: the next hunk, as in any diff
    editor.keys("[c")
    assert review_state(editor)["cursor"] == 2
    assert permission_floats(editor) == []  # the prompt waits while the review is open
    editor.keys("\\a")  # keep hunk 1: marked, on to hunk 2
    assert review_state(editor)["cursor"] == 11
    editor.keys("\\a")
    editor.keys("\\s")  # answer: everything kept -> allow once
    editor.wait_footers(1)
    assert review_state(editor)["tab"] == 1 and editor.lua("return vim.fn.tabpagenr('$')") == 1
    buf = editor.lua("return vim.api.nvim_buf_get_lines(vim.fn.bufnr(...), 0, -1, false)", str(target))
    assert buf == TWO_HUNKS_AFTER.rstrip("\n").split("\n")
    assert "Both fixed." in editor.lines()


def test_review_reject_all_and_closing_it_decides_nothing(editor: Editor, fake: FakeDeepSeek) -> None:
    target = start_review(editor, fake, "call_rv2", "Kept as it was.")
    editor.keys("q")  # close: nothing decided, the request stays open
    editor.wait(lambda: review_state(editor)["tab"] == 1, what="the review closed")
    assert len(open_requests(editor)) == 1 and editor.status() == "running"
    editor.cmd("DshPermission")
    editor.wait(
        lambda: permission_floats(editor) and permission_floats(editor)[0]["current"], what="the prompt"
    )
    editor.keys("gd")  # review again, from the prompt
    editor.wait(lambda: review_state(editor)["tab"] == 2, what="the review tab again")
    editor.keys("\\R")  # reject all
    (footer,) = editor.wait_footers(1)
    assert footer.startswith("── completed")
    assert target.read_text() == TWO_HUNKS_BEFORE
    row = next(i for i, line in enumerate(editor.lines()) if line.startswith("⚙ write_file"))
    (card,) = [c for c in editor.snapshot()["cards"] if c["row"] == row]
    assert card["text"].strip() == "✗ REJECTED"


def test_a_partly_accepted_edit_is_written_as_accepted_and_the_model_is_told(
    editor: Editor, fake: FakeDeepSeek
) -> None:
    """Taking one hunk out: the answer is allow-once with the accepted text (protocol.md §8
    `newText`); the daemon writes exactly that, the buffer is saved (a command would see it), and
    the model's next request says the person changed the proposal."""
    target = start_review(editor, fake, "call_rv3", "OK, kept yours.")
    editor.keys("]c")
    editor.keys("\\r")  # take hunk 2 out of the proposal
    rv = review_state(editor)
    assert rv["wins"][1]["lines"][-1] == "    return a + b"  # back to the file's line
    editor.keys("\\s")
    editor.wait_footers(1)
    partly = TWO_HUNKS_AFTER.replace("def sub(a, b):\n    return a - b", "def sub(a, b):\n    return a + b")
    buf = editor.lua("return vim.api.nvim_buf_get_lines(vim.fn.bufnr(...), 0, -1, false)", str(target))
    assert buf == partly.rstrip("\n").split("\n")
    assert target.read_text() == partly  # saved: buffer == disk
    assert editor.lua("return vim.bo[vim.fn.bufnr(...)].modified", str(target)) is False
    assert any("allowed your version of the edit to" in line for line in editor.lines())
    told = json.dumps(fake.requests[1].json["messages"][-1])
    assert "The user changed your proposed edit of calc.py before accepting it" in told
