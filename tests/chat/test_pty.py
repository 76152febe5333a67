"""`dsh-daemon chat` in a pseudo-terminal through pexpect (no tmux needed): keys in, the bytes a
terminal would receive read back (colour codes stripped). The daemon talks to the fake DeepSeek server."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.harness import ROOT, daemon_env, tool_call_stream

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|\x1b[=>]|\r")


class Terminal:
    def __init__(self, env: dict[str, str], args: list[str], cwd: Path) -> None:
        env = {**env, "TERM": "xterm-256color", "PROMPT_TOOLKIT_NO_CPR": "1", "PYTHONPATH": str(ROOT)}
        self.child = pexpect.spawn(
            sys.executable, ["-m", "dsh_daemon", *args], env=env, cwd=str(cwd), dimensions=(36, 110),
            encoding="utf-8", timeout=60,
        )  # fmt: skip
        self.seen = ""

    def wait(self, text: str) -> None:
        """Read until `text` has been printed (colour and cursor codes aside)."""
        while text not in self.seen:
            try:
                self.child.expect(r".+", timeout=60)
            except pexpect.TIMEOUT as exc:
                raise AssertionError(f"never saw {text!r}; saw:\n{self.seen}") from exc
            self.seen += ANSI.sub("", self.child.after)

    def send(self, text: str) -> None:
        self.child.send(text)

    def close(self) -> None:
        self.child.close(force=True)


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[tuple[Terminal, FakeDeepSeek, Path]]:
    work = tmp_path / "work"
    work.mkdir()
    with FakeDeepSeek() as fake:
        term = Terminal(daemon_env(tmp_path / "state", fake), ["--no-thinking", "chat"], work)
        try:
            term.wait("Enter sends")
            yield term, fake, work
        finally:
            term.close()


def test_a_rejected_permission_by_key_then_ctrl_c_and_wake(
    terminal: tuple[Terminal, FakeDeepSeek, Path],
) -> None:
    term, fake, work = terminal
    (work / "notes.txt").write_text("alpha\n")
    fake.script(
        Reply.stream(
            tool_call_stream(
                [("c1", "edit_file", {"path": "notes.txt", "old_string": "alpha", "new_string": "beta"})]
            )
        ),
        Reply.stream(text_stream(["Left it alone"])[:-2], tail="stall"),
        Reply.stream(text_stream(["Queued one ran"])),
    )
    term.send("edit it\r")
    term.wait("+beta")
    term.send("n")  # one key
    term.wait("→ rejected")
    term.wait("✗ edit_file")
    assert (work / "notes.txt").read_text() == "alpha\n"
    term.wait("Left it alone")
    term.send("later, please\r")
    term.wait("[queued] later, please")
    term.send("\x03")  # Ctrl-C
    term.wait("1 queued item(s) parked — /wake runs them")
    assert len(fake.requests) == 2
    term.send("/wake\r")
    term.wait("Queued one ran")
    last = fake.requests[-1].json["messages"]
    assert last[-1] == {"role": "user", "content": "later, please"}
    term.send("\x04")  # Ctrl-D leaves
    term.child.expect(pexpect.EOF)
