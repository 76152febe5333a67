"""`dsh-daemon chat` at a terminal, driven the way a person would: keys into a tmux pane, the screen read
back. The daemon talks to the fake DeepSeek server on 127.0.0.1; state and HOME are temp dirs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.chat.screen import Screen, needs_tmux
from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.harness import daemon_env, tool_call_stream

pytestmark = needs_tmux


@pytest.fixture
def fake() -> Iterator[FakeDeepSeek]:
    with FakeDeepSeek() as server:
        yield server


@pytest.fixture
def work(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


@pytest.fixture
def chat(tmp_path: Path, fake: FakeDeepSeek, work: Path) -> Iterator[Screen]:
    screen = Screen(tmp_path, daemon_env(tmp_path / "state", fake), ["--no-thinking", "chat"], cwd=work)
    try:
        screen.wait("Enter sends")
        yield screen
    finally:
        screen.close()


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


def test_queue_while_busy_cancel_keeps_it_wake_runs_it_drop_and_edit(
    chat: Screen, fake: FakeDeepSeek
) -> None:
    fake.script(
        endless(["Working on it"]),
        Reply.stream(text_stream(["Third, reworded: done"])),
    )
    chat.type("first")
    chat.keys("Enter")
    chat.wait("Working on it", whole=False)
    chat.wait(lambda s: "running" in status_line(chat))
    chat.type("second")
    chat.keys("Enter")
    chat.type("third")
    chat.keys("Enter")
    chat.wait(lambda s: "[queued] second" in s and "[queued] third" in s)
    chat.wait(lambda s: "queued 2" in status_line(chat))

    chat.keys("C-c")
    screen = chat.wait("queued item(s) parked")
    assert "[cancelled: user; 2 queued item(s) parked — /wake runs them" in screen
    chat.wait(lambda s: "idle" in status_line(chat) and "queued 2" in status_line(chat))
    assert len(fake.requests) == 1  # nothing ran on its own

    chat.type("/queue")
    chat.keys("Enter")
    chat.wait(lambda s: "1. second" in s and "2. third" in s)
    chat.type("/drop 1")
    chat.keys("Enter")
    chat.wait("[dropped: second]")
    chat.wait(lambda s: "queued 1" in status_line(chat))
    chat.type("/edit 1 third, reworded")
    chat.keys("Enter")
    chat.wait("[edited: third, reworded]")

    chat.type("/wake")
    chat.keys("Enter")
    chat.wait("Third, reworded: done")
    chat.wait(lambda s: "idle" in status_line(chat) and "queued" not in status_line(chat))
    assert prompts(fake) == ["first", "third, reworded"]


def test_typing_while_it_streams_keeps_the_input_line_whole(chat: Screen, fake: FakeDeepSeek) -> None:
    fake.script(endless(["streamed words ", "keep coming"]))
    chat.type("go")
    chat.keys("Enter")
    chat.wait("streamed words keep coming", whole=False)
    chat.keys("Up")  # history
    chat.wait(lambda s: any(row.rstrip() == "› go" for row in s.splitlines()), whole=False)
    chat.keys("C-u")
    chat.type("/que")
    chat.wait("list the queue (prompts", whole=False)  # the completion menu
    chat.keys("Tab")  # completes the command
    chat.wait(lambda s: "› /queue" in s, whole=False)
    chat.keys("C-u", "Escape")
    chat.type("half typed")
    screen = chat.wait("› half typed", whole=False)
    line = next(row for row in screen.splitlines() if "half typed" in row)
    assert line.rstrip() == "› half typed"
    # Alt-Enter adds a line; Enter sends both (queued behind the running turn).
    chat.keys("Escape", "Enter")
    chat.type("second line")
    chat.keys("Enter")
    chat.wait("[queued] half typed second line")
    chat.keys("C-c")
    chat.wait("queued item(s) parked")
    fake.script(Reply.stream(text_stream(["ok"])))
    chat.type("/wake")
    chat.keys("Enter")
    chat.wait(lambda s: len(fake.requests) == 2 and "idle" in status_line(chat))
    assert prompts(fake)[-1] == "half typed\nsecond line"


def test_permission_shows_the_diff_and_is_answered_by_one_key(
    chat: Screen, fake: FakeDeepSeek, work: Path
) -> None:
    (work / "notes.txt").write_text("alpha\n")
    fake.script(
        Reply.stream(
            tool_call_stream(
                [("c1", "edit_file", {"path": "notes.txt", "old_string": "alpha", "new_string": "beta"})]
            )
        ),
        Reply.stream(text_stream(["Done."])),
    )
    chat.type("edit it")
    chat.keys("Enter")
    screen = chat.wait(lambda s: "[c]ancel turn" in s and "+beta" in s, whole=False)
    print(screen)
    assert "? Edit notes.txt" in screen and "-alpha" in screen
    chat.wait(lambda s: "awaiting permission" in status_line(chat))
    chat.keys("y")  # one key, no Enter
    chat.wait(lambda s: "→ allowed once" in s and "✓ edit_file" in s and "Done." in s)
    assert (work / "notes.txt").read_text() == "beta\n"


def test_attach_sends_the_lines_with_the_next_prompt(chat: Screen, fake: FakeDeepSeek, work: Path) -> None:
    (work / "app.py").write_text("one = 1\ntwo = 2\nthree = 3\nfour = 4\n")
    fake.script(Reply.stream(text_stream(["Seen."])))
    chat.type("/attach app.py:2-3")
    chat.keys("Enter")
    chat.wait("goes with your next prompt")
    chat.type("what do these lines do?")
    chat.keys("Enter")
    chat.wait(lambda s: "Seen." in s and "📎 selection: app.py" in s)
    messages = fake.requests[0].json["messages"]
    users = [m["content"] for m in messages if m["role"] == "user"]
    assert users[-1] == "what do these lines do?"
    assert "two = 2\nthree = 3" in users[-2] and "four" not in users[-2]


def test_an_attachment_queued_while_busy_goes_with_its_own_prompt(
    chat: Screen, fake: FakeDeepSeek, work: Path
) -> None:
    """The lines attached to a prompt typed while a turn runs reach that prompt's turn, not the
    running one, and as they were when Enter was pressed."""
    (work / "app.py").write_text("one = 1\ntwo = 2\nthree = 3\n")
    # The running turn goes on to a second step (after a read_file call): the attachment must not join it.
    fake.script(
        Reply.stream(tool_call_stream([("c1", "read_file", {"path": "app.py"})], text="Busy"), delay=1.0),
        Reply.stream(text_stream(["First done."])),
        Reply.stream(text_stream(["Seen."])),
    )
    chat.type("first")
    chat.keys("Enter")
    chat.wait("Busy", whole=False)
    chat.type("/attach app.py:2")
    chat.keys("Enter")
    chat.wait("goes with your next prompt")
    chat.type("and this line?")
    chat.keys("Enter")
    chat.wait("[queued] and this line?")
    (work / "app.py").write_text("one = 1\nTWO = 22\nthree = 3\n")  # changed after Enter
    chat.wait(lambda s: "Seen." in s)
    first, step_two, second = (r.json["messages"] for r in fake.requests)
    assert "and this line?" not in str(step_two)
    assert all("Selection in" not in str(m.get("content")) for m in first + step_two if m["role"] == "user")
    users = [m["content"] for m in second if m["role"] == "user"]
    assert users[-1] == "and this line?"
    assert "two = 2" in users[-2] and "TWO" not in users[-2]


def test_sessions_and_resume_with_the_picker(tmp_path: Path, fake: FakeDeepSeek, work: Path) -> None:
    env = daemon_env(tmp_path / "state", fake)
    fake.script(Reply.stream(text_stream(["Answer one"])), Reply.stream(text_stream(["Answer two"])))
    first = Screen(tmp_path, env, ["--no-thinking", "chat", "the first session"], cwd=work)
    try:
        first.wait("Answer one")
        first.keys("C-d")
        first.wait("[chat exited 0]")
    finally:
        first.close()
    second = Screen(tmp_path, env, ["--no-thinking", "chat", "the second session"], cwd=work)
    try:
        second.wait("Answer two")
        second.type("/sessions")
        second.keys("Enter")
        second.wait("the first session")
        second.type("/resume")
        second.keys("Enter")
        second.wait("resume which session?", whole=False)
        second.keys("Down")
        second.wait(
            lambda s: "❯ 2." in s and "the first session" in s.split("❯ 2.")[1].splitlines()[0], whole=False
        )
        second.keys("Enter")
        second.wait("[resuming")
        screen = second.wait("Answer one")
        tail = screen.split("[resuming", 1)[1]
        assert "› the first session" in tail and "Answer one" in tail
    finally:
        second.close()


def test_a_line_typed_during_a_question_queues_ctrl_c_answers_cancel_and_clear_empties(
    chat: Screen, fake: FakeDeepSeek, work: Path
) -> None:
    (work / "notes.txt").write_text("alpha\n")
    fake.script(
        Reply.stream(
            tool_call_stream(
                [("c1", "edit_file", {"path": "notes.txt", "old_string": "alpha", "new_string": "beta"})]
            )
        )
    )
    chat.type("edit it")
    chat.keys("Enter")
    chat.wait(lambda s: "[c]ancel turn" in s and "+beta" in s, whole=False)
    chat.type("please also this")  # the first key is not y/a/n/c: the person is typing a prompt
    chat.keys("Enter")
    chat.wait("[queued] please also this")
    chat.wait(lambda s: "awaiting permission" in status_line(chat))
    chat.keys("C-c")
    chat.wait(lambda s: "→ cancelled" in s and "[cancelled: user; 1 queued item(s) parked" in s)
    assert (work / "notes.txt").read_text() == "alpha\n"
    chat.type("/clear")
    chat.keys("Enter")
    chat.wait("[queue cleared]")
    chat.wait(lambda s: "idle" in status_line(chat) and "queued" not in status_line(chat))
    chat.type("/wake")
    chat.keys("Enter")
    chat.wait("[nothing is queued]")
    assert len(fake.requests) == 1
    chat.keys("C-c")
    chat.wait("[Ctrl-C again (or Ctrl-D) leaves]")
    chat.keys("C-c")
    chat.wait("[chat exited 0]")
