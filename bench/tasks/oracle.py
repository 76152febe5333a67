"""The oracle's tool calls: what a correct agent does for a task, made from its `oracle.patch` (and
`oracle.json`), for a scripted model to send through the agent's real tools.

The patch is applied with `git apply` to a scratch copy of the starting files; each file it changes
becomes tool calls the agent has: `read_file` first (all in one step), then one `edit_file` per
changed region (its text unique in the file at that point), `write_file` for a new file or when a
region's text is not unique, `run_command rm` for a deleted file. The calls are replayed on the text
here before they are returned, so a derivation that would not give the patched file is refused."""

from __future__ import annotations

import difflib
import json
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.tasks.suite import Task

CONTEXT_LINES = 2


@dataclass(frozen=True)
class ToolCallSpec:
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


Step = list[ToolCallSpec]  # the tool calls of one model reply


def patched_copy(task: Task, dest: Path) -> Path:
    """The task's starting files with `oracle.patch` applied, in `dest`."""
    shutil.copytree(task.repo, dest, symlinks=True)
    done = subprocess.run(
        ["git", "apply", "--whitespace=nowarn", str(task.oracle_patch)],
        cwd=dest,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise ValueError(f"{task.name}: oracle.patch does not apply: {done.stderr.strip()}")
    return dest


def _files(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


def edit_calls(path: str, before: str, after: str) -> Step:
    """`edit_file` calls that turn `before` into `after`, one per changed region; a `write_file` when a
    region's old text is not unique (or empty) at its turn."""
    old_lines = before.splitlines(keepends=True)
    new_lines = after.splitlines(keepends=True)
    calls: Step = []
    current = before
    for group in difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False).get_grouped_opcodes(
        CONTEXT_LINES
    ):
        i1, i2 = group[0][1], group[-1][2]
        j1, j2 = group[0][3], group[-1][4]
        old = "".join(old_lines[i1:i2])
        new = "".join(new_lines[j1:j2])
        if not old or current.count(old) != 1:
            return [ToolCallSpec("write_file", {"path": path, "content": after})]
        current = current.replace(old, new, 1)
        calls.append(ToolCallSpec("edit_file", {"path": path, "old_string": old, "new_string": new}))
    if current != after:  # cannot happen for disjoint regions; refuse rather than replay a wrong edit
        return [ToolCallSpec("write_file", {"path": path, "content": after})]
    return calls


def _extra(task: Task) -> tuple[list[Step], list[Step]]:
    if not task.oracle_extra.exists():
        return [], []
    raw = json.loads(task.oracle_extra.read_text())

    def steps(key: str) -> list[Step]:
        return [
            [ToolCallSpec(c["name"], dict(c.get("arguments", {}))) for c in step] for step in raw.get(key, [])
        ]

    return steps("before"), steps("after")


def oracle_steps(task: Task) -> list[Step]:
    """The oracle's replies, in order: `oracle.json`'s `before` steps, the reads, one edit per step
    (two edits of one file never race), the `after` steps. The final answer is the caller's."""
    with tempfile.TemporaryDirectory(prefix="dsh-oracle-") as tmp:
        after_files = _files(patched_copy(task, Path(tmp) / "after"))
    before_files = _files(task.repo)
    changed = sorted(p for p in before_files.keys() & after_files.keys() if before_files[p] != after_files[p])
    created = sorted(after_files.keys() - before_files.keys())
    deleted = sorted(before_files.keys() - after_files.keys())
    before, after = _extra(task)
    steps: list[Step] = list(before)
    if changed:
        steps.append([ToolCallSpec("read_file", {"path": p}) for p in changed])
    for path in changed:
        steps += [[call] for call in edit_calls(path, before_files[path], after_files[path])]
    steps += [[ToolCallSpec("write_file", {"path": p, "content": after_files[p]})] for p in created]
    steps += [[ToolCallSpec("run_command", {"command": f"rm -- '{p}'"})] for p in deleted]
    steps += after
    return steps
