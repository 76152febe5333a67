"""Optional (issue 24.7): the README's CodeCompanion.nvim snippet, as written there, in a real headless
Neovim with CodeCompanion's sources, talking to the real `dsh-daemon acp` (on PATH from the venv),
which talks to the fake DeepSeek server. Issue 39's checks run there too: the mode picked in
CodeCompanion's session-options picker, an idle `\\queue` streaming inside its prompt, and the model
choice across a second chat's /resume (another process taking the session over) and back.

CodeCompanion and plenary.nvim are not dependencies of this project and CI cannot download them: the
test is skipped unless their sources are in `tests/neovim/.deps/` (or `$DSH_CODECOMPANION_DEPS`):

    git clone https://github.com/olimorris/codecompanion.nvim tests/neovim/.deps/codecompanion.nvim
    git clone https://github.com/nvim-lua/plenary.nvim tests/neovim/.deps/plenary.nvim
    bash scripts/setup-neovim.sh
    .venv/bin/python -m pytest tests/neovim/test_codecompanion.py

(Any checkout works, e.g. `DSH_CODECOMPANION_DEPS=/some/dir` holding both; last run against
codecompanion.nvim 19.22.0, f1afd025, and plenary.nvim b9fd522.)
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.neovim.harness import find_nvim

ROOT = Path(__file__).resolve().parents[2]
DEPS = Path(os.environ.get("DSH_CODECOMPANION_DEPS") or Path(__file__).with_name(".deps"))
PLUGINS = (DEPS / "codecompanion.nvim", DEPS / "plenary.nvim")

pytestmark = pytest.mark.slow

# After the README's setup: open a chat with one message, wait for the answer, write what the chat
# buffer shows (and what was notified) to $DSH_CC_OUT, quit.
DRIVER = r"""
local notified = {}
vim.notify = function(msg, level) table.insert(notified, tostring(msg)) end
local out = os.getenv("DSH_CC_OUT")
local function dump(state)
  local chat = require("codecompanion").last_chat()
  local lines = chat and vim.api.nvim_buf_get_lines(chat.bufnr, 0, -1, false) or {}
  -- What CodeCompanion's model picker and its "/" completion offer for this chat.
  local connection = chat and chat.acp_connection
  local models = connection and connection.session_id and connection:get_models() or vim.NIL
  local commands = {}
  local registry = require("codecompanion.interactions.chat.acp.commands")
  for _, command in ipairs(connection and registry.get_commands_for_session(connection.session_id) or {}) do
    table.insert(commands, command.name)
  end
  local f = assert(io.open(out, "w"))
  f:write(vim.json.encode({ state = state, lines = lines, notified = notified, models = models, commands = commands }))
  f:close()
end
local function run()
  -- As a person does: open the chat, wait for it to connect, type the message, submit it. (Opening
  -- a chat with a message to auto-submit races CodeCompanion's own connect: two sessions are made
  -- and the answer may land in the one the chat does not show.)
  local chat = require("codecompanion").chat()
  local wait = tonumber(os.getenv("DSH_CC_WAIT_MS"))
  vim.wait(wait, function() return chat.acp_connection ~= nil and chat.acp_connection.session_id ~= nil end, 50)
  local last = vim.api.nvim_buf_line_count(chat.bufnr)
  vim.api.nvim_buf_set_lines(chat.bufnr, last, last, false, { "say hello" })
  chat:submit()
  local expect = os.getenv("DSH_CC_EXPECT")
  local ok = vim.wait(wait, function()
    local text = table.concat(vim.api.nvim_buf_get_lines(chat.bufnr, 0, -1, false), "\n")
    return text:find(expect, 1, true) ~= nil
  end, 100)
  dump(ok and "answered" or "timeout")
  vim.cmd("qa!")
end
-- Once Neovim has started (CodeCompanion finishes its own setup on VimEnter).
vim.api.nvim_create_autocmd("VimEnter", { once = true, callback = function() vim.schedule(run) end })
"""


def readme_snippet() -> str:
    """The README's CodeCompanion setup, exactly as a person would copy it."""
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```lua\n(.*?)```", text, re.S)
    (snippet,) = [b for b in blocks if 'require("codecompanion").setup' in b]
    return snippet


