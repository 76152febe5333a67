"""Restart Neovim: :DshResume reattaches, renders the transcript and the intact queue."""

from __future__ import annotations

from collections.abc import Callable

from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.neovim.harness import Editor, footers


def test_resume_after_restarting_neovim(start_editor: Callable[[], Editor], fake: FakeDeepSeek) -> None:
    fake.script(
        Reply.stream(text_stream(["First", " answer."])),
        Reply.stream(text_stream(["Half an"])[:2], tail="stall"),  # still streaming when Neovim quits
        Reply.stream(text_stream(["Third", " ran."])),
    )
    first = start_editor()
    first.cmd("Dsh first question")
    first.wait_footers(1)
    first.cmd("Dsh second question")
    first.wait_text("Half an")
    first.type_in_input("third question")
    first.keys("<CR>")
    first.lua("require('dsh').send(T.chat(), 'inject', 'a note for later')")
    first.wait(lambda: first.pending() == 2, what="two queued items")
    session_id = first.snapshot()["id"]
    first.quit()  # the running turn ends aborted (shutdown); the queue stays parked

    second = start_editor()  # a new Neovim: same HOME, DSH_HOME and project
    second.cmd("DshResume")
    second.wait(lambda: len(footers(second.lines())) >= 2, what="the replayed transcript")
    snap = second.snapshot()
    assert snap["id"] == session_id
    lines = snap["lines"]
    assert [lines[i + 1] for i, line in enumerate(lines) if line == "## You"] == [
        "first question",
        "second question",
    ]
    assert "First answer." in lines and "Half an" in lines
    assert footers(lines)[0].startswith("── completed · 12 in · 3 out")
    assert footers(lines)[1].startswith("── aborted (shutdown)")
    second.wait(lambda: second.pending() == 2, what="the queue from the attach reply")
    snap = second.snapshot()
    assert snap["queue"] == [
        "  ⧗ next step · inject  a note for later",
        "  ⧗ queued 1 · followup  third question",
    ]
    assert snap["status"] == "idle" and "2 queued" in snap["winbar"] and "first question" in snap["winbar"]
    assert len(fake.requests) == 2  # nothing ran while Neovim was away
    second.cmd("DshWake")
    second.wait_text("Third ran.")
    second.wait_footers(3)
    third = fake.requests[2].json["messages"]
    assert [m["content"] for m in third if m["role"] == "user"][-2:] == ["a note for later", "third question"]
    lines = second.lines()
    assert lines[lines.index("a note for later") - 1 :][:4] == [
        "## You",
        "a note for later",
        "",
        "third question",
    ]
    assert second.snapshot()["queue"] == []


def test_resume_shows_a_transcript_page_then_older_turns_on_demand(
    start_editor: Callable[[], Editor], fake: FakeDeepSeek
) -> None:
    fake.script(*(Reply.stream(text_stream([f"answer {n}"])) for n in ("one", "two", "three")))
    first = start_editor()
    for n, prompt in enumerate(("one", "two", "three"), 1):
        first.cmd(f"Dsh {prompt}")
        first.wait_footers(n)
    session_id = first.snapshot()["id"]
    full = first.lines()
    first.quit()

    second = start_editor()
    second.lua("require('dsh.config').options.page_turns = 2")
    second.cmd("DshResume")
    second.wait(lambda: len(footers(second.lines())) >= 2, what="the newest page")
    snap = second.snapshot()
    assert snap["id"] == session_id and " one " in snap["winbar"]  # the title: the first prompt
    lines = snap["lines"]
    assert lines[0] == "↑ turns before 2 not shown: \\o or :DshOlder loads them"
    assert "one" not in lines and "answer one" not in lines
    assert lines[lines.index("two") :] == full[full.index("two") :]
    assert second.lua("return T.chat().state.rendered_seq") >= 0  # attached without replay
    # \o (<localleader>o) in the transcript loads the older turn above; the page looks as it did live.
    second.lua("vim.api.nvim_set_current_win(vim.fn.win_findbuf(T.chat().buf)[1])")
    second.keys("\\o")
    second.wait(lambda: "one" in second.lines(), what="the older turn")
    assert second.lines() == full
    hls = {(h["row"], h["hl"]) for h in second.snapshot()["hls"]}
    assert {(i, "DshFooter") for i, line in enumerate(full) if line.startswith("── ")} <= hls
    second.cmd("DshOlder")
    second.wait(lambda: "no older turns" in second.lua("return T.messages()"), what="nothing older")
    # A live turn continues the page.
    fake.script(Reply.stream(text_stream(["answer four"])))
    second.cmd("Dsh four")
    second.wait_footers(4)
    lines = second.lines()
    assert lines[: len(full)] == full and lines[len(full) :][:5] == [
        "## You",
        "four",
        "",
        "## dsh",
        "answer four",
    ]


