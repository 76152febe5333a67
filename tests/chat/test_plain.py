"""Piped (no terminal): `dsh-daemon chat` prints plain text and reads one line per prompt or command."""

from __future__ import annotations

from pathlib import Path

from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.harness import daemon_env
from tests.test_cli import run_cli


def test_piped_commands_answer_in_plain_text(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "app.py").write_text("one = 1\ntwo = 2\n")
    with FakeDeepSeek() as fake:
        fake.script(Reply.stream(text_stream(["# Heading\n\nplain *markdown*"])))
        env = daemon_env(tmp_path / "state", fake)
        lines = ["/queue", "/wake", "/attach app.py:2", "/attach", "/bogus", "/drop 1", "/help", "/sessions"]
        result = run_cli(["--no-thinking", "chat"], env, stdin="\n".join(lines) + "\n", cwd=work)
        assert result.returncode == 0, result.stderr
        out = result.stdout
        assert "\x1b[" not in out  # no colour, no cursor codes when piped
        assert "[the queue is empty]" in out and "[nothing is queued]" in out
        assert "[📎 app.py lines 2-2: goes with your next prompt]" in out and "  📎 app.py lines 2-2" in out
        assert "[unknown command /bogus; /help lists them" in out
        assert "[no queued prompt 1; 0 queued]" in out
        assert "/wake" in out and "/attach" in out  # the help
        assert "[no sessions in this directory]" in out or "(untitled)" in out
        assert fake.requests == []  # nothing ran the model

        fake.script(Reply.stream(text_stream(["# Heading\n\nplain *markdown*"])))
        result = run_cli(["--no-thinking", "chat", "show me"], env, cwd=work)
        assert "› show me" in result.stdout
        assert "# Heading\n\nplain *markdown*" in result.stdout  # streamed verbatim, not rendered


def test_resume_shows_the_last_turns_and_says_where_the_rest_is(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with FakeDeepSeek() as fake:
        fake.script(*[Reply.stream(text_stream([f"answer {n}"])) for n in range(1, 13)])
        env = daemon_env(tmp_path / "state", fake)
        prompts = "\n".join(f"question {n}" for n in range(1, 13)) + "\n"
        first = run_cli(["--no-thinking", "chat"], env, stdin=prompts, cwd=work)
        assert first.returncode == 0, first.stderr
        assert "answer 12" in first.stdout
        resumed = run_cli(["--no-thinking", "chat", "--resume"], env, stdin="", cwd=work)
        assert resumed.returncode == 0, resumed.stderr
        out = resumed.stdout
        assert "earlier turns not shown" in out and "dsh-daemon export" in out
        assert "› question 12" in out and "answer 12" in out and "› question 3\n" in out
        assert "› question 2\n" not in out and "answer 2\n" not in out  # only the last 10 turns
