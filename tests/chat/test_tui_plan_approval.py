"""A plan's approval in `dsh-daemon chat` at a terminal (tmux; protocol.md §3 "Plan approval"): in
plan mode the model's `propose_plan` shows the whole plan and a menu (approve and accept edits,
approve and ask, keep planning, cancel); a line typed meanwhile sends the plan back with those words;
choosing approve switches the status line's mode and the plan runs at once, with no retyping."""

from __future__ import annotations

from pathlib import Path

from tests.chat.screen import Screen, needs_tmux, status_line
from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.harness import daemon_env, tool_call_stream

pytestmark = needs_tmux

PLAN = "1. Write notes.txt with the summary.\n2. Say what changed."
REVISED = PLAN + "\n3. Add a line about the tests."


def propose(plan: str, call_id: str) -> Reply:
    return Reply.stream(tool_call_stream([(call_id, "propose_plan", {"plan": plan})]))


def test_the_plan_is_approved_or_revised_from_the_terminal(tmp_path: Path, fake: FakeDeepSeek) -> None:
    work = tmp_path / "work"
    work.mkdir()
    write = ("call_w", "write_file", {"path": "notes.txt", "content": "summary\n"})
    fake.script(
        propose(PLAN, "call_1"),
        propose(REVISED, "call_2"),
        Reply.stream(tool_call_stream([write])),
        Reply.stream(text_stream(["All done."])),
    )
    chat = Screen(tmp_path, daemon_env(tmp_path / "state", fake), ["--no-thinking", "chat"], cwd=work)
    try:
        chat.wait(lambda s: "›" in s, whole=False)
        chat.keys("BTab")
        chat.keys("BTab")
        chat.wait(lambda s: "⏸ plan" in status_line(chat))
        chat.type("plan the notes")
        chat.keys("Enter")

        # The plan in full, then the menu, listening once the person has paused.
        screen = chat.wait("1-4, then Enter", whole=False)
        assert "? The model proposes this plan:" in screen
        assert "│ 1. Write notes.txt with the summary." in screen and "│ 2. Say what changed." in screen
        assert "? approve the plan?" in screen
        for label in ("1. Yes, approve and accept edits", "2. Yes, approve and ask before each edit",
                      "3. No, keep planning", "4. Cancel the turn"):  # fmt: skip
            assert label in screen, label

        # Typing sends the plan back with those words; the model proposes again, still in plan mode.
        chat.type("add a line about the tests")
        chat.wait("Enter sends the plan back to revise", whole=False)
        chat.keys("Enter")
        chat.wait("sent back to revise")
        screen = chat.wait("│ 3. Add a line about the tests.", whole=False)
        revised = [m for m in fake.requests[1].json["messages"] if m["role"] == "tool"][-1]["content"]
        assert "add a line about the tests" in revised and "still in plan mode" in revised
        # The status line is drawn after the plan's lines; a capture between the two has the prompt
        # last (the CI's failure), so this waits for it: still plan mode, never another.
        chat.wait(lambda s: status_line(chat).strip() != "›")
        assert "⏸ plan" in status_line(chat)

        # Approve: accept edits. The plan runs now; the write needs no question.
        chat.wait("1-4, then Enter", whole=False)
        chat.keys("1")
        chat.keys("Enter")
        chat.wait("plan approved: accept edits")
        chat.wait("All done.")
        chat.wait(lambda s: "accept edits" in status_line(chat) and "idle" in status_line(chat))
        everything = chat.everything()
        assert (
            "[approved plan · accept edits] Carry out this plan; I approved it: 1. Write notes.txt"
            in everything
        )
        assert (work / "notes.txt").read_text() == "summary\n"
        assert PLAN in str(fake.requests[2].json["messages"][-1]["content"])
        assert everything.count("The model proposes this plan:") == 2  # no question for the write
    finally:
        chat.close()
