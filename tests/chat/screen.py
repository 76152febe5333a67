"""Drive `dsh-daemon chat` in a real pseudo-terminal (tmux) and read the screen a person would see.

Each `Screen` has its own tmux server (a socket in the test's temp dir), so tests run in parallel.
Waits poll the screen until what is expected shows up; the time limit only bounds a failure."""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import termios
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
        # ROOT after what the caller put on the path (the benchmark's stage tracer)
        path = os.pathsep.join(filter(None, (env.get("PYTHONPATH"), str(ROOT))))
        env = {**env, "TERM": "xterm-256color", "PYTHONPATH": path}
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

    # ---- what the program has read: to put keys in one read of the terminal, or in separate ones ----

    def program_pid(self) -> int:
        """The `dsh-daemon chat` process in the pane (a child of the pane's shell)."""
        shell = int(self.tmux("display-message", "-p", "#{pane_pid}").strip())
        for child in Path(f"/proc/{shell}/task/{shell}/children").read_text().split():
            if b"dsh_daemon" in Path(f"/proc/{child}/cmdline").read_bytes():
                return int(child)
        raise AssertionError("no dsh_daemon process in the pane")

    def unread(self) -> int:
        """Bytes typed into the pane that the program has not read yet (the tty's input queue)."""
        tty = self.tmux("display-message", "-p", "#{pane_tty}").strip()
        fd = os.open(tty, os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK)
        try:
            queued = fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0")
        finally:
            os.close(fd)
        return int(struct.unpack("i", queued)[0])

    def until_unread(self, count: int, *, at_least: bool = False, limit_s: float = 30) -> None:
        """Until `count` bytes (or, `at_least`, that many or more) wait to be read."""
        deadline = time.monotonic() + limit_s
        while not (self.unread() >= count if at_least else self.unread() == count):
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.unread()} bytes unread, not {count}")
            time.sleep(0.0005)

    def one_read(self, *keys: str, size: int) -> None:
        """Send `keys` (`size` bytes) so that the program gets them in one read (after any typed
        before them that it has not read yet): it is stopped until they are in the input queue."""
        pid = self.program_pid()
        os.kill(pid, signal.SIGSTOP)
        try:
            self.keys(*keys)
            self.until_unread(size, at_least=True)
        finally:
            os.kill(pid, signal.SIGCONT)

    def read_alone(self, *keys: str, size: int) -> None:
        """Send `keys` (`size` bytes) as the end of one read and stop the program right after it read
        them: keys sent before `resume` come in a later read, whatever timers it has due meanwhile
        (asyncio runs a read that woke it before due timers)."""
        self.one_read(*keys, size=size)
        self.until_unread(0)
        os.kill(self.program_pid(), signal.SIGSTOP)

    def resume(self, size: int) -> None:
        """After `read_alone`: once the `size` bytes sent since are queued, let the program go on."""
        try:
            self.until_unread(size, at_least=True)
        finally:
            os.kill(self.program_pid(), signal.SIGCONT)

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
