"""Opens sessions for driving or reading: store, lease, repair, log and agent wired together.

Invariants kept here:
- A process drives a session only while it holds the session's lease; others may read it.
- On open for driving, an open tail turn is closed by the repair closers, durably, before anything
  (attach replay included) reads the log.
- A derived-state snapshot (`agent/snapshot.py`) is a cache: an open with it and an open without it
  build the same agent (history, requests, inbox, turn number). It is written only at a turn end with
  every event on disk, so it never describes more than the stored log; one that cannot be trusted is
  logged, dropped, and the whole log derived instead.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from dsh_daemon.agent.hooks import Hooks
from dsh_daemon.agent.loop import Agent, AgentOptions
from dsh_daemon.agent.snapshot import (
    SNAPSHOT_FORMAT,
    DerivedSnapshot,
    SnapshotCodec,
    SnapshotError,
    SnapshotView,
    encode_in_slices,
)
from dsh_daemon.agent.tools import Approver, ToolRegistry
from dsh_daemon.host.errors import HostError
from dsh_daemon.host.heap import freeze_long_lived, thaw_after_close
from dsh_daemon.host.review import review_title
from dsh_daemon.model.events import INBOX_INSERTED, STATUS, SUBAGENT_FINISHED, TURN_END, Event, EventBus
from dsh_daemon.model.payloads import InboxInserted, SessionTitled, StatusChanged, entry
from dsh_daemon.model.provider import Provider
from dsh_daemon.session.lease import HEARTBEAT_EVERY_S, LeaseHolder
from dsh_daemon.session.log import SessionLog
from dsh_daemon.session.logevents import LogEvents
from dsh_daemon.session.repair import repair_closers, unentered_claims
from dsh_daemon.session.store import (
    CorruptSessionError,
    SessionInfo,
    SessionStore,
    StoreError,
    UntrustedSnapshotError,
    WorktreeRow,
)

logger = logging.getLogger(__name__)

AUTO_TITLE_CHARS = 80
# A resume folds at most about this many events after the last derived-state snapshot; writing one
# costs about as much as folding the whole history once, so not at every turn end.
SNAPSHOT_EVERY = 500
MAX_TITLE_CHARS = 200


class SessionRunningError(HostError):
    """The session has a turn running in this process (refused for what must wait for idle)."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"session {session_id} has a turn running in this dsh-daemon")
        self.session_id = session_id


def collapse_title(text: str) -> str:
    """Whitespace runs become one space, ends trimmed."""
    return " ".join(text.split())


