"""The pieces of what the chat shows: status line, wrapping, markdown, diffs, control codes."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest

from dsh_daemon.chat.permission import ALLOW_ONCE, CANCELLED, SETTLE_S, Question
from dsh_daemon.chat.queue import QueueBook
from dsh_daemon.chat.render import (
    CodeBlock,
    clip,
    code_blocks,
    diff_lines,
    hard_wrap,
    markdown_ansi,
    markdown_parts,
    sanitize,
    word_wrap,
)
from dsh_daemon.chat.sessions import NoSuchSession, find_session
from dsh_daemon.chat.status import Status
from dsh_daemon.chat.tui import TuiView
from tests.fakes.tool_events import tool_call_events


def test_the_status_line_follows_the_events() -> None:
    status = Status(session_id="7f3a2c1e-aaaa")
    assert status.line().startswith("idle · 0 tokens")
    status.on_event("agent/status", {"status": "running"})
    status.on_event("agent/inbox/inserted", {"message": {"id": "q1"}, "target": "next-turn"})
    status.on_event("agent/inbox/inserted", {"message": {"id": "q2"}, "target": "next-turn"})
    status.on_event("agent/inbox/inserted", {"message": {"id": "c1"}, "target": "next-step"})
    status.on_event("agent/inbox/claimed", {"message": {"id": "q1"}, "turn": 2})
    status.on_event(
        "turn/usage", {"turn": 1, "usage": {"inputTokens": 1200, "outputTokens": 34, "costUsd": 0.0123}}
    )
    assert (
        status.line()
        == "running · queued 1 · context 1 · 1.2k tokens (1.2k in, 34 out) · $0.0123 · session 7f3a2c1e"
    )
    status.permission = True
    assert status.line().startswith("awaiting permission · queued 1")
    status.on_event("agent/inbox/discarded", {"message": {"id": "q2"}})
    assert status.queued == 0


def test_the_status_line_says_the_sandbox_and_warns_when_commands_are_refused() -> None:
    status = Status(session_id="7f3a2c1e-aaaa")
    assert status.sandbox_part() == "" and "⛨" not in status.line()  # not told yet: nothing claimed
    told = {"mode": "workspace-write", "configuredMode": "workspace-write", "level": "Landlock 7",
            "confined": True, "available": True, "reasons": [], "network": [], "writable": []}  # fmt: skip
    assert status.on_event("sandbox/status", told)
    assert status.sandbox_part() == "⛨ workspace-write" and not status.sandbox_refused
    assert status.line().endswith("⛨ workspace-write · session 7f3a2c1e")
    status.on_event("sandbox/status", {**told, "confined": False, "available": False, "level": "unconfined"})
    assert status.sandbox_refused
    assert status.sandbox_part() == "⚠ workspace-write: no confinement here, commands refused (/sandbox)"
    status.on_event("sandbox/status", {**told, "mode": "full-access", "confined": False, "available": False})
    assert not status.sandbox_refused and status.sandbox_part() == "⚠ full-access (unconfined)"


def test_text_from_the_model_cannot_drive_the_terminal() -> None:
    assert sanitize("a\x1b[31mb\x07c\td\ne") == "a[31mbc\td\ne"
    assert clip("x\x1b]0;title\x07 y", 20) == "x]0;title y"
    assert "\x1b[31m" not in markdown_ansi(sanitize("a\x1b[31mb"), 40)


def test_wrapping_markdown_and_diffs() -> None:
    assert hard_wrap("abcdefghijkl\nxy", 10) == ["abcdefghij", "kl", "xy"]
    assert hard_wrap("日本語日本語", 10) == ["日本語日本", "語"]  # two cells each
    rendered = markdown_ansi("# Title\n\n```python\nprint(1)\n```\n", 40)
    assert "Title" in rendered and "print" in rendered and "```" not in rendered
    colored = diff_lines("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+new\n same", True)
    assert (
        colored[3] == "\x1b[31m-old\x1b[0m" and colored[4] == "\x1b[32m+new\x1b[0m" and colored[5] == " same"
    )
    assert diff_lines("-old", False) == ["-old"]


def test_word_wrap_breaks_between_words_and_cuts_only_a_word_wider_than_the_line() -> None:
    assert word_wrap("alpha beta gamma delta", 11) == ["alpha beta", "gamma delta"]
    assert word_wrap("a " + "x" * 25 + " b", 10) == ["a", "xxxxxxxxxx", "xxxxxxxxxx", "xxxxx b"]
    assert word_wrap("  indented text\n\nnext", 10) == ["  indented", "text", "", "next"]
    assert all(len(line) <= 12 for line in word_wrap(" ".join(f"word{i}" for i in range(50)), 12))


def test_code_blocks_are_kept_exactly_and_numbered() -> None:
    code = "def f(x):\n\treturn x  # " + "long " * 40 + "\n\n"
    text = f"Look:\n\n```python\n{code}```\n\n- a list\n\n```\nls\n```\n"
    assert code_blocks(text) == [CodeBlock(code, "python"), CodeBlock("ls\n", "")]
    rendered = markdown_ansi(text, 40, first_block=3)
    plain = re.sub(r"\x1b\[[0-9;]*m", "", rendered)
    # no padding, no wrap (a tab shows as four spaces; /copy gives the tab)
    assert "╶─ python · /copy 3\ndef f(x):\n    return x  # " + "long " * 40 + "\n" in plain
    assert "╶─ code · /copy 4\nls\n" in plain
    assert all(not line.endswith(" ") for line in plain.splitlines() if "long" not in line)


def test_a_permission_question_takes_a_choice_then_enter_and_gives_typed_digits_back() -> None:
    loop = asyncio.new_event_loop()
    try:
        question = Question(
            {"tool": "run_command", "preview": {"command": "pytest -q"}}, loop.create_future(), 0.0
        )
        assert question.options[1].label == "Yes, and always allow exactly `pytest -q` in this session"
        assert not question.settled(SETTLE_S / 2) and question.settled(SETTLE_S)
        assert question.confirm() is None and "choose" in question.hint  # Enter alone answers nothing
        assert question.digit("2") and question.selected == 1
        assert question.take_back_digit() == "2" and question.selected is None  # "2 more tests"
        question.move(1)
        assert question.confirm() == ALLOW_ONCE
        question.move(-1)
        assert question.confirm() == CANCELLED and not question.digit("9")
    finally:
        loop.close()


def test_queue_numbers_stay_with_their_items() -> None:
    book = QueueBook()
    book.inserted({"id": "a", "content": "first"}, "next-turn")
    book.inserted({"id": "b", "content": "second"}, "next-turn")
    book.claimed({"id": "a"}, 4)
    assert [item.label for item in book.pending()] == ["#2"]
    assert (
        book.find(1) is not None
        and book.find(1).why_not_pending() == "#1 is no longer queued: turn 4 took it"
    )  # type: ignore[union-attr]
    second = book.find(2)
    assert second is not None
    book.reserve("b2", second)  # reworded: a new id, the same number
    book.discarded({"id": "b"})
    book.inserted({"id": "b2", "content": "second, reworded"}, "next-turn", 0)
    assert [(item.label, item.text) for item in book.pending()] == [("#2", "second, reworded")]


def test_a_session_is_found_by_id_prefix_or_title() -> None:
    sessions = [
        {"sessionId": "ce4ec973-1111", "title": "Fix the flaky test", "updatedAt": 0},
        {"sessionId": "ce4a0000-2222", "title": "Port the parser", "updatedAt": 0},
    ]
    assert find_session(sessions, "ce4ec973")["title"] == "Fix the flaky test"
    assert find_session(sessions, "port the parser")["sessionId"] == "ce4a0000-2222"
    assert find_session(sessions, "flaky")["sessionId"] == "ce4ec973-1111"
    with pytest.raises(NoSuchSession, match="'ce4' matches 2 sessions"):
        find_session(sessions, "ce4")
    with pytest.raises(NoSuchSession, match="no session matches 'zzz'"):
        find_session(sessions, "zzz")


def test_a_tool_card_says_what_the_results_meta_says_never_what_its_words_say() -> None:
    """The terminal chat's cards read what the language server told the agent from `meta`
    (protocol.md §9), as the editors do: other words with the meta show the note, the usual words
    without it show none."""
    from dsh_daemon.chat.core import Chat
    from tests.test_event_fixtures import RecordingView

    view = RecordingView()
    chat = Chat(None, view, cwd="/w", auto_allow=False)  # type: ignore[arg-type]  # events only, no rpc
    chat.status = Status(session_id="s")
    edit = {"path": "/w/app.py", "diff": "--- a/app.py\n+++ b/app.py\n@@ -1 +1 @@\n-a = 1\n+a = b\n",
            "beforeHash": "h0", "afterHash": "h1", "created": False}  # fmt: skip
    told = "Edited app.py (+1 -1 lines)\n1 new error in app.py after this edit (from the editor's language server):"
    calls = [
        ("e1", "edit_file", {"path": "app.py"}, "Edited app.py (+1 -1 lines)\nThe checker is unhappy.",
         {**edit, "newErrors": 2}),
        ("e2", "edit_file", {"path": "app.py"}, told, edit),
        ("d1", "definition", {"path": "notes.txt", "line": 1, "symbol": "b"}, "Use grep.", {"noLanguageServer": True}),
        ("d2", "definition", {"path": "app.py", "line": 1, "symbol": "b"},
         "No language server for this file in the editor; use grep and read_file instead.", None),
    ]  # fmt: skip
    for i, (call_id, name, arguments, text, meta) in enumerate(calls):
        for frame in tool_call_events("s", 1 + 2 * i, call_id, name, arguments, text, meta):
            chat.on_notification("dsh/event", frame)
    results = [line.split(" · /show")[0] for line in view.lines if line.startswith("  ✓")]
    assert results == [
        "  ✓ edit_file app.py (+1 −1) · 2 new errors",
        "  ✓ edit_file app.py (+1 −1)",
        "  ✓ definition b  notes.txt:1 · no language server",
        "  ✓ definition b  app.py:1 · 1 line",
    ], results


def test_a_pasted_file_path_becomes_a_mention(tmp_path: Path) -> None:
    """Issue 38.8: a path pasted (or a file dragged into the terminal: quoted, escaped or a
    file:// URI) attaches the file as `@path` would; anything else pastes as it is."""
    from dsh_daemon.chat.tui import pasted_mention

    (tmp_path / "src").mkdir()
    app = tmp_path / "src" / "app.py"
    app.write_text("x = 1\n")
    spaced = tmp_path / "my notes.txt"
    spaced.write_text("n\n")
    cwd = str(tmp_path)
    assert pasted_mention(str(app), cwd) == "@src/app.py "
    assert pasted_mention(f"'{app}'\n", cwd) == "@src/app.py "
    assert pasted_mention(f"file://{app}", cwd) == "@src/app.py "
    assert pasted_mention("src/app.py", cwd) == "@src/app.py "
    assert pasted_mention(str(tmp_path / "src"), cwd) is None  # a folder
    assert pasted_mention("fix the bug in app.py", cwd) is None  # words
    assert pasted_mention(f"{app}\n{app}", cwd) is None  # several lines
    assert pasted_mention(str(spaced), cwd) is None  # @ cannot name it: pasted as it is


def test_the_live_area_wraps_only_the_end_of_a_growing_reply_and_shows_the_same_lines() -> None:
    """Issue 38.6: the live area's lines, as the reply grows delta by delta, are exactly the last
    lines of wrapping the whole text (and their count exact) while paragraphs are of normal length;
    a new width starts over; a single huge paragraph shows its true end with an estimated count."""
    from dsh_daemon.chat.render import TailWrap, word_wrap

    words = [f"w{n}" + ("\n" if n % 13 == 12 else " ") for n in range(2000)]
    wrap = TailWrap(keep=12)
    text = ""
    for index, word in enumerate(words):
        text += word
        if index % 7 == 0 or index == len(words) - 1:
            whole = word_wrap(text, 40)
            assert wrap.lines(text, 40) == (len(whole), whole[-12:])
    whole = word_wrap(text, 25)
    assert wrap.lines(text, 25) == (len(whole), whole[-12:])  # a resize
    assert wrap.lines("fresh", 25) == (1, ["fresh"])  # a new reply

    huge = " ".join(f"word{n}" for n in range(40_000))  # ~300 KB, no line break
    count, lines = TailWrap(keep=12).lines(huge, 80)
    assert lines == word_wrap(huge, 80)[-12:] or lines[-1] == word_wrap(huge, 80)[-1]
    assert abs(count - len(word_wrap(huge, 80))) <= len(word_wrap(huge, 80)) // 20


def test_a_huge_paragraph_grown_delta_by_delta_counts_as_one_wrapped_at_once() -> None:
    """Issue 38.6: the cells above a huge open paragraph's end are counted as the cut moves on (a walk
    of the whole paragraph per frame was most of a frame); the count and lines are those of wrapping
    the text seen so far in one go, at every step, and after a line break ends the paragraph."""
    from dsh_daemon.chat.render import TailWrap

    growing = TailWrap(keep=12)
    text = ""
    for n in range(6000):
        text += f"t{n} " if n % 2 else "漢字漢字 "  # wide characters: cells, not characters, count
        if n % 97 == 0 or n == 5999:
            assert growing.lines(text, 60) == TailWrap(keep=12).lines(text, 60), n
    count, lines = growing.lines(text, 60)
    whole = word_wrap(text, 60)
    assert len(lines) == 12 and abs(count - len(whole)) <= len(whole) // 20, (count, len(whole))
    text += "\nnext paragraph " + "x " * 3000
    assert growing.lines(text, 60) == TailWrap(keep=12).lines(text, 60)
    assert growing.lines(text, 50) == TailWrap(keep=12).lines(text, 50)  # a resize starts over


def test_cells_counts_ascii_without_a_walk_and_the_rest_as_before() -> None:
    from prompt_toolkit.utils import get_cwidth

    from dsh_daemon.chat.render import cells

    for text in ("plain words", "tab\there", "\x1b[1mbold\x1b[0m", "wide 漢字", "é", ""):
        walked = sum(get_cwidth(ch) for ch in re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text))
        assert cells(text) == walked, text


