"""The commands people expect (issue 23 item 6), typed into the terminal chat in a tmux pane: `@path`
completion and attachment, `!cmd`, `/model`, `/context`, `/cost`, `/compact`, `/help`."""

from __future__ import annotations

from pathlib import Path

from dsh_daemon.chat.commands import COMMANDS
from tests.chat.screen import Screen, needs_tmux, status_line
from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.harness import daemon_env

pytestmark = needs_tmux


def user_texts(request: dict[str, object]) -> list[str]:
    return [str(m["content"]) for m in request["messages"] if m["role"] == "user"]  # type: ignore[attr-defined]


def test_mentions_shell_model_context_cost_compact_and_help(
    chat: Screen, fake: FakeDeepSeek, work: Path
) -> None:
    (work / "app.py").write_text("one = 1\ntwo = 2\nthree = 3\nfour = 4\n")
    fake.script(
        Reply.stream(text_stream(["Lines two and three."])),
        Reply.stream(text_stream(["It printed shell-out."])),
        Reply.stream(text_stream(["Third, on the pro model."])),
        Reply.stream(text_stream(["Summary: the person asked about app.py and a shell command."])),
    )
    # @path: Tab completes the file name, the mention attaches the lines it names
    chat.type("explain @ap")
    chat.wait(lambda s: "app.py" in s.split("› explain @ap")[-1], whole=False)  # the completion menu
    chat.keys("Tab")
    chat.wait(lambda s: "› explain @app.py" in s, whole=False)
    chat.type(":2-3 please")
    chat.keys("Enter")
    screen = chat.wait("Lines two and three.")
    assert "[📎 app.py lines 2-3]" in screen and "📎 selection: app.py" in screen
    users = user_texts(fake.requests[0].json)
    assert users[-1] == "explain @app.py:2-3 please"
    assert "two = 2\nthree = 3" in users[-2] and "four" not in users[-2]

    # !cmd: runs here, shows its output, and the output goes with the next prompt
    chat.type("!echo shell-out")
    chat.keys("Enter")
    chat.wait("[📎 $ echo shell-out (exit 0, 1 line): goes with your next prompt]")
    assert "│ shell-out" in chat.everything()
    chat.type("what did it print?")
    chat.keys("Enter")
    chat.wait("It printed shell-out.")
    users = user_texts(fake.requests[1].json)
    assert users[-1] == "what did it print?"
    assert "$ echo shell-out\nshell-out\n[exit status 0" in users[-2]

    # /model NAME: through workspace/didChangeConfiguration, from the next request
    chat.type("/model deepseek-v4-pro")
    chat.keys("Enter")
    chat.wait("[model: deepseek-v4-pro, from the next request]")
    chat.type("third")
    chat.keys("Enter")
    chat.wait("Third, on the pro model.")
    assert [r.json["model"] for r in fake.requests] == ["deepseek-v4-flash"] * 2 + ["deepseek-v4-pro"]
    chat.wait(lambda s: "deepseek-v4-pro" in status_line(chat))

    chat.type("/cost")
    chat.keys("Enter")
    chat.wait("3 turn(s) · 36 tokens in · 9 out · $0.0000")
    chat.type("/context")
    chat.keys("Enter")
    screen = chat.wait("  context: 12 of 1.0M tokens (0%), as of the last request")
    assert "system prompt ·" in screen and "tool definitions ·" in screen

    chat.type("/compact")
    chat.keys("Enter")
    chat.wait("[context compacted (manual)")
    assert fake.requests[-1].headers.get("x-dsh-purpose") == "compaction"
    chat.wait(lambda s: "idle" in status_line(chat))

    chat.type("/help")
    chat.keys("Enter")
    screen = chat.wait("  Tab ")
    help_rows = screen.split("› /help")[-1].splitlines() if "› /help" in screen else screen.splitlines()
    for name in COMMANDS:
        assert any(row.startswith(f"  {name} ") for row in help_rows), name
    for syntax in ("@PATH[:L1-L2]", "!CMD", "//TEXT", "Esc", "Alt-Up"):
        assert any(row.startswith(f"  {syntax} ") for row in help_rows), syntax
    assert "/undo" in screen  # offered: the daemon advertises `rewind`

    chat.type("/model")  # alone: a picker of models
    chat.keys("Enter")
    screen = chat.wait("model — now deepseek-v4-pro", whole=False)
    assert "deepseek-v4-flash" in screen and "deepseek-v4-pro  (current)" in screen
    chat.keys("Escape")
    chat.wait(lambda s: "model — now" not in s, whole=False)


def test_model_lists_what_the_daemon_serves(tmp_path: Path, fake: FakeDeepSeek, work: Path) -> None:
    """`/model` asks the daemon (`dsh/models/list`): a model only the daemon's configuration names is
    offered, and marked current, before any request has been made."""
    env = daemon_env(tmp_path / "state", fake, DSH_MODEL="local-coder")
    chat = Screen(tmp_path, env, ["--no-thinking", "chat"], cwd=work)
    try:
        chat.wait("Enter sends")
        chat.type("/model")
        chat.keys("Enter")
        screen = chat.wait("model — now local-coder", whole=False)
        assert "local-coder  (current)" in screen and "deepseek-v4-pro" in screen
        chat.keys("Escape")
        chat.wait(lambda s: "model — now" not in s, whole=False)
    finally:
        chat.close()
