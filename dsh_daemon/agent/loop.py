"""The agent: `send(target × wakeup)`, the driver, turns and steps (D1-D6, agent-semantics §2-§4).

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
from dataclasses import dataclass, field
from typing import Any, Literal

from dsh_daemon.agent import compaction
from dsh_daemon.agent.assembler import Assembler
from dsh_daemon.agent.derive import Derivation
from dsh_daemon.agent.hooks import (
    Enter,
    Hooks,
    PreStepContext,
    PreStepDecision,
    Reject,
    RequestConfig,
    RequestContext,
    RequestErrorContext,
    Retry,
    TurnStoppingContext,
    run_waterfall,
)
from dsh_daemon.agent.inbox import TARGETS, Inbox, InboxItem, Target
from dsh_daemon.agent.retry import RetryPolicy
from dsh_daemon.agent.signal import AbortedError, AbortSignal
from dsh_daemon.agent.toolrun import run_tool_batch
from dsh_daemon.agent.tools import Approver, ToolRegistry
from dsh_daemon.model import events as ev
from dsh_daemon.model.events import Event, EventBus
from dsh_daemon.model.inbox import preset_of
from dsh_daemon.model.jsonvalue import FrozenDict, dumps, freeze_json
from dsh_daemon.model.messages import AssistantMessage, MessageId, UserMessage
from dsh_daemon.model.provider import (
    CONTEXT_WINDOW_EXCEEDED,
    EMPTY_RESPONSE,
    UNKNOWN,
    Finish,
    LlmFailure,
    ModelRequest,
    Provider,
    ProviderFailure,
    TextDelta,
    ToolCallDelta,
)
from dsh_daemon.session.log import ReentrantAppendError, SessionLog

logger = logging.getLogger(__name__)

Status = Literal["idle", "running"]
CANCEL_CAUSES = frozenset({"user", "shutdown", "disposed", "hook"})


class AgentDisposedError(RuntimeError):
    pass


class StepError(RuntimeError):
    """A non-provider failure of a step (configuration, a hook that threw...)."""


@dataclass
class AgentOptions:
    model: str = ""
    system: str | None = None
    max_tokens: int | None = None
    config: Mapping[str, Any] = field(default_factory=dict)  # thinking, reasoningEffort, temperature...
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    tool_concurrency: int = 10
    context_window: int | None = None  # tokens; None: the provider's `context_window(model)`
    compact_keep_turns: int = compaction.KEEP_TURNS  # the kept tail when compacting (docs/design.md §11)

    def __post_init__(self) -> None:
        if self.max_tokens is not None and (
            not isinstance(self.max_tokens, int) or isinstance(self.max_tokens, bool) or self.max_tokens <= 0
        ):
            raise ValueError("max_tokens must be a positive integer")


@dataclass
class _Activity:
    """One driver run, from the waking send until it retires."""

    signal: AbortSignal
    task: asyncio.Task[None] | None = None
    compaction_only: bool = False  # a `compact()` turn: it claims nothing, so a waking send latches


@dataclass(frozen=True)
class Claim:
    """What one boundary took out of the inbox, by list, so an abort before entry can put it back."""

    next_step: tuple[InboxItem, ...] = ()
    prompt: InboxItem | None = None

    @property
    def messages(self) -> tuple[UserMessage, ...]:
        """The batch in entry order: each item's attachments just before its message, prompt last."""
        items = self.next_step if self.prompt is None else (*self.next_step, self.prompt)
        return tuple(m for item in items for m in item.messages)


@dataclass
class _TurnState:
    """One turn's own state, created when it opens: nothing of it leaks into the next turn."""

    number: int
    signal: AbortSignal
    steps: int = 0
    usage: dict[str, int] = field(default_factory=dict)
    overflow: FrozenDict | None = None  # a CONTEXT_WINDOW_EXCEEDED the next boundary compacts for
    overflow_compacted: bool = False  # compacted for an overflow, no step succeeded since
    compacted: FrozenDict | None = None  # the `context/compacted` data this turn wrote, if any


class CompactionError(RuntimeError):
    """A compaction that could not finish; nothing was changed (the turn ends with `error`)."""

    def __init__(self, error: Mapping[str, Any]) -> None:
        super().__init__(str(error.get("message", "")))
        self.error = freeze_json(error)