def test_rename_the_session(editor: Editor, fake: FakeDeepSeek) -> None:
    fake.script(Reply.stream(text_stream(["ok"])))
    editor.cmd("Dsh name me")
    editor.wait_footers(1)
    assert "name me" in editor.snapshot()["winbar"]
    editor.cmd("DshRename  Flaky   test, take two ")
    editor.wait(lambda: "Flaky test, take two" in editor.snapshot()["winbar"], what="the new title")
    (listed,) = editor.lua("return T.request('dsh/session/list', vim.empty_dict())")["sessions"]
    assert listed["title"] == "Flaky test, take two"


def test_switching_sessions_detaches_the_one_left(
    start_editor: Callable[[], Editor], fake: FakeDeepSeek
) -> None:
    fake.script(Reply.stream(text_stream(["first"])), Reply.stream(text_stream(["second window"])))
    first = start_editor()
    first.cmd("Dsh one")
    first.wait_footers(1)
    left = first.snapshot()["id"]
    first.cmd("DshNew")  # the session shown before is detached: no longer leased to this window
    first.wait(lambda: first.snapshot()["id"] != left, what="a new session")
    second = start_editor()  # another Neovim (its own daemon) on the same state
    second.cmd(f"DshResume {left}")
    second.wait_text("first")
    assert "read-only" not in second.snapshot()["winbar"]
    second.cmd("Dsh two")  # it drives the session
    second.wait_text("second window")
    second.wait_footers(2)
    # Back in the first window, the session is driven by the other one: it opens read-only.
    first.cmd(f"DshResume {left}")
    first.wait(lambda: "read-only" in first.snapshot()["winbar"], what="read-only")
    first.wait_text("second window")


def test_delete_a_session(editor: Editor, fake: FakeDeepSeek) -> None:
    fake.script(
        Reply.stream(text_stream(["first"])),
        Reply.stream(text_stream(["Half an"])[:2], tail="stall"),
        Reply.stream(text_stream(["a fresh start"])),
    )
    # vim.fn.confirm answers what _G.answer says (1 Delete, 2 Cancel) and records the question.
    editor.lua(
        "_G.asked, _G.answer = {}, 2;"
        " vim.fn.confirm = function(msg) table.insert(_G.asked, msg); return _G.answer end"
    )

    def listed() -> list[str]:
        sessions = editor.lua("return T.request('dsh/session/list', vim.empty_dict())")["sessions"]
        return [s["sessionId"] for s in sessions]

    editor.cmd("Dsh delete me later")
    editor.wait_footers(1)
    session_id = editor.snapshot()["id"]
    # A turn is running: refused, and the notification says why.
    editor.cmd("Dsh second")
    editor.wait_text("Half an")
    editor.cmd("DshDelete!")
    editor.wait(lambda: "cannot delete the session" in editor.lua("return T.messages()"), what="the refusal")
    assert "a turn is running" in editor.lua("return T.messages()")
    assert editor.lua("return _G.asked") == []  # ! does not ask
    editor.cmd("DshStop")
    editor.wait_footers(2)
    # Asked first; "Cancel" keeps it.
    editor.cmd("DshDelete")
    editor.wait(lambda: editor.lua("return #_G.asked") == 1, what="the confirmation")
    question = editor.lua("return _G.asked[1]")
    assert session_id[:8] in question and '"delete me later"' in question
    assert session_id in listed()
    editor.lua("_G.answer = 1")
    editor.cmd("DshDelete")
    editor.wait_text("✗ this session was deleted; the next prompt starts a new session")
    assert session_id not in listed()
    assert "deleted" in editor.snapshot()["winbar"]
    assert "deleted session " + session_id[:8] in editor.lua("return T.messages()")
    # The next prompt, typed in the same chat, starts a new session shown in its place.
    editor.type_in_input("again")
    editor.keys("<CR>")
    editor.wait(lambda: (editor.snapshot() or {}).get("id") not in (None, session_id), what="a new session")
    editor.wait_footers(1)
    lines = editor.lines()
    assert lines[:2] == ["## You", "again"] and "a fresh start" in lines
    assert listed() == [editor.snapshot()["id"]]
    # :DshDelete! <prefix> deletes another session of the project; the chat shown stays.
    other = editor.lua("return T.request('dsh/session/new', vim.empty_dict())")["sessionId"]
    editor.cmd(f"DshDelete! {other[:8]}")
    editor.wait(lambda: other not in listed(), what="the other session deleted")
    assert "deleted" not in editor.snapshot()["winbar"]
