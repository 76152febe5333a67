"""The bounds of `host/gitrun.py: run_git` with a stand-in `git` on PATH (a shell script, since a
real git that hangs or floods needs a hostile repository: tests/server/test_hostile_repository.py
has those): a git that hangs is killed with whatever it started, a flood of stderr does not block
it, stdout is cut at the limit, and its environment holds none of the daemon's variables."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from dsh_daemon.host.gitrun import GitFailed, run_git


def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> None:
    folder = tmp_path / "bin"
    folder.mkdir()
    script = folder / "git"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}:{os.environ.get('PATH', '/usr/bin:/bin')}")


def test_a_git_that_hangs_is_killed_with_what_it_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pid_file = tmp_path / "child"
    stand_in(tmp_path, monkeypatch, f"sleep 600 &\necho $! > {pid_file}\nwait\n")
    with pytest.raises(GitFailed, match="took longer than"):
        run_git(tmp_path, "status", timeout_s=0.5)
    child = int(pid_file.read_text())
    for _ in range(200):  # the kill is sent; the child's exit is the kernel's to finish
        if not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text().split()[2]:
            break
        time.sleep(0.01)
    else:
        raise AssertionError("the hung git's child outlived it")


def test_stderr_floods_do_not_block_and_stdout_is_cut(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stand_in(tmp_path, monkeypatch, "head -c 300000 /dev/zero >&2\nhead -c 5000 /dev/zero\nexit 3\n")
    with pytest.raises(GitFailed, match="git diff"):
        run_git(tmp_path, "diff", timeout_s=30)
    out, cut = run_git(tmp_path, "diff", ok=(3,))
    assert (len(out), cut) == (5000, False)
    out, cut = run_git(tmp_path, "diff", limit=100, timeout_s=30)
    assert (len(out), cut) == (100, True)


def test_git_gets_none_of_the_daemons_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stand_in(tmp_path, monkeypatch, "env\n")
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-not-for-git")
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "elsewhere"))
    out = run_git(tmp_path, "status", env={"GIT_INDEX_FILE": "/tmp/index"})[0].decode()
    names = {line.split("=", 1)[0] for line in out.splitlines()}
    assert "sk-not-for-git" not in out and "DEEPSEEK_API_KEY" not in names and "GIT_DIR" not in names
    assert "GIT_INDEX_FILE=/tmp/index" in out.splitlines() and "PATH" in names