def test_the_prompt_is_split_by_runs_as_prompt_toolkit_splits_it_by_characters() -> None:
    """Issue 38.6: the live area above the input is cut from the prompt at its last line break, by
    runs of a style, not by prompt_toolkit's character-by-character split (quadratic, ten times a
    frame); what each part shows, character by character and style by style, is the same."""
    from prompt_toolkit.formatted_text import ANSI, to_formatted_text
    from prompt_toolkit.layout.utils import explode_text_fragments

    from dsh_daemon.chat.tui import merged_fragments, pt_prompt, split_prompt_by_runs

    def chars(fragments: Any) -> list[tuple[str, str]]:
        return [(style, text) for style, text, *_ in explode_text_fragments(to_formatted_text(fragments))]

    prompts = [
        "\x1b[2m… 3 more lines\x1b[0m\nstreamed \x1b[1mwords\x1b[0m\n\x1b[36m› \x1b[0m",
        "\x1b[36m› \x1b[0m",  # one line: nothing above the input
        "a\n\nb\n",  # an empty line, and a break at the very end
        "\x1b[33m? allow\nrun_command?\x1b[0m\n\x1b[33medit #2 ›\x1b[0m ",  # a break inside a style
    ]
    for raw in prompts:
        message = merged_fragments(to_formatted_text(ANSI(raw)))
        assert chars(message) == chars(ANSI(raw))  # merging keeps every character's style
        theirs = pt_prompt._split_multiline_prompt(lambda m=message: m)
        ours = split_prompt_by_runs(lambda m=message: m)
        assert ours[0]() == theirs[0](), raw
        assert chars(ours[1]()) == chars(theirs[1]()), raw
        assert chars(ours[2]()) == chars(theirs[2]()), raw
        assert len(ours[1]()) <= raw.count("\x1b") + raw.count("\n") + 1  # runs, not characters


