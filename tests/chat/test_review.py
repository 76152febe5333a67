"""`/review` in the terminal chat, piped, against the real daemon and a real git repository: the
review runs, each finding prints as `file:line severity title` with its body indented, the
prompt shows as the command typed (not the diff), and a folder outside git says why in one line."""

from __future__ import annotations

from pathlib import Path

from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.harness import daemon_env, tool_call_stream
from tests.server.test_review import finding, repo_with_changes
from tests.test_cli import run_cli


def test_piped_review_prints_findings_as_file_line_severity_title(tmp_path: Path) -> None:
    work = tmp_path / "work"
    repo_with_changes(work)
    with FakeDeepSeek() as fake:
        env = daemon_env(tmp_path / "state", fake)
        fake.script(
            Reply.stream(tool_call_stream([finding("call_1", body="len(xs) is 0.\nGuard it.")])),
            Reply.stream(text_stream(["One finding."])),
        )
        result = run_cli(["--no-thinking", "chat"], env, stdin="/review check the math\n", cwd=work)
        assert result.returncode == 0, result.stderr
        out = result.stderr
        assert "[review of 2 file(s): app.py, notes.md]" in out
        assert "› /review check the math\n" in out and "diff --git" not in out  # the command, not the diff
        assert (
            "✗ app.py:2 error Division by zero on an empty list\n    len(xs) is 0.\n    Guard it.\n"
            "    (a fix is suggested: dsh/review/list has its patch)\n"
        ) in out
        assert "[review done: 1 finding(s)]" in out
        assert result.stdout == "One finding.\n"
        prompt = fake.requests[0].json["messages"][-1]["content"]
        assert "check the math" in prompt and "+    return sum(xs) / len(xs)" in prompt

        plain = tmp_path / "plain"
        plain.mkdir()
        result = run_cli(["--no-thinking", "chat"], env, stdin="/review base main\n", cwd=plain)
        assert "is not inside a git work tree" in result.stderr
        assert len(fake.requests) == 2  # nothing more ran
