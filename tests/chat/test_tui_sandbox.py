"""The sandbox in the terminal chat (issue 41.5), over the real daemon and the fake DeepSeek: the status
line's mode (and its warning when commands are refused for want of confinement), `/sandbox` and
`/sandbox MODE` (full-access only after a confirmation), and an escalation's permission card."""

from __future__ import annotations

from pathlib import Path

from tests.chat.screen import Screen, needs_tmux, status_line
from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.harness import daemon_env, tool_call_stream

pytestmark = needs_tmux


def first_prompt(chat: Screen, fake: FakeDeepSeek) -> None:
    """A session exists (and with it the daemon's `sandbox/status`) once a prompt was sent."""
    fake.script(Reply.stream(text_stream(["Hello."])))
    chat.type("hi")
    chat.keys("Enter")
    chat.wait("Hello.")


def test_sandbox_shows_the_level_and_changes_the_mode_full_access_only_confirmed(
    chat: Screen, fake: FakeDeepSeek
) -> None:
    chat.type("/sandbox")
    chat.keys("Enter")
    chat.wait("sandbox: not known yet")  # no session, nothing told yet: said so, no session made
    first_prompt(chat, fake)
    chat.wait(lambda s: "⛨ workspace-write" in status_line(chat))

    chat.type("/sandbox")
    chat.keys("Enter")
    screen = chat.wait(lambda s: "/sandbox read-only | workspace-write | full-access" in s)
    print(screen)
    report = screen[screen.rindex("sandbox: workspace-write") :]
    assert "level: " in report and "network: none (no domain is allowed)" in report
    assert "writable: the workspace, the temp directory, no other path" in report

    # Another mode goes to the daemon (workspace/didChangeConfiguration); its new status comes back.
    chat.type("/sandbox read-only")
    chat.keys("Enter")
    chat.wait(lambda s: "⛨ read-only" in status_line(chat))

    # full-access hands over the whole account: a picker asks first; Esc keeps the sandbox.
    chat.type("/sandbox full-access")
    chat.keys("Enter")
    screen = chat.wait("run commands unconfined, as your whole account?", whole=False)
    print(screen)
    chat.wait("the agent gets your whole account")  # the warning, in words, above the picker
    chat.keys("Escape")
    chat.wait("[the sandbox is unchanged]")
    chat.wait(lambda s: "⛨ read-only" in status_line(chat))  # (the screen is drawn again after the picker)
    chat.type("/sandbox full-access")
    chat.keys("Enter")
    chat.wait("run commands unconfined, as your whole account?", whole=False)
    chat.keys("Down", "Enter")
    chat.wait(lambda s: "⚠ full-access (unconfined)" in status_line(chat))
    chat.type("/sandbox nowhere")
    chat.keys("Enter")
    chat.wait("[no sandbox mode nowhere: one of read-only, workspace-write, full-access]")


def test_without_confinement_the_status_line_warns_that_commands_are_refused(
    tmp_path: Path, fake: FakeDeepSeek, work: Path
) -> None:
    env = daemon_env(tmp_path / "state", fake, DSH_SANDBOX_LAYERS="none")
    chat = Screen(tmp_path, env, ["--no-thinking", "chat"], cwd=work)
    try:
        chat.wait("Enter sends")
        first_prompt(chat, fake)
        chat.wait(lambda s: "⚠ workspace-write: no confinement here, commands refused" in status_line(chat))
        chat.type("/sandbox")
        chat.keys("Enter")
        screen = chat.wait("/sandbox read-only | workspace-write")
        print(screen)
        assert "⚠ this machine cannot confine commands: every command is refused in workspace-write" in screen
        assert "why: confinement switched off (DSH_SANDBOX_LAYERS=none" in screen
    finally:
        chat.close()


def test_an_escalation_names_the_reason_and_the_widening_and_a_session_answer_widens(
    chat: Screen, fake: FakeDeepSeek, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    widen = {"reason": "the build keeps its cache there", "writable": [str(outside)]}
    fake.script(
        Reply.stream(
            tool_call_stream(
                [("c1", "run_command", {"command": f"echo one > {outside}/a.txt", "escalate": widen})]
            )
        ),
        Reply.stream(tool_call_stream([("c2", "run_command", {"command": f"echo two > {outside}/b.txt"})])),
        Reply.stream(text_stream(["Both written."])),
    )
    chat.type("write outside")
    chat.keys("Enter")
    screen = chat.wait(
        lambda s: "? widen the sandbox?" in s and "why: the build" in s and "5. Cancel the turn" in s,
        whole=False,
    )
    print(screen)
    assert "why: the build keeps its cache there" in screen
    assert f"widen: writable: {outside}" in screen
    assert "1. Yes, once (this command only)" in screen
    assert "2. Yes, for this session (every later command gets this widening)" in screen
    # the daemon advertises `persistWidening`: the widening can be saved to config.json
    assert "3. Always: save it to config.json (every later session too)" in screen
    assert "4. No, run nothing" in screen
    chat.wait("↑/↓ or 1-5, then Enter", whole=False)  # the menu listens
    chat.type("2")
    chat.wait(lambda s: "❯ 2. Yes, for this session" in s, whole=False)
    chat.keys("Enter")
    chat.wait("→ allowed always")
    chat.wait("Both written.")  # the second command ran widened, unasked
    assert (outside / "a.txt").read_text() == "one\n" and (outside / "b.txt").read_text() == "two\n"
    chat.type("/sandbox")
    chat.keys("Enter")
    chat.wait(f"writable: the workspace, the temp directory, {outside}")