def test_a_code_block_of_each_kind_is_found_and_prose_alone_is_one_part() -> None:
    # prose without a fence or an indented line skips the markdown parse: the same single part
    prose = "# Title\n\nSome *words* and `code` here.\n\n- a list\n   - three spaces in\n"
    assert markdown_parts(prose) == [prose]
    assert markdown_parts(" \n\n") == []
    for text in (
        "a\n\n```\nx = 1\n```\n",
        "a\n\n~~~\nx = 1\n~~~\n",
        "a\n\n    x = 1\n",
        "a\n\n\tx = 1\n",
        "a\n\n  \tx = 1\n",
        "a\r\r    x = 1\r",
    ):
        assert [block.code for block in code_blocks(text)] == ["x = 1\n"], repr(text)


def _transcript(view: TuiView, replies: list[str]) -> None:
    view.print("› first")
    for number, reply in enumerate(replies):
        view.message_done("", reply, streamed=True, interrupted=False, final=True, first_block=number + 1)
        view.print(f"  ⚙ after reply {number}")


def test_a_finished_reply_renders_off_the_loop_and_prints_exactly_as_before_in_order(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue 38.6: a 200 KB reply's markdown took the loop for a tenth of a second or more when it
    ended, and typed keys waited. It renders in a worker thread now; what it prints, and the order
    of the lines printed after it, are what the render on the loop gave."""
    from prompt_toolkit.application import create_app_session
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    big = "".join(f"word{n % 97} " * 20 + ("\n" if n % 5 == 4 else "") for n in range(1450))
    code = "## Steps\n\n1. one\n2. two\n\n```python\nx = 1\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"
    replies = [big, code, "Short **answer**."]
    with create_pipe_input() as keys, create_app_session(input=keys, output=DummyOutput()):
        _transcript(TuiView(), replies)  # no loop: rendered at once, as before
        on_the_loop = capsys.readouterr().out

        async def main() -> tuple[str, str]:
            view = TuiView()
            _transcript(view, replies)
            seen: list[str] = []
            # The loop turns before the reply is written (the render is not on it); the line
            # printed after the reply waits behind it.
            asyncio.get_running_loop().call_soon(lambda: seen.append(capsys.readouterr().out))
            await view.settled()
            return seen[0], capsys.readouterr().out

        before, rest = asyncio.run(main())
    assert "word0" not in before and "after reply 0" not in before
    assert before + rest == on_the_loop
    assert on_the_loop.index("word96") < on_the_loop.index("after reply 0") < on_the_loop.index("/copy 2")


def test_a_reply_whose_render_fails_prints_as_it_is_in_its_place(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from prompt_toolkit.application import create_app_session
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    import dsh_daemon.chat.render as render

    def broken(text: str, width: int, first_block: int = 0) -> str:
        raise ValueError("no markdown today")

    monkeypatch.setattr(render, "markdown_ansi", broken)
    with create_pipe_input() as keys, create_app_session(input=keys, output=DummyOutput()):

        async def main() -> None:
            view = TuiView()
            _transcript(view, ["the *whole* reply"])
            await view.settled()

        asyncio.run(main())
    assert capsys.readouterr().out.splitlines() == [
        "› first",
        "the *whole* reply",
        "\x1b[2m[not rendered: ValueError: no markdown today]\x1b[0m",
        "  ⚙ after reply 0",
    ]


def test_a_line_printed_behind_a_rendering_reply_is_in_view_at_once(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 38.1: the "[cancelled" after Esc waited (out of view) for the interrupted reply's
    markdown render in its worker thread. It keeps its place behind the reply in the scrollback, and
    is in the live area below the reply's text until then."""
    import threading

    from prompt_toolkit.application import create_app_session
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    import dsh_daemon.chat.tui as tui

    rendering = threading.Event()
    release = threading.Event()
    render = tui.render_reply

    def slow_render(*args: Any) -> str:
        rendering.set()
        release.wait(30)
        return render(*args)

    monkeypatch.setattr(tui, "render_reply", slow_render)
    with create_pipe_input() as keys, create_app_session(input=keys, output=DummyOutput()):

        async def main() -> list[str]:
            view = TuiView()
            view.live_text = "the partial reply"
            view.message_done(
                "", "the partial reply", streamed=True, interrupted=True, final=True, first_block=0
            )
            view.print("[cancelled: user]")
            await asyncio.to_thread(rendering.wait, 30)
            live = [re.sub(r"\x1b\[[0-9;]*m", "", line) for line in view._live_lines(80, 12)]
            release.set()
            await view.settled()
            return live

        live = asyncio.run(main())
    assert live == ["the partial reply", "[cancelled: user]"]
    out = capsys.readouterr().out
    assert out.index("the partial reply") < out.index("[cancelled: user]")
    assert out.count("[cancelled: user]") == 1
