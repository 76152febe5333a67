"""`dsh-daemon chat` in a pseudo-terminal through pexpect (no tmux needed): keys in, the bytes a
terminal would receive read back (colour codes stripped). The daemon talks to the fake DeepSeek server."""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

from tests.chat.conftest import unconfined
from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.harness import ROOT, daemon_env, tool_call_stream

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|\x1b[=>]|\r")


class Terminal:
    def __init__(self, env: dict[str, str], args: list[str], cwd: Path, term: str = "xterm-256color") -> None:
        env = {**env, "TERM": term, "PROMPT_TOOLKIT_NO_CPR": "1", "PYTHONPATH": str(ROOT)}
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
    term.wait("4. Cancel the turn")
    term.send("n")  # a letter is text, never an answer
    time.sleep(1)  # (past the menu's settle time)
    term.send("\x15")  # Ctrl-U: clear it
    time.sleep(1)
    term.send("3")  # chooses "No"
    term.send("\r")  # confirms
    term.wait("→ rejected")
    term.wait("✗ edit_file")
    assert (work / "notes.txt").read_text() == "alpha\n"
    term.wait("Left it alone")
    term.send("later, please\r")
    term.wait("[queued #2] later, please")
    term.send("\x03")  # Ctrl-C
    term.wait("1 queued item(s) parked — /wake runs them")
    assert len(fake.requests) == 2
    term.send("/wake\r")
    term.wait("Queued one ran")
    last = fake.requests[-1].json["messages"]
    assert last[-1] == {"role": "user", "content": "later, please"}
    term.send("\x04")  # Ctrl-D leaves
    term.child.expect(pexpect.EOF)


def test_at_a_dumb_terminal_a_line_answers_and_end_of_input_cancels_an_open_question(tmp_path: Path) -> None:
    """The plain view at a terminal (TERM=dumb): a question takes a whole line (`always` allows
    always; a line that is no answer is a prompt). Ctrl-D with a question open answers it `cancelled`,
    says how to allow the tool, and the chat exits 1 instead of waiting for the daemon's timeout."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("alpha\n")
    edit = [("c1", "edit_file", {"path": "notes.txt", "old_string": "alpha", "new_string": "beta"})]
    again = [("c2", "edit_file", {"path": "notes.txt", "old_string": "beta", "new_string": "gamma"})]
    run = [("c3", "run_command", {"command": "echo hi"})]
    unconfined(tmp_path / "state")  # commands ask (a confined one would run unasked)
    with FakeDeepSeek() as fake:
        fake.script(
            Reply.stream(tool_call_stream(edit)),
            Reply.stream(tool_call_stream(again)),  # allowed always: not asked
            Reply.stream(tool_call_stream(run)),
        )
        term = Terminal(daemon_env(tmp_path / "state", fake), ["--no-thinking", "chat"], work, term="dumb")
        try:
            term.wait("a question takes a line")
            term.send("edit it\r")
            term.wait("answer with a line: 1-4")
            term.send("a\r")  # not an answer: a prompt, queued behind the turn
            term.wait("[queued #2] a")
            term.send("always\r")
            term.wait("→ allowed always")
            term.wait("? Run: echo hi")
            term.wait("answer with a line: 1-4")
            assert (work / "notes.txt").read_text() == "gamma\n"
            term.send("\x04")  # Ctrl-D: the input ends with the question open
            term.wait("allow it with --allow run_command (or every tool with --yes)")
            term.child.expect(pexpect.EOF, timeout=60)
            term.child.close()
            assert term.child.exitstatus == 1
        finally:
            term.close()
