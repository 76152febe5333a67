"""A turn's diff, kept or undone by hunk (protocol.md §15 "A turn's diff", docs/design.md §14).

The diff of turn T is derived from what is durable, so it is the same after a restart or a rewind:
per file the turn changed (its checkpoint rows of turn T, edits and commands' git snapshots, in
order), the content before the first change and after the last one (both in the checkpoint store, or
git blobs), and the `turn/review` events of the log for T (which hunks were kept or undone). Rows a
rewind or an undo wrote are not part of any turn's diff.

An undo (`undo_durably`) writes the file (through the editor when the client applies edits, like a
rewind), then records it: a checkpoint row of kind `undo` (so a later rewind expects the file to hold
what the undo wrote and chains it like an edit), a durable `turn/review {action: "undo"}` and a note
queued for the model as `dsh/inject` does (next-step, not waking): the model reads what the person
took back before its next step. A crash after the write and before the record leaves the file
changed and unrecorded: a later rewind then names it as a conflict (changed by someone else), never
overwrites it silently.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from dsh_daemon.host import gitsnap, hunks
from dsh_daemon.host.errors import invalid_params, session_busy_because
from dsh_daemon.host.rewind import Planned, UnreadableFile, Version, apply_planned, read_disk, row_changes
from dsh_daemon.model.codec import unstructure
from dsh_daemon.model.events import CONVERSATION_CUT, TOOL_RESULT, TURN_END, TURN_REVIEW, TURN_START, Event
from dsh_daemon.model.messages import UserMessage
from dsh_daemon.model.payloads import TurnDiffChanged, TurnReviewed, entry
from dsh_daemon.model.wire import (
    HunkState,
    RewindProblem,
    TurnDiffFile,
    TurnDiffFileSummary,
    TurnDiffHunk,
    TurnHunkProblem,
)
from dsh_daemon.session.checkpoints import Checkpoint, CheckpointStore, content_hash
from dsh_daemon.tools.editor import EditorUnavailable
from dsh_daemon.tools.errors import EditConflictError, FileToolError

if TYPE_CHECKING:
    from dsh_daemon.host.hosted import HostedSession
    from dsh_daemon.host.sessions import SessionHost

logger = logging.getLogger(__name__)

NOTE_SOURCE = {"kind": "plugin", "plugin": "dsh-review", "form": "notice"}
NOT_KEPT = (
    "its content after the turn was not kept "
    "(a checkpoint from before turn diffs, or dropped over the budget)"
)
DROPPED = "its content before the turn was dropped (the session's checkpoints went over their byte budget)"
FILE_TOOLS = frozenset({"edit_file", "write_file", "run_command"})


@dataclass
class _Versions:
    path: Path
    before: Version
    before_root: str | None
    after: Version
    after_root: str | None
    by: Literal["edit", "command"]
    lost: bool = False


@dataclass
class FileDiff:
    """One file of a turn's diff, with the texts its hunks were computed from."""

    path: Path
    by: Literal["edit", "command"]
    before: bytes | None
    after: bytes | None
    unavailable: str | None = None
    hunks: list[hunks.Hunk] = field(default_factory=list)
    before_lines: list[str] = field(default_factory=list)
    after_lines: list[str] = field(default_factory=list)
    binary: bool = False

    @property
    def status(self) -> Literal["modified", "created", "deleted"]:
        return "created" if self.before is None else "deleted" if self.after is None else "modified"


# ---- which turn ----------------------------------------------------------------------------------------


def last_kept_turn(events: Iterable[Event]) -> int | None:
    """The last turn still in the conversation: a `conversation/cut {beforeTurn: N}` takes back N on."""
    turns: list[int] = []
    for event in events:
        if event.type == TURN_START:
            turns.append(int(event.data["turn"]))
        elif event.type == CONVERSATION_CUT:
            cut = int(event.data["beforeTurn"])
            turns = [t for t in turns if t < cut]
    return turns[-1] if turns else None


def turn_ended(events: Iterable[Event], turn: int) -> bool:
    return any(e.type == TURN_END and int(e.data["turn"]) == turn for e in events)


def review_states(events: Iterable[Event], turn: int) -> dict[str, dict[int, HunkState]]:
    """Per path, the hunks kept or undone (an undo wins over a keep, whichever came first)."""
    out: dict[str, dict[int, HunkState]] = {}
    for event in events:
        if event.type != TURN_REVIEW or int(event.data["turn"]) != turn:
            continue
        review = TurnReviewed.of(event)
        states = out.setdefault(review.path, {})
        for index in review.hunks or (0,):
            if review.action == "undo" or states.get(index) != "undone":
                states[index] = "undone" if review.action == "undo" else "kept"
    return out


# ---- the diff ------------------------------------------------------------------------------------------


