"""The chat: streaming into the transcript, the queue while busy, stop keeping the queue, wake."""

from __future__ import annotations

import json
import os
import signal
from typing import Any

from tests.fakes.deepseek_server import STREAM_B, FakeDeepSeek, Reply, text_stream
from tests.neovim.harness import Editor, Paths, children, footers
from tests.server.harness import tool_call_stream


def slow(pieces: list[str], delay: float = 0.15) -> Reply:
    return Reply.stream(text_stream(pieces), delay=delay)


def test_stream_into_the_transcript(editor: Editor, fake: FakeDeepSeek) -> None:
    pieces = ["Hello", " from", " the", " fake", " model.\n", "Second", " line", " here."]
    fake.script(slow(pieces, delay=0.25))
    editor.cmd("Dsh say hello")
    snap = editor.wait(editor.snapshot, what="the chat")
    assert snap["filetype"] == "markdown" and snap["buftype"] == "nofile"
    # Mid-stream: part of the reply is already in the buffer while the turn runs.
    editor.wait(lambda: "Hello from" in editor.text(), what="first deltas")
    mid = editor.snapshot()
    assert mid["status"] == "running" and "running" in mid["winbar"]
    assert "Second line here." not in "\n".join(mid["lines"])
    (footer,) = editor.wait_footers(1)
    lines = editor.lines()
    assert lines[:2] == ["## You", "say hello"]
    assert lines[lines.index("## dsh") + 1 :][:2] == ["Hello from the fake model.", "Second line here."]
    assert footer.startswith("── completed · 12 in · 3 out · $0.0000") and footer.endswith(" ──")
    # The transcript window's cursor was on the last line, so it followed the end.
    snap = editor.snapshot()
    assert snap["cursor"][0] == snap["line_count"]
    assert "idle" in snap["winbar"]


def test_the_cursor_stays_where_the_person_put_it(editor: Editor, fake: FakeDeepSeek) -> None:
    fake.script(slow(["one"]), slow(["two", " three", " four", " five"], delay=0.2))
    editor.cmd("Dsh first")
    editor.wait_footers(1)
    # Move the transcript cursor to the top, then stream another reply: it must not jump.
    editor.lua("local c = T.chat(); vim.api.nvim_win_set_cursor(c:windows()[1], {1, 0})")
    editor.cmd("Dsh second")
    editor.wait_footers(2)
    assert editor.snapshot()["cursor"][0] == 1
    assert "two three four five" in editor.text()


def test_reasoning_is_dimmed_and_tool_calls_are_cards(editor: Editor, fake: FakeDeepSeek) -> None:
    (editor.paths.work / "notes.txt").write_text("a note\n")
    fake.script(
        Reply.stream(STREAM_B),  # reasoning "The user greets me." then "Hi!"
        Reply.stream(tool_call_stream([("call_r", "read_file", {"path": "notes.txt"})], text="Reading.")),
        Reply.stream(text_stream(["It says: a note"])),
    )
    editor.cmd("Dsh hi")
    editor.wait_footers(1)
    lines = editor.lines()
    row = lines.index("The user greets me.")
    assert lines[row + 2] == "Hi!"  # a blank line between the reasoning and the answer
    snap = editor.snapshot()
    dim = [h for h in snap["hls"] if h["hl"] == "DshReasoning"]
    assert (
        dim
        and dim[0]["row"] == row
        and dim[0]["end_row"] == row
        and dim[0]["end_col"] == len("The user greets me.")
    )
    editor.cmd("Dsh read my notes")
    editor.wait_footers(2)
    lines = editor.lines()
    card_row = next(i for i, line in enumerate(lines) if line.startswith("⚙ read_file"))
    assert lines[card_row] == "⚙ read_file  notes.txt"
    cards = [c for c in editor.snapshot()["cards"] if c["row"] == card_row]
    assert cards and cards[0]["text"].strip() == "✓ ok" and cards[0]["hl"] == "DshToolOk"
    assert "It says: a note" in lines[card_row + 1 :]


