"""`dsh-daemon chat` at a terminal, driven the way a person would: keys into a tmux pane, the screen read
back. The daemon talks to the fake DeepSeek server on 127.0.0.1; state and HOME are temp dirs."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from tests.chat.conftest import unconfined
from tests.chat.screen import Screen, endless, needs_tmux, prompts, status_line
from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.harness import daemon_env, tool_call_stream

pytestmark = needs_tmux


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
    chat.wait(lambda s: "[queued #2] second" in s and "[queued #3] third" in s)
    chat.wait(lambda s: "queued 2" in status_line(chat))
    # the queue stays in view above the input, by number
    screen = chat.wait(lambda s: "⋯ #2 second" in s and "⋯ #3 third" in s, whole=False)
    rows = screen.splitlines()
    assert rows.index("⋯ #3 third") == rows.index("⋯ #2 second") + 1
    assert rows[rows.index("⋯ #3 third") + 1].startswith("›")

    chat.keys("C-c")
    screen = chat.wait("queued item(s) parked")
    assert "[cancelled: user; 2 queued item(s) parked — /wake runs them" in screen
    chat.wait(lambda s: "idle" in status_line(chat) and "queued 2" in status_line(chat))
    assert len(fake.requests) == 1  # nothing ran on its own

    chat.type("/queue")
    chat.keys("Enter")
    chat.wait(lambda s: "  #2 second" in s and "  #3 third" in s)
    chat.type("/drop 2")
    chat.keys("Enter")
    chat.wait("[dropped #2: second]")
    chat.wait(lambda s: "queued 1" in status_line(chat))
    chat.type("/edit 3 third, reworded")
    chat.keys("Enter")
    chat.wait("[edited #3: third, reworded]")

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
    chat.wait("the queue by number", whole=False)  # the completion menu
    chat.keys("Tab")  # completes the command
    chat.wait(lambda s: "› /queue" in s, whole=False)
    chat.keys("C-u")
    chat.type("half typed")
    screen = chat.wait("› half typed", whole=False)
    line = next(row for row in screen.splitlines() if "half typed" in row)
    assert line.rstrip() == "› half typed"
    # Alt-Enter adds a line; Enter sends both (queued behind the running turn).
    chat.keys("Escape", "Enter")
    chat.type("second line")
    chat.keys("Enter")
    chat.wait("[queued #2] half typed second line")
    chat.keys("C-c")
    chat.wait("queued item(s) parked")
    fake.script(Reply.stream(text_stream(["ok"])))
    chat.type("/wake")
    chat.keys("Enter")
    chat.wait(lambda s: len(fake.requests) == 2 and "idle" in status_line(chat))
    assert prompts(fake)[-1] == "half typed\nsecond line"


def menu_row(screen: str, start: str) -> str:
    return next(row for row in screen.splitlines() if row.lstrip("❯ ").startswith(start))


def test_permission_is_a_menu_typed_text_never_answers(chat: Screen, fake: FakeDeepSeek, work: Path) -> None:
    """Issue 23 item 1: text typed while a question opens stays in the input (`add a test too` used to
    answer "allow always" with its `a`); an answer takes a choice (↑/↓ or a digit) and then Enter."""
    (work / "notes.txt").write_text("alpha\n")
    fake.script(
        Reply.stream(
            tool_call_stream(
                [("c1", "edit_file", {"path": "notes.txt", "old_string": "alpha", "new_string": "beta"})]
            )
        ),
        Reply.stream(text_stream(["Done."])),
        Reply.stream(text_stream(["Queued one answered."])),
    )
    chat.type("edit it")
    chat.keys("Enter")
    screen = chat.wait(lambda s: "? allow edit_file?" in s and "+beta" in s, whole=False)
    print(screen)
    assert "? Edit notes.txt" in screen and "-alpha" in screen
    assert "2. Yes, and always allow edit_file in this session" in screen
    assert "❯" not in screen  # nothing is chosen to begin with
    chat.type("add a test too")  # typed as the question opens: a prompt, every letter of it
    screen = chat.wait(lambda s: "› add a test too" in s, whole=False)
    assert "awaiting permission" in status_line(chat) and "❯" not in screen
    chat.keys("Enter")  # sends the line (queued behind the turn); the question stays
    chat.wait("[queued #2] add a test too")
    time.sleep(1)  # the person stopped typing: the menu takes keys now
    chat.type("y")  # a letter is text, never an answer
    chat.wait(lambda s: any(row.rstrip() == "› y" for row in s.splitlines()), whole=False)
    chat.keys("C-u")
    chat.type("1 more")  # a digit followed by text was the start of a prompt
    chat.wait(lambda s: any(row.rstrip() == "› 1 more" for row in s.splitlines()), whole=False)
    chat.keys("C-u")
    time.sleep(1)
    chat.keys("Enter")  # Enter alone answers nothing
    chat.wait("choose with ↑/↓ or 1-4 first, then Enter", whole=False)
    chat.type("2")  # chooses "always" but does not answer
    screen = chat.wait(lambda s: menu_row(s, "2.").startswith("❯"), whole=False)
    assert "awaiting permission" in status_line(chat)
    chat.keys("Up")
    chat.wait(lambda s: menu_row(s, "1.").startswith("❯"), whole=False)
    assert (work / "notes.txt").read_text() == "alpha\n"
    chat.keys("Enter")
    chat.wait(lambda s: "→ allowed once" in s and "✓ edit_file notes.txt (+1 −1)" in s and "Done." in s)
    chat.wait("Queued one answered.")
    assert (work / "notes.txt").read_text() == "beta\n"
    assert prompts(fake)[-1] == "add a test too"


def test_a_digit_replaces_the_choice_and_one_typed_too_early_is_never_a_prompt(
    chat: Screen, fake: FakeDeepSeek, work: Path
) -> None:
    """Issue 38.2: the hint says when the menu listens; a digit typed before it listens shows in the
    input with a note and Enter then chooses that option (never sends "3" to the model); a second
    digit while it listens replaces the choice (3 then 1 used to queue the prompt "31")."""
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
    chat.wait(lambda s: "? allow edit_file?" in s, whole=False)
    chat.type("3")  # at once: the menu is not listening yet
    chat.wait("3 went into the input (the menu was not listening yet)", whole=False)
    chat.keys("Enter")  # chooses 3, sends nothing
    chat.wait("3 is chosen: Enter confirms it", whole=False)
    chat.wait(lambda s: menu_row(s, "3.").startswith("❯"), whole=False)
    chat.wait("↑/↓ or 1-4, then Enter", whole=False)  # listening now
    chat.type("1")  # replaces the choice
    chat.wait(lambda s: menu_row(s, "1.").startswith("❯"), whole=False)
    assert not any(row.rstrip() == "› 31" for row in chat.screen().splitlines())
    chat.keys("Enter")
    chat.wait(lambda s: "→ allowed once" in s and "Done." in s)
    assert (work / "notes.txt").read_text() == "beta\n"
    assert set(prompts(fake)) == {"edit it"}  # no digit ever reached the model


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
    chat.wait("[queued #2] and this line?")
    (work / "app.py").write_text("one = 1\nTWO = 22\nthree = 3\n")  # changed after Enter
    chat.wait(lambda s: "Seen." in s)
    first, step_two, second = (r.json["messages"] for r in fake.requests)
    assert "and this line?" not in str(step_two)
    assert all("Selection in" not in str(m.get("content")) for m in first + step_two if m["role"] == "user")
    users = [m["content"] for m in second if m["role"] == "user"]
    assert users[-1] == "and this line?"
    assert "two = 2" in users[-2] and "TWO" not in users[-2]


def test_sessions_and_resume_with_the_picker(tmp_path: Path, fake: FakeDeepSeek, work: Path) -> None:
    """Issue 23 item 7: the /resume picker filters as you type and previews the highlighted session's
    last exchange; a resumed session shows its token totals (not 0)."""
    env = daemon_env(tmp_path / "state", fake)
    fake.script(
        Reply.stream(text_stream(["Answer one"])),
        Reply.stream(text_stream(["Answer one, again"])),
        Reply.stream(text_stream(["Answer two"])),
    )
    first = Screen(tmp_path, env, ["--no-thinking", "chat", "the first session"], cwd=work)
    try:
        first.wait("Answer one")
        first.type("and more of it")
        first.keys("Enter")
        first.wait("Answer one, again")
        first.wait(lambda s: "30 tokens" in status_line(first))  # two turns of 15
        first.keys("C-d")
        first.wait("[chat exited 0]")
    finally:
        first.close()
    second = Screen(tmp_path, env, ["--no-thinking", "chat", "the second session"], cwd=work)
    try:
        second.wait("Answer two")
        second.wait(lambda s: "15 tokens" in status_line(second))
        second.type("/sessions")
        second.keys("Enter")
        second.wait("the first session")
        second.type("/resume")
        second.keys("Enter")
        screen = second.wait("type to filter", whole=False)
        picker = screen.split("resume which session?")[1]
        assert "the second session" in picker and "the first session" in picker
        second.type("first")
        screen = second.wait(lambda s: "│ Answer one, again" in s, whole=False)
        print(screen)
        picker = screen.split("resume which session?")[1]
        assert "the second session" not in picker  # filtered out
        assert "the first session" in next(row for row in picker.splitlines() if row.startswith("❯"))
        assert "│ › and more of it" in picker  # the preview: the last exchange
        second.keys("Enter")
        second.wait("[resuming")
        screen = second.wait("Answer one, again")
        tail = screen.split("[resuming", 1)[1]
        assert "› the first session" in tail and "Answer one" in tail
        second.wait(lambda s: "30 tokens" in status_line(second))  # the totals came back with it
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
    chat.wait(lambda s: "? allow edit_file?" in s and "+beta" in s, whole=False)
    chat.type("please also this")  # the person is typing a prompt
    chat.keys("Enter")
    chat.wait("[queued #2] please also this")
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


def test_queue_items_keep_their_number_edit_in_place_pull_back_and_a_claimed_one_is_refused(
    chat: Screen, fake: FakeDeepSeek
) -> None:
    """Issue 23 item 2: commands act on an item's #number, not its position: once a turn took #2,
    `/drop 2` says so instead of removing whatever is now first; `/edit N` alone puts #N's text in the
    input and Enter saves it in place; Alt-Up pulls the last queued prompt back into the input."""
    fake.script(endless(["Working"]), endless(["On the second"]))
    chat.type("first")
    chat.keys("Enter")
    chat.wait("Working", whole=False)
    for text in ("second", "third", "fourth"):
        chat.type(text)
        chat.keys("Enter")
        chat.wait(f"] {text}")
    chat.wait(lambda s: "⋯ #2 second" in s and "⋯ #3 third" in s and "⋯ #4 fourth" in s, whole=False)

    chat.type("/edit 3")
    chat.keys("Enter")
    chat.wait(lambda s: any(row.rstrip() == "edit #3 › third" for row in s.splitlines()), whole=False)
    chat.type(" (reworded)")
    chat.keys("Enter")
    chat.wait("[edited #3: third (reworded)]")
    chat.wait(lambda s: "⋯ #3 third (reworded)" in s, whole=False)

    chat.keys("M-Up")  # the last queued prompt comes back into the input
    screen = chat.wait(lambda s: any(row.rstrip() == "› fourth" for row in s.splitlines()), whole=False)
    assert "⋯ #4" not in screen
    chat.wait("[pulled #4 back into the input")
    chat.keys("C-u")

    chat.keys("Escape")  # cancels the turn like Ctrl-C; the queue stays
    chat.wait("[cancelled: user; 2 queued item(s) parked")
    chat.type("/wake")
    chat.keys("Enter")
    chat.wait("On the second", whole=False)  # turn 2 took #2; #3 waits behind it
    chat.type("/drop 2")
    chat.keys("Enter")
    chat.wait("[#2 is no longer queued: turn 2 took it]")
    chat.type("/edit 2 too late")
    chat.keys("Enter")
    chat.wait(lambda s: s.count("[#2 is no longer queued: turn 2 took it]") == 2)
    chat.type("/drop 3")
    chat.keys("Enter")
    chat.wait("[dropped #3: third (reworded)]")
    chat.wait(lambda s: "queued" not in status_line(chat))
    chat.keys("Escape")
    chat.wait(lambda s: "idle" in status_line(chat))
    assert prompts(fake) == ["first", "second"]


@needs_tmux
def test_esc_acts_at_once_and_what_is_typed_after_it_is_plain_keys(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """Issue 38.1: prompt_toolkit read Esc as a Meta prefix and waited 1.5 s; `/queue` typed right
    after Esc lost its slash (Meta-/), the turn kept running and "queue" was queued as a prompt. Then
    it waited 30 ms twice, and `/queue` in the next read within them lost its slash still. Now a read
    that ends in Esc is the Esc key: the chat is held right after it read the Esc alone, `/queue` and
    Enter are typed, and it goes on (the next read is taken before any timer it has due): the turn
    ends cancelled and the command runs. (How soon after the key is a benchmark figure, not asserted
    here.)"""
    fake.script(endless(["thinking about it"]))
    chat = Screen(tmp_path, daemon_env(tmp_path / "state", fake), ["chat"], cwd=tmp_path)
    try:
        chat.wait(lambda s: "›" in s, whole=False)
        chat.type("start")
        chat.keys("Enter")
        chat.wait("thinking about it", whole=False)
        chat.read_alone("Escape", size=1)
        chat.type("/queue")
        chat.keys("Enter")
        chat.resume(size=7)
        chat.wait("[cancelled: user")
        chat.wait("[the queue is empty]")
        chat.wait(lambda s: "idle" in status_line(chat))
        assert prompts(fake) == ["start"]  # "queue" never became a prompt
    finally:
        chat.close()


@needs_tmux
def test_an_alt_key_in_one_read_is_still_an_alt_key(tmp_path: Path, fake: FakeDeepSeek) -> None:
    """A real Alt-key comes in the same read as its Esc (issue 38.1): Alt-b moves back a word and
    Alt-Enter breaks the line at the cursor, while a turn streams and when idle."""
    fake.script(endless(["thinking about it"]))
    chat = Screen(tmp_path, daemon_env(tmp_path / "state", fake), ["chat"], cwd=tmp_path)
    try:
        chat.wait(lambda s: "›" in s, whole=False)
        chat.type("one two")
        chat.wait(lambda s: "› one two" in s, whole=False)
        chat.one_read("M-b", size=2)
        chat.type("Y")
        chat.wait(lambda s: "› one Ytwo" in s, whole=False)
        chat.keys("C-e", "C-u")
        chat.wait(lambda s: "one" not in s, whole=False)
        chat.type("start")
        chat.keys("Enter")
        chat.wait("thinking about it", whole=False)
        chat.type("hello world")
        chat.wait(lambda s: "› hello world" in s, whole=False)
        chat.one_read("M-b", size=2)
        chat.type("X")
        chat.wait(lambda s: "› hello Xworld" in s, whole=False)
        chat.one_read("M-Enter", size=2)
        chat.type("two")
        chat.wait(lambda s: "› hello X\n" in s.replace(" \n", "\n") and "  twoworld" in s, whole=False)
        # Neither was an Esc: the turn goes on (waited for: a capture mid-redraw can lack the status line).
        chat.wait(lambda s: "running" in status_line(chat))
        chat.keys("Escape")
        chat.wait("[cancelled: user")
        assert prompts(fake) == ["start"]
    finally:
        chat.close()


@needs_tmux
def test_shift_tab_cycles_the_sessions_mode(tmp_path: Path, fake: FakeDeepSeek) -> None:
    """Issue 38.3: Shift-Tab cycles ask → accept edits → plan on the session (dsh/session/setMode,
    as the other clients set it), shown in the status line; plan mode offers only the read-only
    tools to the next request. Chosen before the first prompt, it applies to the session that
    prompt creates."""
    fake.script(Reply.stream(text_stream(["a plan"])))
    chat = Screen(tmp_path, daemon_env(tmp_path / "state", fake), ["chat"], cwd=tmp_path)
    try:
        chat.wait(lambda s: "›" in s, whole=False)
        chat.keys("BTab")
        chat.wait(lambda s: "accept edits" in status_line(chat))
        chat.keys("BTab")
        chat.wait(lambda s: "⏸ plan" in status_line(chat))
        chat.type("plan the refactor")
        chat.keys("Enter")
        chat.wait("a plan", whole=False)
        offered = {t["function"]["name"] for t in fake.requests[-1].json.get("tools", [])}
        assert "edit_file" not in offered and "read_file" in offered  # run_command runs read-only there
        chat.keys("BTab")  # plan → ask
        chat.wait(lambda s: "plan" not in status_line(chat) and "accept edits" not in status_line(chat))
    finally:
        chat.close()


@needs_tmux
def test_ctrl_g_edits_the_input_in_the_editor_and_ctrl_o_shows_the_last_output(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """Issue 38.5: Ctrl-G opens the input in $EDITOR and takes the saved text back into the input
    (not sent); Ctrl-O shows the last tool call's whole output, as /show does."""
    editor = tmp_path / "editor.py"
    editor.write_text(
        "import sys\nfrom pathlib import Path\n"
        "p = Path(sys.argv[1])\np.write_text(p.read_text().strip() + ' (written in the editor)')\n"
    )
    fake.script(
        Reply.stream(tool_call_stream([("c1", "run_command", {"command": "seq 1 30"})])),
        Reply.stream(text_stream(["counted"])),
    )
    env = {**daemon_env(tmp_path / "state", fake), "EDITOR": f"{sys.executable} {editor}", "VISUAL": ""}
    chat = Screen(tmp_path, env, ["chat", "--yes"], cwd=tmp_path)
    try:
        chat.wait(lambda s: "›" in s, whole=False)
        chat.type("count to thirty")
        chat.keys("C-g")
        chat.wait(lambda s: "› count to thirty (written in the editor)" in s, whole=False)
        assert fake.requests == []  # back in the input, not sent
        chat.keys("Enter")
        chat.wait("counted", whole=False)
        assert prompts(fake)[0] == "count to thirty (written in the editor)"
        chat.keys("C-o")
        chat.wait(lambda s: "── /show 1" in s and "30" in s.split("── /show 1", 1)[1])
        chat.type("and again")
        chat.keys("C-x")  # a shell's key for the same, typed key by key
        chat.until_unread(0)
        time.sleep(0.2)  # a person's pause between the two keys (the chat waits up to 1 s)
        chat.keys("C-e")
        chat.wait(lambda s: "› and again (written in the editor)" in s, whole=False)
        assert len(fake.requests) == 2
    finally:
        chat.close()


