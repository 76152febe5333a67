"""`dsh-daemon chat --worktree` (issue 34.2), piped, against the real daemon and a real repository: the
session's edit lands in its own worktree, `/sessions` shows the branch and what changed, `/worktree
diff` prints the change, `/worktree apply` writes it into the person's work tree, and a second
`/worktree apply` of a session whose change now conflicts names the file and writes nothing."""

from __future__ import annotations

import json
from pathlib import Path

from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.harness import daemon_env, tool_call_stream
from tests.server.test_worktrees import git
from tests.test_cli import run_cli


def test_piped_worktree_session_edits_its_own_copy_then_applies_it(tmp_path: Path) -> None:
    work = tmp_path / "app"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    (work / "app.py").write_text("VALUE = 1\n")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "start")
    state = tmp_path / "state"
    state.mkdir()
    (state / "config.json").write_text(json.dumps({"tools": {"permissions": {"write_file": "allow"}}}))
    with FakeDeepSeek() as fake:
        env = daemon_env(state, fake)
        write = ("c1", "write_file", {"path": "app.py", "content": "VALUE = 2\n"})
        fake.script(Reply.stream(tool_call_stream([write])), Reply.stream(text_stream(["Changed."])))
        lines = "set it to 2\n/sessions\n/worktree\n/worktree diff\n/worktree apply\n"
        result = run_cli(["--no-thinking", "chat", "--worktree", "feat"], env, stdin=lines, cwd=work)
        assert result.returncode == 0, result.stderr
        out = result.stderr
        copy = tmp_path / "app.dsh-worktrees" / "feat"
        assert (copy / "app.py").read_text() == "VALUE = 2\n"
        assert "⎇ feat: 1 file changed" in out  # /sessions and /worktree
        assert f"{copy} · from HEAD]" in out
        assert "modified app.py  +1 −1" in out and "-VALUE = 1\n+VALUE = 2" in out
        assert f"[applied 1 file(s) to {work} as uncommitted changes]" in out
        assert (work / "app.py").read_text() == "VALUE = 2\n"

        # A second session's worktree changes the same line: its apply is refused, nothing written.
        write = ("c1", "write_file", {"path": "app.py", "content": "VALUE = 3\n"})
        fake.script(Reply.stream(tool_call_stream([write])), Reply.stream(text_stream(["Changed."])))
        result = run_cli(
            ["--no-thinking", "chat", "--worktree"], env, stdin="set it to 3\n/worktree apply\n", cwd=work
        )
        out = result.stderr
        assert "[not applied: nothing was written; these conflict with your work tree]" in out
        assert "  app.py: you changed it where this session changed it too" in out
        assert (work / "app.py").read_text() == "VALUE = 2\n"
        (other,) = [p for p in (tmp_path / "app.dsh-worktrees").iterdir() if p.name != "feat"]
        assert other.name.startswith("dsh-session-")  # titled by its first prompt only later
        assert (other / "app.py").read_text() == "VALUE = 3\n"
