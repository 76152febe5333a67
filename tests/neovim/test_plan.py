"""The agent's plan in Neovim (issue 33.1) over the real daemon: one block per turn in the transcript,
rewritten in place by each `plan/updated` (never a copy per change), the window bar's gauge, :DshPlan
following the changes, the plan back from the attach reply after Neovim restarts, and a rewind
putting back the plan that stood before the cut turn."""

from __future__ import annotations

from typing import Any

from tests.fakes.deepseek_server import FakeDeepSeek, Reply
from tests.neovim.harness import Editor
from tests.server.harness import text_reply, tool_call_stream


def plan_call(call_id: str, *steps: tuple[str, str], note: str | None = None) -> Reply:
    args: dict[str, Any] = {"steps": [{"title": t, "status": s} for t, s in steps]}
    if note:
        args["note"] = note
    return Reply.stream(tool_call_stream([(call_id, "update_plan", args)]))


def plan_floats(editor: Editor) -> list[dict[str, Any]]:
    return [f for f in editor.floats() if f["kind"] == "plan"]


def block(lines: list[str]) -> list[str]:
    """Every plan block's lines, in order."""
    out, inside = [], False
    for line in lines:
        if line.startswith("☰ plan"):
            inside = True
        elif inside and not line.startswith("  "):
            inside = False
        if inside:
            out.append(line)
    return out


def test_the_plan_is_one_block_per_turn_rewritten_in_place_and_dsh_plan_follows(
    start_editor: Any, fake: FakeDeepSeek
) -> None:
    editor = start_editor()
    fake.script(
        plan_call(
            "call_p1",
            ("Read the code", "in_progress"),
            ("Fix the bug", "pending"),
            ("Run the tests", "pending"),
        ),
        plan_call(
            "call_p2",
            ("Read the code", "done"),
            ("Fix the bug", "in_progress"),
            ("Run the tests", "pending"),
            note="the bug is in parse()",
        ),
        text_reply("Working on it."),
        plan_call(
            "call_p3", ("Read the code", "done"), ("Fix the bug", "done"), ("Run the tests", "in_progress")
        ),
        text_reply("Tests next."),
    )
    editor.cmd("Dsh fix the parser")
    editor.wait_footers(1)
    lines = editor.lines()
    assert block(lines) == [
        "☰ plan · 1/3 done",
        "  ☑ Read the code",
        "  ◐ Fix the bug",
        "  ☐ Run the tests",
        "  note: the bug is in parse()",
    ]
    # In place: the block sits where the turn's first update put it, after the first call's card.
    first_card = next(i for i, line in enumerate(lines) if line.startswith("⚙ update_plan"))
    assert lines[first_card + 1] == "☰ plan · 1/3 done"
    assert sum(line.startswith("⚙ update_plan") for line in lines) == 2
    assert lines.index("☰ plan · 1/3 done") < max(
        i for i, line in enumerate(lines) if line.startswith("⚙ update_plan")
    )
    assert "Working on it." in lines
    assert "plan 1/3" in editor.snapshot()["winbar"]

    editor.cmd("DshPlan")
    pf = editor.wait(lambda: next(iter(plan_floats(editor)), None), what="the plan view")
    assert pf["current"] and pf["lines"][0] == "☰ plan of turn 1 · 1/3 done"
    assert pf["lines"][1:] == [
        "  ☑ Read the code",
        "  ◐ Fix the bug",
        "  ☐ Run the tests",
        "  note: the bug is in parse()",
    ]
    editor.cmd("wincmd p")  # the view stays open while the next turn runs, and follows its changes
    editor.type_in_input("go on")
    editor.keys("<CR>")
    editor.wait_footers(2)
    pf = editor.wait(
        lambda: next(
            (f for f in plan_floats(editor) if f["lines"][0] == "☰ plan of turn 2 · 2/3 done"), None
        ),
        what="the view updated",
    )
    assert pf["lines"][1:] == ["  ☑ Read the code", "  ☑ Fix the bug", "  ◐ Run the tests"]
    # A new turn's plan is a new block below; the first turn's block keeps what that turn ended with.
    assert block(editor.lines()) == [
        "☰ plan · 1/3 done",
        "  ☑ Read the code",
        "  ◐ Fix the bug",
        "  ☐ Run the tests",
        "  note: the bug is in parse()",
        "☰ plan · 2/3 done",
        "  ☑ Read the code",
        "  ☑ Fix the bug",
        "  ◐ Run the tests",
    ]
    assert "plan 2/3" in editor.snapshot()["winbar"]
    editor.lua("vim.api.nvim_set_current_win(...)", pf["win"])
    editor.keys("q")
    editor.wait(lambda: plan_floats(editor) == [], what="the view closed")

    # Neovim again: the transcript page carries no plan; the attach reply's `plan` is shown.
    editor.quit()
    again = start_editor()
    again.cmd("Dsh")
    again.wait_text("Tests next.")
    again.wait(lambda: "☰ plan · 2/3 done" in again.lines(), what="the plan from the attach reply")
    assert block(again.lines()) == [
        "☰ plan · 2/3 done",
        "  ☑ Read the code",
        "  ☑ Fix the bug",
        "  ◐ Run the tests",
    ]
    assert "plan 2/3" in again.snapshot()["winbar"]

    # A rewind of turn 2's conversation puts back the plan that stood when turn 2 began (this Neovim
    # never saw turn 2 start: it asks the daemon).
    again.lua(
        "_G.asked = {} vim.fn.confirm = function(msg, choices) table.insert(_G.asked, msg) return 3 end"
    )  # 3: the conversation only
    again.cmd("DshRewind 2")
    again.wait_text("── rewound to before turn 2: the turns since are out of the model's history ──")
    again.wait(lambda: "plan 1/3" in again.snapshot()["winbar"], what="turn 1's plan back")
    again.cmd("DshPlan")
    pf = again.wait(lambda: next(iter(plan_floats(again)), None), what="the plan view")
    assert pf["lines"][0] == "☰ plan of turn 1 · 1/3 done"


def test_a_rewind_past_every_plan_clears_it_from_what_this_chat_saw(
    editor: Editor, fake: FakeDeepSeek
) -> None:
    fake.script(
        plan_call("call_p1", ("One", "in_progress"), ("Two", "pending")),
        text_reply("Started."),
    )
    editor.cmd("Dsh start")
    editor.wait_footers(1)
    assert "plan 0/2" in editor.snapshot()["winbar"]
    editor.lua("vim.fn.confirm = function() return 3 end")
    editor.cmd("DshRewind 1")
    editor.wait_text("── rewound to before turn 1: the turns since are out of the model's history ──")
    editor.wait(lambda: "plan " not in editor.snapshot()["winbar"], what="no plan")
    editor.cmd("DshPlan")
    pf = editor.wait(lambda: next(iter(plan_floats(editor)), None), what="the plan view")
    assert pf["lines"][0].startswith("no plan")