def _versions(rows: Sequence[Checkpoint]) -> list[_Versions]:
    """Per path the turn's rows changed (edit tools and commands; not rewinds, not undos), first
    before and last after. Reads git (command snapshots): run off the event loop."""
    out: dict[Path, _Versions] = {}
    problems: list[RewindProblem] = []
    for row in rows:
        if row.kind not in ("edit", "command"):
            continue
        by: Literal["edit", "command"] = "edit" if row.kind == "edit" else "command"
        for path, before, after, root in row_changes(row, problems):
            seen = out.get(path)
            if seen is None:
                out[path] = _Versions(path, before, root, after, root, by, row.dropped)
            else:
                seen.after, seen.after_root, seen.by = after, root, by
    return list(out.values())


async def turn_files(store: CheckpointStore, session_id: str, turn: int) -> list[FileDiff]:
    """The files turn `turn` changed, with their hunks. The store is read on the event loop (it
    belongs to it), git and the diffing on a thread."""
    versions = await asyncio.to_thread(_versions, store.of_turn(session_id, turn))
    blobs: dict[str, bytes | None] = {}
    for v in versions:
        for version in (v.before, v.after):
            if version is not None and version[0] == "sha256" and version[1] not in blobs:
                blobs[version[1]] = store.blob(session_id, version[1])
    return await asyncio.to_thread(lambda: [_file_diff(v, blobs) for v in versions])


def _content(version: Version, root: str | None, blobs: dict[str, bytes | None]) -> bytes | str | None:
    """The bytes of a version (None: absent), or why they cannot be had."""
    if version is None:
        return None
    kind, value = version
    if kind == "sha256":
        data = blobs.get(value)
        return NOT_KEPT if data is None else data
    if root is None:
        return "no git work tree holds it"
    try:
        return gitsnap.read_blob(root, value)
    except gitsnap.GitError:
        return "its content is gone from git's object store (pruned by git gc?)"


def _file_diff(v: _Versions, blobs: dict[str, bytes | None]) -> FileDiff:
    before = _content(v.before, v.before_root, blobs)
    after = _content(v.after, v.after_root, blobs)
    if v.lost:
        before = DROPPED
    if isinstance(before, str) or isinstance(after, str):
        reason = before if isinstance(before, str) else after
        assert isinstance(reason, str)
        # The status still follows the versions: a file the turn created has no before, gone or not.
        known_before = None if v.before is None else b"" if isinstance(before, str) else before
        known_after = None if v.after is None else b"" if isinstance(after, str) else after
        return FileDiff(v.path, v.by, known_before, known_after, unavailable=reason)
    diff = FileDiff(v.path, v.by, before, after)
    try:
        diff.before_lines = hunks.split_lines((before or b"").decode("utf-8"))
        diff.after_lines = hunks.split_lines((after or b"").decode("utf-8"))
    except UnicodeDecodeError:
        diff.binary = True
        return diff
    diff.hunks = hunks.hunks(diff.before_lines, diff.after_lines)
    return diff


def _counts(diff: FileDiff) -> tuple[int, int]:
    added = sum(h.new_end - h.new_start for h in diff.hunks)
    removed = sum(h.old_end - h.old_start for h in diff.hunks)
    return added, removed


def _wire_file(diff: FileDiff, states: dict[int, HunkState]) -> TurnDiffFile:
    added, removed = _counts(diff)
    return TurnDiffFile(
        str(diff.path),
        diff.status,
        diff.by,
        added,
        removed,
        tuple(
            TurnDiffHunk(
                h.index,
                h.old_start + 1,
                h.old_end - h.old_start,
                h.new_start + 1,
                h.new_end - h.new_start,
                h.text,
                states.get(h.index, "pending"),
            )
            for h in diff.hunks
        ),
        True if diff.binary else None,
        diff.unavailable,
        states.get(0) if diff.binary or diff.unavailable else None,
    )


def _summary(diff: FileDiff, states: dict[int, HunkState]) -> TurnDiffFileSummary:
    added, removed = _counts(diff)
    pending = sum(1 for h in diff.hunks if states.get(h.index, "pending") == "pending")
    return TurnDiffFileSummary(str(diff.path), diff.status, diff.by, added, removed, len(diff.hunks), pending)


def _turn_or_last(hosted: HostedSession, turn: int | None, method: str) -> int | None:
    if turn is None:
        return last_kept_turn(hosted.agent.log.events)
    if turn > hosted.agent.turn:
        last = hosted.agent.turn
        raise invalid_params(f"{method}: turn {turn} has not begun (the session's last turn is {last})")
    return turn


async def turn_diff(host: SessionHost, session_id: str, turn: int | None) -> dict[str, Any]:
    hosted = host.session(session_id)
    number = _turn_or_last(hosted, turn, "dsh/turn/diff")
    if number is None:
        return {"turn": None, "files": [], "final": True}
    files = await turn_files(host.checkpoints, session_id, number)
    events = hosted.agent.log.events
    states = review_states(events, number)
    return {
        "turn": number,
        "files": [unstructure(_wire_file(f, states.get(str(f.path), {}))) for f in files],
        "final": turn_ended(events, number),
    }