def test_prompts_sent_while_busy_are_queued_and_run_in_order(editor: Editor, fake: FakeDeepSeek) -> None:
    fake.script(
        slow(["working", " on", " it", " slowly", " now"], delay=0.8), slow(["B done"]), slow(["C done"])
    )
    editor.cmd("Dsh A")
    editor.wait(lambda: editor.status() == "running", what="running")
    editor.type_in_input("B")
    editor.keys("<CR>")  # <CR> in normal mode sends; busy, so it is queued
    editor.type_in_input("C")
    editor.keys("<C-s>")
    snap = editor.wait(lambda: (s := editor.snapshot())["pending"] == 2 and s, what="two queued prompts")
    assert snap["queue"][:2] == ["  ⧗ queued 1 · followup  B", "  ⧗ queued 2 · followup  C"]
    assert "2 queued" in snap["winbar"]
    assert snap["input"] == [""]
    assert editor.status() == "running"
    editor.wait_footers(3)
    lines = editor.lines()
    you = [lines[i + 1] for i, line in enumerate(lines) if line == "## You"]
    assert you == ["A", "B", "C"]
    assert lines.index("B done") < lines.index("C done")
    assert editor.snapshot()["queue"] == []


def test_stop_keeps_the_queue_then_wake_runs_it(editor: Editor, fake: FakeDeepSeek) -> None:
    fake.script(Reply.stream(text_stream(["thinking about it"])[:2], tail="stall"), slow(["queued one ran"]))
    editor.cmd("Dsh long task")
    editor.wait_text("thinking about it")
    editor.type_in_input("then this")
    editor.keys("<CR>")
    editor.wait(lambda: editor.pending() == 1, what="queued")
    editor.keys("<C-c>")  # stop, keep the queue
    (footer,) = editor.wait_footers(1)
    assert footer.startswith("── aborted (user)")
    snap = editor.snapshot()
    assert snap["pending"] == 1 and snap["queue"] == ["  ⧗ queued 1 · followup  then this"]
    assert len(fake.requests) == 1  # parked: nothing ran
    editor.cmd("DshWake")
    footers_ = editor.wait_footers(2)
    assert footers_[1].startswith("── completed")
    lines = editor.lines()
    assert lines[lines.index("then this") + 3] == "queued one ran"
    assert editor.snapshot()["queue"] == []


def test_stop_bang_clears_the_queue(editor: Editor, fake: FakeDeepSeek) -> None:
    fake.script(Reply.stream(text_stream(["x"])[:2], tail="stall"))
    editor.cmd("Dsh long task")
    editor.wait_text("x")
    editor.cmd("DshSteer")  # nothing typed: says so, sends nothing
    editor.type_in_input("never mind")
    editor.keys("<CR>")
    editor.wait(lambda: editor.pending() == 1, what="queued")
    editor.cmd("DshStop!")
    editor.wait_footers(1)
    editor.wait(lambda: editor.pending() == 0, what="queue cleared")
    assert footers(editor.lines())[0].startswith("── aborted (user)")
    assert editor.lua("return T.inbox()") == {"nextTurn": [], "nextStep": []}


def test_a_daemon_that_died_is_restarted_and_the_chat_goes_on(editor: Editor, fake: FakeDeepSeek) -> None:
    fake.script(slow(["before"]), slow(["after"]))
    editor.cmd("Dsh one")
    editor.wait_footers(1)
    (daemon,) = children(editor.pid)
    os.kill(daemon, signal.SIGKILL)
    editor.wait_text("daemon exited")
    editor.cmd("Dsh two")  # starts a daemon again, reattaches the session, sends
    editor.wait_footers(2)
    lines = editor.lines()
    assert lines.index("before") < lines.index("two") < lines.index("after")
    assert children(editor.pid) != [daemon]


def test_a_failed_turn_says_why_in_its_footer(editor: Editor, fake: FakeDeepSeek) -> None:
    fake.fail_next(1, 401)
    editor.cmd("Dsh hello")
    (footer,) = editor.wait_footers(1)
    assert footer.startswith("── error · AUTH: ") and "Authentication Fails" in footer
    assert editor.snapshot()["hls"][-1]["hl"] == "DshFooterError"
    assert " hello · idle" in editor.snapshot()["winbar"]  # the title is the first prompt


