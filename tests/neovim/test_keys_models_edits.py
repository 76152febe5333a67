"""Issue 37.8: the `?` float names a space leader `<Space>` and lists every command (:DshRewind,
:DshFork included); :DshModel offers the daemon's own models (dsh/models/list); :DshEdits tells an
agent's edit from the rewind that took it back."""

from __future__ import annotations

import re

from tests.fakes.deepseek_server import FakeDeepSeek
from tests.neovim.harness import PLUGIN, Editor, Paths
from tests.neovim.test_tools import answer, edit_call, permission_float, permission_floats
from tests.server.harness import text_reply


def test_the_keys_float_shows_a_space_leader_and_every_command(editor: Editor) -> None:
    editor.lua("vim.g.maplocalleader = ' '")
    editor.cmd("Dsh")
    editor.wait(editor.snapshot, what="the chat")
    editor.keys("?")
    help_float = editor.wait(lambda: next((f for f in editor.floats() if f["kind"] == "help"), None))
    text = "\n".join(help_float["lines"])
    print(text)
    editor.screen(capture="37.8-keys-float")
    assert "<Space>q" in text and "edit the queue" in text
    assert "  q " not in text  # the leader is never a blank
    words = text.split()
    for name in editor.lua("return vim.tbl_map(function(c) return c[1] end, require('dsh.spec').commands)"):
        assert f":{name}" in words, name


def test_dsh_model_offers_the_daemons_models(editor: Editor) -> None:
    editor.lua(
        "require('dsh.config').options.models = {'setup-only-model'};"
        " _G.offered = nil;"
        " vim.ui.select = function(items, opts) _G.offered = vim.tbl_map(opts.format_item, items) end"
    )
    editor.cmd("Dsh")
    editor.wait(editor.snapshot, what="the chat")
    editor.cmd("DshModel")
    offered = editor.wait(lambda: editor.lua("return _G.offered"), what="the model list")
    print(offered)
    # The daemon's list (with its names), then what setup names besides.
    assert offered[0] == "deepseek-v4-flash  DeepSeek V4 Flash  (current)"
    assert "deepseek-v4-pro  DeepSeek V4 Pro" in offered and offered[-1] == "setup-only-model"


def test_dsh_edits_labels_the_rewind_apart_from_the_edit(editor: Editor, fake: FakeDeepSeek) -> None:
    target = editor.paths.work / "b.py"
    target.write_text("x = 1\ny = 2\n")
    fake.script(edit_call(target, "x = 1", "x = 2"), text_reply("Changed x."))
    editor.lua("vim.fn.confirm = function() return 1 end")  # the rewind: files and conversation
    editor.cmd("edit b.py")
    editor.cmd("Dsh set x to 2")
    permission_float(editor)
    answer(editor, "gy")
    editor.wait(lambda: permission_floats(editor) == [], what="the float to close")
    editor.wait_footers(1)
    editor.cmd("DshRewind")
    editor.wait(lambda: target.read_text() == "x = 1\ny = 2\n", what="the file rewound")
    editor.cmd("DshEdits")
    qf = editor.lua("return vim.tbl_map(function(e) return e.text end, vim.fn.getqflist())")
    assert qf == ["dsh: edit b.py", "dsh: rewind b.py"]


def test_the_readme_has_one_lazy_spec_and_its_statusline_snippet_loads_nothing(
    nvim_bin: str, paths: Paths, fake: FakeDeepSeek
) -> None:
    readme = (PLUGIN / "README.md").read_text()
    assert readme.count("name = 'dsh.nvim'") == 1  # one recommended lazy.nvim spec
    section = readme[readme.index("### Status line") :]
    snippet = re.search(r"```lua\n(.*?)```", section, re.S)
    assert snippet is not None and "dsh_status" in snippet.group(1)
    # As a person's config that only installs the plugin, with the README's status line.
    editor = Editor(
        nvim_bin, paths, fake.base_url, setup=False, extra=snippet.group(1) + "\nvim.o.laststatus = 2"
    )
    try:
        editor.cmd("redrawstatus!")
        editor.cmd("redraw!")
        loaded = editor.lua(
            "local out = {} for name in pairs(package.loaded) do"
            " if name == 'dsh' or name:match('^dsh%.') then out[#out + 1] = name end end"
            " table.sort(out) return out"
        )
        # plugin/dsh.lua's command list and default keys only: not the plugin, nor its status module
        assert set(loaded) <= {"dsh.spec", "dsh.config"} and "dsh.spec" in loaded
        assert editor.lua("return vim.api.nvim_eval_statusline(vim.o.statusline, {}).str").strip() != ""
        editor.lua("require('dsh')")  # once the plugin is loaded, the component is its own
        assert editor.lua("return _G.dsh_status()") == ""  # (no chat of this project yet)
    finally:
        editor.quit()
