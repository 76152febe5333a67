"""What the terminal chat draws (issue 23 item 5), read back from a tmux pane: the live area
word-wrapped and clipped, a resize painting the screen again, code blocks exactly as written (and
`/copy`), tool cards in words with `/show N` for the rest."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.chat.screen import Screen, needs_tmux, status_line
from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.harness import daemon_env, tool_call_stream

pytestmark = needs_tmux
TOKEN = re.compile(r"^word\d+$")


def word_rows(screen: str) -> list[str]:
    return [row for row in screen.splitlines() if "word" in row]


def assert_clean(rows: list[str], width: int) -> list[int]:
    """Rows of `wordN` tokens: every token whole, no row wider than `width`, the numbers consecutive
    from top to bottom (a leftover of an older layout breaks the run). Returns the numbers."""
    numbers = []
    for row in rows:
        assert len(row.rstrip()) <= width, row
        for token in row.split():
            assert TOKEN.match(token), f"a cut word {token!r} in {row!r}"
            numbers.append(int(token[4:]))
    assert numbers == list(range(numbers[0], numbers[0] + len(numbers))), rows
    return numbers


def test_the_live_area_word_wraps_clips_and_a_resize_paints_the_screen_again(
    tmp_path: Path, fake: FakeDeepSeek, work: Path
) -> None:
    text = " ".join(f"word{i}" for i in range(300))
    pieces = [text[i : i + 30] for i in range(0, len(text), 30)]
    fake.script(Reply.stream(text_stream(pieces)[:-2], delay=0.02, tail="stall"))  # streams, then waits
    chat = Screen(
        tmp_path, daemon_env(tmp_path / "state", fake), ["--no-thinking", "chat"], cwd=work, width=100
    )
    try:
        chat.wait("Enter sends")
        chat.type("tell me a long story")
        chat.keys("Enter")
        screen = chat.wait(lambda s: "word299" in s, whole=False)
        print(screen)
        rows = screen.splitlines()
        clipped = next(i for i, row in enumerate(rows) if re.fullmatch(r"… \d+ more lines", row.strip()))
        live = rows[clipped + 1 : rows.index("›")]
        assert len(live) >= 5 and assert_clean(live, 99)[-1] == 299
        assert not word_rows("\n".join(rows[:clipped]))  # nothing stale above the live area

        chat.tmux("resize-window", "-x", "60")
        screen = chat.wait(  # the screen painted again: what was printed, then the live area for 60 columns
            lambda s: "› tell me a long story" in s and "word299" in s and " more lines" in s, whole=False
        )
        print(screen)
        rows = screen.splitlines()
        clipped = next(i for i, row in enumerate(rows) if re.fullmatch(r"… \d+ more lines", row.strip()))
        assert not word_rows("\n".join(rows[:clipped])), "a fragment of the old layout stayed on screen"
        assert assert_clean(rows[clipped + 1 : rows.index("›")], 60)[-1] == 299

        chat.keys("Escape")  # the reply so far goes to the scrollback, rendered for 60 columns
        screen = chat.wait(lambda s: "[interrupted]" in s and "idle" in status_line(chat), whole=False)
        print(screen)
        assert assert_clean(word_rows(screen), 60)[-1] == 299
    finally:
        chat.close()


CODE = "def f(x):\n    return x * 2  # " + " ".join(["a long comment"] * 10) + "\n\n\tprint(f(2))\n"


@pytest.fixture
def chat_allowing(tmp_path: Path, fake: FakeDeepSeek, work: Path) -> Iterator[Screen]:
    args = ["--no-thinking", "chat", "--allow", "edit_file", "--allow", "run_command"]
    screen = Screen(tmp_path, daemon_env(tmp_path / "state", fake), args, cwd=work, width=80)
    screen.tmux("set-option", "-g", "set-clipboard", "on")  # tmux keeps what OSC 52 copies
    try:
        screen.wait("Enter sends")
        yield screen
    finally:
        screen.close()


def test_code_blocks_are_exact_and_copied_tool_cards_read_as_words_with_show(
    chat_allowing: Screen, fake: FakeDeepSeek, work: Path
) -> None:
    chat = chat_allowing
    (work / "notes.txt").write_text("alpha\n")
    fake.script(
        Reply.stream(
            text_stream([f"Here it is:\n\n```python\n{CODE}```\n\nAnd a second:\n\n```\nls -la\n```\n"])
        ),
        Reply.stream(
            tool_call_stream(
                [
                    (
                        "c1",
                        "edit_file",
                        {"path": "notes.txt", "old_string": "alpha", "new_string": "alpha\nbeta"},
                    )
                ]
            )
        ),
        Reply.stream(tool_call_stream([("c2", "run_command", {"command": "seq 1 30"})])),
        Reply.stream(text_stream(["Edited and counted."])),
    )
    chat.type("show me code")
    chat.keys("Enter")
    screen = chat.wait(lambda s: "/copy 2" in s and "idle" in status_line(chat))
    print(screen)
    rows = screen.splitlines()
    assert "╶─ python · /copy 1" in rows and "╶─ code · /copy 2" in rows
    assert "def f(x):" in rows  # at column 0: no padding
    long_line = CODE.splitlines()[1]
    assert long_line in rows  # whole: wrapped by the terminal, not cut into two lines by the chat
    chat.type("/copy 1")
    chat.keys("Enter")
    chat.wait("[code block 1 (python, 4 lines) copied to the clipboard (OSC 52)]")
    assert chat.tmux("show-buffer") == CODE  # exactly the code, tab and blank line included
    chat.type("/copy")
    chat.keys("Enter")
    chat.wait("[code block 2 (code, 1 lines) copied")
    assert chat.tmux("show-buffer") == "ls -la\n"

    chat.type("edit and count")
    chat.keys("Enter")
    # The whole turn drawn, not a capture taken mid-redraw as the reply's first line lands.
    screen = chat.wait(
        lambda s: "Edited and counted." in s and "/show 2" in s and "idle" in status_line(chat)
    )
    print(screen)
    assert "  ⚙ edit_file notes.txt (+1 −0)" in screen
    assert "  ✓ edit_file notes.txt (+1 −0) · /show 1" in screen
    assert "  ⚙ run_command seq 1 30" in screen
    assert "│ … 26 more lines above" in screen and "│ 30" in screen and "│ 12" not in screen
    assert "  ✓ run_command seq 1 30 · exit 0 · 31 lines · /show 2" in screen
    assert '{"path"' not in screen  # no raw JSON
    chat.type("/show 1")
    chat.keys("Enter")
    screen = chat.wait("── /show 1: edit_file notes.txt (+1 −0)")
    assert screen.split("── /show 1:")[1].splitlines()[1:6] == [
        "--- a/notes.txt", "+++ b/notes.txt", "@@ -1 +1,2 @@", " alpha", "+beta"
    ]  # fmt: skip
    chat.type("/show 2")
    chat.keys("Enter")
    screen = chat.wait("[exit code 0]")
    shown = screen.split("── /show 2: run_command seq 1 30")[1].splitlines()[1:32]
    assert shown == [str(n) for n in range(1, 31)] + ["[exit code 0]"]
