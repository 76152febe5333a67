"""Sessions in their own git worktree (issue 34.2; protocol.md "Worktrees"), through the real daemon
over its pipes with a scripted model: each session's tools work in its worktree only, two sessions edit
the same file in parallel, applying one then the other names the conflict and loses neither; keep,
discard, and a deleted session's worktree listed, never silently removed."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.deepseek_server import FakeDeepSeek, Reply
from tests.server.harness import Daemon, start_daemon, stop_daemon, text_reply, tool_call_stream
from tests.server.test_custom_commands import refused
from tests.server.test_tools_e2e import tool_results

OPTIONS = {"thinking": False, "tools": {"permissions": {"write_file": "allow", "edit_file": "allow"}}}


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "app"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "app.py").write_text("def greet():\n    return 'hello'\n\n\nVALUE = 1\n")
    (path / "README.md").write_text("app\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "start")
    return path


def absent(path: Path) -> bool:
    return not path.exists()


async def started(tmp_path: Path, fake: FakeDeepSeek, repo: Path) -> Daemon:
    return await start_daemon(tmp_path / "state", fake, root=repo, init_options=OPTIONS)


def write(path: str, content: str, call: str = "w1") -> Reply:
    return Reply.stream(tool_call_stream([(call, "write_file", {"path": path, "content": content})]))


async def turn(d: Daemon, sid: str, text: str) -> None:
    done = len(d.of(sid, "turn/end"))
    await d.request("dsh/followup", {"sessionId": sid, "message": {"content": text}})
    await d.wait_idle_turn(sid, done + 1)


async def listed(d: Daemon, sid: str, cwd: Path | None = None) -> dict[str, Any]:
    params = {"cwd": str(cwd)} if cwd else {}
    sessions = (await d.request("dsh/session/list", params))["sessions"]
    return next(s for s in sessions if s["sessionId"] == sid)


async def test_two_worktree_sessions_edit_the_same_file_then_apply_names_the_conflict_and_loses_neither(
    tmp_path: Path, fake: FakeDeepSeek, repo: Path
) -> None:
    d = await started(tmp_path, fake, repo)
    try:
        one = await d.new_session(cwd=str(repo), title="Fix greet", worktree={})
        two = await d.new_session(cwd=str(repo), title="Shout", worktree={"branch": "shout"})
        row_one, row_two = (await listed(d, one, repo))["worktree"], (await listed(d, two, repo))["worktree"]
        wt_one, wt_two = Path(row_one["path"]), Path(row_two["path"])
        assert wt_one.parent == wt_two.parent == tmp_path / "app.dsh-worktrees"
        assert row_one["branch"].startswith("dsh/fix-greet-") and row_two["branch"] == "shout"
        assert (row_one["changedFiles"], row_one["ahead"], row_one["base"]) == (0, 0, "HEAD")
        # In parallel: each writes app.py by a relative path: its own worktree's copy.
        fake.script_for(
            "one's", write("app.py", "def greet():\n    return 'hi'\n\n\nVALUE = 1\n"), text_reply("ok")
        )
        fake.script_for(
            "two's", write("app.py", "def greet():\n    return 'HELLO'\n\n\nVALUE = 1\n"), text_reply("ok")
        )
        await asyncio.gather(turn(d, one, "one's change"), turn(d, two, "two's change"))
        assert "'hi'" in (wt_one / "app.py").read_text() and "'HELLO'" in (wt_two / "app.py").read_text()
        assert "'hello'" in (repo / "app.py").read_text()  # the person's work tree is untouched
        assert (await listed(d, one, repo))["worktree"]["changedFiles"] == 1
        diff = await d.request("dsh/worktree/diff", {"sessionId": one})
        assert [(f["path"], f["status"], f["added"], f["removed"]) for f in diff["files"]] == [
            ("app.py", "modified", 1, 1)
        ]
        assert "-    return 'hello'\n+    return 'hi'" in diff["patch"]
        # Applying the first writes it into the person's work tree, uncommitted.
        applied = await d.request("dsh/worktree/apply", {"sessionId": one})
        assert applied["applied"] is True and [f["path"] for f in applied["files"]] == ["app.py"]
        assert "'hi'" in (repo / "app.py").read_text()
        assert git(repo, "status", "--porcelain") == " M app.py\n"
        # The second now conflicts: nothing is written; both versions are still there.
        refused = await d.request("dsh/worktree/apply", {"sessionId": two})
        assert refused["applied"] is False
        assert [c["path"] for c in refused["conflicts"]] == ["app.py"]
        assert "changed it" in refused["conflicts"][0]["reason"]
        assert "'hi'" in (repo / "app.py").read_text() and "'HELLO'" in (wt_two / "app.py").read_text()
    finally:
        await stop_daemon(d)


async def test_a_worktree_sessions_tools_stay_in_its_worktree(
    tmp_path: Path, fake: FakeDeepSeek, repo: Path
) -> None:
    d = await started(tmp_path, fake, repo)
    try:
        sid = await d.new_session(cwd=str(repo), worktree={"branch": "confined"})
        path = Path((await listed(d, sid))["worktree"]["path"])
        commit = "echo more >> README.md && git add -A && git -c user.name=a -c user.email=b commit -qm work"
        escape = f"echo escaped >> {repo / 'README.md'}"
        fake.script(
            write(str(repo / "app.py"), "overwritten\n"),
            Reply.stream(tool_call_stream([("r1", "run_command", {"command": commit})])),
            Reply.stream(tool_call_stream([("r2", "run_command", {"command": escape})])),
            text_reply("ok"),
        )
        await turn(d, sid, "write the person's copy, commit, then write theirs from a command")
        written, committed, escaped = tool_results(d, sid)
        assert written.get("error") is not None and "outside" in str(written["error"]).lower(), written
        assert "'hello'" in (repo / "app.py").read_text() and (repo / "README.md").read_text() == "app\n"
        # A commit in its worktree works in the sandbox (on its branch); the person's tree is not writable.
        assert git(repo, "log", "-1", "--format=%s", "confined") == "work\n", committed
        assert (path / "README.md").read_text() == "app\nmore\n"
        assert "exit code 0" not in str(escaped), escaped
        assert (await listed(d, sid))["worktree"]["ahead"] == 1
    finally:
        await stop_daemon(d)


async def test_keep_commits_on_the_branch_and_removes_the_folder_discard_removes_both(
    tmp_path: Path, fake: FakeDeepSeek, repo: Path
) -> None:
    d = await started(tmp_path, fake, repo)
    try:
        kept = await d.new_session(cwd=str(repo), title="Keep me", worktree={"branch": "keep-me"})
        gone = await d.new_session(cwd=str(repo), worktree={"branch": "gone"})
        path_kept = Path((await listed(d, kept))["worktree"]["path"])
        path_gone = Path((await listed(d, gone))["worktree"]["path"])
        fake.script(write("new.txt", "new\n"), text_reply("ok"))
        await turn(d, kept, "add a file")
        result = await d.request("dsh/worktree/keep", {"sessionId": kept})
        assert result["branch"] == "keep-me" and absent(path_kept)
        assert git(repo, "show", "keep-me:new.txt") == "new\n"
        assert git(repo, "log", "-1", "--format=%s", "keep-me") == "dsh: Keep me\n"
        row = (await listed(d, kept))["worktree"]
        assert row["exists"] is False and row["branch"] == "keep-me"
        # Its session cannot work any more: it says why, and nothing runs in the editor's folders.
        said = await refused(d, "dsh/followup", {"sessionId": kept, "message": {"content": "more"}})
        assert "was removed" in said
        await d.request("dsh/worktree/discard", {"sessionId": gone})
        assert absent(path_gone) and "gone" not in git(repo, "branch", "--list", "gone")
    finally:
        await stop_daemon(d)


async def test_a_deleted_sessions_worktree_stays_listed_until_removed(
    tmp_path: Path, fake: FakeDeepSeek, repo: Path
) -> None:
    d = await started(tmp_path, fake, repo)
    try:
        sid = await d.new_session(cwd=str(repo), worktree={"branch": "orphan"})
        path = Path((await listed(d, sid))["worktree"]["path"])
        await d.request("dsh/session/delete", {"sessionId": sid})
        assert not absent(path)  # never silently deleted
        (row,) = (await d.request("dsh/worktree/list", {"repo": str(repo)}))["worktrees"]
        assert (row["path"], row["sessionId"], row["branch"], row["exists"]) == (
            str(path),
            None,
            "orphan",
            True,
        )
        await d.request("dsh/worktree/discard", {"path": str(path)})
        assert absent(path)
        assert (await d.request("dsh/worktree/list", {}))["worktrees"] == []
        # Deleting with removeWorktree takes the folder and branch along.
        other = await d.new_session(cwd=str(repo), worktree={"branch": "with-it"})
        other_path = Path((await listed(d, other))["worktree"]["path"])
        await d.request("dsh/session/delete", {"sessionId": other, "removeWorktree": True})
        assert absent(other_path) and git(repo, "branch", "--list", "with-it") == ""
        assert (await d.request("dsh/worktree/list", {}))["worktrees"] == []
    finally:
        await stop_daemon(d)


async def test_what_the_person_got_wrong_is_a_typed_error_and_leaves_nothing(
    tmp_path: Path, fake: FakeDeepSeek, repo: Path
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    d = await start_daemon(tmp_path / "state", fake, root=tmp_path, init_options=OPTIONS)
    try:
        assert "not inside a git work tree" in await refused(
            d, "dsh/session/new", {"cwd": str(plain), "worktree": {}}
        )
        git(repo, "branch", "taken")
        assert "exists already" in await refused(
            d, "dsh/session/new", {"cwd": str(repo), "worktree": {"branch": "taken"}}
        )
        assert "no commit" in await refused(
            d, "dsh/session/new", {"cwd": str(repo), "worktree": {"base": "nope"}}
        )
        assert (await d.request("dsh/session/list", {}))["sessions"] == []
        assert not (tmp_path / "app.dsh-worktrees").exists() or not any(
            (tmp_path / "app.dsh-worktrees").iterdir()
        )
    finally:
        await stop_daemon(d)