@dataclass
class _StepOutcome:
    kind: Literal["completed", "tools", "max-tokens", "error", "overflow"]
    error: FrozenDict | None = None
    concluded: bool = False


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
    ) -> None:
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
        self.inbox.replay(session_log.events)
        self.status: Status = "idle"
        # Turn numbers only grow, so the last turn/start has the highest (parsing every one would
        # cost a long session's resume more than the rest of opening it).
        self.turn = next(
            (int(e.data["turn"]) for e in reversed(session_log.events) if e.type == ev.TURN_START), 0
        )
        self._activity: _Activity | None = None
        self._latch = False
        self._disposing = False
        self._disposed = False
        self._derivation = Derivation()
        self._derived_upto = 0
        self._header_logged = False
        self._idle_waiters: list[asyncio.Future[None]] = []
        self._current: _TurnState | None = None
        self._compact_requested = False  # `compact()` while running: the next boundary compacts
        self._last_compacted: FrozenDict | None = None  # the last turn's `context/compacted` data

    # ---- public surface ------------------------------------------------------------------------------

    def subscribe(self, subscriber: Any) -> Any:
        return self.bus.subscribe(subscriber)

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
        if self._disposing:
            raise AgentDisposedError(f"session {self.session_id} is shut down")
        if target not in TARGETS:
            raise ValueError(f"target must be one of {TARGETS}")
        if not isinstance(message, UserMessage) or not all(isinstance(m, UserMessage) for m in attachments):
            raise TypeError("send takes UserMessages")
        verb = verb or preset_of(target, wakeup)
        if wakeup and self._activity is not None and self._activity.signal.aborted:
            # A waking send in the abort-to-idle window becomes a queued prompt (replayed by the latch).
            target = "next-turn"
        self.inbox.append(target, message, attachments, wakeup=wakeup, verb=verb)
        if wakeup:
            self._wake()
        return message.id

    def followup(self, message: UserMessage) -> MessageId:
        return self.send(message, target="next-turn", wakeup=True)

    def steer(self, message: UserMessage) -> MessageId:
        return self.send(message, target="next-step", wakeup=True)

    def inject(self, message: UserMessage) -> MessageId:
        return self.send(message, target="next-step", wakeup=False)

    def wake(self) -> bool:
        """Run parked work now. Returns whether a driver was started."""
        if self.log.publishing:
            raise ReentrantAppendError("cannot wake the agent from inside a durable-event observer")
        if self._activity is not None or self._disposing or not self.inbox.has_pending:
            if self._activity is not None and self._latches() and not self._disposing:
                self._latch = self.inbox.has_pending
                return self._latch  # the parked work runs as soon as the cancelled turn has ended
            return False
        self._start_activity()
        return True

    async def compact(self) -> dict[str, Any]:
        """Compact the history now (`dsh/session/compact`). Idle: one turn that only compacts (it
        claims nothing; parked input stays parked), answered when it has ended. Running: the running
        turn compacts at its next boundary, and this answers at once with `scheduled: true`.
        Raises `CompactionError` when the compaction failed (nothing changed)."""
        if self._disposing:
            raise AgentDisposedError(f"session {self.session_id} is shut down")
        if self._activity is not None:
            self._compact_requested = True
            return {"compacted": False, "scheduled": True}
        activity = _Activity(AbortSignal(), compaction_only=True)
        self._activity = activity
        self._set_status("running")
        if activity.signal.aborted or self._activity is not activity:
            if self._activity is activity:
                self._retire(activity)
            return {"compacted": False}
        done: asyncio.Future[tuple[FrozenDict, FrozenDict | None]] = (
            asyncio.get_running_loop().create_future()
        )
        try:
            self.turn += 1
            self.log.append(ev.TURN_START, {"turn": self.turn})
        except BaseException:
            self._retire(activity)
            raise
        activity.task = asyncio.get_running_loop().create_task(self._drive_compaction(activity, done))
        reason, compacted = await asyncio.shield(done)
        if reason["kind"] == "error":
            raise CompactionError(reason["error"])
        if compacted is None:
            return {"compacted": False, "reason": dict(reason)}
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
            reason, _ = await self._run_turn(self.turn, Claim(), activity.signal, compaction_only=True)
            compacted = self._last_compacted
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
                self._latch = False
                if self._activity is not None:
                    # Input the aborted turn claimed but has not entered is discarded with the rest.
                    self._activity.signal.discard_unentered = True
                self.inbox.clear()
        finally:
            # Abort even if the discard could not be written: the turn must stop either way.
            if self._activity is not None:
                self._activity.signal.abort(cause)

    @property
    def running(self) -> bool:
        return self._activity is not None

    async def when_idle(self) -> None:
        """Resolves when no driver is active (covers a replacement driver started by the latch)."""
        while self._activity is not None:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._idle_waiters.append(waiter)
            await waiter

    def stop_for_lost_lease(self, exc: Exception) -> None:
        """Another process drives this session now: stop, refuse further sends, and say why (live)."""
        self._disposing = True
        self._latch = False
        self.bus.publish(
            Event(
                ev.AGENT_ERROR,
                freeze_json(
                    {"turn": self.turn, "step": None, "error": {"code": "LEASE_LOST", "message": str(exc)}}
                ),
            )
        )
        if self._activity is not None:
            self._activity.signal.abort("shutdown")

    async def until_retired(self) -> None:
        """Resolves when the driver running now (if any) has retired; a later one may be running."""
        activity = self._activity
        while activity is not None and self._activity is activity:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._idle_waiters.append(waiter)
            await waiter

    async def dispose(self, cause: str = "shutdown") -> None:
        """D6: end a running turn `aborted{cause}`, keep pending items parked, flush the log."""
        if self._disposed:
            return
        self._disposing = True
        self._latch = False
        if self._activity is not None:
            self._activity.signal.abort(cause)
        await self.when_idle()
        self.log.commit()
        self._disposed = True

    # ---- driver --------------------------------------------------------------------------------------

    def _set_status(self, status: Status) -> None:
        if status == self.status:
            return
        self.status = status
        self.bus.publish(Event(ev.STATUS, FrozenDict({"status": status})))

    def _latches(self) -> bool:
        """Whether a wake now must wait for the running activity to retire (it will claim nothing)."""
        return self._activity is not None and (
            self._activity.signal.aborted or self._activity.compaction_only
        )

    def _wake(self) -> None:
        if self._activity is not None:
            if self._latches() and not self._disposing:
                self._latch = True
            return
        if not self._disposing and self.inbox.has_pending:
            self._start_activity()

    def _start_activity(self) -> None:
        assert self._activity is None, "one driver at a time"
        activity = _Activity(AbortSignal())
        self._activity = activity
        self._set_status("running")
        if activity.signal.aborted or self._activity is not activity:
            # Cancelled (or restarted) by a status listener: no turn at all from this activity.
            if self._activity is activity:
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
        self.log.append(ev.TURN_START, {"turn": self.turn})
        claim = Claim(tuple(self.inbox.claim_next_step()), self.inbox.claim_next_turn())
        self._announce_claims(claim.messages, self.turn)
        return claim

    def _announce_claims(self, batch: tuple[UserMessage, ...], turn: int) -> None:
        for message in batch:
            self.bus.publish(
                Event(ev.INBOX_CLAIMED, FrozenDict({"message": message.to_json(), "turn": turn}))
            )

    async def _drive(self, activity: _Activity, claim: Claim) -> None:
        try:
            while True:
                reason, stepped = await self._run_turn(self.turn, claim, activity.signal)
                # A turn that ran no step (its first batch entered empty) retires the driver, like a
                # blocked one: the rest stays parked until a new waking send (agent-semantics §4).
                normal = stepped and reason["kind"] in ("completed", "max-tokens")
                if normal and self.inbox.has_pending and not activity.signal.aborted and not self._disposing:
                    await asyncio.sleep(0)  # let the editor's requests in between turns
                    if activity.signal.aborted or self._disposing or not self.inbox.has_pending:
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
        if self._activity is activity:
            self._activity = None
        self._set_status("idle")
        waiters, self._idle_waiters = self._idle_waiters, []
        latched, self._latch = self._latch, False
        # An idle listener may already have started the next driver; the latch must not start another.
        if latched and self._activity is None and self.inbox.has_pending and not self._disposing:
            self._start_activity()
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    # ---- one turn ------------------------------------------------------------------------------------

    async def _run_turn(
        self, turn: int, claim: Claim, signal: AbortSignal, *, compaction_only: bool = False
    ) -> tuple[FrozenDict, bool]:
        """Run one turn to its `turn/end`; returns the reason and whether any step ran."""
        reason: dict[str, Any] = {
            "kind": "error",
            "error": {"code": UNKNOWN, "message": "turn did not finish"},
        }
        state = self._current = _TurnState(turn, signal)
        try:
            if compaction_only:
                reason = await self._compaction_turn(state)
            else:
                reason = await self._turn_body(state, claim)
        except AbortedError as exc:
            reason = {"kind": "aborted", "cause": exc.cause}
        except Exception as exc:
            logger.exception("session %s: turn %d failed", self.session_id, turn)
            error = {"code": UNKNOWN, "message": _error_chain(exc)}
            self._publish_error(turn, None, error)
            reason = {"kind": "error", "error": error}
        finally:
            self._current = None
            if state.usage:
                self.log.append(ev.USAGE, {"turn": turn, "usage": state.usage})
            self.log.append(ev.TURN_END, {"turn": turn, "reason": reason}, commit=True)
        return freeze_json(reason), state.steps > 0

    async def _turn_body(self, state: _TurnState, claim: Claim) -> dict[str, Any]:
        turn, signal = state.number, state.signal
        step = 0
        last: _StepOutcome | None = None
        max_tokens = False
        first = True
        while True:
            if not first:
                # Check before claiming: an aborted turn must leave unclaimed input parked (D5, D6).
                signal.check()
                try:
                    await self._compact_if_due(state)  # before the claim of the step it serves
                except CompactionError as exc:
                    self._publish_error(turn, None, exc.error)
                    return {"kind": "error", "error": exc.error}
                claim = Claim(tuple(self.inbox.claim_next_step()))
                self._announce_claims(claim.messages, turn)
            try:
                signal.check()
                if first:
                    # The first claim happened when the turn opened (inside the waking send, §2.4).
                    await self._compact_if_due(state)
                decision = await self._pre_step(claim.messages, turn, step + 1, signal)
                signal.check()
            except AbortedError:
                # Claimed but never entered: the abort must not make it vanish (docs/design.md).
                self.inbox.return_claimed_durably(
                    claim.next_step, claim.prompt, discard=signal.discard_unentered
                )
                raise
            except CompactionError as exc:
                # A failed compaction changes nothing: the claimed input goes back, parked.
                self.inbox.return_claimed_durably(claim.next_step, claim.prompt, discard=False)
                self._publish_error(turn, None, exc.error)
                return {"kind": "error", "error": exc.error}
            first = False
            if isinstance(decision, Reject):
                return {"kind": "blocked"}
            messages = decision.messages
            resume = last is not None and last.kind == "overflow"  # the compacted step runs again
            if not messages and not resume and (last is None or last.kind != "tools" or last.concluded):
                # Empty first boundary: a completed no-step turn. After a completed step: close.
                return {"kind": "max-tokens" if max_tokens else "completed"}
            step += 1
            state.steps = step
            self.log.append(ev.STEP_START, {"turn": turn, "step": step})
            try:
                for message in messages:
                    self.log.append(ev.USER_MESSAGE, message.to_json())
                signal.check()
                last = await self._run_step(turn, step, signal)
            finally:
                self.log.append(ev.STEP_END, {"turn": turn, "step": step})
            signal.check()
            if last.kind == "overflow":
                if state.overflow_compacted:  # compacting did not make it fit: give up
                    assert last.error is not None
                    self._publish_error(turn, step, last.error)
                    return {"kind": "error", "error": last.error}
                state.overflow = last.error  # the next boundary compacts, then the step is retried
                continue
            state.overflow_compacted = False
            if last.kind == "error":
                return {"kind": "error", "error": last.error}
            if last.kind == "max-tokens":
                max_tokens = True  # sticky for the rest of the turn
            if last.kind == "tools" and not last.concluded:
                continue
            if self.inbox.next_step:
                continue
            await run_serial(self.hooks.turn_stopping, TurnStoppingContext(self, turn, signal))
            signal.check()
            if self.inbox.next_step:
                continue
            return {"kind": "max-tokens" if max_tokens else "completed"}

    async def _pre_step(
        self, claimed: tuple[UserMessage, ...], turn: int, step: int, signal: AbortSignal
    ) -> PreStepDecision:
        async def innermost() -> PreStepDecision:
            return Enter(claimed)

        ctx = PreStepContext(self, claimed, turn, step, signal)
        decision = await run_waterfall(self.hooks.pre_step, ctx, innermost)
        if isinstance(decision, Enter):
            for message in decision.messages:
                if not isinstance(message, UserMessage):
                    raise StepError("agent/pre-step entered something that is not a UserMessage")
            return decision
        if isinstance(decision, Reject):
            return decision
        raise StepError(f"agent/pre-step returned {decision!r}; expected Enter or Reject")

    # ---- compaction (docs/design.md §11) -------------------------------------------------------------

    async def _compaction_turn(self, state: _TurnState) -> dict[str, Any]:
        """The body of a `compact()` turn: compact, claim nothing, run no step."""
        self._last_compacted = None
        try:
            await self._compact(state, "manual")
        except CompactionError as exc:
            self._publish_error(state.number, None, exc.error)
            return {"kind": "error", "error": exc.error}
        self._last_compacted = state.compacted
        return {"kind": "completed"}

    def _compaction_due(self, state: _TurnState) -> str | None:
        if state.overflow is not None:
            return "overflow"
        if self._compact_requested:
            return "manual"
        derivation = self._derive()
        used, window = derivation.context_used, self.context_window(self._model())
        ratio = getattr(self.provider, "compact_at_ratio", compaction.DEFAULT_RATIO)
        if used is None or window is None or not isinstance(ratio, int | float) or isinstance(ratio, bool):
            return None
        return "ratio" if used >= ratio * window else None

    async def _compact_if_due(self, state: _TurnState) -> None:
        reason = self._compaction_due(state)
        if reason is not None:
            await self._compact(state, reason)

    def _model(self) -> str:
        header = self._derive().header
        model = header["config"].get("model") if header is not None else None
        return model if isinstance(model, str) and model else self.options.model

    async def _compact(self, state: _TurnState, reason: str) -> None:
        """One compaction: a summarising model call, then a durable `context/compacted`. Raises
        `CompactionError` (nothing written but the attempt's `llm/request` / `llm/retry`) when it fails;
        returns quietly when there is nothing to compact (an overflow then ends the turn)."""
        turn, signal, step = state.number, state.signal, state.steps + 1
        overflow, state.overflow = state.overflow, None
        self._compact_requested = False
        try:
            current = await self._build_request(turn, step, signal)  # logs a changed header first
        except StepError as exc:
            raise CompactionError({"code": "CONFIG", "message": f"compaction failed: {exc}"}) from None
        derivation = self._derive()
        assert derivation.header is not None
        window = self.context_window(current.model)
        chars_now = len(dumps(current.to_json()))
        per_token = self._chars_per_token(derivation)
        budget = window * per_token if window is not None else chars_now
        cuts, end = list(derivation.cuts), self.log.next_seq
        if overflow is not None and cuts:
            end = cuts.pop()  # the step that overflowed keeps what it entered (the person's prompt)
        kept = compaction.choose_cut(
            derivation.entries,
            cuts,
            derivation.turn_starts,
            end,
            keep_turns=max(1, self.options.compact_keep_turns),
            tail_chars=int(budget * compaction.TAIL_SHARE),
            summary=derivation.summary,
        )
        if kept is None:
            if overflow is not None:
                raise CompactionError(overflow)  # nothing to compact: the overflow stands
            return
        max_tokens = compaction.SUMMARY_MAX_TOKENS
        if window is not None:
            max_tokens = max(256, min(max_tokens, window // 4))
        data = compaction.request_data(
            kept,
            transcript_chars=max(10_000, int(budget * compaction.TRANSCRIPT_SHARE)),
            max_tokens=max_tokens,
        )
        summary = await self._summarise(state, step, data)
        after = [m for p, m in derivation.entries if p >= kept]
        message = compaction.summary_message(summary, self.log.next_seq)
        tail_request = ModelRequest(current.config, current.system, current.tools, (message, *after))
        compacted = {
            "turn": turn,
            "reason": reason,
            "summary": summary,
            "keptFromSeq": kept,
            "tokensBefore": round(chars_now / per_token),
            "tokensAfter": round(len(dumps(tail_request.to_json())) / per_token),
            "message": message.to_json(),
        }
        event = self.log.append(ev.CONTEXT_COMPACTED, compacted, commit=True)
        state.compacted = event.data
        if overflow is not None:
            state.overflow_compacted = True

    def _chars_per_token(self, derivation: Derivation) -> float:
        """Characters per token of this session's requests, from the last step request's usage."""
        used = derivation.context_used
        for request in reversed(derivation.requests):
            if request.config.get("purpose") is None:
                if used:
                    return min(8.0, max(1.0, len(dumps(request.to_json())) / used))
                break
        return compaction.CHARS_PER_TOKEN

    async def _summarise(self, state: _TurnState, step: int, data: Mapping[str, Any]) -> str:
        """The compaction call (`x-dsh-purpose: compaction`), retried like a step's request (D8)."""
        assert self.provider is not None
        turn, signal = state.number, state.signal
        retries = 0
        while True:
            signal.check()
            self.log.append(
                ev.LLM_REQUEST, {"turn": turn, "step": step, "attempt": retries + 1, **data}, commit=True
            )
            request = self._derive().requests[-1]
            result = await self._summary_attempt(request, signal)
            if isinstance(result, str):
                return result
            delay = self.options.retry.delay(result, retries, self.rng)
            signal.check()
            if delay is None:
                raise CompactionError({**result.to_json(), "message": f"compaction failed: {result.message}"})
            retries += 1
            self.log.append(
                ev.LLM_RETRY,
                {
                    "turn": turn,
                    "step": step,
                    "retry": retries,
                    "delayMs": int(delay * 1000),
                    "error": result.to_json(),
                    "purpose": compaction.PURPOSE,
                },
                commit=True,
            )
            await signal.sleep(delay)

    async def _summary_attempt(self, request: ModelRequest, signal: AbortSignal) -> str | LlmFailure:
        """One attempt: the reply's text (nothing is streamed to clients or logged as chunks)."""
        assert self.provider is not None
        stream = self.provider.stream(request)
        parts: list[str] = []

        async def consume() -> Finish:
            async for item in stream:
                if isinstance(item, Finish):
                    return item
                if isinstance(item, TextDelta):
                    parts.append(item.text)
            raise ProviderFailure(LlmFailure("STREAM_CLOSED", "the provider stream ended without a finish"))

        try:
            finish = await signal.race(consume())
        except ProviderFailure as failure:
            return failure.failure
        except AbortedError:
            raise
        except Exception as exc:
            logger.exception("session %s: provider raised during compaction", self.session_id)
            return LlmFailure(UNKNOWN, _error_chain(exc))
        finally:
            await _aclose(stream)
        if finish.usage is not None:
            self._add_usage(finish.usage)
        summary = "".join(parts).strip()
        if finish.reason == "max-tokens" or not summary:
            why = "was cut at its token limit" if summary else "was empty"
            return LlmFailure(EMPTY_RESPONSE, f"the summary {why}")
        return summary

    # ---- one step ------------------------------------------------------------------------------------

    async def _run_step(self, turn: int, step: int, signal: AbortSignal) -> _StepOutcome:
        retries = 0
        while True:
            request = await self._build_request(turn, step, signal)
            signal.check()
            self.log.append(ev.LLM_REQUEST, {"turn": turn, "step": step, "attempt": retries + 1}, commit=True)
            result = await self._stream_attempt(request, turn, step, signal)
            if isinstance(result, LlmFailure) and result.code == CONTEXT_WINDOW_EXCEEDED:
                # Not retried as it stands: the next boundary compacts first (docs/design.md §11).
                return _StepOutcome("overflow", freeze_json(result.to_json()))
            if isinstance(result, LlmFailure):
                delay = await self._recover(turn, step, result, retries, signal)
                if delay is None:
                    error = freeze_json(result.to_json())
                    self._publish_error(turn, step, error)
                    return _StepOutcome("error", error)
                retries += 1
                self.log.append(
                    ev.LLM_RETRY,
                    {
                        "turn": turn,
                        "step": step,
                        "retry": retries,
                        "delayMs": int(delay * 1000),
                        "error": result.to_json(),
                    },
                    commit=True,
                )
                await signal.sleep(delay)
                continue
            message, finish = result
            if finish.reason == "max-tokens":
                return _StepOutcome("max-tokens")
            calls = message.tool_calls
            if not calls:
                return _StepOutcome("completed")
            concluded = await run_tool_batch(self, calls, turn, step, signal)
            return _StepOutcome("tools", concluded=concluded)

    async def _recover(
        self, turn: int, step: int, failure: LlmFailure, retries: int, signal: AbortSignal
    ) -> float | None:
        async def innermost() -> Retry | None:
            delay = self.options.retry.delay(failure, retries, self.rng)
            return None if delay is None else Retry(delay)

        ctx = RequestErrorContext(self, turn, step, failure, retries, signal)
        try:
            decision = await run_waterfall(self.hooks.request_error, ctx, innermost)
        except AbortedError:
            raise
        except Exception:
            logger.exception("session %s: request-error hook failed", self.session_id)
            return None
        signal.check()  # cancellation beats retry
        return decision.delay_s if isinstance(decision, Retry) else None

    async def _build_request(self, turn: int, step: int, signal: AbortSignal) -> ModelRequest:
        base = self._base_request_config()

        async def innermost() -> RequestConfig:
            return base

        config = await run_waterfall(
            self.hooks.request, RequestContext(self, turn, step, signal, base), innermost
        )
        signal.check()
        if not config.config.get("provider") or not config.config.get("model"):
            raise StepError("no model configured: set a provider and a model (e.g. DSH_MODEL)")
        if self.provider is None:
            raise StepError("no provider configured")
        draft = ModelRequest(config.config, config.system, config.tools, ())
        header = draft.header_json()
        derivation = self._derive()
        if not self._header_logged or derivation.header != header:
            reason = "change" if self._header_logged else ("resume" if derivation.header else "initial")
            self.log.append(ev.REQUEST_HEADER, {"header": header, "reason": reason})
            self._header_logged = True
            derivation = self._derive()
        return derivation.request()

    def _base_request_config(self) -> RequestConfig:
        provider_name = self.provider.name if self.provider is not None else ""
        model = self.options.model
        config: dict[str, Any] = {"provider": provider_name, "model": model}
        if self.provider is not None and model:
            config.update(self.provider.default_config(model))
        config.update(self.options.config)
        if self.options.max_tokens is not None:
            config["maxTokens"] = self.options.max_tokens
        return RequestConfig(freeze_json(config), self.options.system, self.tools.specs())

    def _derive(self) -> Derivation:
        """The derivation, caught up with the log (incremental: each event is folded once)."""
        events = self.log.events
        for event in events[self._derived_upto :]:
            self._derivation.feed(event)
        self._derived_upto = len(events)
        return self._derivation

    async def _stream_attempt(
        self, request: ModelRequest, turn: int, step: int, signal: AbortSignal
    ) -> tuple[AssistantMessage, Finish] | LlmFailure:
        assert self.provider is not None
        assembler = Assembler()
        chunks = self.log.open_chunks(turn, step)
        stream = self.provider.stream(request)

        # Per block (text, reasoning, each tool call's arguments): how many UTF-16 code units came
        # before this delta in this attempt, so a client joining mid-step can merge live deltas with
        # the stored chunks.
        offsets: dict[object, int] = {}

        async def consume() -> Finish:
            async for item in stream:
                if isinstance(item, Finish):
                    return item
                assembler.add(item)
                delta = item.to_json()
                self.log.add_chunk(chunks, delta)
                key = item.index if isinstance(item, ToolCallDelta) else delta["type"]
                piece = item.arguments if isinstance(item, ToolCallDelta) else delta["text"]
                offset = offsets.get(key, 0)
                offsets[key] = offset + len(piece.encode("utf-16-le")) // 2
                self.bus.publish(
                    Event(
                        ev.ASSISTANT_DELTA,
                        FrozenDict(
                            {"turn": turn, "step": step, "offset": offset, "delta": FrozenDict(delta)}
                        ),
                    )
                )
            raise ProviderFailure(LlmFailure("STREAM_CLOSED", "the provider stream ended without a finish"))

        try:
            finish = await signal.race(consume())
        except AbortedError:
            self.log.close_chunks(chunks)
            prefix = assembler.prefix_blocks()
            if prefix:
                message = AssistantMessage.create(prefix, provider=request.provider, model=request.model)
                self.log.append(
                    ev.ASSISTANT_MESSAGE,
                    {
                        "turn": turn,
                        "step": step,
                        "message": message.to_json(),
                        "interrupted": True,
                        "sourceEventSeqs": list(chunks.seqs),
                    },
                )
            raise
        except ProviderFailure as failure:
            self.log.close_chunks(chunks)
            return failure.failure
        except Exception as exc:  # an adapter bug is still a failed attempt, classified UNKNOWN
            self.log.close_chunks(chunks)
            logger.exception("session %s: provider raised", self.session_id)
            return LlmFailure(UNKNOWN, _error_chain(exc))
        finally:
            await _aclose(stream)
        self.log.close_chunks(chunks)
        blocks = assembler.blocks(drop_tool_calls=finish.reason == "max-tokens")
        message = AssistantMessage.create(blocks, provider=request.provider, model=request.model)
        data: dict[str, Any] = {
            "turn": turn,
            "step": step,
            "message": message.to_json(),
            "finishReason": finish.reason,
            "sourceEventSeqs": list(chunks.seqs),
        }
        if finish.usage is not None:
            data["usage"] = finish.usage
            self._add_usage(finish.usage)
        self.log.append(ev.ASSISTANT_MESSAGE, data)
        if finish.usage is not None:
            self._log_context_usage(turn, step, request.model, finish.usage)
        return message, finish

    def _add_usage(self, usage: Mapping[str, Any]) -> None:
        """Sum a request's usage into the open turn's `turn/usage`."""
        summed = self._current.usage if self._current is not None else {}
        for key, value in usage.items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                summed[key] = summed.get(key, 0) + value  # type: ignore[assignment]

    def context_window(self, model: str | None = None) -> int | None:
        """The model's context window in tokens: the options', else the provider's; None if unknown."""
        if self.options.context_window is not None:
            return self.options.context_window
        lookup = getattr(self.provider, "context_window", None)
        window = lookup(model or self.options.model) if callable(lookup) else None
        return window if isinstance(window, int) and not isinstance(window, bool) and window > 0 else None

    def _log_context_usage(self, turn: int, step: int, model: str, usage: Mapping[str, Any]) -> None:
        """Durable `context/usage`: the last request's input tokens (cache hits included) against the
        window, so a client can show a meter (live, and replayed on attach)."""
        used = sum(
            v
            for k in ("inputTokens", "cacheReadTokens")
            if isinstance(v := usage.get(k), int) and not isinstance(v, bool) and v >= 0
        )
        self.log.append(
            ev.CONTEXT_USAGE,
            {"turn": turn, "step": step, "used": used, "window": self.context_window(model)},
            ignorable=True,  # informational: a reader that does not know it loses nothing
        )

    def _publish_error(self, turn: int, step: int | None, error: Mapping[str, Any]) -> None:
        self.bus.publish(Event(ev.AGENT_ERROR, freeze_json({"turn": turn, "step": step, "error": error})))


async def run_serial(hooks: list[Any], ctx: Any) -> None:
    for hook in hooks:
        await hook(ctx)


async def _aclose(stream: Any) -> None:
    close = getattr(stream, "aclose", None)
    if close is not None:
        try:
            await close()
        except Exception:
            logger.debug("provider stream aclose failed", exc_info=True)


def _error_chain(exc: BaseException) -> str:
    parts: list[str] = []
    current: BaseException | None = exc
    while current is not None and len(parts) < 5:
        parts.append(f"{type(current).__name__}: {current}")
        current = current.__cause__ or current.__context__
    return " <- ".join(parts)


__all__ = ["Agent", "AgentDisposedError", "AgentOptions", "StepError"]