@needs_tmux
def test_the_permission_header_wraps_between_words(tmp_path: Path, fake: FakeDeepSeek) -> None:
    """Issue 38.8: at 70 columns a long permission title was cut mid-word by the terminal's edge;
    it wraps between words now, each continuation under the title."""
    command = "echo " + " ".join(f"word{n:02d}" for n in range(14))
    fake.script(
        Reply.stream(tool_call_stream([("c1", "run_command", {"command": command})])),
        Reply.stream(text_stream(["ok"])),
    )
    unconfined(tmp_path / "state")  # the command asks (a confined one would run unasked)
    chat = Screen(tmp_path, daemon_env(tmp_path / "state", fake), ["chat"], cwd=tmp_path, width=70)
    try:
        chat.wait(lambda s: "›" in s, whole=False)
        chat.type("echo the words")
        chat.keys("Enter")
        screen = chat.wait(lambda s: "? allow run_command?" in s and "\n? Run:" in s, whole=False)
        rows = screen.splitlines()
        start = next(i for i, row in enumerate(rows) if row.startswith("? Run:"))
        header = [rows[start]]
        for row in rows[start + 1 :]:
            if not row.startswith("  ") or row.lstrip().startswith("$"):
                break
            header.append(row)
        assert len(header) >= 2, screen  # it did wrap
        words = " ".join(row[2:].strip() for row in header).split()
        assert words[:2] == ["Run:", "echo"] and all(w.startswith("word") for w in words[2:]), header
        assert all(len(w) == len("word00") for w in words[2:]), header  # no word was cut in two
    finally:
        chat.close()