def test_what_was_typed_comes_back_when_the_daemon_cannot_start(editor: Editor, fake: FakeDeepSeek) -> None:
    fake.script(slow(["hi"]))
    editor.cmd("Dsh hello")
    editor.wait_footers(1)
    (daemon,) = children(editor.pid)
    os.kill(daemon, signal.SIGKILL)
    editor.wait_text("daemon exited")
    # The next daemon refuses its configuration at `initialize`.
    editor.lua(
        "local o = require('dsh.config').options; o.init_options = {bogusKey = 1}; o.start_timeout = 1500"
    )
    editor.type_in_input("keep me")
    editor.keys("<CR>")
    editor.wait(lambda: editor.snapshot()["input"] == ["keep me"], what="the input restored")
    assert "followup failed: the daemon did not start" in editor.lua("return T.messages()")


def test_meta_enter_steers_the_running_turn(editor: Editor, fake: FakeDeepSeek) -> None:
    fake.script(slow(["working", " on", " it", " slowly"], delay=0.6), slow(["switched to v2"]))
    editor.cmd("Dsh do the thing")
    editor.wait_text("working")
    editor.type_in_input("use the v2 API instead")
    editor.keys("<M-CR>")  # steer: next step of the running work, never a queued prompt
    editor.wait(
        lambda: editor.snapshot()["queue"] == ["  ⧗ next step · steer  use the v2 API instead"],
        what="steer shown",
    )
    (footer,) = editor.wait_footers(1)  # the steer entered the same turn, as its next step
    assert footer.startswith("── completed") and len(fake.requests) == 2
    second = [m["content"] for m in fake.requests[1].json["messages"] if m["role"] == "user"]
    assert second[-1] == "use the v2 API instead"
    lines = editor.lines()
    assert lines.index("use the v2 API instead") < lines.index("switched to v2")


def test_a_wiped_transcript_comes_back(editor: Editor, fake: FakeDeepSeek) -> None:
    fake.script(slow(["first reply"]), slow(["second reply"]))
    editor.cmd("Dsh one")
    editor.wait_footers(1)
    editor.lua(
        "local c = T.chat(); vim.api.nvim_buf_delete(c.buf, {force = true}); vim.api.nvim_buf_delete(c.input, {force = true})"
    )
    editor.cmd("Dsh two")
    editor.wait_footers(2)
    lines = editor.lines()
    assert lines.index("first reply") < lines.index("two") < lines.index("second reply")


def test_a_turn_its_budget_stopped_says_so_in_words(
    start_editor: Any, paths: Paths, fake: FakeDeepSeek
) -> None:
    """agent.budget (issue 35.2): the `budget` turn end names the cap, what the turn used and what to do."""
    config = json.loads((paths.state / "config.json").read_text())
    (paths.state / "config.json").write_text(json.dumps({**config, "agent": {"budget": {"steps": 1}}}))
    editor = start_editor()
    (paths.work / "a.txt").write_text("hello\n")
    fake.script(
        Reply.stream(tool_call_stream([("call_r", "read_file", {"path": str(paths.work / "a.txt")})]))
    )
    editor.cmd("Dsh read a.txt")
    (footer,) = editor.wait_footers(1)
    lines = editor.lines()
    stopped = lines[lines.index(footer) - 1]
    assert stopped == (
        "⏹ Stopped: the turn's budget of 1 model request is spent (used 1 model request)"
        " — raise agent.budget.steps to go on, or send a prompt to continue"
    )
    assert footer.startswith("── budget · ")
    assert len(fake.requests) == 1  # the request that would pass the cap was never made (nor later)
    hl = [h["hl"] for h in editor.snapshot()["hls"] if h["row"] == lines.index(stopped)]
    assert hl == ["DshFooterError"]
    # A cost cap, changed live: the cost the turn used, as the footer writes costs.
    editor.lua(
        "require('dsh.client').notify(require('dsh.client').root_for(0), 'workspace/didChangeConfiguration',"
        " {settings = {dsh = {agent = {budget = {steps = 100, costUsd = 0.000001}}}}})"
    )
    fake.script(
        Reply.stream(tool_call_stream([("call_r2", "read_file", {"path": str(paths.work / "a.txt")})]))
    )
    editor.type_in_input("again")
    editor.keys("<CR>")
    footer2 = editor.wait_footers(2)[1]
    lines = editor.lines()
    cost = footer2.split(" · ")[-1].rstrip(" ─")
    assert lines[len(lines) - 1 - lines[::-1].index(footer2) - 1] == (
        f"⏹ Stopped: the turn's budget of $0.000001 is spent (used {cost})"
        " — raise agent.budget.costUsd to go on, or send a prompt to continue"
    )
    assert len(fake.requests) == 2