class SessionManager:
    def __init__(
        self,
        state_dir: Path | str,
        *,
        provider: Provider | None = None,
        options: Callable[[], AgentOptions] | None = None,
        tools: Callable[[str], ToolRegistry] | None = None,
        hooks: Callable[[str], Hooks] | None = None,
        approver: Callable[[str], Approver | None] | None = None,
        write_delay: float | None = None,
        durable_auto_title: bool = False,
        snapshot_every: int = SNAPSHOT_EVERY,
        leases: LeaseHolder | None = None,
    ) -> None:
        """`durable_auto_title`: the title taken from the first prompt is also a durable `session/title`
        event (the daemon's choice, so attached clients see it); off, it goes to the sessions row only
        and the log holds exactly what the agent core writes. `leases`: this process's lease holder
        and its store, when they were made before the manager (`host/early.py`)."""
        self.store = SessionStore(state_dir) if leases is None else leases.store
        self.leases = LeaseHolder(self.store) if leases is None else leases
        self.provider = provider
        self._options = options or AgentOptions
        self._tools = tools or (lambda _sid: ToolRegistry())
        self._hooks = hooks or (lambda _sid: Hooks())
        self._approver = approver or (lambda _sid: None)
        self._disposals: set[asyncio.Future[None]] = set()
        self._write_delay = write_delay
        self._durable_auto_title = durable_auto_title
        self.agents: dict[str, Agent] = {}
        self._titled: set[str] = set()  # open sessions whose title is set (no automatic title any more)
        self._heartbeat: asyncio.Task[None] | None = None
        self.snapshot_every = snapshot_every  # events logged between two derived-state snapshots
        self._snapshot_upto: dict[str, int] = {}  # per session, the seq its stored snapshot ends at
        self._codecs: dict[str, SnapshotCodec] = {}  # per session, what its snapshots already encoded
        self._snapshot_writes: set[asyncio.Future[bool]] = set()  # being encoded or written
        self._frozen_with: set[str] = set()  # sessions driven here at a freeze (host/heap.py)
        self._snapshot_last: asyncio.Future[bool] | None = None  # the last one begun (they go in order)
        self._snapshot_thread: ThreadPoolExecutor | None = None

    # ---- sessions ------------------------------------------------------------------------------------

    def create(
        self,
        *,
        cwd: str | None = None,
        title: str | None = None,
        session_id: str | None = None,
        parent: tuple[str, str] | None = None,
        worktree: WorktreeRow | None = None,
    ) -> Agent:
        """`parent`: (parent session, its call) of a subagent's session; `worktree`: the git worktree
        made for it (host/worktrees.py), recorded with its row."""
        session_id = session_id or str(uuid.uuid4())
        self.store.create_session(session_id, title=title, cwd=cwd, parent=parent, worktree=worktree)
        self.leases.acquire(session_id)
        return self.build_created(session_id, title)

    def build_created(self, session_id: str, title: str | None = None) -> Agent:
        """The agent of a session just created, whose row and lease exist (`create`, `host/early.py`)."""
        agent = self._build(session_id, [])
        if title is not None:
            self.write_title(agent, title, commit=True)
        return agent

    def open(self, session_id: str) -> Agent:
        """Open `session_id` for driving (takes the lease; raises SessionBusyError/UnknownSessionError)."""
        agent = self.agents.get(session_id)
        if agent is not None:
            return agent
        self.store.session_info(session_id)
        self.leases.acquire(session_id)
        self.store.clear_handover(session_id, requester=self.leases.holder)  # asked for and got
        self._forget_snapshots(session_id)
        try:
            try:
                snapshot = self._read_snapshot(session_id)
                tail, events = self._stored_events(session_id, snapshot)
                # A snapshot is taken with no turn open, so an open turn lies wholly in the tail.
                closers = repair_closers(tail)
                try:
                    agent = self._build(session_id, events, snapshot)
                except Exception as exc:
                    if snapshot is None or isinstance(exc, StoreError):
                        raise  # (a lease lost, a store that refuses: not the snapshot's doing)
                    # It decoded, but the log's rows after it do not fold onto it (a snapshot sealed
                    # by a key holder, not by this log's fold): still a cache, never the reason a
                    # session cannot be opened (issue 32.4).
                    logger.warning(
                        "session %s: derived-state snapshot ignored, deriving from the log: the rows "
                        "after it do not fold onto it (%s: %s)",
                        session_id,
                        type(exc).__name__,
                        exc,
                    )
                    self.store.drop_snapshot(session_id)
                    self._forget_snapshots(session_id)
                    snapshot = None
                    tail, events = self._stored_events(session_id, None)
                    closers = repair_closers(tail)
                    agent = self._build(session_id, events, None)
            except (KeyError, TypeError, ValueError, sqlite3.DatabaseError) as exc:
                # A stored event of the wrong shape (or a file that is not a database): the log cannot
                # be read; not a daemon bug, and said once, here, where the stored data is read.
                raise CorruptSessionError(f"session {session_id} cannot be loaded: {exc}") from exc
            if closers:
                stamp = tail[-1].time
                pending_before = () if snapshot is None else [i for t in snapshot.inbox.values() for i in t]
                next_step, prompt = unentered_claims(tail, pending_before)
                agent.inbox.return_claimed_durably(next_step, prompt, discard=False)
                for kind, data in closers:
                    # (an older daemon skips a subagent's closer, as it skips the rest of subagents)
                    agent.log.append(kind, data, time=stamp, ignorable=kind == SUBAGENT_FINISHED)
                agent.log.commit()
                logger.info("session %s: repaired an interrupted turn (%d closers)", session_id, len(closers))
            self.store.update_session(session_id, status="idle", pending=len(agent.inbox))
        except BaseException:
            self.agents.pop(session_id, None)
            self.leases.release(session_id)
            raise
        self._freeze_long_lived()  # its state, decoded or loaded
        return agent

    def _freeze_long_lived(self) -> None:
        """The state of the sessions driven here out of the collector's walks (host/heap.py)."""
        if freeze_long_lived():
            self._frozen_with.update(self.agents)

    def _stored_events(
        self, session_id: str, snapshot: DerivedSnapshot | None
    ) -> tuple[list[Event], LogEvents]:
        """The rows an open folds (all of them, or those after the snapshot), and the log's events."""
        if snapshot is None:
            tail = self.store.load_events(session_id)
            return tail, LogEvents(tail)
        # Only the rows after the snapshot are read (and checked) now; the older ones stay on disk
        # until something asks for them (they were checked when it was taken).
        base = snapshot.upto + 1
        tail = self.store.load_events(session_id, after_seq=snapshot.upto)
        events = LogEvents(
            tail,
            base=base,
            load_prefix=lambda: self.store.load_events(session_id, before_seq=base),
            last_stored=lambda kind, below: self.store.last_event_of_type(session_id, kind, below),
            read_backward=lambda seq: self.store.iter_events_backward(session_id, seq),
        )
        return tail, events

    def read(self, session_id: str, after_seq: int = -1) -> list[Event]:
        """The durable events of any session, leased or not."""
        return self.store.load_events(session_id, after_seq)

    def info(self, session_id: str) -> SessionInfo:
        return self.store.session_info(session_id)

    def list_sessions(self, cwd: str | None = None) -> list[SessionInfo]:
        return self.store.list_sessions(cwd)

    def write_title(self, agent: Agent, title: str, *, commit: bool = True) -> None:
        """Set the title of a session this process drives: a durable `session/title` event (on disk on
        return with `commit`) and the sessions row. Once set, no automatic title replaces it."""
        self._titled.add(agent.session_id)
        agent.log.append(*entry(SessionTitled(title)), commit=commit)
        self.store.update_session(agent.session_id, title=title)

    def delete_session(self, session_id: str) -> None:
        """Remove a session and all its rows. Raises `UnknownSessionError`, `SessionRunningError` (a
        turn runs here) or `SessionBusyError` (another live process drives it); pending items go too."""
        agent = self.agents.get(session_id)
        if agent is not None and agent.running:
            raise SessionRunningError(session_id)
        self.store.session_info(session_id)
        if agent is None:
            self.leases.acquire(session_id)  # nobody else may be driving it while its rows go
        else:
            agent.log.commit()  # nothing left to write behind into a deleted session
        self.store.delete_session(session_id, holder=self.leases.holder)
        self.agents.pop(session_id, None)
        self._forget_snapshots(session_id)
        self._titled.discard(session_id)

    def _read_snapshot(self, session_id: str) -> DerivedSnapshot | None:
        """The session's derived-state snapshot, when there is one this build can trust; one that is
        not sealed for this session and log, unreadable or inconsistent is said in the log (once: it is
        dropped), and the state derived from the log instead (it is a cache: nothing but speed depends
        on it); the next snapshot written replaces it."""
        try:
            stored = self.store.read_snapshot(session_id)
            if stored is None:
                return None
            upto, format, data = stored
            if format != SNAPSHOT_FORMAT:
                raise SnapshotError(f"snapshot format {format}, this build reads {SNAPSHOT_FORMAT}")
            codec = SnapshotCodec()
            snapshot = codec.decode(data)
            last = self.store.session_info(session_id).last_seq
            if snapshot.upto != upto or upto > last:
                raise SnapshotError(f"snapshot of seq {snapshot.upto} (row: {upto}), the log ends at {last}")
        except (SnapshotError, UntrustedSnapshotError) as exc:
            logger.warning(
                "session %s: derived-state snapshot ignored, deriving from the log: %s", session_id, exc
            )
            self.store.drop_snapshot(session_id)
            return None
        self._snapshot_upto[session_id] = upto
        self._codecs[session_id] = codec
        return snapshot

    def _forget_snapshots(self, session_id: str) -> None:
        """This process no longer drives the session (or opens it afresh): what it knew of its
        snapshots goes (a codec holds the encoded history)."""
        self._snapshot_upto.pop(session_id, None)
        self._codecs.pop(session_id, None)

    def _snapshot_writer(self, agent: Agent) -> Callable[[Event], None]:
        """Writes the session's derived-state snapshot at a turn end once `snapshot_every` events
        have been logged since the last one. Only then: no turn is open, and with every event on disk
        the snapshot never runs ahead of the stored log (a crash before it is written leaves the older
        snapshot, which the next open extends with the events after it)."""
        session_id = agent.session_id

        def write(event: Event) -> None:
            if event.type != TURN_END or event.seq is None or self.agents.get(session_id) is not agent:
                return
            last = self._snapshot_upto.get(session_id, -1)
            if event.seq - last < self.snapshot_every or not agent.log.on_disk:
                return
            if agent.log.next_seq != event.seq + 1:
                return  # (not at the turn end itself any more)
            try:
                view = SnapshotView.of(agent.snapshot())
            except Exception:
                # A cache that could not be written: the next open derives more of the log, that is all.
                logger.exception("session %s: viewing the derived-state snapshot failed", session_id)
                return
            # Only the view is taken at the turn end itself (no history is copied: see SnapshotView);
            # the freeze of the state it views comes first in the encode's task, a callback of its
            # own (its young-generation pass took 3-9 ms at the turn end, issue 40.4).
            # Encoding it (megabytes for a long session) runs on this loop in slices of a few
            # milliseconds between its other work, and the write (and a disk flush) on the snapshot
            # writer's thread, so that no turn end holds up the streams on this loop (issue 40.4; a
            # thread encoding in Python would hold the GIL, and the loop's every SQLite call would wait
            # the interpreter's switch interval for it back). The snapshots are encoded and written
            # one after the other, in order: a codec runs one encode at a time.
            codec = self._codecs.setdefault(session_id, SnapshotCodec())
            written = asyncio.get_running_loop().create_task(
                self._encode_and_write_snapshot(session_id, codec, view, self._snapshot_last)
            )
            self._snapshot_last = written
            self._snapshot_writes.add(written)

            def done(future: asyncio.Future[bool]) -> None:
                self._snapshot_writes.discard(future)
                if codec.broken and self._codecs.get(session_id) is codec:
                    del self._codecs[session_id]  # half-way through: the next one starts over
                if future.cancelled():
                    return
                if (exc := future.exception()) is not None:
                    what = "encoding" if codec.broken else "writing"
                    logger.error(
                        "session %s: %s the derived-state snapshot failed", session_id, what, exc_info=exc
                    )
                elif future.result() and self._codecs.get(session_id) is codec:
                    last = self._snapshot_upto.get(session_id, -1)
                    self._snapshot_upto[session_id] = max(last, view.upto)

            written.add_done_callback(done)

        return write

    async def _encode_and_write_snapshot(
        self,
        session_id: str,
        codec: SnapshotCodec,
        view: SnapshotView,
        previous: asyncio.Future[bool] | None,
    ) -> bool:
        """Once the snapshot before it is written: the view encoded in slices on this loop, then
        stored sealed on the snapshot writer's thread (False: the store refused it)."""
        # The state it views, derived by now (a session opened with no snapshot derives its history
        # at its first request), out of the collector's walks before the encode makes more:
        # host/heap.py.
        self._freeze_long_lived()
        if previous is not None and not previous.done():
            await asyncio.wait([previous])  # (its outcome is its own to report)
        text = await encode_in_slices(codec, view)
        self._freeze_long_lived()  # the codec's new tables too
        if self._snapshot_thread is None:
            self._snapshot_thread = ThreadPoolExecutor(1, thread_name_prefix="dsh-snapshot")
        return await asyncio.get_running_loop().run_in_executor(
            self._snapshot_thread, self.store.write_snapshot, session_id, view.upto, SNAPSHOT_FORMAT, text
        )

    async def _snapshots_written(self) -> None:
        """Wait for the snapshot writes under way (before the store closes under them)."""
        while self._snapshot_writes:
            await asyncio.gather(*self._snapshot_writes, return_exceptions=True)
        if self._snapshot_thread is not None:
            self._snapshot_thread.shutdown()
            self._snapshot_thread = None

    def _build(
        self, session_id: str, events: list[Event] | LogEvents, snapshot: DerivedSnapshot | None = None
    ) -> Agent:
        bus = EventBus()
        kwargs = {} if self._write_delay is None else {"write_delay": self._write_delay}

        def forget(exc: Exception) -> None:
            agent.stop_for_lost_lease(exc)
            if self.agents.get(session_id) is agent:
                del self.agents[session_id]  # a later open asks the store again (and hears session_busy)
                self._forget_snapshots(session_id)

        # The log's callbacks reach the agent built just below (it needs the log first).
        session_log = SessionLog(
            self.store,
            session_id,
            events,
            bus,
            pending_count=lambda: len(agent.inbox),
            on_lease_lost=forget,
            lease_holder=self.leases.holder,
            **kwargs,
        )
        agent = Agent(
            session_log,
            self.provider,
            options=self._options(),
            tools=self._tools(session_id),
            hooks=self._hooks(session_id),
            approver=self._approver(session_id),
            bus=bus,
            snapshot=snapshot,
        )
        bus.subscribe(self._status_tracker(agent))
        bus.subscribe(self._snapshot_writer(agent))
        self.agents[session_id] = agent
        return agent

    def _status_tracker(self, agent: Agent) -> Callable[[Event], None]:
        """Keeps the sessions row current: status, pending count, and a title from the first prompt (D11),
        which is a durable `session/title` like any other title."""
        session_id = agent.session_id
        if self.store.session_info(session_id).title is not None:
            self._titled.add(session_id)

        def track(event: Event) -> None:
            if event.type == STATUS:
                status = StatusChanged.of(event).status
                # Not flushed: a cache of the log (the next open rewrites it) that cost a second disk
                # flush on the event loop at every turn end (issue 40.4); a daemon crash keeps it.
                self.store.update_session(session_id, status=status, pending=len(agent.inbox), flush=False)
            elif event.type == INBOX_INSERTED and session_id not in self._titled:
                message = InboxInserted.of(event).message
                source = message["source"]
                if source.get("kind") == "user":
                    text = " ".join(b.get("text", "") for b in message["content"] if b.get("type") == "text")
                    title = collapse_title(text)[:AUTO_TITLE_CHARS]
                    if isinstance(source.get("review"), Mapping):  # not the review prompt's first words
                        title = collapse_title(review_title(source["review"]))[:AUTO_TITLE_CHARS]
                    if title and self._durable_auto_title:
                        # Written behind with the next batch (the splice before it is already on disk).
                        self.write_title(agent, title, commit=False)
                    elif title:
                        self._titled.add(session_id)
                        self.store.update_session(session_id, title=title)

        return track

    # ---- lifecycle -----------------------------------------------------------------------------------

    def start_heartbeat(self) -> None:
        async def beat() -> None:
            while True:
                await asyncio.sleep(HEARTBEAT_EVERY_S)
                try:
                    self.leases.heartbeat()
                except Exception:
                    logger.exception("lease heartbeat failed")

        if self._heartbeat is None:
            self._heartbeat = asyncio.get_running_loop().create_task(beat())

    def release_idle_session(self, session_id: str) -> bool:
        """Stop driving an idle session here: its log is flushed and its lease released at once, so
        another process can take it; False (nothing changes) while a turn runs. Pending items stay
        parked in the store; a later `open` builds a new agent from it."""
        agent = self.agents.get(session_id)
        if agent is None:
            return True
        if agent.running:
            return False
        del self.agents[session_id]
        self._forget_snapshots(session_id)
        agent.log.commit()
        self.leases.release(session_id)
        disposal = asyncio.ensure_future(agent.dispose("detached"))  # idle: only marks it disposed
        self._disposals.add(disposal)
        disposal.add_done_callback(self._disposals.discard)
        return True

    def hand_over_idle_session(self, session_id: str) -> bool:
        """Pass the lease of an idle session to the process that asked for it (see `host/handover.py`):
        the log is flushed first, the lease moves in one transaction. False (nothing changes) while a
        turn runs or when nobody asks any more; a session not driven here but leased (a lease handed
        to this process that it never picked up) is passed on too."""
        agent = self.agents.get(session_id)
        if agent is not None:
            if agent.running:
                return False
            agent.log.commit()
        if not self.store.hand_over_lease(session_id, self.leases.holder):
            return False
        if agent is not None:
            del self.agents[session_id]
            self._titled.discard(session_id)
            self._forget_snapshots(session_id)
            disposal = asyncio.ensure_future(agent.dispose("handover"))  # idle: only marks it disposed
            self._disposals.add(disposal)
            disposal.add_done_callback(self._disposals.discard)
        return True

    async def close_session(self, session_id: str, cause: str = "shutdown") -> None:
        agent = self.agents.pop(session_id, None)
        if agent is None:
            return
        self._forget_snapshots(session_id)
        await agent.dispose(cause)
        self.leases.release(session_id)
        if session_id in self._frozen_with:  # frozen, it would never be freed: host/heap.py
            self._frozen_with.discard(session_id)
            del agent
            if thaw_after_close():
                self._frozen_with.update(self.agents)

    async def close(self) -> None:
        """D6: running turns end aborted{shutdown}; pending items stay parked for the next attach."""
        self._frozen_with.clear()  # (no collection pass for a process about to end: host/heap.py)
        for session_id in list(self.agents):
            await self.close_session(session_id)
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            self._heartbeat = None
        await self._snapshots_written()
        self.store.close()
