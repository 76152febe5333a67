"""Review findings and a turn's diff in Neovim (issues 33.4 and 33.3) over the real daemon, in a real
git repository: :DshReview starts a review whose findings (the scripted model's `report_finding`s)
become `vim.diagnostic`s of the `dsh-review` namespace and quickfix entries (:DshReviewList); `x` in
the list dismisses one through `dsh/review/dismiss`, and an edit to a finding's lines dismisses it
too (one above only moves it). :DshDiff lists the last turn's hunks; `u` on one of two undoes that
one only (`dsh/turn/undo`), the other stays in the file."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.neovim.harness import Editor, Paths
from tests.server.harness import text_reply, tool_call_stream

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


def commit(work: Path, name: str, text: str) -> None:
    git(work, "init", "-q", "-b", "main")
    (work / name).write_text(text)
    git(work, "add", name)
    git(work, "commit", "-q", "-m", "first")


def finding(call_id: str, **args: Any) -> tuple[str, str, dict[str, Any]]:
    base = {"path": "app.py", "severity": "error", "body": "why it matters"}
    return call_id, "report_finding", {**base, **args}


def diagnostics(editor: Editor) -> list[dict[str, Any]]:
    return editor.lua(
        "local out = {} for _, d in ipairs(vim.diagnostic.get(vim.fn.bufnr('app.py'),"
        " {namespace = require('dsh.findings').ns})) do out[#out + 1] = {lnum = d.lnum, end_lnum = d.end_lnum,"
        " severity = d.severity, message = d.message, source = d.source} end"
        " table.sort(out, function(a, b) return a.lnum < b.lnum end) return out"
    )


def live_findings(editor: Editor) -> list[dict[str, Any]]:
    return editor.lua("return T.request('dsh/review/list', {sessionId = T.chat().id})")["findings"]


def quickfix(editor: Editor) -> list[dict[str, Any]]:
    return editor.lua(
        "return vim.tbl_map(function(i) return {lnum = i.lnum, end_lnum = i.end_lnum, text = i.text} end,"
        " vim.fn.getqflist())"
    )


def focus_quickfix(editor: Editor, entry: int) -> None:
    editor.lua(
        "for _, w in ipairs(vim.api.nvim_tabpage_list_wins(0)) do"
        " if vim.bo[vim.api.nvim_win_get_buf(w)].buftype == 'quickfix' then vim.api.nvim_set_current_win(w) end end"
        " vim.api.nvim_win_set_cursor(0, {..., 0})",
        entry,
    )
    assert editor.lua("return vim.bo.buftype") == "quickfix"


def test_review_findings_are_diagnostics_and_quickfix_entries_dismissed_by_key_and_by_an_edit(
    editor: Editor, fake: FakeDeepSeek
) -> None:
    work = editor.paths.work
    commit(work, "app.py", ORIGINAL)
    (work / "app.py").write_text(CHANGED)
    fake.script(
        Reply.stream(
            tool_call_stream(
                [
                    finding("call_f1", startLine=2, endLine=2, title="Division by zero on an empty list"),
                    finding("call_f2", startLine=5, endLine=6, severity="warning", title="mean is total"),
                ]
            )
        ),
        text_reply("Two findings."),
    )
    editor.cmd("edit app.py")
    editor.cmd("DshReview look at errors first")
    got = editor.wait(lambda: len(diagnostics(editor)) == 2 and diagnostics(editor), what="two diagnostics")
    assert [(d["lnum"], d["end_lnum"], d["severity"], d["source"]) for d in got] == [
        (1, 1, 1, "dsh review"),
        (4, 5, 2, "dsh review"),
    ]
    assert got[0]["message"] == "Division by zero on an empty list\nwhy it matters"
    editor.wait_footers(1)
    # The transcript shows what was asked, not the diff the message carries to the model.
    lines = editor.lines()
    print("\n".join(lines))
    assert "/review the uncommitted changes: look at errors first" in lines
    assert not any("sum(xs) / len(xs)" in line for line in lines)
    sent = [m["content"] for m in fake.requests[0].json["messages"] if m["role"] == "user"]
    assert "sum(xs) / len(xs)" in sent[-1]  # ... which the model did read

    editor.cmd("DshReviewList")
    items = editor.wait(lambda: len(quickfix(editor)) == 2 and quickfix(editor), what="the quickfix list")
    assert items == [
        {"lnum": 2, "end_lnum": 2, "text": "[error] Division by zero on an empty list"},
        {"lnum": 5, "end_lnum": 6, "text": "[warning] mean is total"},
    ]

    # A line added above both moves them along (nothing is dismissed)...
    editor.lua("vim.api.nvim_buf_set_lines(vim.fn.bufnr('app.py'), 0, 0, false, {'# header'})")
    editor.wait(lambda: [d["lnum"] for d in diagnostics(editor)] == [2, 5], what="the findings moved")
    assert len(live_findings(editor)) == 2

    # ... and so does the whole buffer rewritten with the same text (a reload, a whole-file write)...
    editor.lua(
        "local b = vim.fn.bufnr('app.py')"
        " vim.api.nvim_buf_set_lines(b, 0, -1, false, vim.api.nvim_buf_get_lines(b, 0, -1, false))"
    )
    # (had it dismissed them, the daemon's list below would never hold the second one alone)
    assert [d["lnum"] for d in diagnostics(editor)] == [2, 5]

    # ... `x` on the first entry of the list dismisses it in the daemon, the buffer and the list...
    focus_quickfix(editor, 1)
    editor.keys("x")
    editor.wait(lambda: [d["lnum"] for d in diagnostics(editor)] == [5], what="the first finding gone")
    editor.wait(lambda: [f["title"] for f in live_findings(editor)] == ["mean is total"], what="dismissed")
    assert quickfix(editor) == [{"lnum": 6, "end_lnum": 7, "text": "[warning] mean is total"}]

    # ... and changing the lines the second points at dismisses it too.
    editor.lua(
        "vim.api.nvim_buf_set_lines(vim.fn.bufnr('app.py'), 6, 7, false, {'    return total(xs) / 1'})"
    )
    editor.wait(lambda: live_findings(editor) == [], what="the edited finding dismissed")
    editor.wait(lambda: diagnostics(editor) == [] and quickfix(editor) == [], what="nothing shown")


def allow_writes(paths: Paths) -> None:
    (paths.state / "config.json").write_text(
        json.dumps({"tools": {"sandbox": "full-access", "permissions": {"write_file": "allow"}}})
    )


def file_lines(editor: Editor, path: Path) -> list[str]:
    """What the person has of the file: its buffer when loaded, else the disk."""
    loaded = editor.lua(
        "local b = vim.fn.bufnr(...) return b > 0 and vim.api.nvim_buf_is_loaded(b)", str(path)
    )
    if loaded:
        return editor.lua("return vim.api.nvim_buf_get_lines(vim.fn.bufnr(...), 0, -1, false)", str(path))
    return path.read_text().splitlines()


def test_undoing_one_of_two_hunks_from_the_quickfix_list_leaves_the_other(
    editor: Editor, paths: Paths, fake: FakeDeepSeek
) -> None:
    allow_writes(paths)
    work = paths.work
    before = [f"line {i}" for i in range(1, 13)]
    commit(work, "app.py", "\n".join(before) + "\n")
    after = ["line 1 changed", *before[1:10], "line 11 changed", "line 12"]
    target = work / "app.py"
    fake.script(
        Reply.stream(
            tool_call_stream(
                [("call_w", "write_file", {"path": str(target), "content": "\n".join(after) + "\n"})]
            )
        ),
        text_reply("Changed two lines."),
    )
    editor.cmd("Dsh change two lines")
    editor.wait_footers(1)
    editor.wait(lambda: file_lines(editor, target) == after, what="the turn's write")

    editor.cmd("DshDiff")
    items = editor.wait(lambda: len(quickfix(editor)) == 2 and quickfix(editor), what="two hunks")
    assert items[0]["lnum"] == 1 and items[0]["text"].startswith("hunk 1 [pending] +1 -1 -line 1")
    assert items[1]["lnum"] == 11 and items[1]["text"].startswith("hunk 2 [pending] +1 -1 -line 11")

    focus_quickfix(editor, 2)
    editor.keys("u")
    expected = ["line 1 changed", *before[1:]]
    editor.wait(lambda: file_lines(editor, target) == expected, what="hunk 2 undone, hunk 1 kept")
    editor.wait(
        lambda: (
            [i["text"].split(" +")[0] for i in quickfix(editor)] == ["hunk 1 [pending]", "hunk 2 [undone]"]
        ),
        what="the list refreshed",
    )
    print(editor.lua("return T.messages()"))
    # A second undo of the same hunk is a conflict, reported, nothing written.
    focus_quickfix(editor, 2)
    editor.keys("u")
    editor.wait(lambda: "not undone: " in editor.lua("return T.messages()"), what="the conflict reported")
    assert "already undone" in editor.lua("return T.messages()")
    assert file_lines(editor, target) == expected

    # The person changes hunk 1's line in the buffer, then undoes it from the file (the cursor on
    # it): a conflict, reported with its reason; their text stays.
    editor.cmd("cclose")
    editor.cmd(f"edit {target}")
    editor.lua(
        "vim.api.nvim_buf_set_lines(0, 0, 1, false, {'line 1 mine'}) vim.api.nvim_win_set_cursor(0, {1, 0})"
    )
    editor.cmd("DshDiffUndo")
    editor.wait(lambda: "hunk 1: " in editor.lua("return T.messages()"), what="the conflict of hunk 1")
    print(editor.lua("return T.messages()"))
    assert file_lines(editor, target) == ["line 1 mine", *before[1:]]
    assert target.read_text().splitlines() == expected  # nothing written to disk either


def test_a_review_queued_behind_a_running_turn_shows_what_was_asked_not_the_diff(
    editor: Editor, fake: FakeDeepSeek
) -> None:
    work = editor.paths.work
    commit(work, "app.py", ORIGINAL)
    (work / "app.py").write_text(CHANGED)
    fake.script(
        Reply.stream(text_stream(["Working", " on it."]), gate_after=(1, "hold")),
        text_reply("Nothing to report."),
    )
    editor.cmd("Dsh do something")
    editor.wait(lambda: editor.status() not in (None, "idle"), what="the turn running")
    editor.cmd("DshReview commit HEAD")
    head = git(work, "rev-parse", "HEAD").strip()
    queued = editor.wait(lambda: editor.snapshot()["queue"], what="the review queued")
    print(queued)
    assert queued == [f"  ⧗ queued 1 · review  /review commit {head[:12]}"]
    fake.open_gate("hold")
    editor.wait_footers(2)
    assert f"/review commit {head[:12]}" in editor.lines()


def test_a_resumed_session_shows_its_live_findings_again(
    start_editor: Callable[[], Editor], fake: FakeDeepSeek
) -> None:
    first = start_editor()
    work = first.paths.work
    commit(work, "app.py", ORIGINAL)
    (work / "app.py").write_text(CHANGED)
    fake.script(
        Reply.stream(
            tool_call_stream([finding("call_f1", startLine=2, endLine=2, title="Division by zero")])
        ),
        text_reply("One finding."),
    )
    first.cmd("DshReview")
    first.wait_footers(1)
    first.quit()

    second = start_editor()
    second.cmd("edit app.py")
    assert diagnostics(second) == []
    second.cmd("DshResume")
    got = second.wait(lambda: diagnostics(second), what="the finding shown again")
    assert [(d["lnum"], d["message"]) for d in got] == [(1, "Division by zero\nwhy it matters")]
