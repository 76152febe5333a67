"""The person's unsaved changes in the file the agent edits (issue 37, protocol.md §8, §9): never
written by the agent's edit. Apart from the edit, the file gets the saved text plus only the agent's
change and the buffer keeps both, still modified; overlapping it, the prompt asks (write both, the
buffer only, reject) and each choice does what it says; the model is told which happened."""

from __future__ import annotations

import json

import pytest

from tests.fakes.deepseek_server import FakeDeepSeek
from tests.neovim.harness import Editor
from tests.neovim.test_tools import answer, edit_call, permission_float, permission_floats
from tests.server.harness import text_reply

SAVED = "a = 1\nb = 2\nc = 3\n"


def buffer_of(editor: Editor, path: str) -> dict:
    return editor.lua(
        "local b = vim.fn.bufnr(...); return {lines = vim.api.nvim_buf_get_lines(b, 0, -1, false), modified = vim.bo[b].modified}",
        path,
    )


def tool_result_sent(fake: FakeDeepSeek) -> str:
    """The edit's tool result as the model got it (the last request's tool message)."""
    (tool,) = [m for m in fake.requests[-1].json["messages"] if m["role"] == "tool"]
    return str(tool["content"])


def start_with_draft(editor: Editor, draft_first_line: str) -> str:
    target = editor.paths.work / "app.py"
    target.write_text(SAVED)
    editor.cmd("edit app.py")
    editor.lua("vim.api.nvim_buf_set_lines(0, 0, 1, false, {...})", draft_first_line)
    return str(target)


def test_an_edit_apart_from_the_draft_writes_only_the_agents_change(
    editor: Editor, fake: FakeDeepSeek
) -> None:
    fake.script(
        edit_call(editor.paths.work / "app.py", "c = 3", "c = 4"),
        text_reply("Changed c."),
    )
    path = start_with_draft(editor, "a = (  # half typed")
    editor.cmd("Dsh set c to 4")
    pf = permission_float(editor)
    assert "app.py: your unsaved changes stay unsaved;" in pf["lines"]
    assert "only this edit is written to the file." in pf["lines"]
    answer(editor, "gy")
    editor.wait(lambda: permission_floats(editor) == [], what="the float to close")
    editor.wait_text("Changed c.")
    with open(path) as f:
        assert f.read() == "a = 1\nb = 2\nc = 4\n"  # the saved text plus the agent's change only
    assert buffer_of(editor, path) == {"lines": ["a = (  # half typed", "b = 2", "c = 4"], "modified": True}
    told = tool_result_sent(fake)
    assert "app.py has unsaved changes in the editor that are not yours" in told
    assert "commands see your edit and nothing of theirs" in told
    # Neovim knows the file's new state: the person's own :write asks nothing and writes their text.
    editor.lua("vim.api.nvim_buf_call(vim.fn.bufnr(...), function() vim.cmd('silent write') end)", path)
    with open(path) as f:
        assert f.read() == "a = (  # half typed\nb = 2\nc = 4\n"
    # `u` from the agent's edit goes back to the person's draft (the write left no step in the way).
    editor.lua("vim.api.nvim_buf_call(vim.fn.bufnr(...), function() vim.cmd('silent undo') end)", path)
    assert buffer_of(editor, path)["lines"] == ["a = (  # half typed", "b = 2", "c = 3"]


@pytest.mark.parametrize(
    ("keys", "disk", "lines", "modified", "told"),
    [
        (
            "gy",
            SAVED,
            ["a = 11", "b = 2", "c = 3"],
            True,
            "they chose to keep it in the editor's buffer only. It is not saved",
        ),
        ("gw", "a = 11\nb = 2\nc = 3\n", ["a = 11", "b = 2", "c = 3"], False, "they chose to save both"),
        ("gn", SAVED, ["a = 10", "b = 2", "c = 3"], True, "the user rejected running edit_file"),
    ],
    ids=["buffer-only", "both", "reject"],
)
def test_an_edit_overlapping_the_draft_asks_and_each_choice_does_what_it_says(
    editor: Editor, fake: FakeDeepSeek, keys: str, disk: str, lines: list[str], modified: bool, told: str
) -> None:
    fake.script(
        edit_call(editor.paths.work / "app.py", "a = 10", "a = 11"),
        text_reply("Done."),
    )
    path = start_with_draft(editor, "a = 10")  # the person's unsaved change, on the line the agent edits
    editor.cmd("Dsh make a 11")
    pf = permission_float(editor)
    assert pf["lines"][:4] == [
        "  ▸ Keep it in the buffer only",
        "  ▸ Write both to the file",
        "  ▸ Reject: the agent is told and goes on",
        "  ▸ Cancel the turn (the queue is kept)",
    ]
    assert "app.py: this edit overlaps your unsaved changes." in pf["lines"]
    assert "Buffer only: not saved, commands will not see it." in pf["lines"]
    assert "gy buffer only" in pf["footer"] and "gw write both" in pf["footer"]
    answer(editor, keys)
    editor.wait(lambda: permission_floats(editor) == [], what="the float to close")
    editor.wait_text("Done.")
    with open(path) as f:
        assert f.read() == disk
    assert buffer_of(editor, path) == {"lines": lines, "modified": modified}
    assert told in tool_result_sent(fake)
    if keys != "gn":
        sent = json.dumps(fake.requests[-1].json)
        assert "unsaved changes in app.py" in sent
