"""Issue 37: :DshMode [ask|accept-edits|plan] sets the session's mode through the real daemon
(dsh/session/setMode, protocol.md §3): completed, picked with vim.ui.select without an argument,
shown in the window bar, and it changes what the next model request is offered."""

from __future__ import annotations

from typing import Any

from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.neovim.harness import Editor

# The next vim.ui.select records what it shows and answers as the person: the item with id `pick`.
PICK = """
local pick = ...
local original = vim.ui.select
vim.ui.select = function(items, opts, on_choice)
  vim.ui.select = original
  _G.shown = { prompt = opts.prompt, items = vim.tbl_map(opts.format_item, items) }
  for _, it in ipairs(items) do
    if it.id == pick then return on_choice(it) end
  end
  on_choice(nil)
end
"""


def tool_names(fake: FakeDeepSeek, i: int = -1) -> set[str]:
    tools: list[dict[str, Any]] = fake.requests[i].json.get("tools") or []
    return {t["function"]["name"] for t in tools}


def bar(editor: Editor) -> str:
    return str(editor.lua("return vim.wo[vim.fn.win_findbuf(T.chat().buf)[1]].winbar"))


def test_dsh_mode_sets_the_sessions_mode_picks_and_shows_it(editor: Editor, fake: FakeDeepSeek) -> None:
    fake.script(*(Reply.stream(text_stream([f"Reply {i}."])) for i in range(3)))
    editor.cmd("Dsh hello")
    editor.wait_footers(1)
    assert "edit_file" in tool_names(fake) and "propose_plan" not in tool_names(fake)
    assert editor.lua("return vim.fn.getcompletion('DshMode ', 'cmdline')") == ["ask", "accept-edits", "plan"]
    assert editor.lua("return vim.fn.getcompletion('DshMode p', 'cmdline')") == ["plan"]
    assert "plan mode" not in bar(editor)

    editor.cmd("DshMode plan")
    editor.wait(lambda: "plan mode" in bar(editor), what="the bar says plan mode")
    # The daemon has it: the next request is offered the read-only tools and propose_plan.
    editor.cmd("Dsh look around")
    editor.wait_footers(2)
    names = tool_names(fake)
    assert "propose_plan" in names and "read_file" in names and "edit_file" not in names

    # Without an argument: a vim.ui.select of the three, the current one marked.
    editor.lua(PICK, "accept-edits")
    editor.cmd("DshMode")
    editor.wait(lambda: "accept edits" in bar(editor), what="the bar says accept edits")
    shown = editor.lua("return _G.shown")
    assert shown["prompt"] == "dsh mode"
    assert [s.split(" — ")[0] for s in shown["items"]] == ["  Ask", "  Accept edits", "● Plan"]
    assert editor.lua("return T.chat().state.mode") == "accept-edits"
    editor.cmd("Dsh go on")
    editor.wait_footers(3)
    assert "edit_file" in tool_names(fake) and "propose_plan" not in tool_names(fake)

    # The name other clients use is understood; a mode that does not exist is refused, unchanged.
    editor.cmd("DshMode ask")
    editor.wait(lambda: "accept edits" not in bar(editor), what="back to ask")
    editor.cmd("DshMode acceptEdits")
    editor.wait(lambda: "accept edits" in bar(editor), what="acceptEdits")
    editor.cmd("DshMode yolo")
    editor.wait(lambda: 'no mode "yolo"' in editor.lua("return T.messages()"), what="the refusal")
    assert editor.lua("return T.chat().state.mode") == "accept-edits"
    editor.screen(capture="37-dsh-mode")
