"""Optional (issue 24.7): the README's CodeCompanion.nvim snippet, as written there, in a real headless
Neovim with CodeCompanion's sources, talking to the real `dsh-daemon acp` (on PATH from the venv),
which talks to the fake DeepSeek server.

CodeCompanion and plenary.nvim are not dependencies of this project and CI cannot download them: the
test is skipped unless their sources are in `tests/neovim/.deps/` (or `$DSH_CODECOMPANION_DEPS`):

    git clone https://github.com/olimorris/codecompanion.nvim tests/neovim/.deps/codecompanion.nvim
    git clone https://github.com/nvim-lua/plenary.nvim tests/neovim/.deps/plenary.nvim
    bash scripts/setup-neovim.sh
    .venv/bin/python -m pytest tests/neovim/test_codecompanion.py
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
    init.write_text(f"{rtp}\n{readme_snippet()}\n{DRIVER}")
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
        timeout=120,
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
