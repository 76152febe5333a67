"""The sandbox in Neovim (issue 41.5) over the real daemon: the status line component shows the mode
and the level the daemon reports (and the README's snippet loads nothing at start-up), :DshSandbox
changes the mode through workspace/didChangeConfiguration (full-access only once confirmed),
:checkhealth says what this machine gives, and a widening the agent asks for is a permission prompt
naming the reason and the exact widening, with its answers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dsh_daemon.sandbox.level import probe_level
from tests.fakes.deepseek_server import FakeDeepSeek, Reply
from tests.neovim.harness import Editor, Paths
from tests.neovim.test_tools import permission_float, permission_floats
from tests.server.harness import text_reply, tool_call_stream

pytestmark = pytest.mark.skipif(
    not probe_level().confined, reason=f"no confinement on this machine: {probe_level().describe()}"
)

# The README's snippet (editors/neovim/README.md "Status line"): through package.loaded, so drawing
# the status line never loads the plugin.
SNIPPET = """
function _G.dsh_status()
  local dsh = package.loaded['dsh']
  return dsh and dsh.statusline() or ''
end
vim.o.statusline = "%f %= %{%v:lua.dsh_status()%} "
"""


def confined(paths: Paths, **sandbox: Any) -> None:
    """Commands run in workspace-write (the harness's default is full-access)."""
    (paths.state / "config.json").write_text(
        json.dumps({"tools": {"sandbox": {"mode": "workspace-write", **sandbox}}})
    )


def statusline(editor: Editor) -> str:
    return editor.lua("return vim.api.nvim_eval_statusline(vim.o.statusline, {maxwidth = 400}).str")


def raw_statusline(editor: Editor) -> str:
    return editor.lua("return require('dsh').statusline()")


def sandbox_of(editor: Editor) -> dict[str, Any] | None:
    return editor.lua("local c = T.chat() return c and c.state.sandbox or vim.NIL")


def run(call_id: str, command: str, **extra: Any) -> Reply:
    return Reply.stream(tool_call_stream([(call_id, "run_command", {"command": command, **extra})]))


def setup_lua(editor: Editor, base_url: str) -> None:
    log = str(editor.paths.tmp / "daemon.log")
    editor.lua(
        "local exe, log, url = ... require('dsh').setup { cmd = { exe, '-m', 'dsh_daemon', '--log-file', log },"
        " init_options = { baseUrl = url, apiKey = 'sk-test-secret-key-0000', thinking = false } }",
        sys.executable,
        log,
        base_url,
    )


def test_the_status_line_shows_the_mode_and_level_and_dsh_sandbox_changes_the_mode(
    nvim_bin: str, paths: Paths, fake: FakeDeepSeek
) -> None:
    confined(paths)
    editor = Editor(nvim_bin, paths, fake.base_url, setup=False, extra=SNIPPET)
    try:
        editor.cmd("edit notes.txt")
        assert statusline(editor).strip() == "notes.txt"
        loaded = editor.lua(
            "local out = {} for name in pairs(package.loaded) do"
            " if name == 'dsh' or name:match('^dsh%.') then out[#out + 1] = name end end"
            " table.sort(out) return out"
        )
        assert loaded == ["dsh.config", "dsh.spec"]  # drawing the status line loaded nothing
        setup_lua(editor, fake.base_url)
        fake.script(text_reply("Hello."), run("call_w", "echo x > written.txt"), text_reply("Could not."))
        editor.cmd("Dsh hi")
        editor.wait_footers(1)
        level = probe_level().describe()
        editor.wait(
            lambda: (sandbox_of(editor) or {}).get("mode") == "workspace-write", what="sandbox/status"
        )
        line = editor.wait(lambda: "⛨" in statusline(editor) and statusline(editor), what="the sandbox shown")
        assert "dsh ○ idle · " in line
        assert line.rstrip().endswith(f" · ⛨ workspace-write · {level}")
        assert editor.lua("return require('dsh').status()").endswith(f" · ⛨ workspace-write · {level}")
        assert "⚠" not in editor.snapshot()["winbar"]

        # A mode typed: sent as workspace/didChangeConfiguration; the daemon answers with its status.
        editor.cmd("DshSandbox read-only")
        editor.wait(lambda: (sandbox_of(editor) or {}).get("mode") == "read-only", what="read-only")
        assert "⛨ read-only · " in statusline(editor)
        editor.cmd("Dsh write a file")
        editor.wait_footers(2)
        # The daemon runs commands read-only now: the write was refused by the sandbox.
        assert not (paths.work / "written.txt").exists()
        row = next(i for i, line in enumerate(editor.lines()) if line.startswith("⚙ run_command"))
        (card,) = [c for c in editor.snapshot()["cards"] if c["row"] == row]
        assert "SANDBOX_DENIED" in card["text"]

        # full-access is confirmed first, whichever way it is chosen; cancelling changes nothing.
        editor.lua(
            "_G.asked = {} _G.answer = 2"
            " vim.fn.confirm = function(msg, choices) table.insert(_G.asked, {msg, choices}) return _G.answer end"
        )
        editor.cmd("DshSandbox full-access")
        (asked,) = editor.lua("return _G.asked")
        assert "UNCONFINED" in asked[0] and "every session of this daemon" in asked[0]
        assert asked[1] == "&Yes, full access\n&Cancel"
        editor.cmd("sleep 300m")
        assert (sandbox_of(editor) or {}).get("mode") == "read-only"
        editor.lua("_G.answer = 1")
        editor.cmd("DshSandbox full-access")
        editor.wait(lambda: (sandbox_of(editor) or {}).get("mode") == "full-access", what="full-access")
        assert "%#DshSandboxWarn#⚠ sandbox full-access · unconfined%*" in raw_statusline(editor)
        assert "⚠ full-access" in editor.snapshot()["winbar"]
        # Without a mode: a choice of the three (the current one marked); full-access asks again.
        editor.lua(
            "_G.offered = nil vim.ui.select = function(items, opts, cb)"
            " _G.offered = {prompt = opts.prompt, items = vim.tbl_map(opts.format_item, items)}"
            " cb('workspace-write') end"
        )
        editor.cmd("DshSandbox")
        offered = editor.lua("return _G.offered")
        assert offered["prompt"].startswith("dsh sandbox — ⚠ sandbox full-access")
        assert [i.split()[0] for i in offered["items"]] == ["read-only", "workspace-write", "full-access"]
        assert offered["items"][2].endswith("(current)")
        editor.wait(lambda: (sandbox_of(editor) or {}).get("mode") == "workspace-write", what="back")
        assert len(editor.lua("return _G.asked")) == 2  # no confirmation to leave full-access
        # The chat shown again (its state reset): the attach reply's `sandbox` says where commands run.
        sid = editor.snapshot()["id"]
        editor.lua("T.chat().state.before_resume = true")
        editor.cmd(f"DshResume {sid}")
        editor.wait(
            lambda: editor.lua("local st = T.chat().state return not st.before_resume and st.last_seq > 0"),
            what="attached again",
        )
        assert (sandbox_of(editor) or {}).get("mode") == "workspace-write"
        # A daemon started again starts in the mode chosen (kept in init_options).
        assert (
            editor.lua("return require('dsh.config').options.init_options.tools.sandbox.mode")
            == "workspace-write"
        )
    finally:
        editor.close()


def test_a_machine_without_confinement_shows_commands_refused_and_checkhealth_says_why(
    start_editor: Any, paths: Paths, fake: FakeDeepSeek
) -> None:
    confined(paths)
    editor = start_editor()
    # The daemon's test-only knob: no layer may be used, as on a machine without Landlock.
    editor.lua("require('dsh.config').options.cmd_env = { DSH_SANDBOX_LAYERS = 'none' }")
    fake.script(text_reply("Hello."))
    editor.cmd("Dsh hi")
    editor.wait_footers(1)
    sb = editor.wait(lambda: sandbox_of(editor), what="sandbox/status")
    assert sb["available"] is False and sb["mode"] == "workspace-write"
    status = editor.lua("return require('dsh').status()")
    assert status.startswith("dsh ○ idle · ")
    assert " · ⚠ sandbox workspace-write · unconfined: commands refused (" in status
    assert "DSH_SANDBOX_LAYERS=none" in status  # the daemon's reason
    assert raw_statusline(editor).count("%#DshSandboxWarn#") == 1
    assert "⚠ no sandbox: commands refused" in editor.snapshot()["winbar"]

    editor.cmd("checkhealth dsh")
    text = "\n".join(editor.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)"))
    # What this machine gives, by the daemon's own check (the knob is the session's, not the machine's).
    check = subprocess.run(
        [sys.executable, "-m", "dsh_daemon", "sandbox", "check", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    machine = json.loads(check.stdout)
    assert "dsh: sandbox" in text
    if machine["namespaces"]:
        assert f"- ✅ OK this machine confines commands: {machine['description']}" in text
    else:
        assert f"commands are confined without namespaces (layer 1): {machine['description']}" in text
        assert machine["reasons"][0] in text
    assert (
        f"- ⚠️ WARNING running for {paths.work}: ⚠ sandbox workspace-write · unconfined: commands refused"
        in text
    )


def escalation_prompt(editor: Editor) -> dict[str, Any]:
    pf = permission_float(editor)
    assert not pf["current"]  # announced, never focused by itself
    return pf


def answer(editor: Editor, keys: str) -> None:
    editor.cmd("DshPermission")
    editor.wait(lambda: any(f["current"] for f in permission_floats(editor)), what="the prompt focused")
    editor.keys(keys)
    editor.wait(
        lambda: permission_floats(editor) == [] or not permission_floats(editor)[0]["current"],
        what="answered",
    )


RECORD_REPLIES = """
_G.replies = {}
local client = require('dsh.client')
local ask = client.on.permission
client.on.permission = function(root, ...)
  local reply = ask(root, ...)
  table.insert(_G.replies, reply)
  return reply
end
"""


def tool_messages(fake: FakeDeepSeek, request: int) -> list[str]:
    return [str(m["content"]) for m in fake.requests[request].json["messages"] if m["role"] == "tool"]


def test_a_widening_is_a_prompt_naming_the_reason_and_the_paths_and_allowed_for_the_session(
    editor: Editor, paths: Paths, fake: FakeDeepSeek, tmp_path: Path
) -> None:
    confined(paths)
    outside = tmp_path / "outside"
    outside.mkdir()
    widen = {
        "reason": "the build writes its cache there",
        "writable": [str(outside)],
        "network": ["pypi.org"],
    }
    fake.script(
        run("call_e1", f"echo one > {outside}/one.txt", escalate=widen),
        run("call_e2", f"echo two > {outside}/two.txt"),  # the session's widening holds: not asked
        text_reply("Both written."),
    )
    editor.lua(RECORD_REPLIES)
    editor.cmd("Dsh build it")
    pf = escalation_prompt(editor)
    lines = pf["lines"]
    # The answers: the daemon advertises persistWidening, so "Always (saved to config)" is offered.
    assert lines[:5] == [
        "  ▸ Allow once (this command)",
        "  ▸ Allow for this session",
        "  ▸ Always (saved to config)",
        "  ▸ Reject (nothing runs)",
        "  ▸ Cancel the turn (the queue is kept)",
    ]
    assert "Why: the build writes its cache there" in lines
    assert f"  + writable: {outside.resolve()}" in lines and "  + network:  pypi.org" in lines
    assert "For this session: every later command, widened so." in lines
    # What runs, why and the widening come first: the unfocused float shows only its top.
    first = lines.index("────────────────────────────────────────") + 1
    assert lines[first : first + 3] == [
        "Widen the sandbox (now workspace-write) to run:",
        f"$ echo one > {outside}/one.txt",
        "Why: the build writes its cache there",
    ]
    assert "Widen the sandbox" in pf["title"] and "gY session" in pf["footer"]
    assert not (outside / "one.txt").exists()
    answer(editor, "gY")
    editor.wait_footers(1)
    assert editor.lua("return _G.replies") == [{"outcome": "allow-always"}]
    assert (outside / "one.txt").read_text() == "one\n" and (outside / "two.txt").read_text() == "two\n"
    # What the model was told: both commands ran (the second without asking).
    told = tool_messages(fake, 2)
    assert "[exit code 0]" in told[0] and "[exit code 0]" in told[1]
    assert "Both written." in editor.lines()
    assert (
        f"⛨ sandbox widened for this session: writable: {outside.resolve()}; network: pypi.org"
        in editor.lines()
    )
    sb = editor.wait(
        lambda: (
            str(outside.resolve()) in ((sandbox_of(editor) or {}).get("writable") or [])
            and sandbox_of(editor)
        ),
        what="widened status",
    )
    assert sb["mode"] == "workspace-write"


def test_always_saved_to_config_is_offered_with_persist_widening_and_never_for_unconfined(
    editor: Editor, paths: Paths, fake: FakeDeepSeek, tmp_path: Path
) -> None:
    confined(paths)
    outside = tmp_path / "outside"
    outside.mkdir()
    fake.script(
        run("call_u", "id -u", escalate={"reason": "needs the real account", "unconfined": True}),
        run(
            "call_s",
            f"echo saved > {outside}/s.txt",
            escalate={"reason": "the cache", "writable": [str(outside)]},
        ),
        text_reply("Done."),
    )
    editor.lua(RECORD_REPLIES)  # the daemon advertises persistWidening itself
    editor.cmd("Dsh go")
    pf = escalation_prompt(editor)
    assert pf["lines"][:4] == [
        "  ▸ Allow once (this command)",
        "  ▸ Allow for this session",
        "  ▸ Reject (nothing runs)",
        "  ▸ Cancel the turn (the queue is kept)",
    ]
    assert "  + UNCONFINED: the command runs with no sandbox at all" in pf["lines"]
    assert "For this session: exactly this command, unconfined again." in pf["lines"]
    assert "saved" not in pf["footer"]
    answer(editor, "gn")  # reject
    pf = editor.wait(
        lambda: next(
            (f for f in permission_floats(editor) if any("the cache" in x for x in f["lines"])), None
        ),
        what="the second prompt",
    )
    assert pf["lines"][2] == "  ▸ Always (saved to config)"
    assert f"  + writable: {outside.resolve()}" in pf["lines"]
    assert "gA saved" in pf["footer"]
    editor.cmd("DshPermission")
    editor.wait(lambda: any(f["current"] for f in permission_floats(editor)), what="focused")
    editor.keys("gg")
    editor.keys("jj<CR>")  # <CR> on the "Always (saved to config)" line
    editor.wait_footers(1)
    assert editor.lua("return _G.replies") == [
        {"outcome": "reject"},
        {"outcome": "allow-always", "persist": True},
    ]
    assert (outside / "s.txt").read_text() == "saved\n"
    saved = json.loads((paths.state / "config.json").read_text())  # the daemon kept the widening
    assert str(outside.resolve()) in saved["tools"]["sandbox"]["writable"]
    told = tool_messages(fake, 2)
    assert "rejected" in told[0] and "[exit code 0]" in told[1]


def test_a_sandbox_notice_is_a_line_in_the_transcript(
    editor: Editor, paths: Paths, fake: FakeDeepSeek
) -> None:
    """A `.git` a command made at the root while commands could write there: the daemon protects it
    from then on and says so in a durable `session/notice {kind: "sandbox"}`, which is a line."""
    confined(paths)
    fake.script(run("call_g1", "mkdir .git"), run("call_g2", "true"), text_reply("Done."))
    editor.cmd("Dsh make a repository")
    editor.wait_footers(1)
    (line,) = [x for x in editor.lines() if x.startswith("⛨ ")]
    assert line.startswith(f"⛨ {paths.work.resolve()}/.git") and "It is protected from now on" in line, line
    assert (paths.work / ".git").is_dir()
