"""Hunks of a turn's change and their three-way undo (host/hunks.py), and the checkpoint store's
after contents under its budget (session/checkpoints.py)."""

from __future__ import annotations

import zlib
from pathlib import Path

from dsh_daemon.host import hunks
from dsh_daemon.session.checkpoints import CheckpointStore, content_hash
from dsh_daemon.session.store import SessionStore

BEFORE = [f"{n}\n" for n in range(1, 11)]
AFTER = ["1\n", "two\n", "3\n", "4\n", "6\n", "7\n", "8\n", "8.5\n", "9\n", "10\n"]


def test_each_changed_region_is_one_numbered_hunk_with_its_context() -> None:
    found = hunks.hunks(BEFORE, AFTER)
    assert [(h.index, h.old_start, h.old_end, h.new_start, h.new_end) for h in found] == [
        (1, 1, 2, 1, 2),
        (2, 4, 5, 4, 4),
        (3, 8, 8, 7, 8),
    ]
    assert found[0].text == "@@ -1,4 +1,4 @@\n 1\n-2\n+two\n 3\n 4\n"
    # the context stops at the next hunk: only the unchanged lines between them are context
    assert found[1].text == "@@ -3,6 +3,5 @@\n 3\n 4\n-5\n 6\n 7\n 8\n"
    assert hunks.hunks(["a"], ["b"])[0].text.endswith("+b\n\\ No newline at end of file\n")


def test_undoing_one_hunk_leaves_the_others_and_a_later_edit_elsewhere() -> None:
    found = hunks.hunks(BEFORE, AFTER)
    current = [*AFTER[:-1], "ten, as the person wrote it\n"]
    result = hunks.undo(BEFORE, AFTER, current, [found[1]])
    assert result.undone == (2,) and result.conflicts == ()
    kept = ["1\n", "two\n", "3\n", "4\n", "5\n", "6\n", "7\n", "8\n", "8.5\n", "9\n"]
    assert result.lines == [*kept, "ten, as the person wrote it\n"]


def test_a_hunk_whose_lines_changed_since_is_a_conflict_and_nothing_is_written_for_it() -> None:
    found = hunks.hunks(BEFORE, AFTER)
    current = ["1\n", "TWO\n", *AFTER[2:]]
    result = hunks.undo(BEFORE, AFTER, current, found)
    assert result.undone == (2, 3) and [i for i, _ in result.conflicts] == [1]
    assert result.lines[:2] == ["1\n", "TWO\n"] and "5\n" in result.lines and "8.5\n" not in result.lines
    # a deletion whose neighbours were pulled apart by the person cannot be put back
    apart = ["1\n", "two\n", "3\n", "4\n", "between\n", "6\n", *AFTER[5:]]
    assert [i for i, _ in hunks.undo(BEFORE, AFTER, apart, [found[1]]).conflicts] == [2]


def test_after_contents_go_first_over_the_budget_and_a_rewind_keeps_what_it_needs(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    first, second, third = (bytes((n * i * 7919) % 251 for i in range(200)) for n in (3, 5, 7))
    size = len(zlib.compress(first, 1))
    checkpoints = CheckpointStore(store, 2 * size + 8)
    common = {"step": 1, "call_id": None, "kind": "edit", "path": "/w/f"}
    checkpoints.record_file(
        "s", turn=1, before=first, after_hash=content_hash(second), after=second, **common
    )
    assert checkpoints.blob("s", content_hash(second)) == second
    recorded = checkpoints.record_file(
        "s", turn=2, before=second, after_hash=content_hash(third), after=third, **common
    )
    # the newest after content (only a diff reads it) went; the befores a rewind needs stayed
    assert recorded.dropped == ()
    assert checkpoints.blob("s", content_hash(third)) is None
    assert checkpoints.blob("s", content_hash(first)) == first
    assert checkpoints.blob("s", content_hash(second)) == second
