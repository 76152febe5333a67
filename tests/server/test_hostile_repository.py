"""A hostile repository against the git the daemon runs itself (docs/design.md §14 "git the daemon
runs"), through the real daemon process: a repository's `.git/config` and `.gitattributes` name
programs git would run (clean, smudge and process filters, an external diff, a textconv, the
fsmonitor hook, hooks through `core.hooksPath`), each a marker script that records its environment
if it ever runs. A run_command (snapshots before and after), a rewind (blobs read back) and a review
(a diff against the work tree) run none of them, and `git` on PATH, a wrapper that records the
environment it is given, never sees the daemon's API key."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.deepseek_server import FakeDeepSeek, Reply
from tests.server.harness import Daemon, start_daemon, stop_daemon, text_reply, tool_call_stream

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

SECRET = "sk-test-secret-key-0000"  # the harness's DEEPSEEK_API_KEY
HOOKS = (
    "pre-commit",
    "post-commit",
    "post-checkout",
    "post-index-change",
    "pre-auto-gc",
    "reference-transaction",
    "post-rewrite",
    "fsmonitor-watchman",
)


def git(work: Path, *args: str) -> str:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(work),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    return subprocess.run(
        ["git", "-C", str(work), *args], env=env, check=True, capture_output=True, text=True
    ).stdout


def marker(path: Path, marks: Path, passes_on: bool = True) -> None:
    """A program that, if it ever runs, leaves its environment in `marks` and passes its input on
    (a filter process does not: it would wait for git's handshake)."""
    path.write_text(
        "#!/bin/sh\n"
        f'env > "{marks}/$(basename "$0").$$.env"\n'
        + ('if [ -f "$1" ]; then cat "$1"; else cat; fi\n' if passes_on else "")
    )
    path.chmod(0o755)


def hostile_repository(tmp_path: Path) -> tuple[Path, Path]:
    """(the work tree, the folder its programs leave their marks in). Committed before the
    configuration turns hostile, so that only the daemon's git can meet it."""
    work, marks, evil = tmp_path / "work", tmp_path / "marks", tmp_path / "evil"
    for folder in (work, marks, evil, evil / "hooks"):
        folder.mkdir()
    git(work, "init", "-q", "-b", "main")
    (work / "a.txt").write_text("committed\n")
    (work / "notes.md").write_text("notes\n")
    git(work, "add", "a.txt", "notes.md")
    git(work, "commit", "-q", "-m", "first")
    for name in ("clean", "smudge", "external-diff", "textconv"):
        marker(evil / name, marks)
    marker(evil / "process", marks, passes_on=False)
    marker(evil / "fsmonitor", marks, passes_on=False)
    for name in HOOKS:
        marker(evil / "hooks" / name, marks)
        shutil.copy(evil / "hooks" / name, work / ".git" / "hooks" / name)
    settings = {
        "filter.evil.clean": evil / "clean",
        "filter.evil.smudge": evil / "smudge",
        "filter.evil.required": "true",
        "filter.sub.name.process": evil / "process",
        "diff.external": evil / "external-diff",
        "diff.evil.textconv": evil / "textconv",
        "core.fsmonitor": evil / "fsmonitor",
        "core.hooksPath": evil / "hooks",
        "core.pager": evil / "textconv",
    }
    for key, value in settings.items():
        git(work, "config", key, str(value))
    (work / ".gitattributes").write_text("*.txt diff=evil filter=evil\n*.md diff=evil filter=sub.name\n")
    (work / "a.txt").write_text("committed\nand changed since\n")  # the clean filter's turn to read it
    return work, marks


def git_wrapper(tmp_path: Path) -> tuple[Path, Path]:
    """(a folder to put first on the daemon's PATH, the folder its logs go to): `git` there records
    its arguments and environment, then runs the real git."""
    real = shutil.which("git")
    assert real is not None
    folder, logs = tmp_path / "bin", tmp_path / "git-runs"
    folder.mkdir()
    logs.mkdir()
    wrapper = folder / "git"
    wrapper.write_text(f'#!/bin/sh\nenv > "{logs}/$$.env"\necho "$@" > "{logs}/$$.args"\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    return folder, logs


def call(name: str, args: dict[str, Any], call_id: str = "call_1") -> Reply:
    return Reply.stream(tool_call_stream([(call_id, name, args)]))


def ran(marks: Path) -> dict[str, str]:
    return {path.name: path.read_text() for path in sorted(marks.iterdir())}


def git_runs(logs: Path) -> list[tuple[str, str]]:
    """(arguments, environment) of each time the daemon ran `git`."""
    return [(args.read_text(), args.with_suffix(".env").read_text()) for args in sorted(logs.glob("*.args"))]


async def started(tmp_path: Path, fake: FakeDeepSeek, work: Path) -> Daemon:
    folder, _ = git_wrapper(tmp_path)
    path = f"{folder}:{os.environ.get('PATH', '/usr/bin:/bin')}"
    return await start_daemon(tmp_path / "state", fake, apply_edit=False, root=work, env={"PATH": path})


async def test_a_snapshot_and_a_rewind_run_nothing_the_repository_configures(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    work, marks = hostile_repository(tmp_path)
    d = await started(tmp_path, fake, work)
    command = "echo overwritten > a.txt && echo more >> notes.md && echo made > made.txt"
    fake.script(call("run_command", {"command": command}), text_reply("ran it"))
    sid = await d.new_session(cwd=str(work))
    await d.request("dsh/followup", {"sessionId": sid, "message": {"content": "run it"}})
    await d.wait_idle_turn(sid, 1)
    assert sorted(ran(marks)) == []

    listed = await d.request("dsh/session/checkpoints", {"sessionId": sid})
    (turn,) = listed["turns"]
    assert turn["commands"] == 1 and "unrestorableCommands" not in turn  # the snapshots were taken
    assert {f["path"] for f in turn["files"]} == {str(work / n) for n in ("a.txt", "notes.md", "made.txt")}
    result = await d.request("dsh/session/rewind", {"sessionId": sid, "beforeTurn": 1, "conversation": False})
    assert sorted(result["restored"]) == [str(work / "a.txt"), str(work / "notes.md")]
    # What the disk held before, byte for byte: no filter stood between the file and the snapshot.
    assert (work / "a.txt").read_text() == "committed\nand changed since\n"
    assert (work / "notes.md").read_text() == "notes\n" and not (work / "made.txt").exists()
    await stop_daemon(d)

    assert ran(marks) == {}
    runs = git_runs(tmp_path / "git-runs")
    assert any(" add -A " in f" {args} " for args, _ in runs), runs
    for args, env in runs:
        assert SECRET not in env and "DEEPSEEK_" not in env, (args, env)


async def test_a_reviews_git_runs_nothing_the_repository_configures(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    work, marks = hostile_repository(tmp_path)
    d = await started(tmp_path, fake, work)
    fake.script(text_reply("looked"))
    sid = await d.new_session(cwd=str(work))
    await d.request("dsh/review/start", {"sessionId": sid})
    await d.wait_idle_turn(sid, 1)
    prompt = fake.requests[0].json["messages"][-1]["content"]
    assert "+and changed since" in prompt
    await stop_daemon(d)

    assert ran(marks) == {}
    runs = git_runs(tmp_path / "git-runs")
    assert any(" diff " in f" {args} " for args, _ in runs), runs
    for args, env in runs:
        assert SECRET not in env and "DEEPSEEK_" not in env, (args, env)
