"""The agent's driver: `send(target × wakeup)`, wake, cancel, dispose; it opens turns, which
`agent/turn.py` runs (D1-D6, docs/design.md §2).

Invariants kept here (each next to the code that keeps it):
- A turn is one run of the model loop; an idle inject never opens one (D4).
- `turn/start` precedes its claim; every turn and step closes exactly once (finally blocks).
- At each boundary the whole next-step list is claimed, plus, at a turn's first boundary only, the
  oldest next-turn prompt; input inserted after the claim waits for a later boundary (D3).
- A running driver keeps going while anything is pending; one followup is at most one turn.
- `status` alternates idle/running and never repeats a value.
- Cancel discards pending input durably unless `keep_inbox`; input entered into a step is never
  restored (D5). Input claimed at a boundary but not yet entered when the turn is aborted goes back to
  the front of its list (a durable splice), and with a clearing cancel is then discarded with the rest:
  every acknowledged message is entered, pending, or discarded by an acknowledged request.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from dsh_daemon.agent.compacting import CompactionError
from dsh_daemon.agent.derive import Derivation
from dsh_daemon.agent.errors import AgentError, StepError
from dsh_daemon.agent.hooks import (
    AgentControl,
    Hooks,
)
from dsh_daemon.agent.inbox import Inbox
from dsh_daemon.agent.options import AgentOptions
from dsh_daemon.agent.signal import AbortSignal
from dsh_daemon.agent.snapshot import DerivedSnapshot
from dsh_daemon.agent.tools import Approver, ToolRegistry
from dsh_daemon.agent.turn import Turn
from dsh_daemon.agent.turnstate import Claim
from dsh_daemon.model import events as ev
from dsh_daemon.model.events import EventBus
from dsh_daemon.model.inbox import PRESETS, TARGETS, Target, preset_of
from dsh_daemon.model.jsonvalue import FrozenDict, freeze_json
from dsh_daemon.model.messages import MessageId, UserMessage
from dsh_daemon.model.payloads import AgentErrored, InboxClaimed, StatusChanged, TurnStarted, entry
from dsh_daemon.model.provider import (
    UNKNOWN,
    Provider,
)
from dsh_daemon.session.log import ReentrantAppendError, SessionLog

logger = logging.getLogger(__name__)

Status = Literal["idle", "running"]


class AgentDisposedError(AgentError, RuntimeError):
    pass


@dataclass
class _Activity:
    """One driver run, from the waking send until it retires."""

    signal: AbortSignal
    task: asyncio.Task[None] | None = None
    compaction_only: bool = False  # a `compact()` turn: it claims nothing, so a waking send latches


@dataclass(frozen=True)
class _Phase:
    """Where the driver is, as one value (docs/design.md §2.4, §2.6):
    - `idle`: no driver;
    - `running`: `activity` runs turns;
    - `latched`: `activity` winds down (aborted, or a compact-only turn that claims nothing) and a wake
      came meanwhile: when it retires, a new driver starts if anything is pending;
    - `closing`: disposing, or the lease was lost: sends are refused and nothing latches; `activity`,
      if any, winds down;
    - `closed`: disposed."""

    name: Literal["idle", "running", "latched", "closing", "closed"] = "idle"
    activity: _Activity | None = None

    @property
    def closing(self) -> bool:
        return self.name in ("closing", "closed")


class Agent:
    def __init__(
        self,
        session_log: SessionLog,
        provider: Provider | None,
        *,
        options: AgentOptions | None = None,
        tools: ToolRegistry | None = None,
        hooks: Hooks | None = None,
        approver: Approver | None = None,
        bus: EventBus | None = None,
        rng: random.Random | None = None,
        snapshot: DerivedSnapshot | None = None,
    ) -> None:
        """`snapshot`: the derived state of the log's first events (`agent/snapshot.py`), taken when
        the log was at `snapshot.upto`; only the events after it are folded here."""
        self.log = session_log
        self.session_id = session_log.session_id
        self.bus = bus or session_log.bus
        self.provider = provider
        self.options = options or AgentOptions()
        self.tools = tools or ToolRegistry()
        self.hooks = hooks or Hooks()
        self.approver = approver
        self.always_allowed: set[str] = set()
        self.rng = rng or random.Random()
        self.inbox = Inbox(session_log, self.bus)
        events = session_log.events
        start = 0 if snapshot is None else snapshot.upto + 1
        if snapshot is not None:
            self.inbox.restore(snapshot.inbox)
        self.inbox.replay(events[start:])
        self.status: Status = "idle"
        # Turn numbers only grow, so the last turn/start has the highest (parsing every one would
        # cost a long session's resume more than the rest of opening it).
        last_start = next((e for e in reversed(events[start:]) if e.type == ev.TURN_START), None)
        if last_start is not None:
            self.turn = TurnStarted.of(last_start).turn
        else:
            self.turn = snapshot.turn if snapshot is not None else 0
        self._phase = _Phase()
        self._derivation = Derivation() if snapshot is None else snapshot.derivation
        self._derived_upto = start
        self.header_logged = False
        self._idle_waiters: list[asyncio.Future[None]] = []
        self.compact_requested = False  # `compact()` while running: the next boundary compacts

    # ---- public surface ------------------------------------------------------------------------------

    def subscribe(self, subscriber: Any) -> Any:
        return self.bus.subscribe(subscriber)

    @property
    def control(self) -> AgentControl:
        """What hooks get of this agent (the turn context's `control`): send, cancel, wake, read."""
        return self

    def send(
        self,
        message: UserMessage,
        *,
        target: Target,
        wakeup: bool,
        attachments: Sequence[UserMessage] = (),
        verb: str | None = None,
    ) -> MessageId:
        """Insert `message` (durably, before returning) and, with `wakeup`, make the model run.
        `attachments` travel with it as one item and are entered just before it; `verb` says how a
        client sent it (followup, steer, inject, send, context), for clients that list the queue."""
        if self._phase.closing:
            raise AgentDisposedError(f"session {self.session_id} is shut down")
        if target not in TARGETS:
            raise ValueError(f"target must be one of {TARGETS}")
        if not isinstance(message, UserMessage) or not all(isinstance(m, UserMessage) for m in attachments):
            raise TypeError("send takes UserMessages")
        verb = verb or preset_of(target, wakeup)
        activity = self._phase.activity
        if wakeup and activity is not None and activity.signal.aborted:
            # A waking send in the abort-to-idle window becomes a queued prompt (replayed by the latch).
            target = "next-turn"
        self.inbox.append(target, message, attachments, wakeup=wakeup, verb=verb)
        if wakeup:
            self._wake()
        return message.id

    def followup(self, message: UserMessage) -> MessageId:
        return self._send_preset("followup", message)

    def steer(self, message: UserMessage) -> MessageId:
        return self._send_preset("steer", message)

    def inject(self, message: UserMessage) -> MessageId:
        return self._send_preset("inject", message)

    def _send_preset(self, preset: str, message: UserMessage) -> MessageId:
        target, wakeup = PRESETS[preset]
        return self.send(message, target=target, wakeup=wakeup)

    def wake(self) -> bool:
        """Run parked work now. Returns whether a driver was started."""
        if self.log.publishing:
            raise ReentrantAppendError("cannot wake the agent from inside a durable-event observer")
        phase, pending = self._phase, self.inbox.has_pending
        if phase.activity is not None or phase.closing or not pending:
            if phase.activity is not None and self._latches() and not phase.closing:
                # the parked work runs as soon as the cancelled turn has ended
                self._phase = _Phase("latched" if pending else "running", phase.activity)
                return pending
            return False
        self._start_activity()
        return True

    async def compact(self) -> dict[str, Any]:
        """Compact the history now (`dsh/session/compact`). Idle: one turn that only compacts (it
        claims nothing; parked input stays parked), answered when it has ended. Running: the running
        turn compacts at its next boundary, and this answers at once with `scheduled: true`.
        Raises `CompactionError` when the compaction failed (nothing changed)."""
        if self._phase.closing:
            raise AgentDisposedError(f"session {self.session_id} is shut down")
        if self._phase.activity is not None:
            self.compact_requested = True
            return {"compacted": False, "scheduled": True}
        if not self.derive().entries:
            return {"compacted": False}  # no history at all: no turn is opened for nothing
        activity = _Activity(AbortSignal(), compaction_only=True)
        self._phase = _Phase("running", activity)
        self._set_status("running")
        if activity.signal.aborted or self._phase.activity is not activity:
            if self._phase.activity is activity:
                self._retire(activity)
            return {"compacted": False}
        done: asyncio.Future[tuple[FrozenDict, FrozenDict | None]] = (
            asyncio.get_running_loop().create_future()
        )
        try:
            self.turn += 1
            self.log.append(*entry(TurnStarted(self.turn)))
        except BaseException:
            self._retire(activity)
            raise
        activity.task = asyncio.get_running_loop().create_task(self._drive_compaction(activity, done))
        reason, compacted = await asyncio.shield(done)
        if reason["kind"] == "error":
            raise CompactionError(reason["error"])
        if compacted is None:
            return {"compacted": False}
        return {
            "compacted": True,
            "keptFromSeq": compacted["keptFromSeq"],
            "tokensBefore": compacted["tokensBefore"],
            "tokensAfter": compacted["tokensAfter"],
        }

    async def _drive_compaction(
        self, activity: _Activity, done: asyncio.Future[tuple[FrozenDict, FrozenDict | None]]
    ) -> None:
        reason: FrozenDict = freeze_json({"kind": "error", "error": {"code": UNKNOWN, "message": "no turn"}})
        compacted: FrozenDict | None = None
        try:
            turn = Turn(self)
            reason, _ = await turn.run(self.turn, Claim(), activity.signal, compaction_only=True)
            compacted = turn.state.compacted if turn.state is not None else None
        except Exception:
            logger.exception("session %s: compaction driver failed", self.session_id)
        finally:
            self._retire(activity)
            if not done.done():
                done.set_result((reason, compacted))

    def cancel(self, cause: str = "user", *, keep_inbox: bool = False) -> None:
        """Abort the running turn; unless `keep_inbox`, durably discard everything pending (even idle)."""
        try:
            if not keep_inbox:
                if self._phase.name == "latched":  # nothing is left to run after the abort
                    self._phase = _Phase("running", self._phase.activity)
                self.inbox.clear()
        finally:
            # Abort even if the discard could not be written: the turn must stop either way. Input
            # the aborted turn claimed but has not entered goes with the rest unless keep_inbox.
            activity = self._phase.activity
            if activity is not None:
                activity.signal.abort(cause, discard_unentered=not keep_inbox)

    @property
    def running(self) -> bool:
        return self._phase.activity is not None

    async def when_idle(self) -> None:
        """Resolves when no driver is active (covers a replacement driver started by the latch)."""
        while self._phase.activity is not None:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._idle_waiters.append(waiter)
            await waiter

    def stop_for_lost_lease(self, exc: Exception) -> None:
        """Another process drives this session now: stop, refuse further sends, and say why (live)."""
        self._close()
        self.bus.publish(AgentErrored(self.turn, None, {"code": "LEASE_LOST", "message": str(exc)}).event())
        if self._phase.activity is not None:
            self._phase.activity.signal.abort("shutdown")

    async def until_retired(self) -> None:
        """Resolves when the driver running now (if any) has retired; a later one may be running."""
        activity = self._phase.activity
        while activity is not None and self._phase.activity is activity:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._idle_waiters.append(waiter)
            await waiter

    async def dispose(self, cause: str = "shutdown") -> None:
        """D6: end a running turn `aborted{cause}`, keep pending items parked, flush the log."""
        if self._phase.name == "closed":
            return
        self._close()
        if self._phase.activity is not None:
            self._phase.activity.signal.abort(cause)
        await self.when_idle()
        self.log.commit()
        self._phase = _Phase("closed")

    def _close(self) -> None:
        """Refuse sends from now on, and never latch; a running driver winds down."""
        if self._phase.name != "closed":
            self._phase = _Phase("closing", self._phase.activity)

    # ---- driver --------------------------------------------------------------------------------------

    def _set_status(self, status: Status) -> None:
        if status == self.status:
            return
        self.status = status
        self.bus.publish(StatusChanged(status).event())

    def _latches(self) -> bool:
        """Whether a wake now must wait for the running activity to retire (it will claim nothing)."""
        activity = self._phase.activity
        return activity is not None and (activity.signal.aborted or activity.compaction_only)

    def _wake(self) -> None:
        phase = self._phase
        if phase.activity is not None:
            if self._latches() and not phase.closing:
                self._phase = _Phase("latched", phase.activity)
            return
        if not phase.closing and self.inbox.has_pending:
            self._start_activity()

    def _start_activity(self) -> None:
        assert self._phase.activity is None, "one driver at a time"
        activity = _Activity(AbortSignal())
        self._phase = _Phase("running", activity)
        self._set_status("running")
        if activity.signal.aborted or self._phase.activity is not activity:
            # Cancelled (or restarted) by a status listener: no turn at all from this activity.
            if self._phase.activity is activity:
                self._retire(activity)
            return
        try:
            first_claim = self._open_turn()
        except BaseException:
            # All or nothing: an agent must never be left "running" without a driver.
            self._retire(activity)
            raise
        activity.task = asyncio.get_running_loop().create_task(self._drive(activity, first_claim))

    def _open_turn(self) -> Claim:
        """`turn/start`, then the first claim: all of next-step plus the oldest next-turn prompt."""
        self.turn += 1
        self.log.append(*entry(TurnStarted(self.turn)))
        claim = Claim(tuple(self.inbox.claim_next_step()), self.inbox.claim_next_turn())
        self.announce_claims(claim.messages, self.turn)
        return claim

    def announce_claims(self, batch: tuple[UserMessage, ...], turn: int) -> None:
        for message in batch:
            self.bus.publish(InboxClaimed(message.to_json(), turn).event())

    async def _drive(self, activity: _Activity, claim: Claim) -> None:
        try:
            while True:
                reason, stepped = await Turn(self).run(self.turn, claim, activity.signal)
                # A turn that ran no step (its first batch entered empty) retires the driver, like a
                # blocked one: the rest stays parked until a new waking send (docs/design.md §2.4).
                normal = stepped and reason["kind"] in ("completed", "max-tokens")
                more = self.inbox.has_pending and not activity.signal.aborted and not self._phase.closing
                if normal and more:
                    await asyncio.sleep(0)  # let the editor's requests in between turns
                    if activity.signal.aborted or self._phase.closing or not self.inbox.has_pending:
                        return
                    activity.signal = AbortSignal()  # each turn gets a fresh signal
                    claim = self._open_turn()
                    continue
                return
        except Exception:
            logger.exception("session %s: driver failed", self.session_id)
        finally:
            self._retire(activity)

    def _retire(self, activity: _Activity) -> None:
        phase = self._phase
        latched = phase.name == "latched" and phase.activity is activity
        if phase.activity is activity:
            self._phase = _Phase("closing" if phase.closing else "idle")
        self._set_status("idle")
        waiters, self._idle_waiters = self._idle_waiters, []
        # An idle listener may already have started the next driver; the latch must not start another.
        now = self._phase
        if latched and now.activity is None and self.inbox.has_pending and not now.closing:
            self._start_activity()
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    # ---- what turns use ------------------------------------------------------------------------------

    def derive(self) -> Derivation:
        """The derivation, caught up with the log (incremental: each event is folded once)."""
        events = self.log.events
        for event in events[self._derived_upto :]:
            self._derivation.feed(event)
        self._derived_upto = len(events)
        return self._derivation

    def snapshot(self) -> DerivedSnapshot:
        """The derived state as it stands (the log folded through its last event), for a resume to
        start from. Meaningful at a turn end only: the caller checks no turn is open."""
        derivation = self.derive()
        return DerivedSnapshot(self.log.next_seq - 1, self.turn, self.inbox.lists(), derivation)

    def context_window(self, model: str | None = None) -> int | None:
        """The model's context window in tokens: the options', else the provider's; None if unknown."""
        if self.options.context_window is not None:
            return self.options.context_window
        window = self.provider.context_window(model or self.options.model) if self.provider else None
        return window if isinstance(window, int) and not isinstance(window, bool) and window > 0 else None

    def publish_error(self, turn: int, step: int | None, error: Mapping[str, Any]) -> None:
        self.bus.publish(AgentErrored(turn, step, error).event())


__all__ = ["Agent", "AgentDisposedError", "AgentOptions", "CompactionError", "StepError"]
