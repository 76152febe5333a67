"""Drive `dsh-daemon chat` in a real pseudo-terminal (tmux) and read the screen a person would see.

Each `Screen` has its own tmux server (a socket in the test's temp dir), so tests run in parallel.
Waits poll the screen until what is expected shows up; the time limit only bounds a failure."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.harness import ROOT

TMUX = shutil.which("tmux")
needs_tmux = pytest.mark.skipif(TMUX is None, reason="tmux is not installed (apt-get install tmux)")


class Screen:
    def __init__(self, tmp: Path, env: Mapping[str, str], args: list[str], *, cwd: Path,
                 width: int = 110, height: int = 36) -> None:  # fmt: skip
        assert TMUX is not None
        name = uuid.uuid4().hex[:8]  # one tmux server per screen, even in one test
        # a short path: a unix socket's path is limited to about 100 bytes
        self.socket = str(Path(tempfile.gettempdir(), f"dsh-tmux-{name}.sock"))
        command = [sys.executable, "-m", "dsh_daemon", *args]
        env = {**env, "TERM": "xterm-256color", "PYTHONPATH": str(ROOT)}
        exports = " ".join(f"{k}={_quote(v)}" for k, v in env.items() if k.isidentifier())
        script = tmp / f"run-chat-{name}.sh"
        script.write_text(
            f"cd {_quote(str(cwd))}\nexport {exports}\n{' '.join(map(_quote, command))}\n"
            'echo "[chat exited $?]"\nsleep 3600\n'
        )
        self.tmux(
            "new-session",
            "-d",
            "-x",
            str(width),
            "-y",
            str(height),
            "bash",
            "--noprofile",
            "--norc",
            str(script),
        )
        self.tmux("set-option", "-g", "history-limit", "5000")

    def tmux(self, *args: str) -> str:
        assert TMUX is not None
        done = subprocess.run([TMUX, "-S", self.socket, *args], capture_output=True, text=True, timeout=30)
        return done.stdout

    def screen(self) -> str:
        """The visible screen, one line per row."""
        return self.tmux("capture-pane", "-p")

    def everything(self) -> str:
        """Scrollback and screen, wrapped lines joined."""
        return self.tmux("capture-pane", "-p", "-J", "-S", "-")

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", *keys)

    def type(self, text: str) -> None:
        self.tmux("send-keys", "-l", text)

    def wait(self, what: str | Callable[[str], bool], *, whole: bool = True, limit_s: float = 60) -> str:
        test = (lambda text: what in text) if isinstance(what, str) else what
        deadline = time.monotonic() + limit_s
        while True:
            text = self.everything() if whole else self.screen()
            if test(text):
                return text
            if time.monotonic() > deadline:
                raise AssertionError(f"never saw {what!r}; the screen:\n{self.everything()}")
            time.sleep(0.1)

    def close(self) -> None:
        self.tmux("kill-server")
        Path(self.socket).unlink(missing_ok=True)


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def endless(pieces: list[str]) -> Reply:
    """A reply that streams `pieces` and then never finishes (until the client goes away)."""
    return Reply.stream(text_stream(pieces)[:-2], tail="stall")


def prompts(fake: FakeDeepSeek) -> list[str]:
    """The last user message of each model request."""
    return [
        next(m["content"] for m in reversed(r.json["messages"]) if m["role"] == "user") for r in fake.requests
    ]


def status_line(screen: Screen) -> str:
    return next(line for line in reversed(screen.screen().splitlines()) if line.strip())
