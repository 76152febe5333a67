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
    assert snap["queue"] == ["  ⧗ next step · inject  a note for later", "  ⧗ queued 1 · followup  third question"]
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