def run_codecompanion(
    tmp_path: Path,
    fake: FakeDeepSeek,
    key: str | None,
    base_url: str | None = None,
    wait_ms: int = 45_000,
    driver: str = DRIVER,
) -> dict[str, Any]:
    nvim, why = find_nvim()
    if nvim is None:
        pytest.skip(f"Neovim: {why} (bash scripts/setup-neovim.sh)")
    missing = [str(p) for p in PLUGINS if not (p / "lua").is_dir()]
    if missing:
        pytest.skip(f"CodeCompanion sources absent: {', '.join(missing)} (see this file's docstring)")
    home = tmp_path / "home"
    work = tmp_path / "work"
    for path in (home, work):
        path.mkdir(parents=True, exist_ok=True)
    rtp = "\n".join(f"vim.opt.runtimepath:prepend({json.dumps(str(p))})" for p in PLUGINS)
    init = tmp_path / "init.lua"
    init.write_text(f"{rtp}\n{readme_snippet()}\n{driver}")
    out = tmp_path / "out.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DEEPSEEK_", "DSH_"))}
    env.update(
        {
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_DATA_HOME": str(home / ".local/share"),
            "XDG_STATE_HOME": str(home / ".local/state"),
            "XDG_CACHE_HOME": str(home / ".cache"),
            "DSH_HOME": str(tmp_path / "dsh"),
            "DEEPSEEK_BASE_URL": base_url or fake.base_url,
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            "PYTHONPATH": str(ROOT),
            "DSH_CC_OUT": str(out),
            "DSH_CC_EXPECT": "Hello from dsh",
            "DSH_CC_WAIT_MS": str(wait_ms),
        }
    )
    if key is not None:
        env["DEEPSEEK_API_KEY"] = key
    ran = subprocess.run(
        [nvim, "--headless", "-i", "NONE", "-u", str(init)],
        cwd=work,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=180,
        check=False,
    )
    assert out.exists(), "Neovim ended before the driver wrote what the chat shows"
    result: dict[str, Any] = json.loads(out.read_text())
    result["stderr"] = ran.stderr.decode(errors="replace")[-3000:]
    return result


def test_the_readme_snippet_chats_without_passing_a_made_up_key(tmp_path: Path, fake: FakeDeepSeek) -> None:
    """DEEPSEEK_API_KEY unset in Neovim: the agent gets no key at all (the old snippet sent the text
    "DEEPSEEK_API_KEY" as one). A local endpoint takes none, so the chat is answered."""
    fake.script(Reply.stream(text_stream(["Hello from dsh!"])))
    shown = run_codecompanion(tmp_path, fake, key=None)
    assert shown["state"] == "answered", shown
    assert any("Hello from dsh!" in line for line in shown["lines"])
    (request,) = fake.requests
    assert "authorization" not in request.headers, request.headers
    assert [m["content"] for m in request.json["messages"] if m["role"] == "user"] == ["say hello"]


def test_the_readme_snippet_passes_the_key_neovim_has(tmp_path: Path, fake: FakeDeepSeek) -> None:
    fake.script(Reply.stream(text_stream(["Hello from dsh!"])))
    shown = run_codecompanion(tmp_path, fake, key="sk-from-neovims-env")
    assert shown["state"] == "answered", shown
    (request,) = fake.requests
    assert request.headers["authorization"] == "Bearer sk-from-neovims-env"
    # Its model picker lists the session's models (ACP configOptions, category "model"), and "/"
    # completes dsh's slash commands (available_commands_update).
    models = shown["models"]
    assert models["currentModelId"] == "deepseek-v4-flash"
    assert [m["modelId"] for m in models["availableModels"]] == ["deepseek-v4-flash", "deepseek-v4-pro"]
    assert {"queue", "steer", "wake", "compact", "model"} <= set(shown["commands"]), shown["commands"]


def test_without_a_key_codecompanion_says_what_to_set(tmp_path: Path, fake: FakeDeepSeek) -> None:
    """DeepSeek's own API needs a key: CodeCompanion's authenticate is refused with words naming the
    variable, and nothing reaches any provider."""
    # Nothing will answer: the chat is given a few seconds to show what it shows.
    shown = run_codecompanion(tmp_path, fake, key=None, base_url="https://api.deepseek.com", wait_ms=5000)
    assert fake.requests == []
    assert [line for line in shown["lines"] if line.strip()] == ["## Me", "say hello"]  # no answer
    said = "\n".join(shown["notified"])
    assert "auth_required" in said and "No DeepSeek API key: set DEEPSEEK_API_KEY" in said, shown


