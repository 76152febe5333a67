"""One session this process drives, as the host hands it to a front end: its agent and tools, and
what a request can do with it (send, inbox edits, cancel, wake, compact, permissions).

Every operation that queues or edits input is synchronous (committed before it returns), so requests
take effect in the order they arrive.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsh_daemon.agent.loop import Agent, AgentDisposedError
from dsh_daemon.agent.tools import Approver
from dsh_daemon.agent.turn import CompactionError
from dsh_daemon.host.commands import command_word, expand_message
from dsh_daemon.host.errors import invalid_params, session_busy_because, shown
from dsh_daemon.host.models import ModelSettings
from dsh_daemon.host.plan_approval import approve_plan_durably
from dsh_daemon.host.review import MAX_INSTRUCTIONS_CHARS, review_message
from dsh_daemon.host.review_diff import review_diff
from dsh_daemon.host.wiring import SessionTools
from dsh_daemon.model.codec import unstructure
from dsh_daemon.model.events import SESSION_MODE, SESSION_SETTINGS, Event
from dsh_daemon.model.inbox import Target
from dsh_daemon.model.messages import UserMessage
from dsh_daemon.model.payloads import (
    Payload,
    ProcessExited,
    ProcessStopper,
    ReviewDismissed,
    ReviewTarget,
    SandboxStatus,
    SandboxWidened,
    SessionModeSet,
    SessionSettingsSet,
    entry,
)
from dsh_daemon.model.processes import PROCESS_EVENTS, fold_processes
from dsh_daemon.model.review import REVIEW_EVENTS, ReviewTracker, fold_reviews
from dsh_daemon.model.wire import SandboxMode, SessionMode
from dsh_daemon.session.logevents import last_of
from dsh_daemon.tools.plan_approval import PROPOSE_PLAN_TOOL, ProposePlanTool
from dsh_daemon.tools.policy import PermissionPolicy
from dsh_daemon.tools.workspace import Workspace

logger = logging.getLogger(__name__)

CANCEL_SETTLE_S = 10.0  # how long a cancel waits for the aborted turn to end before it answers


@dataclass
class HostedSession:
    """A session this process drives: its agent, its tools, and whether the connection follows it."""

    agent: Agent
    tools: SessionTools
    _tasks: set[asyncio.Task[None]]
    followed: bool = False  # the connection receives its events
    detached: bool = False  # the client let it go while a turn ran: released when the turn ends
    models: ModelSettings = field(default_factory=ModelSettings)  # the session's own model choices
    sandbox_choice: SandboxMode | None = None  # the session's own sandbox mode (None: the configured)
    _unfollow: Callable[[], None] | None = field(default=None, repr=False)
    # A rewind is writing files and the log: no turn may start under it (sends, wakes and compactions
    # are refused with `session_busy` until it ends; it never waits for the client for long).
    rewinding: bool = False
    _sandbox_status: SandboxStatus | None = field(default=None, repr=False)
    _stopping: asyncio.Task[None] | None = field(default=None, repr=False)  # a cancel's stop of processes
    max_steps: int | None = None  # a subagent's child session: its step cap (host/children.py)

    def _refuse_while_rewinding(self) -> None:
        if self.rewinding:
            raise session_busy_because(
                self.session_id, "a rewind is in progress; try again when it is done", reason="rewinding"
            )

    @property
    def session_id(self) -> str:
        return self.agent.session_id

    @property
    def workspace(self) -> Workspace:
        return self.tools.workspace

    @property
    def status(self) -> str:
        return self.agent.status

    @property
    def approver(self) -> Approver | None:
        return self.agent.approver

    @property
    def last_seq(self) -> int:
        return self.agent.log.next_seq - 1

    def events_after(self, seq: int) -> list[Event]:
        """Its durable events after `seq`, from memory (including those not yet written behind)."""
        return list(self.agent.log.events[max(0, seq + 1) :])  # seq i is at index i

    def mcp_status(self) -> list[dict[str, Any]] | None:
        return None if self.tools.mcp is None else self.tools.mcp.status()

    # ---- input -----------------------------------------------------------------------------------

    def send(
        self,
        message: UserMessage,
        target: Target,
        wakeup: bool,
        attachments: Sequence[UserMessage] = (),
        verb: str | None = None,
    ) -> str:
        """Queued durably before this returns (a refused send raises; `host/errors.py` types it). A
        person's `/NAME …` of one of the session's custom commands is queued expanded
        (`host/commands.py`)."""
        self._refuse_while_rewinding()
        if command_word(message) is not None:
            message = expand_message(message, self.tools.custom_commands())
        return self.agent.send(message, target=target, wakeup=wakeup, attachments=attachments, verb=verb)

    def inbox(self) -> dict[str, Any]:
        return self.agent.inbox.to_json()

    def remove(self, message_id: str) -> bool:
        return self.agent.inbox.remove(message_id)

    def replace(
        self, message_id: str, message: UserMessage, attachments: Sequence[UserMessage] | None = None
    ) -> None:
        """A pending item reworded: a `/NAME …` of a custom command is expanded, as in `send`."""
        if command_word(message) is not None:
            message = expand_message(message, self.tools.custom_commands())
        self.agent.inbox.replace(message_id, message, attachments)

    def move(self, message_id: str, target: Target, index: int) -> None:
        self.agent.inbox.move(message_id, target, index)

    def wake(self) -> bool:
        self._refuse_while_rewinding()
        return self.agent.wake()

    def cancel(self, cause: str = "user", *, keep_inbox: bool = False, stop_processes: bool = False) -> None:
        """Abort the running turn; with `stop_processes`, the session's background processes are
        stopped too (`until_settled` waits for them)."""
        self.agent.cancel(cause, keep_inbox=keep_inbox)
        if stop_processes:
            self._stopping = asyncio.get_running_loop().create_task(self._stop_all("cancel"))

    async def until_settled(self) -> None:
        """Until the turn aborted by a cancel has ended and the processes it stopped have exited
        (bounded: a tool that ignores cancellation must not hold the client's request forever)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.agent.until_retired(), CANCEL_SETTLE_S)
        stopping, self._stopping = self._stopping, None
        if stopping is not None:
            await stopping

    def cancel_then_wake(self) -> None:
        """Abort the running turn keeping the queue, then run the queue once the turn has ended."""
        self.cancel("user", keep_inbox=True)

        async def run_queue() -> None:
            await self.until_settled()
            with contextlib.suppress(AgentDisposedError):
                self.agent.wake()

        task = asyncio.get_running_loop().create_task(run_queue())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def compact(self) -> dict[str, Any]:
        """`{compacted, …}`; a failed compaction is `{compacted: false, error}` (the turn ended so)."""
        self._refuse_while_rewinding()
        try:
            return await self.agent.compact()
        except CompactionError as exc:
            return {"compacted": False, "error": exc.error}

    # ---- mode ----------------------------------------------------------------------------------------

    def _policy(self) -> PermissionPolicy | None:
        return next((h for h in self.tools.kit.hooks.pre_execute if isinstance(h, PermissionPolicy)), None)

    @property
    def mode(self) -> SessionMode:
        policy = self._policy()
        mode = "ask" if policy is None else policy.session_mode
        return "plan" if mode == "plan" else "accept-edits" if mode == "accept-edits" else "ask"

    def restore_mode(self) -> None:
        """The mode the log last recorded (a session opened again keeps its mode)."""
        event = last_of(self.agent.log.events, SESSION_MODE)
        if event is not None:
            self._apply_mode(SessionModeSet.of(event).mode)

    def restore_settings(self) -> None:
        """The model settings and sandbox mode the log last recorded (a session opened again, here or
        in another process, keeps its own choices)."""
        event = last_of(self.agent.log.events, SESSION_SETTINGS)
        if event is not None:
            chosen = SessionSettingsSet.of(event)
            self.models = ModelSettings(chosen.model, chosen.thinking, chosen.reasoning_effort)
            self.sandbox_choice = chosen.sandbox

    def set_model_settings_durably(self, settings: ModelSettings) -> None:
        """New model settings: a durable `session/settings` (on disk on return; nothing when they
        are the settings already); the caller applies them to the agent's next request."""
        if settings == self.models:
            return
        before, self.models = self.models, settings  # what the append's live event shows
        try:
            self._append_settings()
        except BaseException:
            self.models = before
            raise

    def set_sandbox_mode_durably(self, mode: SandboxMode | None) -> None:
        """The session's own sandbox mode (None: follow the configuration): a durable
        `session/settings` (on disk on return; nothing when it is the choice already), in effect from
        the next command (one under way finishes in the sandbox it started in); the new
        `sandbox/status` follows."""
        if mode == self.sandbox_choice:
            return
        before, self.sandbox_choice = self.sandbox_choice, mode
        try:
            self._append_settings()
        except BaseException:
            self.sandbox_choice = before
            raise
        self.tools.kit.sandbox.announce()

    def _append_settings(self) -> None:
        """Every one of the session's own settings in one event: the latest is the whole choice."""
        models, sandbox = self.models, self.sandbox_choice
        chosen = SessionSettingsSet(models.model, models.thinking, models.reasoning_effort, sandbox)
        self.agent.log.append(*entry(chosen), commit=True, ignorable=True)

    def set_mode_durably(self, mode: SessionMode) -> None:
        """A new mode: a durable `session/mode` (on disk on return; nothing when it is the mode
        already), in effect from the next model request and tool call (a call under way finishes)."""
        if mode == self.mode:
            return
        self.agent.log.append(*entry(SessionModeSet(mode)), commit=True, ignorable=True)
        self._apply_mode(mode)

    def wire_plan_approval(self) -> None:
        """`propose_plan`'s approval switches this session's mode and queues the plan (§3)."""
        tool = self.tools.kit.registry.get(PROPOSE_PLAN_TOOL)
        if isinstance(tool, ProposePlanTool):
            tool.approve = self.approve_plan_durably

    def approve_plan_durably(self, plan: str, mode: str, call_id: str) -> None:
        """The person approved the plan: mode and queued plan on disk together on return, then the
        mode applies from the next tool call (even if the write failed and is retried: memory follows
        the log, which holds both)."""
        chosen: SessionMode = "accept-edits" if mode == "accept-edits" else "ask"
        try:
            approve_plan_durably(self.agent, plan, chosen, call_id)
        finally:
            self.restore_mode()

    def _apply_mode(self, mode: str) -> None:
        policy = self._policy()
        if policy is not None:
            policy.session_mode = mode
        self.tools.kit.sandbox.announce()  # plan mode runs commands read-only

    # ---- sandbox -------------------------------------------------------------------------------------

    def wire_sandbox(self) -> None:
        """The commands' sandbox reads the session's grants (a widening granted for the session is
        one) and records its status and each widening in the log; its status is told once probed."""
        sandbox = self.tools.kit.sandbox
        sandbox.grants = lambda: self.agent.always_allowed
        sandbox.session_choice = lambda: self.sandbox_choice
        sandbox.on_status = self._record_sandbox_status
        sandbox.on_widened = self._record_widening

        async def announce() -> None:
            await asyncio.to_thread(sandbox.level)  # a probe may fork: never on the loop
            sandbox.announce()

        task = asyncio.get_running_loop().create_task(announce())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def sandbox_status(self) -> SandboxStatus | None:
        """The sandbox's status as last told (None: not probed yet; it is published once it is)."""
        return self._sandbox_status

    def _record_sandbox_status(self, status: Mapping[str, Any]) -> None:
        """A live `sandbox/status` to whoever follows the session (a client attaching later gets the
        last one from `sandbox_status`), and the log's words for a person reading it later."""
        payload = SandboxStatus(**_snake(status))
        self._sandbox_status = payload
        self.agent.bus.publish(payload.event())
        logger.info("session %s: commands run %s (%s)", self.session_id, payload.mode, payload.level)

    def _record_widening(self, widening: Mapping[str, Any]) -> None:
        """A durable `sandbox/widened` (on disk on return, before the widened command starts)."""
        log = self.agent.log
        if log.lease_lost is not None:
            return
        log.append(*entry(SandboxWidened(**_snake(widening))), commit=True, ignorable=True)

    # ---- background processes --------------------------------------------------------------------

    def wire_processes(self, output_dir: Path) -> None:
        """The session's background processes keep their output under `output_dir` and record each
        exit in the log. A process the log says started but never says ended belonged to a daemon
        that stopped driving the session without saying so (killed): it is recorded as ended by
        that (`daemon-stopped`) before anything else, and the numbering goes on after the log's."""
        processes = self.tools.kit.processes
        processes.output_dir = output_dir
        processes.on_exited = self._record_process_exit
        entries = fold_processes(self._process_events())
        processes.next_number = 1 + max((_number(e.started.process_id) for e in entries), default=0)
        for entry_ in entries:
            if entry_.running:
                self._record_process_exit(
                    ProcessExited(entry_.started.process_id, stopped_by="daemon-stopped")
                )

    def _process_events(self) -> list[Event]:
        return self.events_of(PROCESS_EVENTS)

    def events_of(self, types: frozenset[str]) -> list[Event]:
        """The log's events of `types`, without reading the whole log: those before the events held in
        memory from the store (a resume from a snapshot holds only the newest), then the held ones."""
        log = self.agent.log
        events, base = log.events, log.events.base
        older: list[Event] = []
        if base:
            older = [e for t in sorted(types) for e in log.store.load_events_of_type(self.session_id, t)]
            older = sorted((e for e in older if (e.seq or 0) < base), key=lambda e: e.seq or 0)
        return older + [e for e in events.tail() if e.type in types]

    def _record_process_exit(self, payload: ProcessExited) -> None:
        """A durable `process/exited` (on disk on return), while this process drives the session."""
        log = self.agent.log
        if log.lease_lost is not None:
            return
        try:
            log.append(*entry(payload), commit=True, ignorable=True)
        except Exception:  # a closed store (the daemon's last moments): the next driver records it
            logger.warning(
                "session %s: the exit of %s could not be recorded", self.session_id, payload.process_id
            )

    def processes(self) -> list[dict[str, Any]]:
        """`dsh/process/list`: the log's processes, with what this daemon knows live of its own."""
        live = {p.process_id: p for p in self.tools.kit.processes.all()}
        out = []
        for entry_ in fold_processes(self._process_events()):
            item = entry_.to_json()
            process = live.get(entry_.started.process_id)
            if process is not None:
                item["running"] = process.running
            out.append(item)
        return out

    async def stop_process(self, process_id: str) -> dict[str, Any]:
        """The person's stop: `{stopped, exitCode?, signal?}` (`stopped` false: it had ended)."""
        processes = self.tools.kit.processes
        process = processes.get(process_id)  # ProcessNotFound: the caller types it
        was_running = process.running
        await processes.stop(process_id, "person")
        result: dict[str, Any] = {"stopped": was_running}
        if process.exit_code is not None:
            result["exitCode"] = process.exit_code
        if process.signal is not None:
            result["signal"] = process.signal
        return result

    def stop_processes_now(self, by: ProcessStopper) -> None:
        """Before the session is let go (its log closes after): every running process gets SIGTERM
        (SIGKILL follows when the tools close) and its `process/exited` is written now."""
        self.tools.kit.processes.stop_all_now(by)

    async def _stop_all(self, by: ProcessStopper) -> None:
        await self.tools.kit.processes.stop_all(by)

    # ---- reviews (`host/review.py`) -------------------------------------------------------------------

    def wire_reviews(self) -> None:
        """A review turn's `review/completed` is written to this session's log."""
        self.tools.reviews.record = self._record_review

    def _record_review(self, payload: Payload) -> None:
        log = self.agent.log
        if log.lease_lost is None:
            log.append(*entry(payload), commit=True, ignorable=True)

    async def start_review(self, target: ReviewTarget, instructions: str | None) -> dict[str, Any]:
        """Queue a review of `target` as a followup (durably, before this returns): `{reviewId,
        messageId, target, files, truncated}`. `not_a_repository` outside a git work tree."""
        self._refuse_while_rewinding()
        if instructions is not None and len(instructions) > MAX_INSTRUCTIONS_CHARS:
            raise invalid_params(
                f"dsh/review/start: instructions are longer than {MAX_INSTRUCTIONS_CHARS} characters"
            )
        diff = await asyncio.to_thread(review_diff, self.workspace.cwd, target)
        review_id, message = review_message(diff, instructions)
        message_id = self.send(message, "next-turn", True, verb="review")
        return {
            "reviewId": review_id,
            "messageId": message_id,
            "target": unstructure(diff.target),
            "files": list(diff.files),
            "truncated": diff.truncated,
        }

    def reviews(self) -> ReviewTracker:
        return fold_reviews(self.events_of(REVIEW_EVENTS))

    def dismiss_finding_durably(self, finding_id: str) -> bool:
        """A durable `review/dismissed` (on disk on return); False: it was dismissed already.
        `invalid_params` for a finding the log does not hold (or a cut took back)."""
        tracker = self.reviews()
        if not tracker.known(finding_id):
            raise invalid_params(f"no review finding {shown(finding_id)} in session {self.session_id}")
        if all(f.finding_id != finding_id for f in tracker.findings()):
            return False
        self.agent.log.append(*entry(ReviewDismissed(finding_id)), commit=True, ignorable=True)
        return True

    # ---- permissions -------------------------------------------------------------------------------

    def grants(self) -> list[dict[str, Any]]:
        """The session's "allow always" answers: a whole tool, or one exact command."""
        out = []
        for scope in sorted(self.agent.always_allowed):
            tool, sep, rest = scope.partition(":")
            out.append({"scope": scope, "tool": tool, **({"command": rest} if sep else {})})
        return out

    def revoke_grants(self, scope: str | None) -> int:
        allowed = self.agent.always_allowed
        dropped = set(allowed) if scope is None else ({scope} & allowed)
        allowed.difference_update(dropped)
        return len(dropped)


def _number(process_id: str) -> int:
    return int(process_id[1:]) if process_id[1:].isdigit() else 0


def _snake(data: Mapping[str, Any]) -> dict[str, Any]:
    """camelCase keys as a payload's fields (`configuredMode` -> `configured_mode`), lists as tuples."""
    return {
        re.sub(r"[A-Z]", lambda m: "_" + m.group().lower(), key): tuple(v) if isinstance(v, list) else v
        for key, v in data.items()
    }
