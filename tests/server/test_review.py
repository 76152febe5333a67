"""Review mode through the real daemon process (protocol.md "Review"): `dsh/review/start` on a real
git repository with uncommitted changes queues a read-only turn whose model sees the diff and
reports findings with `report_finding`; every finding is a durable `review/finding`, the turn ends
with `review/completed`, `dsh/review/list` folds them from the log (also after a SIGKILL), a
dismissal is durable, and a finding outside the workspace or past the file's end is refused to the
model with a clear error and not recorded."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from pygls.exceptions import JsonRpcException

from tests.fakes.deepseek_server import FakeDeepSeek, Reply
from tests.server.harness import Daemon, start_daemon, stop_daemon, text_reply, tool_call_stream

ORIGINAL = "def total(xs):\n    return sum(xs)\n"
CHANGED = "def total(xs):\n    return sum(xs) / len(xs)\n\n\ndef mean(xs):\n    return total(xs)\n"


def git(cwd: Path, *args: str) -> str:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(cwd),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def repo_with_changes(work: Path) -> str:
    """A repository whose HEAD has app.py; app.py then changed and notes.md added, uncommitted."""
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    (work / "app.py").write_text(ORIGINAL)
    git(work, "add", "app.py")
    git(work, "commit", "-q", "-m", "first")
    head = git(work, "rev-parse", "HEAD").strip()
    (work / "app.py").write_text(CHANGED)
    (work / "notes.md").write_text("an untracked note\n")
    return head


def finding(call_id: str, **overrides: Any) -> tuple[str, str, dict[str, Any]]:
    args: dict[str, Any] = {
        "path": "app.py",
        "startLine": 2,
        "endLine": 2,
        "severity": "error",
        "title": "Division by zero on an empty list",
        "body": "len(xs) is 0 for an empty list.",
        "suggestedPatch": "--- a/app.py\n+++ b/app.py\n@@ -2 +2 @@\n-    return sum(xs) / len(xs)\n+    return sum(xs) / max(len(xs), 1)\n",
    }
    return call_id, "report_finding", {**args, **overrides}


async def kill(daemon: Daemon) -> None:
    server = daemon.client._server
    assert server is not None
    os.kill(server.pid, signal.SIGKILL)
    await asyncio.wait_for(server.wait(), 15)
    with contextlib.suppress(Exception):
        await daemon.client.stop()


def tool_texts(daemon: Daemon, sid: str) -> list[str]:
    return [r["data"]["message"]["content"][0]["content"][0]["text"] for r in daemon.of(sid, "tool/result")]


async def test_a_review_reads_the_diff_reports_durable_findings_and_dismisses(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    state, work = tmp_path / "state", tmp_path / "work"
    repo_with_changes(work)
    (tmp_path / "outside.py").write_text("x = 1\n")
    d = await start_daemon(state, fake, root=work)
    fake.script(
        Reply.stream(
            tool_call_stream(
                [
                    finding("call_1"),
                    finding("call_2", path="../outside.py", startLine=1, endLine=1),
                    finding("call_3", startLine=40, endLine=41),
                    ("call_4", "edit_file", {"path": "app.py", "oldText": "sum", "newText": "max"}),
                    finding(
                        "call_5",
                        path="notes.md",
                        startLine=1,
                        endLine=1,
                        severity="info",
                        title="Note is not linked",
                        body="Link it from the README.",
                        suggestedPatch=None,
                    ),
                ]
            )
        ),
        text_reply("Two findings."),
    )
    sid = await d.new_session(cwd=str(work))
    started = await d.request("dsh/review/start", {"sessionId": sid, "instructions": "focus on math"})
    assert started["target"] == {"kind": "uncommitted"}
    assert sorted(started["files"]) == ["app.py", "notes.md"] and started["truncated"] is False
    await d.wait_idle_turn(sid, 1)
    # The session is titled for the review, not by the review prompt's first words.
    assert [t["data"]["title"] for t in d.of(sid, "session/title")] == ["Review: uncommitted changes"]

    # The model read the diff and the instructions, and was offered only what reads and reports.
    request = fake.requests[0].json
    prompt = request["messages"][-1]["content"]
    assert "+    return sum(xs) / len(xs)" in prompt and "+an untracked note" in prompt
    assert "focus on math" in prompt
    offered = {t["function"]["name"] for t in request["tools"]}
    assert "report_finding" in offered and "read_file" in offered
    assert not offered & {"edit_file", "write_file", "run_command", "update_plan"}

    texts = tool_texts(d, sid)
    errors = [r["data"].get("error", {}).get("code") for r in d.of(sid, "tool/result")]
    assert errors == [None, "OUTSIDE_WORKSPACE", "INVALID_ARGUMENTS", "DENIED", None], texts
    assert "outside the workspace" in texts[1]
    assert "app.py has 6 lines; lines 40-41 are not in it" in texts[2]
    assert "a review turn only reads" in texts[3]
    assert (work / "app.py").read_text() == CHANGED  # nothing was edited
    assert d.permission_requests == []

    found = d.of(sid, "review/finding")
    assert [f["data"]["path"] for f in found] == ["app.py", "notes.md"]
    assert all(isinstance(f["seq"], int) for f in found)
    first = found[0]["data"]
    assert first["reviewId"] == started["reviewId"] and first["severity"] == "error"
    assert first["startLine"] == 2 and "max(len(xs), 1)" in first["suggestedPatch"]
    assert "suggestedPatch" not in found[1]["data"]
    completed = d.of(sid, "review/completed")
    assert [c["data"] for c in completed] == [
        {"reviewId": started["reviewId"], "turn": 1, "target": {"kind": "uncommitted"}, "findings": 2}
    ]
    listed = await d.request("dsh/review/list", {"sessionId": sid})
    assert listed["findings"] == [f["data"] for f in found]
    assert listed["reviews"] == [completed[0]["data"]]

    # SIGKILL: the findings are on disk; a new process lists them from the log.
    await kill(d)
    d = await start_daemon(state, fake, root=work)
    await d.request("dsh/session/attach", {"sessionId": sid})
    assert (await d.request("dsh/review/list", {"sessionId": sid}))["findings"] == [f["data"] for f in found]

    # A dismissal is durable; a second one says so; an unknown finding is a typed error.
    dismissed = await d.request("dsh/review/dismiss", {"sessionId": sid, "findingId": first["findingId"]})
    assert dismissed == {"dismissed": True}
    again = await d.request("dsh/review/dismiss", {"sessionId": sid, "findingId": first["findingId"]})
    assert again == {"dismissed": False}
    with pytest.raises(JsonRpcException) as unknown:
        await d.request("dsh/review/dismiss", {"sessionId": sid, "findingId": "finding-nope"})
    assert unknown.value.data["code"] == "invalid_params"
    await kill(d)
    d = await start_daemon(state, fake, root=work)
    await d.request("dsh/session/attach", {"sessionId": sid})
    listed = await d.request("dsh/review/list", {"sessionId": sid})
    assert [f["findingId"] for f in listed["findings"]] == [found[1]["data"]["findingId"]]

    # An ordinary turn is not a review: report_finding is neither offered nor runs.
    fake.script(Reply.stream(tool_call_stream([finding("call_6")])), text_reply("ok"))
    done = len(d.of(sid, "turn/end"))
    await d.request("dsh/followup", {"sessionId": sid, "message": {"content": "hello"}})
    await d.wait_idle_turn(sid, done + 1)
    assert "report_finding" not in {t["function"]["name"] for t in fake.requests[-2].json["tools"]}
    assert d.of(sid, "tool/result")[-1]["data"]["error"]["code"] == "DENIED"

    # A rewind before the review turn takes its findings back.
    await d.request("dsh/session/rewind", {"sessionId": sid, "beforeTurn": 1, "files": False})
    assert await d.request("dsh/review/list", {"sessionId": sid}) == {"findings": [], "reviews": []}
    await stop_daemon(d)


async def test_review_targets_and_refusals(tmp_path: Path, fake: FakeDeepSeek) -> None:
    work, plain = tmp_path / "work", tmp_path / "plain"
    first = repo_with_changes(work)
    git(work, "checkout", "-q", "-b", "feature")
    git(work, "commit", "-q", "-am", "divide")
    plain.mkdir()
    d = await start_daemon(tmp_path / "state", fake, root=tmp_path)
    fake.script(text_reply("nothing wrong"), text_reply("fine"))
    sid = await d.new_session(cwd=str(work))

    # A commit by a short name is reviewed by its full id; its diff is that commit's.
    head = git(work, "rev-parse", "HEAD").strip()
    started = await d.request("dsh/review/start", {"sessionId": sid, "commit": head[:8]})
    assert started["target"] == {"kind": "commit", "ref": head} and started["files"] == ["app.py"]
    await d.wait_idle_turn(sid, 1)
    assert [t["data"]["title"] for t in d.of(sid, "session/title")] == [f"Review: commit {head[:12]}"]
    prompt = fake.requests[0].json["messages"][-1]["content"]
    assert f"commit {head}" in prompt and "+    return sum(xs) / len(xs)" in prompt
    assert "notes.md" not in prompt  # untracked files are not part of a commit

    # Against a base branch: the changes since the branch left it (the commit and the work tree).
    started = await d.request("dsh/review/start", {"sessionId": sid, "base": "main"})
    assert started["target"] == {"kind": "base", "ref": "main"}
    assert sorted(started["files"]) == ["app.py", "notes.md"]
    await d.wait_idle_turn(sid, 2)
    assert first not in fake.requests[-1].json["messages"][-1]["content"]

    for params, code, words in (
        ({"base": "main", "commit": head}, "invalid_params", "not both"),
        ({"base": "--output=/tmp/x"}, "invalid_params", "must name a commit"),
        ({"commit": "no-such-ref"}, "invalid_params", "no commit of this repository"),
    ):
        with pytest.raises(JsonRpcException) as refused:
            await d.request("dsh/review/start", {"sessionId": sid, **params})
        assert refused.value.data["code"] == code and words in refused.value.message, refused.value.message

    # A repository git cannot read: a typed error with git's words, not an internal one.
    index = work / ".git" / "index"
    kept = index.read_bytes()
    index.write_bytes(b"DIRC garbage")
    with pytest.raises(JsonRpcException) as broken:
        await d.request("dsh/review/start", {"sessionId": sid})
    assert broken.value.data["code"] == "not_a_repository" and broken.value.data["reason"] == "git-failed"
    assert "index" in broken.value.message, broken.value.message
    index.write_bytes(kept)

    other = await d.new_session(cwd=str(plain))
    with pytest.raises(JsonRpcException) as not_git:
        await d.request("dsh/review/start", {"sessionId": other})
    assert not_git.value.data["code"] == "not_a_repository"
    assert d.of(other, "user/message") == []  # nothing was queued
    await stop_daemon(d)


async def test_a_repositorys_own_diff_drivers_and_hooks_never_run(tmp_path: Path, fake: FakeDeepSeek) -> None:
    """A repository can configure programs git runs while it diffs (an external diff, a textconv
    filter, a clean filter or filter process, an fsmonitor hook, a pager): a review's git runs none of them, and still sees the diff."""
    work = tmp_path / "work"
    repo_with_changes(work)
    marker = tmp_path / "ran"
    evil = tmp_path / "evil.sh"
    evil.write_text(f'#!/bin/sh\necho "$0 $*" >> {marker}\ncat "$1" 2>/dev/null\n')
    evil.chmod(0o755)
    keys = ("diff.external", "diff.evil.textconv", "core.fsmonitor", "core.pager", "pager.diff")
    keys += ("filter.evil.clean", "filter.evil.smudge", "filter.sub.name.process")
    for key in keys:
        git(work, "config", key, str(evil))
    git(work, "config", "filter.evil.required", "true")
    (work / ".gitattributes").write_text("*.py diff=evil filter=evil\n*.md diff=evil filter=sub.name\n")
    d = await start_daemon(tmp_path / "state", fake, root=work)
    fake.script(text_reply("looked"))
    sid = await d.new_session(cwd=str(work))
    started = await d.request("dsh/review/start", {"sessionId": sid})
    await d.wait_idle_turn(sid, 1)
    assert ".gitattributes" in started["files"]
    prompt = fake.requests[0].json["messages"][-1]["content"]
    assert "+    return sum(xs) / len(xs)" in prompt and "+an untracked note" in prompt
    assert not marker.exists(), marker.read_text()
    await stop_daemon(d)