async def publish_turn_diff(host: SessionHost, hosted: HostedSession, turn: int, final: bool) -> None:
    """A live `turn/diff` with the turn's files so far (nothing when the turn changed no file and this
    is not its end)."""
    files = await turn_files(host.checkpoints, hosted.session_id, turn)
    if not files and not final:
        return
    states = review_states(hosted.agent.log.events, turn)
    summary = tuple(_summary(f, states.get(str(f.path), {})) for f in files)
    hosted.agent.bus.publish(TurnDiffChanged(turn, summary, final).event())


def watch_turn_diffs(host: SessionHost, hosted: HostedSession, tasks: set[asyncio.Task[None]]) -> None:
    """After each result of a tool that changes files, and at each turn's end, a live `turn/diff`.
    One at a time, in order: each waits for the one before it; one that is not final gives way to
    a newer one queued behind it (edits faster than their diffs are made send the latest state)."""
    previous: list[asyncio.Task[None] | None] = [None]

    def current() -> bool:
        return host.sessions.get(hosted.session_id) is hosted and hosted.followed

    async def publish(turn: int, final: bool, before: asyncio.Task[None] | None) -> None:
        if before is not None:
            await asyncio.wait([before])
        if not current():
            return  # closed (its store may be gone) or followed by no one: nobody to tell
        if not final and previous[0] is not asyncio.current_task():
            return  # a newer one is queued behind this one: it tells the fresher state
        try:
            await publish_turn_diff(host, hosted, turn, final)
        except Exception:
            if current():
                logger.exception("session %s: no turn/diff for turn %d", hosted.session_id, turn)

    def on_event(event: Event) -> None:
        if event.type == TOOL_RESULT and event.data.get("name") in FILE_TOOLS:
            turn, final = int(event.data["turn"]), False
        elif event.type == TURN_END:
            turn, final = int(event.data["turn"]), True
        else:
            return
        task = asyncio.get_running_loop().create_task(publish(turn, final, previous[0]))
        previous[0] = task
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    hosted.agent.subscribe(on_event)


# ---- keep and undo -------------------------------------------------------------------------------------


async def _file_of(host: SessionHost, hosted: HostedSession, turn: int, path: str, method: str) -> FileDiff:
    _turn_or_last(hosted, turn, method)
    for diff in await turn_files(host.checkpoints, hosted.session_id, turn):
        if str(diff.path) == path:
            return diff
    raise invalid_params(f"{method}: turn {turn} did not change {path!r}")


def _chosen(diff: FileDiff, wanted: Sequence[int] | None, method: str) -> list[hunks.Hunk]:
    if wanted is None:
        return list(diff.hunks)
    by_index = {h.index: h for h in diff.hunks}
    missing = [i for i in wanted if i not in by_index]
    if missing:
        raise invalid_params(
            f"{method}: {diff.path} has {len(diff.hunks)} hunk(s) in this turn; no hunk {missing[0]}"
        )
    return [by_index[i] for i in dict.fromkeys(wanted)]


async def keep_durably(
    host: SessionHost, session_id: str, turn: int, path: str, wanted: Sequence[int] | None
) -> dict[str, Any]:
    """Mark hunks reviewed: a durable `turn/review {action: "keep"}`; the file is not touched."""
    method = "dsh/turn/keep"
    hosted = host.session(session_id)
    diff = await _file_of(host, hosted, turn, path, method)
    states = review_states(hosted.agent.log.events, turn).get(path, {})
    chosen = [h.index for h in _chosen(diff, wanted, method) if states.get(h.index) != "undone"]
    if chosen or not diff.hunks:
        hosted.agent.log.append(
            *entry(TurnReviewed(turn, path, "keep", tuple(chosen))), commit=True, ignorable=True
        )
        await publish_turn_diff(host, hosted, turn, turn_ended(hosted.agent.log.events, turn))
    return {"kept": chosen}


async def undo_durably(
    host: SessionHost, session_id: str, turn: int, path: str, wanted: Sequence[int] | None
) -> dict[str, Any]:
    """Take back hunks of a file a turn changed, three-way against what it holds now (the module
    docstring says what is written and recorded). No turn starts meanwhile: `rewinding` is set from
    the first read of the file to the record, so sends and wakes answer `session_busy`."""
    hosted = host.session(session_id)
    if hosted.agent.running or hosted.rewinding:
        raise session_busy_because(
            session_id, "a turn is running: stop the turn first, then undo", reason="running"
        )
    hosted.rewinding = True
    try:
        result, note = await _undo_recorded(host, hosted, turn, path, wanted)
    finally:
        hosted.rewinding = False
    if note is not None:
        result["noteId"] = hosted.send(note, "next-step", False, verb="inject")
        await publish_turn_diff(host, hosted, turn, turn_ended(hosted.agent.log.events, turn))
    return result


