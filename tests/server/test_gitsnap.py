"""`gitsnap.snapshot` against real git: the tree of the work tree as it is now."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from dsh_daemon.host import gitsnap


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout


def test_a_same_size_edit_in_the_second_the_index_was_written_is_in_the_snapshot(tmp_path: Path) -> None:
    """git re-reads an entry whose file is not older than the index (racily clean); the snapshot's
    temporary index is a copy of the real one and must keep its mtime, or such an edit is missed (a
    worktree session's first edit, made within a second of `git worktree add`, applied as nothing)."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    app = root / "app.py"
    while True:  # the add and the edit within one second (retried when a second boundary fell between)
        second = int(time.time())
        app.write_text("VALUE = 1\n")
        git(root, "add", "app.py")
        with app.open("r+") as edit:  # same size, same inode: only the times could tell
            edit.write("VALUE = 3\n")
        if int(time.time()) == second:
            break
    time.sleep(1.1)  # the snapshot's copy of the index is made in a later second
    tree = gitsnap.snapshot(root)
    blob = git(root, "ls-tree", tree, "app.py").split()[2]
    assert git(root, "cat-file", "-p", blob) == "VALUE = 3\n"
