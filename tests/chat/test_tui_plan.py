"""The agent's plan in `dsh-daemon chat` at a terminal (tmux): a line in the scrollback per update, a
block above the input line while the turn runs (gone when it ends), and `/plan`."""

from __future__ import annotations

from tests.chat.screen import Screen, endless, needs_tmux, status_line
from tests.fakes.deepseek_server import FakeDeepSeek, Reply
from tests.server.harness import tool_call_stream

pytestmark = needs_tmux

STEPS = [
    {"title": "Read the code", "status": "done"},
    {"title": "Fix the bug", "status": "in_progress"},
    {"title": "Run the tests", "status": "pending"},
]


def test_the_plan_shows_above_the_input_while_the_turn_runs(chat: Screen, fake: FakeDeepSeek) -> None:
    fake.script(
        Reply.stream(tool_call_stream([("call_1", "update_plan", {"steps": STEPS, "note": "bug found"})])),
        endless(["Fixing it"]),
    )
    chat.type("fix the bug")
    chat.keys("Enter")
    chat.wait("Fixing it", whole=False)

    # the block, right above the input line
    def rows(screen: str) -> list[str]:
        return [row.rstrip() for row in screen.splitlines()]

    # (the scrollback's line starts the same: wait for the block's own header row)
    screen = chat.wait(lambda s: "plan 1/3 done" in rows(s) and "  ☐ Run the tests" in rows(s), whole=False)
    shown = rows(screen)
    block = shown.index("plan 1/3 done")
    assert shown[block + 1 : block + 5] == ["  ☑ Read the code", "  ◐ Fix the bug", "  ☐ Run the tests", "›"]
    # and its line in the scrollback
    chat.wait("plan 1/3 done · ☑ Read the code · ◐ Fix the bug · ☐ Run the tests")

    chat.keys("C-c")
    chat.wait(lambda s: "idle" in status_line(chat))
    chat.wait(lambda s: "plan 1/3 done" not in rows(s), whole=False)  # idle: no block

    chat.type("/plan")
    chat.keys("Enter")
    everything = chat.wait("note: bug found")
    assert "plan (turn 1): 1/3 done\n  ☑ Read the code\n  ◐ Fix the bug\n  ☐ Run the tests\n" in everything