# Issue 39 as a person does it in CodeCompanion: pick the mode in its session-options picker (ACP
# config options), chat, queue a prompt with its `\queue` command, then open a second chat, resume
# the first chat's session there (/resume: another dsh-daemon process takes it over), chat, switch
# the model there, and go back to the first chat. Each picker's vim.ui.select answers as the person
# would; what each chat shows is written to $DSH_CC_OUT.
LUA_HELPERS = r"""
local out = os.getenv("DSH_CC_OUT")
local wait = tonumber(os.getenv("DSH_CC_WAIT_MS"))
local ACP = require("codecompanion.acp")
local SessionOptions = require("codecompanion.interactions.chat.slash_commands.builtin.acp_session_options")
local Resume = require("codecompanion.interactions.chat.slash_commands.builtin.resume")
local notified, report = {}, { steps = {} }
vim.notify = function(msg) table.insert(notified, tostring(msg)) end
local function text_of(chat) return table.concat(vim.api.nvim_buf_get_lines(chat.bufnr, 0, -1, false), "\n") end
local function step(name, ok) table.insert(report.steps, { name, ok }) return ok end
local function connected(chat)
  return vim.wait(wait, function() return chat.acp_connection ~= nil and chat.acp_connection.session_id ~= nil end, 50)
end
local function option(chat, id)
  for _, o in ipairs(chat.acp_connection:get_config_options()) do if o.id == id then return o end end
end
-- The next vim.ui.select answers with the entry `choose(items)` names (a person's pick).
local function answer_next_select(choose)
  local original = vim.ui.select
  vim.ui.select = function(items, _, on_choice)
    vim.ui.select = original
    local index = choose(items)
    on_choice(index and items[index] or nil, index)
  end
end
-- In the session-options picker of CodeCompanion (`/acp_session_options`), set option `id` to `value`.
local function pick(chat, id, value)
  local opt = option(chat, id)
  answer_next_select(function()
    for i, v in ipairs(ACP.flatten_config_options(opt.options or {})) do if v.value == value then return i end end
  end)
  SessionOptions.new({ Chat = chat }):show_values(opt)
  return option(chat, id).currentValue
end
-- Type a message, submit it, wait for `expect` in the chat and for the request to end.
local function send(chat, typed, expect)
  local last = vim.api.nvim_buf_line_count(chat.bufnr)
  vim.api.nvim_buf_set_lines(chat.bufnr, last, last, false, { typed })
  chat:submit()
  return step(typed, vim.wait(wait, function()
    return chat.current_request == nil and text_of(chat):find(expect, 1, true) ~= nil
  end, 50))
end
"""
# Runs `run()` once Neovim has started, then writes `report` to $DSH_CC_OUT and quits.
LUA_MAIN = r"""
vim.api.nvim_create_autocmd("VimEnter", { once = true, callback = function()
  vim.schedule(function()
    local ok, err = pcall(run)
    report.error = not ok and tostring(err) or nil
    report.notified = notified
    local f = assert(io.open(out, "w"))
    f:write(vim.json.encode(report))
    f:close()
    vim.cmd("qa!")
  end)
end })
"""

ISSUE_39_DRIVER = (
    LUA_HELPERS
    + r"""
local function run()
  local first = require("codecompanion").chat()
  if not step("first connected", connected(first)) then return end
  report.modeOffered = option(first, "mode") and option(first, "mode").type
  report.optionTypes = {}
  for _, o in ipairs(first.acp_connection:get_config_options()) do report.optionTypes[o.id] = o.type end
  report.modePicked = pick(first, "mode", "plan")
  report.modelPicked = pick(first, "model", "deepseek-v4-pro")
  if not send(first, "say hello", "Hello from dsh") then return end
  -- \queue is CodeCompanion's trigger for the agent's /queue; idle, its turn streams inside it.
  if not send(first, "\\queue hello queued", "queued reply") then return end
  report.firstAfterQueue = text_of(first)

  local second = require("codecompanion").chat()
  if not step("second connected", connected(second)) then return end
  local own = second.acp_connection.session_id
  answer_next_select(function(items)
    report.resumeOffered = items -- what the person is offered to resume
    for i, item in ipairs(items) do if not item:find(own, 1, true) then return i end end
  end)
  Resume.new({ Chat = second, config = {} }):execute()
  report.resumed = second.acp_connection.session_id == first.acp_connection.session_id
  report.secondModel = second.acp_connection:get_models().currentModelId
  report.secondMode = option(second, "mode").currentValue
  if not send(second, "from the second chat", "second reply") then return end
  report.secondPicked = pick(second, "model", "deepseek-v4-flash")
  step("first's picker follows", vim.wait(wait, function()
    return first.acp_connection:get_models().currentModelId == "deepseek-v4-flash"
  end, 50))
  report.firstModelAfter = first.acp_connection:get_models().currentModelId
  send(first, "back in the first chat", "first again")
  report.firstEnd = text_of(first)
end
"""
    + LUA_MAIN
)


