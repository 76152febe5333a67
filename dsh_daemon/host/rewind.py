"""Rewinding a session's files to before a turn (docs/design.md §14, protocol.md §15).

The plan (`make_plan`; git and the disk are read off the event loop), per file the agent changed in
turn `beforeTurn` or later (the checkpoint rows, in order): the content to restore is the content
before the *first* of those changes; the content the file is expected to hold now is the content
after the *last* one. A file that holds neither was changed by someone else after the agent: a
conflict, left alone unless `force`. So is a file whose chain of changes does not connect (a later
change found content other than what the earlier one left): someone changed it between two of the
agent's changes, and restoring the content before the first would silently drop that change.

Invariants kept here (crash safety):
- Nothing is written before a durable `rewind/files {phase: "started", plan}` is on disk; each file is
  replaced atomically (temp file + rename, or one editor edit); `rewind/files {phase: "done"}` (with
  the conversation cut, in the same commit) is written after the last file.
- A session opened with a `started` and no `done` (the process died between them) gets
  `rewind/files {phase: "interrupted"}` naming the planned files that hold their restored content and
  those that do not; its conversation is not cut. Running the rewind again finishes it (a file that
  already holds its restored content is not in a new plan).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from dsh_daemon.host import gitsnap
from dsh_daemon.model.events import REWIND_FILES, Event
from dsh_daemon.model.payloads import ConversationCut, FilesRewound
from dsh_daemon.model.wire import RewindAction, RewindProblem
from dsh_daemon.session.checkpoints import Checkpoint, CheckpointStore, content_hash
from dsh_daemon.session.logevents import last_of
from dsh_daemon.tools.documents import DocumentSource
from dsh_daemon.tools.edits import EditApplier, compute_edit
from dsh_daemon.tools.errors import EditConflictError, FileToolError
from dsh_daemon.tools.safefile import read_whole

# A version of a file: ("sha256", hex) of its bytes, ("git", blob id), or None: absent.
Version = tuple[str, str] | None

NO_GIT = (
    "run_command ran outside a git work tree: what it changed cannot be restored (rewind restores "
    "only what the edit tools changed)"
)
DROPPED = "its checkpoint was dropped (the session's checkpoints went over their byte budget)"
READ_BYTES = 256 * 1024 * 1024  # a file read to compare it with its versions (checkpoint_bytes' default)


class UnreadableFile(Exception):
    """What is at a planned path cannot be compared: not a regular file any more (a FIFO, a device, a
    directory, a symlink), unreadable, or over READ_BYTES. A rewind leaves it alone, even with force."""


@dataclass
class _Entry:
    path: Path
    target: Version  # the content before the first change
    expected: Version  # the content after the last change
    turn: int  # the first change's turn
    last_turn: int
    root: str | None = None  # a git work tree holding the target blob
    lost: bool = False  # the target content is gone (dropped checkpoint)
    expected_root: str | None = None  # a git work tree holding the expected blob
    gap: tuple[int, int] | None = None  # (turn, turn): changed by someone else between these changes


@dataclass(frozen=True)
class Planned:
    path: Path
    action: Literal["restore", "delete"]
    target: bytes | None  # None: delete
    current: bytes | None  # what the file holds now (None: absent)
    editor_text: str | None  # the editor's text, when the file is open there


@dataclass(frozen=True)
class Plan:
    actions: tuple[Planned, ...]
    conflicts: tuple[RewindProblem, ...]
    not_restorable: tuple[RewindProblem, ...]


def _entries(rows: list[Checkpoint]) -> tuple[dict[Path, _Entry], list[RewindProblem]]:
    entries: dict[Path, _Entry] = {}
    problems: list[RewindProblem] = []
    for row in rows:
        for path, before, after, root in row_changes(row, problems):
            entry = entries.get(path)
            if entry is None:
                entries[path] = _Entry(path, before, after, row.turn, row.turn, root, row.dropped, root)
                continue
            # A rewind row's "before" may be someone's change a forced rewind overwrote knowingly.
            if (
                entry.gap is None
                and row.kind != "rewind"
                and not _same(entry.expected, entry.expected_root, before, root)
            ):
                entry.gap = (entry.last_turn, row.turn)
            entry.expected, entry.expected_root, entry.last_turn = after, root, row.turn
    return entries, problems


def _same(left: Version, left_root: str | None, right: Version, right_root: str | None) -> bool:
    """Whether two versions are the same content; a git blob and a sha256 are compared by reading
    the blob (an unreadable one counts as different: a false conflict can be forced, a missed one
    loses someone's work)."""
    if left is None or right is None:
        return left is None and right is None
    if left[0] == right[0]:
        return left == right
    blob, blob_root, other = (left, left_root, right) if left[0] == "git" else (right, right_root, left)
    if blob_root is None:
        return False
    try:
        return _matches(other, gitsnap.read_blob(blob_root, blob[1]))
    except gitsnap.GitError:
        return False


def row_changes(
    row: Checkpoint, problems: list[RewindProblem]
) -> list[tuple[Path, Version, Version, str | None]]:
    if row.kind != "command":
        assert row.path is not None
        before = None if row.before_hash is None else ("sha256", row.before_hash)
        after = None if row.after_hash is None else ("sha256", row.after_hash)
        return [(Path(row.path), before, after, None)]
    if row.root is None or row.tree_before is None or row.tree_after is None:
        problems.append(RewindProblem(NO_GIT if row.root is None else _no_snapshot(), turn=row.turn))
        return []
    root = row.root
    try:
        found = gitsnap.changes(root, row.tree_before, row.tree_after)
    except gitsnap.GitError as exc:
        problems.append(RewindProblem(f"the git snapshots of a command are unreadable: {exc}", turn=row.turn))
        return []
    return [
        (
            Path(root) / change.path,
            None if change.old is None else ("git", change.old),
            None if change.new is None else ("git", change.new),
            root,
        )
        for change in found
    ]


def _no_snapshot() -> str:
    return "git could not snapshot the work tree around a command: what it changed cannot be restored"


def _matches(version: Version, data: bytes | None) -> bool:
    if version is None or data is None:
        return version is None and data is None
    kind, value = version
    return (content_hash(data) if kind == "sha256" else gitsnap.blob_id(data)) == value


def read_disk(path: Path) -> bytes | None:
    """The file's bytes (None: absent), read by the one safe reader: opening a FIFO someone put in
    the file's place would block the rewind forever."""
    try:
        return read_whole(path, str(path), READ_BYTES, purpose="a rewind to compare it").data
    except FileToolError as exc:
        if exc.code == "NOT_FOUND":
            return None
        raise UnreadableFile(str(exc)) from None


def _read_or_conflict(path: Path) -> bytes | None:
    try:
        return read_disk(path)
    except UnreadableFile as exc:
        raise EditConflictError(f"{exc}; left alone") from None


async def make_plan(
    store: CheckpointStore,
    session_id: str,
    before_turn: int,
    documents: DocumentSource,
    *,
    force: bool,
) -> Plan:
    """What a rewind to before `before_turn` would write. The store and the editor's documents are
    read on the event loop (they belong to it); git and the files on disk are read on a thread, so a
    large rewind never stalls the other sessions' streams."""
    rows = store.since_turn(session_id, before_turn)
    entries, problems = await asyncio.to_thread(_entries, rows)  # git diffs of command snapshots
    editor_texts = {path: documents.text_for(path) for path in entries}
    blobs = {
        entry.target[1]: store.blob(session_id, entry.target[1])
        for entry in entries.values()
        if entry.target is not None and entry.target[0] == "sha256" and not entry.lost
    }
    return await asyncio.to_thread(_plan, entries, problems, editor_texts, blobs, force)


def _plan(
    entries: dict[Path, _Entry],
    problems: list[RewindProblem],
    editor_texts: dict[Path, str | None],
    blobs: dict[str, bytes | None],
    force: bool,
) -> Plan:
    actions: list[Planned] = []
    conflicts: list[RewindProblem] = []
    for path, entry in entries.items():
        shown = str(path)
        if entry.lost:
            problems.append(RewindProblem(DROPPED, path=shown, turn=entry.turn))
            continue
        editor_text = editor_texts.get(path)
        try:
            current = editor_text.encode("utf-8") if editor_text is not None else read_disk(path)
        except UnreadableFile as exc:
            problems.append(RewindProblem(f"{exc}; left alone", path=shown, turn=entry.last_turn))
            continue
        if _matches(entry.target, current):
            continue  # already as it was (a rewind already restored it, or the change was undone)
        if not force and not _matches(entry.expected, current):
            conflicts.append(
                RewindProblem(
                    f"changed after the agent's last change to it (turn {entry.last_turn}); "
                    "rewind with force to overwrite",
                    path=shown,
                    turn=entry.last_turn,
                )
            )
            continue
        if not force and entry.gap is not None:
            earlier, later = entry.gap
            turns = f"turn {later}" if earlier == later else f"turn {earlier} and turn {later}"
            conflicts.append(
                RewindProblem(
                    f"changed by someone else between the agent's changes to it in {turns}; "
                    "rewind with force to overwrite (that change is lost then)",
                    path=shown,
                    turn=later,
                )
            )
            continue
        target = _target_bytes(blobs, entry)
        if isinstance(target, RewindProblem):
            problems.append(target)
            continue
        if target is None and current is None:
            continue
        action: Literal["restore", "delete"] = "delete" if target is None else "restore"
        actions.append(Planned(path, action, target, current, editor_text))
    return Plan(tuple(actions), tuple(conflicts), tuple(problems))


def _target_bytes(blobs: dict[str, bytes | None], entry: _Entry) -> bytes | RewindProblem | None:
    if entry.target is None:
        return None
    kind, value = entry.target
    if kind == "sha256":
        data = blobs.get(value)
        if data is None:
            return RewindProblem(DROPPED, path=str(entry.path), turn=entry.turn)
        return data
    assert entry.root is not None
    try:
        return gitsnap.read_blob(entry.root, value)
    except gitsnap.GitError:
        return RewindProblem(
            "its content before the command is gone from git's object store (pruned by git gc?)",
            path=str(entry.path),
            turn=entry.turn,
        )


async def apply_planned(planned: Planned, applier: EditApplier, verb: str = "rewind") -> None:
    """Write one planned file: through the editor's applier when the content is text (so the person
    can undo it there), else straight to disk, atomically. Raises `EditConflictError` when the file
    changed since the plan was made."""
    if planned.action == "delete":
        await asyncio.to_thread(_delete, planned)
        return
    assert planned.target is not None
    try:
        text = planned.target.decode("utf-8")
        before = (
            None
            if planned.current is None
            else (planned.editor_text if planned.editor_text is not None else planned.current.decode("utf-8"))
        )
    except UnicodeDecodeError:
        await asyncio.to_thread(_write_bytes, planned)
        return
    await applier.apply(replace(compute_edit(planned.path, before, text, str(planned.path)), verb=verb))


def _delete(planned: Planned) -> None:
    if _read_or_conflict(planned.path) != planned.current:
        raise EditConflictError(f"{planned.path} changed since the rewind was planned")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(planned.path)


def _write_bytes(planned: Planned) -> None:
    assert planned.target is not None
    if _read_or_conflict(planned.path) != planned.current:
        raise EditConflictError(f"{planned.path} changed since the rewind was planned")
    planned.path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=f".{planned.path.name}.", suffix=".dsh-tmp", dir=planned.path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(planned.target)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, planned.path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def plan_actions(plan: Plan) -> tuple[RewindAction, ...]:
    return tuple(
        RewindAction(
            str(p.path),
            p.action,
            None if p.target is None else content_hash(p.target),
        )
        for p in plan.actions
    )


def new_rewind_id() -> str:
    return uuid.uuid4().hex[:12]


def started_event(rewind_id: str, before_turn: int, plan: Plan, conversation: bool) -> FilesRewound:
    return FilesRewound(rewind_id, "started", before_turn, plan=plan_actions(plan), conversation=conversation)


def done_events(
    rewind_id: str,
    before_turn: int,
    restored: list[str],
    deleted: list[str],
    failed: list[RewindProblem],
    conversation: bool,
) -> list[Any]:
    out: list[Any] = [
        FilesRewound(
            rewind_id,
            "done",
            before_turn,
            restored=tuple(restored),
            deleted=tuple(deleted),
            failed=tuple(failed) or None,
        )
    ]
    if conversation:
        out.append(ConversationCut(before_turn))
    return out


# ---- after a crash ---------------------------------------------------------------------------------


def unfinished(events: Sequence[Event]) -> FilesRewound | None:
    """The last `rewind/files` started and never done nor reported interrupted (None: none)."""
    last = last_of(events, REWIND_FILES)
    if last is None:
        return None
    rewound = FilesRewound.of(last)
    return rewound if rewound.phase == "started" else None


def interrupted_event(
    started: FilesRewound, read: Callable[[Path], bytes | None] = read_disk
) -> FilesRewound:
    """Which files of an interrupted rewind's plan hold their restored content (disk is the truth)."""
    restored: list[str] = []
    deleted: list[str] = []
    untouched: list[str] = []
    for action in started.plan or ():
        try:
            data = read(Path(action.path))
        except UnreadableFile:
            untouched.append(action.path)
            continue
        if action.action == "delete":
            (deleted if data is None else untouched).append(action.path)
        elif data is not None and content_hash(data) == action.sha256:
            restored.append(action.path)
        else:
            untouched.append(action.path)
    return FilesRewound(
        started.rewind_id,
        "interrupted",
        started.before_turn,
        restored=tuple(restored),
        deleted=tuple(deleted),
        untouched=tuple(untouched),
    )