async def _undo_recorded(
    host: SessionHost, hosted: HostedSession, turn: int, path: str, wanted: Sequence[int] | None
) -> tuple[dict[str, Any], UserMessage | None]:
    method = "dsh/turn/undo"
    session_id = hosted.session_id
    diff = await _file_of(host, hosted, turn, path, method)
    states = review_states(hosted.agent.log.events, turn).get(path, {})
    conflicts: list[TurnHunkProblem] = []
    chosen = []
    for hunk in _chosen(diff, wanted, method):
        if states.get(hunk.index) == "undone":
            conflicts.append(TurnHunkProblem("already undone", path, hunk.index))
        else:
            chosen.append(hunk)
    documents = host.front_end.document_source(session_id, hosted.workspace)
    editor_text = documents.text_for(diff.path)
    try:
        current = (
            editor_text.encode("utf-8")
            if editor_text is not None
            else await asyncio.to_thread(read_disk, diff.path)
        )
    except UnreadableFile as exc:
        return _undo_result_of((), [TurnHunkProblem(f"{exc}; left alone", path)])
    whole = diff.binary or diff.unavailable is not None or not diff.hunks
    if whole:
        if states.get(0) == "undone":
            return _undo_result_of((), [TurnHunkProblem("already undone", path)])
        if diff.unavailable is not None:
            return _undo_result_of((), [TurnHunkProblem(diff.unavailable, path)])
        if current != diff.after:
            reason = "changed since the turn: undo it as a whole only while it holds what the turn left"
            return _undo_result_of((), [TurnHunkProblem(reason, path)])
        undone: tuple[int, ...] = ()
        target, note_diff = diff.before, f"(the whole file: {diff.status} in turn {turn})"
    else:
        try:
            current_lines = None if current is None else hunks.split_lines(current.decode("utf-8"))
        except UnicodeDecodeError:
            current_lines = None
        if current_lines is None:
            why = "the file is gone" if current is None else "the file is not UTF-8 text any more"
            conflicts += [TurnHunkProblem(f"{why}: nothing was written", path, h.index) for h in chosen]
            return _undo_result_of((), conflicts)
        result = hunks.undo(diff.before_lines, diff.after_lines, current_lines, chosen)
        conflicts += [TurnHunkProblem(why, path, index) for index, why in result.conflicts]
        if not result.undone:
            return _undo_result_of((), conflicts)
        text = "".join(result.lines)
        target = None if diff.before is None and text == "" else text.encode("utf-8")
        undone = result.undone
        note_diff = "".join(h.text for h in chosen if h.index in undone)
    planned = Planned(diff.path, "delete" if target is None else "restore", target, current, editor_text)
    if target != current:
        applier = host.front_end.edit_applier(session_id, hosted.workspace)
        try:
            await apply_planned(planned, applier, verb="undo")
        except (EditConflictError, EditorUnavailable, FileToolError, OSError) as exc:
            problems = [TurnHunkProblem(f"not written: {exc}", path, i) for i in undone or (None,)]
            return _undo_result_of((), conflicts + problems)
    host.checkpoints.record_file(
        session_id,
        turn=hosted.agent.turn,
        step=0,
        call_id=None,
        kind="undo",
        path=path,
        before=current,
        after_hash=None if target is None else content_hash(target),
        after=target,
    )
    hosted.agent.log.append(
        *entry(TurnReviewed(turn, path, "undo", tuple(undone), note_diff)), commit=True, ignorable=True
    )
    note = UserMessage.create(_note_text(path, turn, undone, note_diff), NOTE_SOURCE)
    out: dict[str, Any] = {"undone": list(undone), "conflicts": [unstructure(c) for c in conflicts]}
    if whole:
        out["wholeFile"] = True
    return out, note


def _note_text(path: str, turn: int, undone: Sequence[int], diff: str) -> str:
    if not undone:
        what = "the change"
    elif len(undone) == 1:
        what = f"hunk {undone[0]}"
    else:
        what = "hunks " + ", ".join(str(i) for i in undone)
    return (
        f"The person undid {what} of {path} from turn {turn}: that change of yours is taken back in the "
        f"file (their other edits stay). Do not make it again unless they ask. What was undone:\n{diff}"
    )


def _undo_result_of(
    undone: Sequence[int], conflicts: Sequence[TurnHunkProblem]
) -> tuple[dict[str, Any], UserMessage | None]:
    """An undo that wrote nothing: no note for the model."""
    return {"undone": list(undone), "conflicts": [unstructure(c) for c in conflicts]}, None