def test_issue_39_mode_picker_queue_inside_its_prompt_and_the_model_across_a_takeover(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """Issue 39's "done when" in CodeCompanion: (1) the mode switched through its config-option
    picker takes effect; (2) every option is a select it can show; (3) an idle `\\queue` streams its turn inside its own prompt (CodeCompanion
    drops updates outside one, so the reply would not show otherwise); (5) a second chat resuming the
    session (another process takes it over) shows and uses the first chat's model, its model change
    reaches the first chat's picker, and the first chat, taking the session back, uses it; (9) /resume
    offers only the chat with work in it."""
    from tests.acp.test_modes import READ_ONLY

    fake.script(
        Reply.stream(text_stream(["Hello from dsh!"])),
        Reply.stream(text_stream(["queued reply"])),
        Reply.stream(text_stream(["second reply"])),
        Reply.stream(text_stream(["first again"])),
    )
    shown = run_codecompanion(tmp_path, fake, key="sk-test", driver=ISSUE_39_DRIVER, wait_ms=30_000)
    failed = [name for name, ok in shown["steps"] if not ok]
    assert shown.get("error") is None and failed == [], {
        k: shown.get(k) for k in ("error", "steps", "notified", "stderr")
    }
    bodies = [r.json for r in fake.requests]
    users = [[m["content"] for m in b["messages"] if m["role"] == "user"][-1] for b in bodies]
    assert users == ["say hello", "hello queued", "from the second chat", "back in the first chat"]
    # 1: the mode picked in the session-options picker is in effect (plan mode's tools).
    assert shown["modeOffered"] == "select" and shown["modePicked"] == "plan"
    assert {t["function"]["name"] for t in bodies[0]["tools"]} == READ_ONLY
    # 2: CodeCompanion takes no boolean option: every option, thinking included, is a select it can show.
    assert shown["optionTypes"] == dict.fromkeys(
        ["mode", "model", "thinking", "reasoning_effort", "sandbox"], "select"
    )
    # 3: the queued turn's reply is in the first chat (it streamed inside the \queue prompt).
    assert "queued reply" in shown["firstAfterQueue"]
    assert "after the current turn" not in shown["firstAfterQueue"]
    # 5: the model choice is the session's, across the take-over and back.
    assert shown["modelPicked"] == "deepseek-v4-pro" and shown["resumed"] is True
    # 9: /resume offers the chat with work in it, not the second chat's own empty session.
    assert len(shown["resumeOffered"]) == 1 and shown["resumeOffered"][0].endswith("say hello")
    assert (shown["secondModel"], shown["secondMode"]) == ("deepseek-v4-pro", "plan")
    assert shown["secondPicked"] == shown["firstModelAfter"] == "deepseek-v4-flash"
    assert [b["model"] for b in bodies] == ["deepseek-v4-pro"] * 3 + ["deepseek-v4-flash"]
    assert "first again" in shown["firstEnd"]


CANCEL_THEN_COMMAND_DRIVER = (
    LUA_HELPERS
    + r"""
local function run()
  local chat = require("codecompanion").chat()
  if not step("connected", connected(chat)) then return end
  -- What CodeCompanion writes to the agent: its prompts' blocks, to see the re-sent text.
  local connection, write = chat.acp_connection, chat.acp_connection.write_message
  report.prompts = {}
  connection.write_message = function(self, data)
    for line in data:gmatch("[^\n]+") do
      local message = vim.json.decode(line)
      if message.method == "session/prompt" then table.insert(report.prompts, message.params.prompt) end
    end
    return write(self, data)
  end
  local last = vim.api.nvim_buf_line_count(chat.bufnr)
  vim.api.nvim_buf_set_lines(chat.bufnr, last, last, false, { "refactor the parser" })
  chat:submit()
  if not step("working", vim.wait(wait, function() return text_of(chat):find("working", 1, true) ~= nil end, 50)) then
    return
  end
  chat:stop()
  step("stopped", vim.wait(wait, function()
    return chat.current_request == nil and vim.bo[chat.bufnr].modifiable
  end, 50))
  send(chat, "\\rename Parser work", "Renamed")
  report.title = chat.title
  report.text = text_of(chat)
end
"""
    + LUA_MAIN
)


def test_issue_39_a_command_typed_after_a_cancel_is_run_not_sent_to_the_model(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """Issue 39.4 in CodeCompanion: after a cancel it sends the cancelled text again ahead of what
    the person types next; the `\\rename` typed then is run as the command, and nothing reaches the
    model for it."""
    from tests.acp.test_prompt import stalled

    fake.script(stalled("working"))
    shown = run_codecompanion(
        tmp_path, fake, key="sk-test", driver=CANCEL_THEN_COMMAND_DRIVER, wait_ms=30_000
    )
    failed = [name for name, ok in shown["steps"] if not ok]
    assert shown.get("error") is None and failed == [], {
        k: shown.get(k) for k in ("error", "steps", "notified", "stderr")
    }
    # CodeCompanion sent the cancelled text again as the first block, the command after it.
    resent = [[b.get("text", "").strip() for b in prompt] for prompt in shown["prompts"]]
    assert resent[0] == ["refactor the parser"] and resent[1][0] == "refactor the parser", resent
    assert resent[1][-1] == "/rename Parser work"
    assert len(fake.requests) == 1  # the cancelled turn's; the command reached no model
    assert shown["title"] == "Parser work"
