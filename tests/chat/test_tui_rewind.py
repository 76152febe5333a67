"""`/undo`, `/rewind N` and `/fork N` typed into the terminal chat in a tmux pane (issue 25 item 4):
the files come back, the fork's first request holds exactly the kept turns, a rewound conversation's
next request leaves the cut turns out, and the screen says what happened."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.chat.screen import Screen, needs_tmux, status_line
from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.harness import daemon_env, tool_call_stream

pytestmark = [needs_tmux, pytest.mark.slow]


@pytest.fixture
def allowing_chat(tmp_path: Path, fake: FakeDeepSeek, work: Path) -> Iterator[Screen]:
    args = ["--no-thinking", "chat", "--allow", "write_file", "--allow", "edit_file"]
    screen = Screen(tmp_path, daemon_env(tmp_path / "state", fake), args, cwd=work)
    try:
        screen.wait("Enter sends")
        yield screen
    finally:
        screen.close()


def conversation(request: dict[str, Any]) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in request["messages"] if m["role"] in ("user", "assistant")]


def send(chat: Screen, line: str) -> None:
    chat.type(line)
    chat.keys("Enter")


def test_undo_rewind_and_fork_from_the_chat(allowing_chat: Screen, fake: FakeDeepSeek, work: Path) -> None:
    chat = allowing_chat
    notes = work / "notes.txt"
    fake.script(
        Reply.stream(tool_call_stream([("c1", "write_file", {"path": "notes.txt", "content": "one\n"})])),
        Reply.stream(text_stream(["Made."])),
        Reply.stream(
            tool_call_stream(
                [("c2", "edit_file", {"path": "notes.txt", "old_string": "one", "new_string": "two"})]
            )
        ),
        Reply.stream(text_stream(["Changed."])),
        Reply.stream(text_stream(["Forked answer."])),
        Reply.stream(text_stream(["Fresh start."])),
    )
    send(chat, "make notes")
    chat.wait("Made.")
    send(chat, "change notes")
    chat.wait("Changed.")
    chat.wait(lambda s: "idle" in status_line(chat))
    assert notes.read_text() == "two\n"

    send(chat, "/undo")
    screen = chat.wait("[rewind to before turn 2: restored notes.txt]")
    print(screen)
    assert notes.read_text() == "one\n"

    send(chat, "/rewind")  # alone: a picker of the prompts, newest first, with what each restores
    screen = chat.wait(lambda s: "#2 change notes — restores notes.txt" in s, whole=False)
    assert "#1 make notes — restores notes.txt" in screen
    assert screen.index("#2 change notes") < screen.index("#1 make notes")
    chat.keys("Escape")  # leaves it: nothing rewound
    chat.wait(lambda s: "rewind to before which prompt" not in s, whole=False)

    send(chat, "/fork 1 a forked question")
    chat.wait("Forked answer.")
    screen = chat.wait(lambda s: "idle" in status_line(chat))
    print(chat.screen())
    assert "[forked at turn 1: now in session" in chat.everything()
    forked = conversation(fake.requests[-1].json)
    assert [u for r, u in forked if r == "user"] == ["make notes", "a forked question"]
    assert forked[-2:] == [("assistant", "Made."), ("user", "a forked question")]

    # In the fork: back to before turn 1 (its checkpoints came along): the file the agent created goes.
    send(chat, "/rewind 1")
    screen = chat.wait(
        "── rewound to before turn 1: the turns since stay on screen, out of the model's history ──"
    )
    print(chat.screen())
    assert "[rewind to before turn 1: deleted notes.txt]" in chat.everything()
    assert not notes.exists()
    send(chat, "start over")
    chat.wait("Fresh start.")
    assert [u for r, u in conversation(fake.requests[-1].json) if r == "user"] == ["start over"]


def test_esc_esc_on_an_idle_prompt_opens_the_rewind_picker(
    allowing_chat: Screen, fake: FakeDeepSeek, work: Path
) -> None:
    """Issue 38.4: Esc Esc when idle (as in Claude Code) lists the prompts newest first with what
    each checkpoint restores; Enter chooses the prompt, then files / conversation / both."""
    chat = allowing_chat
    notes = work / "notes.txt"
    fake.script(
        Reply.stream(tool_call_stream([("c1", "write_file", {"path": "notes.txt", "content": "one\n"})])),
        Reply.stream(text_stream(["Made."])),
        Reply.stream(
            tool_call_stream(
                [("c2", "edit_file", {"path": "notes.txt", "old_string": "one", "new_string": "two"})]
            )
        ),
        Reply.stream(text_stream(["Changed."])),
        Reply.stream(text_stream(["Still here."])),
    )
    send(chat, "make notes")
    chat.wait("Made.")
    send(chat, "change notes")
    chat.wait("Changed.")
    chat.wait(lambda s: "idle" in status_line(chat))
    chat.keys("Escape", "Escape")
    chat.wait(lambda s: "rewind to before which prompt" in s and "#2 change notes" in s, whole=False)
    chat.keys("Enter")  # the newest prompt is chosen first
    chat.wait("rewind to before #2: put back", whole=False)
    chat.keys("Down", "Enter")  # files only
    chat.wait("[rewind to before turn 2: restored notes.txt]")
    assert notes.read_text() == "one\n"
    send(chat, "and now?")  # the conversation stayed: turn 2 is still in the model's history
    chat.wait("Still here.")
    users = [u for r, u in conversation(fake.requests[-1].json) if r == "user"]
    assert users == ["make notes", "change notes", "and now?"]
