"""Taking a session back: its checkpoints listed per turn, a rewind (files and/or the conversation) and
a fork (a new session whose history is the first turns of another). `SessionHost` exposes these as
`rewind`, `checkpoints` and `fork`; the rules are in docs/design.md §14 and protocol.md §15."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dsh_daemon.host import gitsnap
from dsh_daemon.host.errors import invalid_params, session_busy_because
from dsh_daemon.host.rewind import (
    Planned,
    apply_planned,
    done_events,
    interrupted_event,
    make_plan,
    new_rewind_id,
    started_event,
    unfinished,
)
from dsh_daemon.model.codec import unstructure
from dsh_daemon.model.events import INBOX_SPLICED, TURN_END, TURN_START, Event
from dsh_daemon.model.inbox import InboxItem, apply_splice
from dsh_daemon.model.jsonvalue import freeze_json
from dsh_daemon.model.messages import UserMessage
from dsh_daemon.model.payloads import ForkOrigin, InboxSpliced, SessionNoticed, SessionTitled, entry
from dsh_daemon.model.wire import CheckpointFile, CheckpointTurn, RewindProblem
from dsh_daemon.session.checkpoints import CheckpointStore, content_hash
from dsh_daemon.session.store import SessionStore, now_ms
from dsh_daemon.tools.editor import EditorUnavailable
from dsh_daemon.tools.errors import EditConflictError, FileToolError

if TYPE_CHECKING:
    import sqlite3

    from dsh_daemon.host.hosted import HostedSession
    from dsh_daemon.host.sessions import SessionHost

FORK_SUFFIX = " (fork)"


def finish_interrupted_rewind(hosted: HostedSession) -> None:
    """A session opened after a crash in the middle of a rewind: say in its log which planned files
    hold their restored content and which do not (the conversation was not cut)."""
    started = unfinished(hosted.agent.log.events)
    if started is not None:
        hosted.agent.log.append(*entry(interrupted_event(started)), commit=True)


async def rewind(
    host: SessionHost, session_id: str, before_turn: int, *, files: bool, conversation: bool, force: bool
) -> dict[str, Any]:
    method = "dsh/session/rewind"
    if not files and not conversation:
        raise invalid_params(f"{method}: 'files' and 'conversation' are both false: nothing to rewind")
    hosted = host.session(session_id)
    agent = hosted.agent
    if agent.running or hosted.rewinding:
        raise session_busy_because(
            session_id, "a turn is running: stop the turn first, then rewind", reason="running"
        )
    if before_turn > agent.turn:
        raise invalid_params(
            f"{method}: turn {before_turn} has not begun (the session's last turn is {agent.turn})"
        )
    result: dict[str, Any] = {"restored": [], "deleted": [], "conflicts": [], "notRestorable": []}
    hosted.rewinding = True
    try:
        plan = None
        if files:
            documents = host.front_end.document_source(session_id, hosted.workspace)
            plan = await make_plan(host.checkpoints, session_id, before_turn, documents, force=force)
            result["conflicts"] = [unstructure(c) for c in plan.conflicts]
            result["notRestorable"] = [unstructure(p) for p in plan.not_restorable]
            if plan.conflicts:
                return result  # nothing is written, the conversation is not cut: the person decides
        if plan is None or not plan.actions:
            if plan is not None and plan.not_restorable:
                result["wroteNoFile"] = True
            if conversation:
                cut = done_events("", before_turn, [], [], [], True)[-1]
                result["cutSeq"] = agent.log.append(*entry(cut), commit=True).seq
            return result
        rewind_id = new_rewind_id()
        agent.log.append(*entry(started_event(rewind_id, before_turn, plan, conversation)), commit=True)
        applier = host.front_end.edit_applier(session_id, hosted.workspace)
        restored: list[str] = []
        deleted: list[str] = []
        failed: list[RewindProblem] = []
        for planned in plan.actions:
            shown = str(planned.path)
            try:
                await apply_planned(planned, applier)
            except (EditConflictError, EditorUnavailable, FileToolError, OSError) as exc:
                # EditorUnavailable: the editor gave no usable answer in time (protocol.md §9); the
                # rewind goes on with the next file and ends, so sends are taken again.
                failed.append(RewindProblem(f"not written: {exc}", path=shown))
                continue
            (deleted if planned.action == "delete" else restored).append(shown)
            if conversation:
                record_rewound(hosted, planned)
            # The rewind is a change too: a later rewind expects the file to hold what it wrote.
            host.checkpoints.record_file(
                session_id,
                turn=agent.turn,
                step=0,
                call_id=None,
                kind="rewind",
                path=shown,
                before=planned.current,
                after_hash=None if planned.target is None else content_hash(planned.target),
            )
        events = done_events(rewind_id, before_turn, restored, deleted, failed, conversation)
        logged = [agent.log.append(*entry(e)) for e in events]
        agent.log.commit()
        result.update(restored=restored, deleted=deleted)
        result["notRestorable"] += [unstructure(f) for f in failed]
        if not restored and not deleted:
            # Each planned file failed: the files still hold what the cut turns left there.
            result["wroteNoFile"] = True
        if conversation:
            result["cutSeq"] = logged[-1].seq
        return result
    finally:
        hosted.rewinding = False


def record_rewound(hosted: HostedSession, planned: Planned) -> None:
    """The model's memory of a file moves back with the conversation: no "changed since you read it"
    about what the rewind wrote (undecodable content is forgotten, as a deleted file is)."""

    def text(content: bytes | None) -> str | None:
        try:
            return None if content is None else content.decode("utf-8")
        except UnicodeDecodeError:
            return None

    before = planned.editor_text if planned.editor_text is not None else text(planned.current)
    hosted.tools.kit.files_seen.record_rewound(planned.path, text(planned.target), before)


def checkpoint_turns(host: SessionHost, session_id: str) -> dict[str, Any]:
    """Per turn, the files the agent changed (edits, and commands seen in git snapshots)."""
    host.info(session_id)  # an unknown session is an error
    store = host.checkpoints
    turns: dict[int, dict[str, Any]] = {}
    for row in store.since_turn(session_id, 1):
        if row.kind == "rewind":
            continue
        turn = turns.setdefault(row.turn, {"files": {}, "commands": 0, "unrestorable": 0})
        files: dict[str, CheckpointFile] = turn["files"]
        if row.kind == "edit":
            assert row.path is not None
            if row.path not in files:
                files[row.path] = CheckpointFile(
                    row.path, row.before_hash is None, "edit", True if row.dropped else None
                )
            continue
        turn["commands"] += 1
        if row.root is None or row.tree_before is None or row.tree_after is None:
            turn["unrestorable"] += 1
            continue
        try:
            changed = gitsnap.changes(row.root, row.tree_before, row.tree_after)
        except gitsnap.GitError:
            turn["unrestorable"] += 1
            continue
        for change in changed:
            path = str(Path(row.root) / change.path)
            if path not in files:
                files[path] = CheckpointFile(path, change.old is None, "command")
    out = [
        CheckpointTurn(number, tuple(turn["files"].values()), turn["commands"], turn["unrestorable"] or None)
        for number, turn in sorted(turns.items())
    ]
    return {
        "turns": [unstructure(t) for t in out],
        "storedBytes": store.stored_bytes(session_id),
        "maxBytes": store.max_bytes,
    }


def fork(host: SessionHost, session_id: str, at_turn: int, message: UserMessage | None) -> str:
    """A new session whose log is a copy of `session_id`'s up to the end of turn `at_turn` (its pending
    items left out), titled "… (fork)", with `message` queued (and run) when given."""
    hosted = host.sessions.get(session_id)
    if hosted is not None and hosted.agent.log.lease_lost is None:
        source: Sequence[Event] = hosted.agent.log.events
    else:
        source = host.manager.store.load_events(session_id)
    cut = _fork_end(source, at_turn)
    if cut is None:
        raise invalid_params(f"dsh/session/fork: turn {at_turn} of the session has not ended")
    info = host.info(session_id)
    copied = list(source[:cut])
    title = f"{info.title or 'Untitled'}{FORK_SUFFIX}"
    new_id = str(uuid.uuid4())
    store = host.manager.store
    origin = info.title or "Untitled"
    forked = SessionNoticed(
        "fork",
        "info",
        f"Forked from «{origin}» at turn {at_turn}.",
        ForkOrigin(session_id, at_turn, origin),
    )
    added = [*_emptied_inbox(copied), entry(SessionTitled(title)), entry(forked)]
    stamp = now_ms()
    tail = [Event(kind, freeze_json(data), len(copied) + i, stamp) for i, (kind, data) in enumerate(added)]
    # One transaction: a crash leaves the whole fork (history, checkpoints, title) or no trace of it,
    # never an empty "… (fork)" session (issue 32.5).
    store.create_session_with_events(
        new_id,
        title=title,
        cwd=info.cwd,
        events=[*copied, *tail],
        also=lambda db: _copy_fork_rows(db, session_id, new_id, at_turn, forked.fork_of),
    )
    if message is not None:
        host.session(new_id).send(message, "next-turn", True)
    return new_id


def _copy_fork_rows(
    db: sqlite3.Connection, session_id: str, new_id: str, at_turn: int, origin: ForkOrigin | None
) -> None:
    """The rest of a fork's creation, in its transaction: the copied turns' checkpoints and where it
    came from (its `dsh/session/list` row's `forkOf`)."""
    CheckpointStore.copy_within(db, session_id, new_id, at_turn)
    if origin is not None:
        SessionStore.record_fork_origin(db, new_id, unstructure(origin))


def _fork_end(events: Sequence[Event], at_turn: int) -> int | None:
    """The number of events a fork at `at_turn` copies: up to the next turn's start (or all), if turn
    `at_turn` ended; None otherwise."""
    ended = False
    for index, event in enumerate(events):
        if event.type == TURN_END and int(event.data["turn"]) == at_turn:
            ended = True
        elif event.type == TURN_START and int(event.data["turn"]) > at_turn:
            return index if ended else None
    return len(events) if ended else None


def _emptied_inbox(events: list[Event]) -> list[tuple[str, dict[str, Any]]]:
    """Splices that empty what the copied log leaves pending: a fork starts with an empty queue."""
    lists: dict[str, list[InboxItem]] = {"next-turn": [], "next-step": []}
    for event in events:
        if event.type == INBOX_SPLICED:
            apply_splice(lists, event.data, event.seq, event.time)
    out = []
    for target, items in lists.items():
        if items:
            ids = tuple(str(m.id) for item in items for m in item.messages)
            splice = InboxSpliced(target, 0, (), len(items), ids, "canceled")  # type: ignore[arg-type]
            out.append(entry(splice))
    return out
