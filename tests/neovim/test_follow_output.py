"""A second Neovim (its own daemon) following a session the first drives read-only sees the first's
running command print (`followerOutput`, protocol.md §3), as the first window does."""

from __future__ import annotations

from collections.abc import Callable

from tests.fakes.deepseek_server import FakeDeepSeek, Reply
from tests.neovim.harness import Editor
from tests.neovim.test_tools import answer, permission_float, permission_floats
from tests.server.harness import text_reply, tool_call_stream


def card_of(editor: Editor, title: str) -> str:
    """The text at the end of the tool card line `title` (its state and last output line), or ''."""
    snap = editor.snapshot() or {}
    if title not in snap.get("lines", []):
        return ""
    row = snap["lines"].index(title)
    return "".join(c["text"] for c in snap["cards"] if c["row"] == row)


def test_a_read_only_window_shows_the_drivers_command_printing(
    start_editor: Callable[[], Editor], fake: FakeDeepSeek
) -> None:
    first = start_editor()
    go, done = first.paths.work / "go", first.paths.work / "done"
    (first.paths.work / "steps.sh").write_text(
        f"echo first-line; while [ ! -f {go} ]; do sleep 0.02; done; echo printed-later\n"
        f"while [ ! -f {done} ]; do sleep 0.02; done\n"
    )
    command = "sh steps.sh"
    fake.script(
        Reply.stream(tool_call_stream([("call_c", "run_command", {"command": command})])),
        text_reply("It ran."),
    )
    title = f"⚙ run_command  {command}"
    first.cmd("Dsh run it")
    permission_float(first)
    answer(first, "gY")
    first.wait(lambda: permission_floats(first) == [], what="the float to close")
    first.wait(lambda: "first-line" in card_of(first, title), what="the driver's card printing")
    session_id = first.snapshot()["id"]

    second = start_editor()  # another Neovim, its own daemon, the same state
    second.cmd(f"DshResume {session_id}")
    second.wait(lambda: "read-only" in (second.snapshot() or {}).get("winbar", ""), what="read-only")
    second.wait(lambda: "running" in card_of(second, title), what="the call, replayed")
    go.write_text("")
    # What the command prints now shows on the follower's card while it runs, as on the driver's.
    second.wait(lambda: "printed-later" in card_of(second, title), what="the output, followed")
    assert "printed-later" in card_of(first, title)
    done.write_text("")
    second.wait(lambda: "It ran." in second.lines(), what="the turn's end, followed")
    assert card_of(second, title).strip() == "✓ ok · exit 0"
