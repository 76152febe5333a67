"""Custom slash commands and skills in the terminal chat (protocol.md "Custom commands and skills"):
`dsh-daemon chat` over its real daemon and the fake provider; what the model received."""

from __future__ import annotations

from pathlib import Path

from tests.chat.screen import Screen, needs_tmux
from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.harness import daemon_env, tool_call_stream
from tests.test_cli import run_cli


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def users(body: dict[str, object]) -> list[object]:
    return [m["content"] for m in body["messages"] if m["role"] == "user"]  # type: ignore[attr-defined, index]


def test_a_custom_command_and_a_skill_from_the_chat(tmp_path: Path) -> None:
    work = tmp_path / "work"
    state = tmp_path / "state"
    write(
        work / ".dsh" / "commands" / "fix.md",
        "---\ndescription: Fix a failing test\nargument-hint: TEST\n---\nFix the test $ARGUMENTS; run it after.\n",
    )
    write(state / "commands" / "tea.md", "---\ndescription: Brew tea\n---\nExplain how to brew tea.\n")
    write(
        state / "skills" / "style" / "SKILL.md",
        "---\nname: style\ndescription: The person's code style\n---\nUse tabs. Never semicolons.\n",
    )
    write(work / ".dsh" / "commands" / "bad name!.md", "left out")
    with FakeDeepSeek() as fake:
        env = daemon_env(state, fake)
        fake.script(
            Reply.stream(tool_call_stream([("c1", "skill", {"name": "style"})])),
            Reply.stream(text_stream(["fixed"])),
            Reply.stream(text_stream(["brewed"])),
            Reply.stream(text_stream(["a literal"])),
        )
        lines = ["/help", "/fix test_parse", "/tea", "//fix is a command", "/nosuch"]
        result = run_cli(["--no-thinking", "chat"], env, stdin="\n".join(lines) + "\n", cwd=work)
        assert result.returncode == 0, result.stderr
        err = result.stderr
        # /help lists them next to the built-in ones; a file left out is said, naming it
        assert "/fix       /fix TEST — Fix a failing test (this project's command)" in err
        assert "/tea       Brew tea (your command)" in err
        assert "bad name!.md: left out" in err
        assert "[unknown command /nosuch;" in err

        first = fake.requests[0].json
        assert users(first)[-1] == "Fix the test test_parse; run it after."
        assert "- style: The person's code style" in first["messages"][0]["content"]
        assert "Use tabs. Never semicolons." in str(fake.requests[1].json["messages"][-1])  # the skill read
        assert users(fake.requests[2].json)[-1] == "Explain how to brew tea."
        assert users(fake.requests[3].json)[-1] == "/fix is a command"  # `//`: sent as text

        # The log keeps what the model read; the chat shows what the person typed.
        resumed = run_cli(["--no-thinking", "chat", "--continue"], env, stdin="", cwd=work)
        assert resumed.returncode == 0, resumed.stderr
        assert "› /fix test_parse" in resumed.stderr and "› /tea" in resumed.stderr
        assert "› /fix is a command" in resumed.stderr


@needs_tmux
def test_tab_completes_a_custom_command(tmp_path: Path) -> None:
    work = tmp_path / "work"
    write(
        work / ".dsh" / "commands" / "fixture.md",
        "---\ndescription: Make a test fixture\n---\nMake $ARGUMENTS.\n",
    )
    with FakeDeepSeek() as fake:
        fake.script(Reply.stream(text_stream(["made"])))
        chat = Screen(tmp_path, daemon_env(tmp_path / "state", fake), ["--no-thinking", "chat"], cwd=work)
        try:
            chat.wait("Enter sends")
            chat.type("/fixt")
            chat.wait("Make a test fixture", whole=False)  # the menu shows its description
            chat.keys("Tab")
            chat.wait(lambda s: "› /fixture" in s, whole=False)
            chat.type(" a user")
            chat.keys("Enter")
            chat.wait("made")
            assert users(fake.requests[0].json)[-1] == "Make a user."
        finally:
            chat.close()
