"""Plugin conventions (issue 22 item 7): plugin/dsh.lua defines the commands and <Plug> mappings
without loading the plugin (setup() optional), default keys never shadow anything, the chat's keys
leave common Vim keys alone and `?` lists them, doc/tags and the README cover every command and
option, :DshToggle, a float layout, and the status line component."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.neovim.harness import PLUGIN, Editor, Paths

COMMANDS = {
    "Dsh",
    "DshNew",
    "DshToggle",
    "DshSteer",
    "DshInject",
    "DshQueue",
    "DshStop",
    "DshWake",
    "DshSessions",
    "DshResume",
    "DshOlder",
    "DshRename",
    "DshDelete",
    "DshAddFile",
    "DshEdits",
    "DshPermission",
    "DshReview",
    "DshMode",
    "DshModel",
    "DshRewind",
    "DshFork",
    "DshPlan",
    "DshSandbox",
    "DshProcesses",
    "DshTrust",
    "DshReviewList",
    "DshReviewDismiss",
    "DshDiff",
    "DshDiffUndo",
    "DshDiffKeep",
    "DshNewWorktree",
    "DshWorktree",
    "DshAgents",
    "DshCost",
}

USER_MAP = "vim.keymap.set('x', '<leader>Di', ':echo \"mine\"<CR>')"


def test_startup_defines_commands_and_plugs_without_loading_the_plugin(
    nvim_bin: str, paths: Paths, fake: FakeDeepSeek
) -> None:
    editor = Editor(nvim_bin, paths, fake.base_url, setup=False, extra=USER_MAP)
    try:
        editor.wait(lambda: editor.lua("return vim.fn.maparg('<leader>Ds', 'x')") != "", what="default keys")
        loaded = editor.lua(
            "local out = {} for name in pairs(package.loaded) do"
            " if name == 'dsh' or name:match('^dsh%.') then out[#out + 1] = name end end"
            " table.sort(out) return out"
        )
        assert loaded == ["dsh.config", "dsh.spec"]  # nothing else until a command is used
        commands = editor.lua("return vim.tbl_keys(vim.api.nvim_get_commands({}))")
        assert {c for c in commands if c.startswith("Dsh")} == COMMANDS
        plugs = editor.lua(
            "return vim.tbl_map(function(lhs) return vim.fn.maparg(lhs, lhs:find('steer') and 'x' or 'n') ~= '' end,"
            " {'<Plug>(dsh-steer)', '<Plug>(dsh-toggle)', '<Plug>(dsh-permission)', '<Plug>(dsh-open)'})"
        )
        assert plugs == [True, True, True, True]
        keys = editor.lua(
            "return {steer = vim.fn.maparg('<leader>Ds', 'x'), inject = vim.fn.maparg('<leader>Di', 'x'),"
            " attach = vim.fn.maparg('<leader>Da', 'x'), old = vim.fn.maparg('<leader>ds', 'x')}"
        )
        assert keys["steer"] == "<Plug>(dsh-steer)" and keys["attach"] == "<Plug>(dsh-attach)"
        assert keys["inject"] == ':echo "mine"<CR>'  # the person's own mapping is never shadowed
        assert keys["old"] == ""  # nothing under <leader>d (debuggers use it)
        # The first command sets the plugin up with the defaults.
        editor.cmd("DshNew")
        editor.wait(lambda: editor.lua("return vim.b.dsh_kind") == "input", what="a draft chat")
        assert editor.lua("return require('dsh').did_setup") is True
        assert editor.lua("return #vim.fn.win_findbuf(T.chat().buf)") == 1
        editor.cmd("DshToggle")
        assert editor.lua("return #vim.fn.win_findbuf(T.chat().buf)") == 0
        editor.cmd("DshToggle")
        editor.wait(lambda: editor.lua("return #vim.fn.win_findbuf(T.chat().buf)") == 1, what="shown again")
    finally:
        editor.close()


def test_help_tags_and_the_readme_cover_every_command_and_option(nvim_bin: str, tmp_path: Path) -> None:
    doc = PLUGIN / "doc"
    copy = tmp_path / "doc"
    shutil.copytree(doc, copy)
    (copy / "tags").unlink()
    subprocess.run(
        [nvim_bin, "--headless", "-u", "NONE", "-i", "NONE", "-n", "-c", f"helptags {copy}", "-c", "qa!"],
        check=True,
        timeout=60,
        capture_output=True,
    )
    shipped = (doc / "tags").read_text()
    assert shipped == (copy / "tags").read_text(), "doc/tags is stale: run :helptags editors/neovim/doc"
    tags = {line.split("\t")[0] for line in shipped.splitlines()}
    assert {":" + c for c in COMMANDS} <= tags
    config = (PLUGIN / "lua" / "dsh" / "config.lua").read_text()
    defaults = config[config.index("M.defaults = {") : config.index("\n}\n", config.index("M.defaults = {"))]
    options = re.findall(r"^  (\w+) = ", defaults, re.M)
    assert len(options) >= 20
    assert {f"dsh-option-{o}" for o in options} <= tags, sorted({f"dsh-option-{o}" for o in options} - tags)
    for plug in ("steer", "inject", "attach", "open", "toggle", "permission", "sessions", "queue", "stop"):
        assert f"<Plug>(dsh-{plug})" in tags
    readme = (PLUGIN / "README.md").read_text()
    spec = re.search(r"cmd = \{([^}]*)\}", readme)
    assert spec is not None
    assert set(re.findall(r"'(\w+)'", spec.group(1))) == COMMANDS
    assert "editors/neovim" in readme and "rtp:append(plugin.dir .. '/editors/neovim')" in readme


def chat_maps(editor: Editor, kind: str) -> dict[str, str]:
    return editor.lua(
        "local buf = ... == 'chat' and T.chat().buf or T.chat().input local out = {}"
        " for _, m in ipairs(vim.api.nvim_buf_get_keymap(buf, 'n')) do out[m.lhs] = m.desc or '' end return out",
        kind,
    )


def test_chat_keys_leave_common_vim_keys_alone_and_question_mark_lists_them(editor: Editor) -> None:
    editor.cmd("DshNew")
    editor.wait(lambda: editor.lua("return vim.b.dsh_kind") == "input", what="the chat")
    transcript, inp = chat_maps(editor, "chat"), chat_maps(editor, "input")
    for common in ("gq", "gr", "go", "<CR>", "gg", "dd", "u", "p"):
        assert common not in transcript, common
    assert "<CR>" in inp and "gq" not in inp and "gr" not in inp  # <CR> sends from the input only
    assert {"\\q", "\\r", "\\o", "\\p", "\\y", "\\a", "K", "]k", "[k", "?"} <= set(transcript)
    editor.lua("vim.api.nvim_set_current_win(vim.fn.win_findbuf(T.chat().buf)[1])")
    editor.keys("?")
    help_float = editor.wait(
        lambda: next((f for f in editor.floats() if f["kind"] == "help"), None), what="the key list"
    )
    text = "\n".join(help_float["lines"])
    for needle in ("\\q ", "edit the queue", "K ", "expand the tool card", "]k ", "<C-s>", "\\Ds", "gy once"):
        assert needle in text, needle
    editor.keys("q")
    editor.wait(lambda: not any(f["kind"] == "help" for f in editor.floats()), what="closed")
    # The keys table changes them.
    editor.lua(
        "local o = vim.deepcopy(require('dsh.config').options); o.keys.chat.queue = 'Q'; o.keys.chat.help = false;"
        " require('dsh').setup(o)"
    )
    editor.lua("vim.api.nvim_buf_delete(T.chat().buf, {force = true})")
    editor.cmd("DshNew")
    editor.wait(lambda: "Q" in chat_maps(editor, "chat"), what="the new key")
    maps = chat_maps(editor, "chat")
    assert "\\q" not in maps and "?" not in maps


def test_float_layout_toggle_and_the_status_line_component(editor: Editor, fake: FakeDeepSeek) -> None:
    assert editor.lua("return require('dsh').status()") == ""
    editor.lua("require('dsh.config').options.layout = 'float'")
    fake.script(Reply.stream(text_stream(["on it"])[:2], tail="stall"))
    editor.cmd("Dsh go")
    editor.wait_text("on it")
    floats = {f["kind"] or f["filetype"]: f for f in editor.floats()}
    chat_floats = [f for f in editor.floats() if f["filetype"] == "markdown"]
    assert len(chat_floats) == 2 and any(f["current"] for f in chat_floats), floats  # transcript + input
    assert editor.lua("return #vim.api.nvim_tabpage_list_wins(0)") == 3  # the editor's window + 2 floats
    editor.cmd("Dsh and then this")
    editor.wait(lambda: editor.pending() == 1, what="queued")
    status = editor.lua("return require('dsh').status()")
    assert status.startswith("dsh ● running") and "1 queued" in status
    editor.cmd("DshToggle")
    assert [f for f in editor.floats() if f["filetype"] == "markdown"] == []
    assert editor.lua("return require('dsh').status()").startswith("dsh ● running")  # hidden, still there
    editor.cmd("DshToggle")
    editor.wait(
        lambda: len([f for f in editor.floats() if f["filetype"] == "markdown"]) == 2, what="shown again"
    )
    editor.cmd("DshStop!")
    editor.wait(lambda: editor.status() == "idle", what="stopped")
    editor.wait(lambda: editor.lua("return require('dsh').status()").startswith("dsh ○ idle"), what="idle")