@needs_tmux
def test_a_pasted_file_path_goes_into_the_input_as_a_mention(tmp_path: Path, fake: FakeDeepSeek) -> None:
    """Issue 38.8: a file's path pasted into the terminal (a bracketed paste, as a terminal sends a
    file dragged into it) becomes `@path`, and the file goes with the prompt; other text pastes as
    it is."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("print('hi')\n")
    fake.script(Reply.stream(text_stream(["Read it."])))
    chat = Screen(tmp_path, daemon_env(tmp_path / "state", fake), ["chat"], cwd=tmp_path)
    try:
        chat.wait(lambda s: "›" in s, whole=False)
        chat.type("look at ")
        chat.tmux("set-buffer", f"'{tmp_path / 'src' / 'app.py'}'")
        chat.tmux("paste-buffer", "-p")  # -p: bracketed, as the chat asked the terminal for
        chat.wait(lambda s: "› look at @src/app.py" in s, whole=False)
        chat.tmux("set-buffer", "and the tests")
        chat.tmux("paste-buffer", "-p")
        chat.wait(lambda s: "› look at @src/app.py and the tests" in s, whole=False)
        chat.keys("Enter")
        chat.wait("Read it.", whole=False)
        sent = fake.requests[0].json["messages"]
        assert any("print('hi')" in str(m["content"]) for m in sent)  # the file went with it
    finally:
        chat.close()


@needs_tmux
def test_tool_cards_are_the_daemons_calls_even_when_the_provider_reuses_an_id(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """Issue 38.7: OpenAI-compatible servers send call_0 in every turn; the chat keyed its cards by
    that id, so a second turn's call fell into the first one's card. Cards follow the daemon's
    per-session call id: two cards, each with its own output (/show N, Ctrl-O the last)."""
    fake.script(
        Reply.stream(tool_call_stream([("call_0", "run_command", {"command": "echo first-output"})])),
        Reply.stream(text_stream(["one"])),
        Reply.stream(tool_call_stream([("call_0", "run_command", {"command": "echo second-output"})])),
        Reply.stream(text_stream(["two"])),
    )
    chat = Screen(tmp_path, daemon_env(tmp_path / "state", fake), ["chat", "--yes"], cwd=tmp_path)
    try:
        chat.wait(lambda s: "›" in s, whole=False)
        chat.type("first")
        chat.keys("Enter")
        chat.wait(lambda s: "idle" in status_line(chat) and "one" in s)
        chat.type("second")
        chat.keys("Enter")
        screen = chat.wait(lambda s: "idle" in status_line(chat) and "two" in s)
        assert "  ✓ run_command echo first-output · exit 0 · 2 lines · /show 1" in screen, screen
        assert "  ✓ run_command echo second-output · exit 0 · 2 lines · /show 2" in screen, screen
        chat.type("/show 1")
        chat.keys("Enter")
        screen = chat.wait("── /show 1: run_command echo first-output")
        assert "second-output" not in screen.split("── /show 1:")[1], screen
        chat.keys("C-o")
        screen = chat.wait("── /show 2: run_command echo second-output")
        assert "first-output" not in screen.split("── /show 2:")[1], screen
    finally:
        chat.close()
