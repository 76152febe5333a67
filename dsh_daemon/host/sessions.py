"""The session host: the one table of the sessions this process drives for its front end.

Both front ends (the LSP server, ACP mode) decode their wire's params, implement the front-end port
(`host/port.py`) and render events; everything in between lives here, once: the provider and its
reconfiguration, creating a session (all or nothing), opening one with its lease, following its
events (a read-only view of a session another process drives, and taking it over when that process
lets go), detaching, deleting, closing, sending, inbox edits, cancel-then-wake, and one cleanup path.

Invariants kept here:
- A session is in `sessions` exactly while this process drives it (holds its lease); leaving the
  table always goes through `_cleanup`, which stops its MCP servers and tells the front end once.
- Creation is all or nothing: a failure leaves no session row, no lease and no tools behind.
- Following a session delivers its durable events after a seq and then its live ones in one
  synchronous stretch: no event falls between the replay and the subscription, none is sent twice.
- A read-only view continues, once this process drives the session, from the last seq it delivered.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import shutil
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsh_daemon.agent.hooks import Hooks
from dsh_daemon.agent.loop import Agent, AgentOptions
from dsh_daemon.agent.tools import ToolCall
from dsh_daemon.agent.turnbudget import TurnBudget
from dsh_daemon.hooks.project import ProjectTrust
from dsh_daemon.host import history, turndiff
from dsh_daemon.host.checkpoints import ParentCheckpoints, SessionCheckpoints
from dsh_daemon.host.children import ChildSessions
from dsh_daemon.host.config_save import ConfigSaveError, save_sandbox_widening
from dsh_daemon.host.early import EarlySession, EarlySessions
from dsh_daemon.host.errors import (
    HostError,
    invalid_params,
    session_busy,
    session_busy_because,
    session_busy_silent_holder,
    shown,
    wire_error,
)
from dsh_daemon.host.follow import ReadOnlyFollower
from dsh_daemon.host.handover import HandoverWatcher
from dsh_daemon.host.hooks import load_project_hooks, start_hooks, trust_project
from dsh_daemon.host.hosted import HostedSession
from dsh_daemon.host.manager import MAX_TITLE_CHARS, SessionManager, SessionRunningError, collapse_title
from dsh_daemon.host.models import EFFORTS, ModelSettings, configured_models
from dsh_daemon.host.options import DaemonOptions
from dsh_daemon.host.paths import is_directory
from dsh_daemon.host.port import FrontEnd
from dsh_daemon.host.review import review_listing
from dsh_daemon.host.wiring import SessionTools, session_hooks, wire_session_tools
from dsh_daemon.host.worktrees import NewWorktree
from dsh_daemon.host.worktrees import remove_worktree as remove_worktree_folder
from dsh_daemon.mcp.config import ServerSource
from dsh_daemon.model.errors import ModelError
from dsh_daemon.model.events import (
    INBOX_SPLICED,
    PLAN_UPDATED,
    SESSION_MODE,
    SESSION_SETTINGS,
    STATUS,
    TURN_END,
    USAGE,
    Event,
)
from dsh_daemon.model.inbox import InboxItem, apply_splice, item_wire
from dsh_daemon.model.messages import UserMessage
from dsh_daemon.model.payloads import (
    PlanUpdated,
    ReviewTarget,
    SessionModeSet,
    SessionNoticed,
    SessionSettingsSet,
    StatusChanged,
    SubagentTools,
    TurnUsage,
    entry,
)
from dsh_daemon.model.plan import PLAN_EVENTS, current_plan
from dsh_daemon.model.processes import PROCESS_EVENTS, fold_processes
from dsh_daemon.model.provider import Provider
from dsh_daemon.model.review import REVIEW_EVENTS, fold_reviews
from dsh_daemon.model.usage import UsageTotals, summed
from dsh_daemon.model.wire import SESSION_MODES, SandboxMode, SessionMode
from dsh_daemon.session.checkpoints import CheckpointStore
from dsh_daemon.session.lease import HEARTBEAT_EVERY_S, SessionBusyError
from dsh_daemon.session.logevents import last_of
from dsh_daemon.session.store import (
    CorruptSessionError,
    SessionInfo,
    SessionPage,
    UnknownSessionError,
    WorktreeRow,
)
from dsh_daemon.session.transcript import DEFAULT_LIMIT as TRANSCRIPT_DEFAULT_LIMIT
from dsh_daemon.session.transcript import MAX_LIMIT as TRANSCRIPT_MAX_LIMIT
from dsh_daemon.session.transcript import SettingsBefore, transcript_page
from dsh_daemon.subagents.definitions import load_definitions
from dsh_daemon.subagents.slots import SubagentSlots
from dsh_daemon.subagents.task import SubagentTask
from dsh_daemon.subagents.tool import RunSubagentTool
from dsh_daemon.subagents.toolsets import TOOL_NAME, ToolsetGate, narrow_registry
from dsh_daemon.tools.config import SANDBOX_MODES
from dsh_daemon.tools.library import scan_commands, scan_skills
from dsh_daemon.tools.policy import PermissionPolicy
from dsh_daemon.tools.processes import ProcessNotFound, tail_text
from dsh_daemon.tools.sandboxing import SESSION_SCOPE, Widening
from dsh_daemon.tools.workspace import Workspace

logger = logging.getLogger(__name__)
# How often a front end holding prompts for a holder to let go checks that the holder still beats.
HOLDER_CHECK_S = HEARTBEAT_EVERY_S


DrivenElsewhere = SessionBusyError  # front ends catch it by this name (they do not import `session`)


class WorkspaceError(HostError):
    """A session's directories cannot make a workspace (a root that is not a directory, …)."""


@dataclass(frozen=True)
class Attached:
    """What attaching a session found: its state now, and whether another process drives it."""

    status: str
    title: str | None
    last_seq: int
    inbox: dict[str, Any]
    holder: SessionBusyError | None = None  # driven by another live process: a read-only view
    mode: str = "ask"  # the session's mode (protocol.md §3)
    from_store: bool = False  # answered from the store alone; this process opens it in the background
    mcp_servers: list[dict[str, Any]] | None = None
    sandbox: dict[str, Any] | None = None  # the session's `sandbox/status` data, once probed
    plan: PlanUpdated | None = None  # the current plan (model/plan.py): a client shows it whatever it replays
    hooks_untrusted: dict[str, Any] | None = None  # the project's hooks waiting for trust (`hooks/untrusted`)
    parent_id: str | None = None  # a subagent's session: followed read-only, its parent drives it


class SessionHost:
    def __init__(
        self,
        state_dir: Path,
        options: DaemonOptions,
        front_end: FrontEnd,
        *,
        roots: Sequence[str] = (),
        durable_auto_title: bool = False,
        provider: Provider | None = None,
        early: EarlySessions | None = None,
    ) -> None:
        """`roots`: the editor's workspace folders (each session's tools may touch them and its cwd).
        `durable_auto_title`: the title taken from the first prompt is a durable `session/title`.
        `early`: the store and lease holder of sessions created before the host (`adopt_early`)."""
        if provider is None:
            from dsh_daemon.llm.deepseek import make_provider

            provider = make_provider(options.provider)
        self.options = options
        self.front_end = front_end
        self.state_dir = Path(state_dir)
        self.roots = list(roots)
        self.provider = provider
        self.sessions: dict[str, HostedSession] = {}
        self._wiring: dict[str, SessionTools] = {}  # a session's tools while its agent is built
        self._to_wire: dict[str, Callable[[], SessionTools]] = {}  # how, when they are wired late
        self._tasks: set[asyncio.Task[None]] = set()  # MCP servers stopping, queues run after cancels
        # sessions the connection follows while another process drives them: the last seq delivered
        self.read_only: dict[str, int] = {}
        self.follower = ReadOnlyFollower(self)
        self.handover = HandoverWatcher(self)
        # sessions this process forced its holder to hand over: their kept queue runs here once open
        self.forced: set[str] = set()
        self._config_lock = asyncio.Lock()  # one widening saved to config.json at a time
        # how to open a session followed read-only once it is handed over (ACP load's cwd, roots, MCP)
        self.open_args: dict[str, tuple[str | None, Sequence[str], ServerSource | None]] = {}
        self.manager = SessionManager(
            state_dir,
            provider=provider,
            # The model is read when an agent is built; `reconfigure` updates the built ones.
            options=lambda: AgentOptions(model=self.options.provider.model, budget=self.options.agent.budget),
            tools=lambda session_id: self._wired(session_id).kit.registry,
            hooks=self._hooks,
            approver=front_end.new_approver,
            durable_auto_title=durable_auto_title,
            leases=None if early is None else early.leases,
        )
        self.manager.start_heartbeat()
        self.checkpoints = CheckpointStore(self.manager.store, options.tools.limits.checkpoint_bytes)
        # how many subagents run at once, daemon-wide (`agent.subagentsMaxParallel`)
        self.subagent_slots = SubagentSlots(options.agent.subagents_max_parallel)
        self._child_tools: dict[str, SubagentTools] = {}  # a child's tool set while it is wired
        self._new_worktrees: dict[str, WorktreeRow] = {}  # a worktree session's, while it is created
        self._in_worktree: set[str] = set()  # sessions wired here whose only root is their worktree
        self._child_calls: dict[str, tuple[ToolCall, str]] = {}  # its parent's call and session, as well
        self.project_trust = ProjectTrust(self.state_dir)
        self.handover.start()

    # ---- configuration ---------------------------------------------------------------------------------

    def reconfigure(self, options: DaemonOptions) -> None:
        """New settings: provider settings, tool permissions, the sandbox and the model take effect
        from the next model request or tool call of every session (one under way finishes on the old
        ones); tool limits, the shell and the system prompt apply to sessions opened from now on.
        (Approvers read the permission timeout from `options` when they ask.)"""
        self.options = options
        self.provider.reconfigure(options.provider)
        self.checkpoints.max_bytes = options.tools.limits.checkpoint_bytes
        if self.subagent_slots.limit != options.agent.subagents_max_parallel:
            self.subagent_slots.set_limit(options.agent.subagents_max_parallel)
        for hosted in self.sessions.values():
            for hook in hosted.tools.kit.hooks.pre_execute:
                if isinstance(hook, PermissionPolicy):
                    hook.modes = dict(options.tools.permissions)
            hosted.tools.kit.sandbox.reconfigure(options.tools.sandbox)
            hosted.tools.hooks.user = options.hooks
            self._apply_model_settings(hosted)

    async def save_sandbox_widening(self, widening: Widening) -> str | None:
        """ "Always (saved to config)": the widening's paths and domains added to config.json's
        `tools.sandbox` (host/config_save.py), and the daemon's options widened the same way, so every
        session of this process has it from its next command and every later daemon reads it from the
        file. None when saved; else why not (the file is then left as it was)."""
        async with self._config_lock:
            try:
                path = await asyncio.to_thread(
                    save_sandbox_widening, self.state_dir, widening.writable, widening.network
                )
            except ConfigSaveError as exc:
                logger.warning("sandbox widening not saved: %s", exc)
                return str(exc)
            logger.info("sandbox widening saved to %s: %s", path, widening.describe())
            sandbox = self.options.tools.sandbox
            widened = dataclasses.replace(
                sandbox,
                writable=tuple(dict.fromkeys([*sandbox.writable, *widening.writable])),
                network_allow=tuple(dict.fromkeys([*sandbox.network_allow, *widening.network])),
            )
            tools = dataclasses.replace(self.options.tools, sandbox=widened)
            self.reconfigure(dataclasses.replace(self.options, tools=tools))
        return None

    def _apply_model_settings(self, hosted: HostedSession) -> None:
        """The session's model and request settings: its own choices over the daemon's."""
        agent, settings = hosted.agent, hosted.models
        agent.options = dataclasses.replace(
            agent.options,
            model=settings.model or self.options.provider.model,
            config={**agent.options.config, **settings.request_config()},
            # from the next model request, like the model; a subagent's own step cap stays
            budget=capped_budget(self.options.agent.budget, hosted.max_steps),
        )

    def model_settings(self, session_id: str) -> tuple[list[dict[str, Any]], tuple[str, bool, str]]:
        """The models offered, and the session's (model, thinking, reasoning effort) now: as this
        process holds them while it drives the session, else as its log says (a session whose lease
        another process took keeps its last choices here, which the new driver may have changed)."""
        config = self.options.provider
        hosted = self.sessions.get(session_id)
        if hosted is not None and hosted.agent.log.lease_lost is None:
            settings = hosted.models
        else:
            settings = self.stored_model_settings(session_id)
        return configured_models(config), settings.effective(config)

    def set_model_setting(self, session_id: str, key: str, value: object, *, method: str) -> None:
        """One of the session's model settings (`model`, `thinking`, `reasoning_effort`), in effect
        from its next model request. Driving the session is required."""
        self.set_model_settings(session_id, {key: value}, method=method)

    def set_model_settings(self, session_id: str, changes: dict[str, object], *, method: str) -> None:
        """Several of the session's model settings at once: all checked first, then one durable
        `session/settings` (none when one is refused), in effect from its next model request."""
        hosted = self.session(session_id)
        settings = dataclasses.replace(hosted.models)
        for key, value in changes.items():
            if key == "model":
                offered = {m["id"] for m in configured_models(self.options.provider)}
                if not isinstance(value, str) or value not in offered:
                    raise invalid_params(
                        f"{method}: model must be one of {', '.join(sorted(offered))}, not {shown(value)}"
                    )
                settings.model = value
            elif key == "thinking":
                if not isinstance(value, bool):
                    raise invalid_params(f"{method}: thinking takes true or false, not {shown(value)}")
                settings.thinking = value
            elif key == "reasoning_effort":
                if value not in EFFORTS:
                    raise invalid_params(
                        f"{method}: reasoning_effort must be one of {', '.join(EFFORTS)}, not {shown(value)}"
                    )
                settings.reasoning_effort = str(value)
            else:
                raise invalid_params(f"{method}: no setting {shown(key)} (model, thinking, reasoning_effort)")
        hosted.set_model_settings_durably(settings)
        self._apply_model_settings(hosted)

    def trust_project(self, root: str, *, method: str) -> tuple[str, int, tuple[str, ...]]:
        """The person trusts a project's hooks (`dsh/project/trust`): (its folder, hooks, events)."""
        return trust_project(self.sessions.values(), self.project_trust, root, method=method)

    def sandbox_setting(self, session_id: str) -> tuple[SandboxMode | None, SandboxMode]:
        """The session's own sandbox mode (None: it follows the configuration) and the mode set for
        it (that choice, else the configured one); plan mode is not folded in."""
        hosted = self.sessions.get(session_id)
        if hosted is not None and hosted.agent.log.lease_lost is None:
            choice = hosted.sandbox_choice
        else:
            choice = self.stored_sandbox_choice(session_id)
        return choice, choice or self.options.tools.sandbox.mode

    def set_sandbox_mode(self, session_id: str, value: object, *, method: str) -> None:
        """The session's own sandbox mode (`None`: follow the configuration again), durable and in
        effect from its next command. Driving the session is required. `full-access` here is the
        person's explicit choice: the client shows it as such (ACP: a config option they picked)."""
        if value is not None and value not in SANDBOX_MODES:
            raise invalid_params(
                f"{method}: sandbox must be one of {', '.join(SANDBOX_MODES)}, not {shown(value)}"
            )
        mode = next((known for known in SANDBOX_MODES if known == value), None)
        self.session(session_id).set_sandbox_mode_durably(mode)

    def set_roots(self, roots: Sequence[str]) -> None:
        """The editor's workspace folders changed: every session's tools follow (each keeps its cwd)."""
        self.roots = list(roots)
        for hosted in self.sessions.values():
            if (
                hosted.session_id not in self._in_worktree
            ):  # confined to its worktree, whatever the editor has
                hosted.workspace.replace_roots(self.roots)

    # ---- creating and opening ----------------------------------------------------------------------------

    def create(
        self,
        cwd: str | None,
        *,
        title: str | None = None,
        extra_roots: Sequence[str] = (),
        mcp_servers: ServerSource | None = None,
        worktree: NewWorktree | None = None,
        session_id: str | None = None,
    ) -> HostedSession:
        """A new session, driven and followed here. All or nothing: what can fail is built before the
        session row exists, and a failure while creating it removes the row and the lease again.
        `worktree`: made for it (`host/worktrees.make_worktree`, with this `session_id`): the session
        works there and only there; removed again (branch too) should the session not be created."""
        session_id = session_id or str(uuid.uuid4())
        row = None
        if worktree is not None:
            cwd, row = worktree.cwd, worktree.row._replace(session_id=session_id)
            self._new_worktrees[session_id] = row
        try:
            return self._host_new(
                session_id,
                cwd,
                extra_roots,
                mcp_servers,
                lambda: self.manager.create(cwd=cwd, title=title, session_id=session_id, worktree=row),
            )
        except BaseException:
            if row is not None:
                remove_worktree_folder(row, delete_branch=True)
            raise
        finally:
            self._new_worktrees.pop(session_id, None)

    def adopt_early(self, early: EarlySession) -> HostedSession:
        """A session created before the host (`host/early.py`: its row and lease exist): its tools
        and agent wired, driven and followed here, as `create` would have left it. Should that fail,
        the session goes (row and lease), as a failed `create` leaves none."""
        session_id = early.session_id
        return self._host_new(
            session_id,
            early.cwd,
            early.extra_roots,
            early.mcp_servers,
            lambda: self.manager.build_created(session_id),
        )

    def adopt_early_sessions(self, early: EarlySessions, failed: Callable[[str, str], None]) -> None:
        """Every session `early` still holds unwired (`adopt_early`), in the order they were created.
        One that cannot be wired (the checks before its reply leave that to races, such as a directory
        removed meanwhile) is gone, as a failed creation leaves none, and `failed(session_id, reason)`
        lets the front end tell its client; later requests naming it get `unknown session`."""
        for session in early.take():
            try:
                self.adopt_early(session)
            except Exception as exc:
                logger.exception("session %s could not be set up", session.session_id)
                refused = wire_error(exc)
                reason = refused.message if refused is not None else f"{type(exc).__name__}: {exc}"
                failed(session.session_id, reason)

    def _host_new(
        self,
        session_id: str,
        cwd: str | None,
        extra_roots: Sequence[str],
        mcp_servers: ServerSource | None,
        build: Callable[[], Agent],
        *,
        max_steps: int | None = None,
    ) -> HostedSession:
        """Wire a new session's tools, `build` its agent, then drive and follow it here (a subagent's
        child, `max_steps` given, is not followed: its parent's stream carries its events); a failure
        removes the session (row and lease), so a failed creation leaves none."""
        try:
            tools = self._wire(session_id, cwd, None, extra_roots, mcp_servers)
            agent = build()
        except BaseException:
            self._discard_new(session_id)
            raise
        finally:
            self._wiring.pop(session_id, None)
        hosted = self._adopt(agent, tools, max_steps)
        if max_steps is None:
            self.follow(hosted)  # what creation logged (a given title: seq 0) goes out first
        return hosted

    def create_child(self, parent: HostedSession, task: SubagentTask, call: ToolCall) -> HostedSession:
        """A subagent's child session of `parent`'s call (host/children.py): in the store under its
        parent, over the parent's workspace, in the parent's mode, with the task's tool set and step cap,
        its edits and commands checkpointed as the parent's call's; driven here, not followed. All or
        nothing, as `create`."""
        session_id = str(uuid.uuid4())
        call_id = call.call_id
        self._child_calls[session_id] = (call, parent.session_id)
        workspace = parent.workspace
        cwd = str(workspace.cwd)
        roots = [str(root) for root in workspace.roots]
        self._child_tools[session_id] = task.tools
        try:
            hosted = self._host_new(
                session_id,
                cwd,
                roots,
                None,
                lambda: self.manager.create(
                    cwd=cwd,
                    title=f"Subagent: {task.description}",
                    session_id=session_id,
                    parent=(parent.session_id, call_id),
                ),
                max_steps=task.max_steps,
            )
        finally:
            self._child_tools.pop(session_id, None)
            self._child_calls.pop(session_id, None)
        if parent.mode != "ask":
            hosted.set_mode_durably(parent.mode)
        # The parent's own choices: its sandbox mode, its model settings (a named agent's model over
        # the parent's, when the daemon offers it).
        if parent.sandbox_choice is not None:
            hosted.set_sandbox_mode_durably(parent.sandbox_choice)
        models = dataclasses.replace(parent.models)
        if task.model is not None:
            if task.model in {m["id"] for m in configured_models(self.options.provider)}:
                models.model = task.model
            else:
                logger.warning("agent %s asks for model %s, which is not offered", task.agent, task.model)
        hosted.set_model_settings_durably(models)
        self._apply_model_settings(hosted)
        # The parent's sandbox rules: the configured ones (the same settings over the same roots), and
        # the widenings the person granted the parent for the session, now and later.
        sandbox = hosted.tools.kit.sandbox
        own = sandbox.grants
        sandbox.grants = lambda: (
            *own(),
            *(grant for grant in parent.agent.always_allowed if grant.startswith(SESSION_SCOPE)),
        )
        return hosted

    def session(
        self,
        session_id: str,
        *,
        cwd: str | None = None,
        extra_roots: Sequence[str] = (),
        mcp_servers: ServerSource | None = None,
    ) -> HostedSession:
        """The session, driven by this process (opened with its lease if needed; raises
        `UnknownSessionError`, `SessionBusyError`, or a `StoreError` saying why its log is unreadable).
        `cwd`: where its tools work when its stored cwd is not a directory."""
        hosted = self.sessions.get(session_id)
        if hosted is not None and hosted.agent.log.lease_lost is None:
            return hosted
        if hosted is not None:  # taken over by another process: forget it and ask the store again
            self._cleanup(hosted, deleted=False)
        if cwd is None and not extra_roots and mcp_servers is None and session_id in self.open_args:
            cwd, extra_roots, mcp_servers = self.open_args[session_id]
        info = self.manager.info(session_id)
        stored = info.cwd
        if info.parent_id is not None:  # a subagent's session opened again: it may read, not change
            self._child_tools.setdefault(session_id, "explore")
        # Wired only once the lease is ours (the manager builds the agent then), so an attach that
        # finds the session driven elsewhere builds no tools and starts no MCP server.
        self._to_wire[session_id] = lambda: self._wire(session_id, stored, cwd, extra_roots, mcp_servers)
        try:
            agent = self.manager.open(session_id)
        except BaseException:
            self._close_tools(self._wiring.get(session_id))
            self.front_end.session_closed(session_id, deleted=False)  # whatever it began to keep
            raise
        finally:
            self._to_wire.pop(session_id, None)
            self._child_tools.pop(session_id, None)
            tools = self._wiring.pop(session_id, None)
        assert tools is not None, "the manager built the agent, so its tools were wired"
        hosted = self._adopt(agent, tools)
        history.finish_interrupted_rewind(hosted)
        if info.parent_id is None:
            self._close_interrupted_children(session_id)
        self.open_args.pop(session_id, None)
        delivered = self.read_only.pop(session_id, None)
        if delivered is not None:
            # Followed read-only before; driven here now: the stream goes on from where it stopped,
            # and the client hears it drives (`session/lease`), whichever request got here first.
            # The previous driver's shared output this view has not shown yet goes between the
            # events as a poll would have sent it (it is all on disk: it let go after its last write).
            follower = self.follower
            follower.read_output(session_id)
            self.follow(hosted, delivered, before=lambda seq: follower.deliver_output(session_id, seq))
            follower.deliver_output(session_id, hosted.last_seq)
            follower.taken_over(session_id)
            leases = self.manager.leases
            self._notice_durably(
                session_id,
                SessionNoticed(
                    "lease",
                    "info",
                    f"dsh-daemon process {leases.pid} on {leases.host} took this chat over; "
                    "it drives it from here on.",
                ),
            )
        self._enter_deferred_sends(hosted)
        if session_id in self.forced or _ended_for_handover(hosted):
            # The holder's turn was aborted to hand it over (forced by this asker, or let go at once
            # by the person there: `dsh/session/handOver`); what was queued behind it is what the
            # person asked next, which the holder would have run after that turn: it runs here now.
            self.forced.discard(session_id)
            hosted.wake()
        return hosted

    def agent_definitions(self, session_id: str) -> list[dict[str, object]]:
        """The named agents the session's model may start (`.dsh/agents`, subagents/definitions.py),
        as its tools read them; a session driven elsewhere: read from its cwd now."""
        hosted = self.sessions.get(session_id)
        tool = None if hosted is None else hosted.tools.kit.registry.get(TOOL_NAME)
        if isinstance(tool, RunSubagentTool):
            definitions = tool.definitions
        else:
            definitions = load_definitions(self.viewer_workspace(session_id))
        return [definition.wire() for definition in definitions.values()]

    def agent_definitions_in(self, cwd: str) -> list[dict[str, object]]:
        """As `agent_definitions`, for a folder before there is a session (read now)."""
        if not is_directory(cwd):
            raise invalid_params(f"dsh/agents/list: cwd is not a directory: {cwd}")
        definitions = load_definitions(self._workspace(cwd, ()))
        return [definition.wire() for definition in definitions.values()]

    def _close_interrupted_children(self, parent_id: str) -> None:
        """Children of the parent that a crash left with an open turn (the parent's repair wrote their
        `subagent/finished {interrupted}`): each opened once here, which repairs its log as any
        session's (its turn ends `interrupted`), and let go again. A child another live process
        drives, or that cannot be read, is left as it is (said in the daemon's log)."""
        store = self.manager.store
        for child_id, _call_id in store.children_of(parent_id):
            if child_id in self.sessions:
                continue
            try:
                if store.session_info(child_id).status == "idle" or not self._nobody_drives(child_id):
                    continue
                child = self.session(child_id)
            except Exception:
                logger.exception("subagent session %s of %s could not be closed", child_id, parent_id)
                continue
            child.detached = True
            self._release_if_idle(child_id)

    def followed(self, session_id: str) -> HostedSession:
        """A session the connection opened and follows (ACP: `session/new`, `load` or `resume`)."""
        hosted = self.sessions.get(session_id)
        if (hosted is None or not hosted.followed) and session_id in self.read_only:
            raise session_busy_because(
                session_id,
                "another dsh-daemon drives it right now (you follow it live); a prompt runs here once "
                "that process lets go",
                reason="leased",
            )
        if hosted is None or not hosted.followed:
            if self.manager.store.has_session(session_id):
                raise invalid_params(
                    f"session {shown(session_id)} is not open here: session/load or resume it"
                )
            raise UnknownSessionError(session_id)
        lost = hosted.agent.log.lease_lost
        if lost is not None:
            raise session_busy(session_id, 0, str(lost))
        return hosted

    def viewer_workspace(
        self, session_id: str, cwd: str | None = None, extra_roots: Sequence[str] = ()
    ) -> Workspace:
        """The workspace a session followed read-only would have here (prompts sent to it are read
        against it: their resource links and file context)."""
        if session_id in self.open_args:
            cwd, extra_roots, _ = self.open_args[session_id]
        stored = self.manager.info(session_id).cwd
        return self._workspace(stored if stored and is_directory(stored) else cwd, extra_roots)

    def _wire(
        self,
        session_id: str,
        stored_cwd: str | None,
        cwd: str | None,
        extra_roots: Sequence[str],
        mcp_servers: ServerSource | None,
    ) -> SessionTools:
        worktree = self._new_worktrees.get(session_id) or self.manager.store.worktree_of(session_id)
        if worktree is not None:
            workspace = self._worktree_workspace(worktree, stored_cwd or cwd)
            self._in_worktree.add(session_id)
        else:
            workspace = self._workspace(
                stored_cwd if stored_cwd and is_directory(stored_cwd) else cwd, extra_roots
            )
        toolset = self._child_tools.get(session_id)
        parent_call = self._child_calls.get(session_id)
        checkpoints = (
            SessionCheckpoints(self.checkpoints, session_id, workspace)
            if parent_call is None
            else ParentCheckpoints(self.checkpoints, *parent_call, workspace)
        )
        tools = wire_session_tools(
            self.front_end,
            session_id,
            workspace,
            self.options,
            mcp_servers,
            checkpoints,
            mcp_status=lambda data: self._mcp_status(session_id, data),
            home=self.state_dir,
            # a child's MCP servers would only start for a set that may call their tools
            with_mcp=toolset is None or toolset == "all",
        )
        registry = tools.kit.registry
        if toolset is None:
            definitions = load_definitions(workspace)
            launcher = ChildSessions(self, session_id)
            registry.add(RunSubagentTool(launcher, self.subagent_slots, workspace, definitions))
        else:
            narrow_registry(registry, toolset)
            tools.kit.hooks.pre_execute.insert(0, ToolsetGate(toolset))
        tools.kit.sandbox.dsh_home = self.state_dir  # the store is masked, whatever the environment says
        load_project_hooks(tools, self.project_trust)
        self._wiring[session_id] = tools
        return tools

    def _mcp_status(self, session_id: str, data: Mapping[str, Any]) -> None:
        """An MCP server's state, to the front end; a server that failed or died is also said in the
        session's log (a `session/notice`), so whoever reads the session later sees it where it
        happened, not only the model through its missing tools."""
        self.front_end.report_mcp_status(session_id, data)
        state = data.get("state")
        if state not in ("failed", "exited"):
            return
        server, error = data.get("server"), data.get("error")
        what = "could not start" if state == "failed" else "stopped"
        because = f" ({error})" if error else ""
        self._notice_durably(
            session_id,
            SessionNoticed(
                "mcp", "warning", f"MCP server {server} {what}{because}; its tools are no longer offered."
            ),
        )

    def _notice_durably(self, session_id: str, notice: SessionNoticed) -> None:
        """A `session/notice` in the log of a session driven here (on disk on return; published live)."""
        hosted = self.sessions.get(session_id)
        if hosted is None or hosted.agent.log.lease_lost is not None:
            return
        try:
            hosted.agent.log.append(*entry(notice), commit=True, ignorable=True)
        except Exception:  # a notice must never break the session
            logger.exception("session %s: the notice could not be stored", session_id)

    def _worktree_workspace(self, worktree: WorktreeRow, cwd: str | None) -> Workspace:
        """A worktree session's only root is its worktree (not the editor's folders, not extra roots):
        its tools and sandbox stay there. Once the worktree is removed the session cannot work."""
        if not is_directory(worktree.path):
            raise WorkspaceError(
                f"this session's worktree {worktree.path} was removed (kept as branch {worktree.branch} "
                "or discarded); its transcript can still be read"
            )
        inside = (
            cwd
            if cwd and is_directory(cwd) and Path(cwd).resolve().is_relative_to(Path(worktree.path).resolve())
            else worktree.path
        )
        try:
            return Workspace([worktree.path], cwd=inside)
        except ValueError as exc:
            raise WorkspaceError(str(exc)) from exc

    def _workspace(self, cwd: str | None, extra_roots: Sequence[str]) -> Workspace:
        """Roots: the editor's folders, the session cwd (when it is a directory outside them), the
        session's extra roots; the daemon's directory when there is nothing else."""
        if cwd is not None and not is_directory(cwd):
            cwd = None  # a cwd that does not exist: the tools work in the roots
        roots = [r for r in self.roots if is_directory(r)]
        if cwd is not None and not any(Path(cwd).resolve().is_relative_to(Path(r).resolve()) for r in roots):
            roots.append(cwd)
        roots += [r for r in extra_roots if is_directory(r) and r not in roots]
        try:
            return Workspace(roots or [os.getcwd()], cwd=cwd)
        except ValueError as exc:
            raise WorkspaceError(str(exc)) from exc

    def _wired(self, session_id: str) -> SessionTools:
        """The tools of the session whose agent is being built (wired now, if that waited)."""
        tools = self._wiring.get(session_id)
        if tools is None:
            tools = self._to_wire[session_id]()
        return tools

    def _hooks(self, session_id: str) -> Hooks:
        tools = self._wired(session_id)
        own = self.front_end.session_hooks(session_id, tools.workspace)
        return session_hooks(tools, self.options.agent, pre_step=own.pre_step, pre_execute=own.pre_execute)

    def _adopt(self, agent: Agent, tools: SessionTools, max_steps: int | None = None) -> HostedSession:
        session_id = agent.session_id
        hosted = HostedSession(agent, tools, self._tasks, max_steps=max_steps)
        hosted.wire_sandbox()
        hosted.wire_processes(self.processes_dir(session_id))
        hosted.wire_reviews()
        hosted.wire_plan_approval()
        start_hooks(hosted, self._tasks)
        sandbox = tools.kit.sandbox
        sandbox.save_widening = self.save_sandbox_widening
        sandbox.on_notice = lambda text: self._notice_durably(
            session_id, SessionNoticed("sandbox", "warning", text)
        )
        hosted.restore_mode()
        hosted.restore_settings()
        self._apply_model_settings(hosted)
        self.sessions[session_id] = hosted
        agent.subscribe(lambda event: self.front_end.observe(session_id, event))
        turndiff.watch_turn_diffs(self, hosted, self._tasks)
        return hosted

    def _discard_new(self, session_id: str) -> None:
        """Undo a creation that failed half-way: its tools, its agent, its row and its lease."""
        self._close_tools(self._wiring.get(session_id))
        self.front_end.session_closed(session_id, deleted=True)
        self.manager.agents.pop(session_id, None)
        store = self.manager.store
        try:
            if store.has_session(session_id):
                # A session that never answered its creating request has no history: drop it whole.
                store.delete_session(session_id, holder=self.manager.leases.holder)
        except Exception:
            logger.exception("could not remove the half-created session %s", session_id)

    # ---- handing over (host/handover.py) ----------------------------------------------------------------

    def take_over(self, session_id: str, *, force: bool = False) -> None:
        """Ask the process that drives a session this connection follows read-only to let it go (idle:
        at once; running: when its turn ends, or with `force` now, its turn aborted with cause
        `handover` and its queue kept). The follower then opens it here and says so with a live
        `session/lease {readOnly: false}`. A session driven here already: nothing to do."""
        hosted = self.sessions.get(session_id)
        if hosted is not None and hosted.agent.log.lease_lost is None:
            return
        if session_id not in self.read_only:
            self.manager.info(session_id)  # an unknown session is an error
            raise invalid_params(
                f"session {shown(session_id)} is not followed here: attach it (dsh/session/attach), "
                "then take it over"
            )
        leases = self.manager.leases
        lease = self.manager.store.read_lease(session_id)
        if lease is not None and leases.other_holder_lives(lease):
            self.manager.store.request_handover(
                session_id, leases.holder, leases.pid, leases.host, force=force
            )
            if force:
                self.forced.add(session_id)
        self.follower.poll_once(session_id)  # nobody drives it (or it was handed over already): now

    def hand_over_now(self, session_id: str) -> None:
        """The driver's side of a waiting take-over (`dsh/session/handOver`): let the session go at
        once, as a forcing request would (the turn here ends `aborted {cause: "handover"}`, the queue
        is kept for the asker to run). `invalid_params` when nobody asks for it."""
        hosted = self.sessions.get(session_id)
        if hosted is None or hosted.agent.log.lease_lost is not None:
            self.manager.info(session_id)  # an unknown session is an error
            raise invalid_params(
                f"session {shown(session_id)} is not driven here: there is nothing to hand over"
            )
        if not self.manager.store.force_handover(session_id, self.manager.leases.holder):
            raise invalid_params(f"nobody asked to take session {shown(session_id)} over")
        self.handover.poll_once()

    def check_holder_answers(self, session_id: str) -> None:
        """Raise `session_busy` (`reason: "silent"`, naming the holder) when the process holding the
        session lives but has stopped heartbeating: a request kept for its handover would wait
        forever."""
        lease = self.manager.store.read_lease(session_id)
        silent = None if lease is None else self.manager.leases.silent_for_ms(lease)
        if lease is not None and silent is not None:
            raise session_busy_silent_holder(session_id, lease[1], lease[2], silent)

    def hand_over(self, session_id: str) -> bool:
        """The holder's side: pass an idle session's lease to the process that asked for it. The
        connection, if it followed the session, goes on following it read-only (the follower
        announces the new holder with `session/lease {readOnly: true, holder}`)."""
        hosted = self.sessions.get(session_id)
        if not self.manager.hand_over_idle_session(session_id):
            return False
        if hosted is None:
            return True
        followed = hosted.followed and not hosted.detached
        last_seq = hosted.last_seq
        self._cleanup(hosted, deleted=False)
        if followed:
            self.read_only[session_id] = last_seq
            self.follower.follow(session_id, None)
        return True

    def defer_send(
        self, session_id: str, message: UserMessage, attachments: Sequence[UserMessage] = ()
    ) -> None:
        """A prompt for a session another process drives: kept durably (on disk on return) until a
        process drives the session; that process enters it as a followup (`_enter_deferred_sends`)."""
        data = {"message": message.to_json(), "attachments": [a.to_json() for a in attachments]}
        self.manager.store.defer_send(session_id, message.id, json.dumps(data))

    def drop_deferred_send(self, session_id: str, message_id: str) -> None:
        self.manager.store.drop_deferred_send(session_id, message_id)

    def _enter_deferred_sends(self, hosted: HostedSession) -> None:
        """Prompts kept for the session while another process drove it, entered as followups in the
        order they came. One already in the log (entered before a crash dropped its row) is not
        entered twice."""
        store = self.manager.store
        deferred = store.deferred_sends(hosted.session_id)
        if not deferred:
            return
        logged = _logged_message_ids(hosted.agent.log.events)
        for message_id, raw in deferred:
            if message_id not in logged:
                data = json.loads(raw)
                message = UserMessage.from_json(data["message"])
                attachments = [UserMessage.from_json(a) for a in data.get("attachments", [])]
                hosted.send(message, "next-turn", True, attachments, "followup")
            store.drop_deferred_send(hosted.session_id, message_id)

    # ---- following -------------------------------------------------------------------------------------

    def follow(
        self,
        hosted: HostedSession,
        after_seq: int = -1,
        *,
        replay: bool = True,
        before: Callable[[int], None] | None = None,
    ) -> None:
        """The connection receives the session's events: (with `replay`) its durable events after
        `after_seq`, then its live ones, with nothing between the two and nothing twice. `before(n)`
        runs before each replayed event `n + 1` (a read-only view's shared output goes there)."""
        session_id = hosted.session_id
        if replay:
            for event in hosted.events_after(after_seq):
                if before is not None and event.seq is not None:
                    before(event.seq - 1)
                self.front_end.deliver(session_id, event, replayed=True)
        if not hosted.followed:
            hosted._unfollow = hosted.agent.subscribe(
                lambda event: self.front_end.deliver(session_id, event, replayed=False)
            )
            hosted.followed = True
        hosted.detached = False

    def is_followed(self, session_id: str) -> bool:
        hosted = self.sessions.get(session_id)
        return hosted is not None and hosted.followed

    def attach(self, session_id: str, after_seq: int, replay: bool = True) -> Attached:
        """Follow a session: (with `replay`) its durable events after `after_seq`, then live ones.
        A session another live process drives is followed read-only, from the store, until it is
        let go; without replay, one nobody drives is answered from the store and opened after."""
        if not replay and session_id not in self.sessions and self._nobody_drives(session_id):
            return self._attach_from_store(session_id)
        try:
            hosted = self.session(session_id)
        except SessionBusyError as exc:
            # Leased by another live process: history only, read from the store.
            if replay:
                events = self.manager.read(session_id, after_seq)
                for event in events:
                    self.front_end.deliver(session_id, event, replayed=True)
                last = events[-1].seq if events else None
                info = self.manager.info(session_id)
                self.read_only[session_id] = after_seq if last is None else last
            else:
                info = self.manager.info(session_id)
                self.read_only[session_id] = info.last_seq
            self.follower.follow(session_id, (exc.pid, exc.host))
            inbox = self.stored_inbox(session_id)
            mode = self.stored_mode(session_id)
            plan = self.stored_plan(session_id)
            return Attached(info.status, info.title, info.last_seq, inbox, holder=exc, mode=mode, plan=plan)
        # Replay from memory (it includes events not yet written behind) and subscribe together.
        self.follow(hosted, after_seq, replay=replay)
        info = self.manager.info(session_id)
        title = info.title
        return Attached(
            hosted.status,
            title,
            hosted.last_seq,
            hosted.inbox(),
            mcp_servers=hosted.mcp_status(),
            mode=hosted.mode,
            sandbox=None if (status := hosted.sandbox_status()) is None else status.data(),
            plan=current_plan(hosted.agent.log.events),
            hooks_untrusted=None if (waiting := hosted.tools.hooks.untrusted) is None else waiting.data(),
            parent_id=info.parent_id,
        )

    def _nobody_drives(self, session_id: str) -> bool:
        lease = self.manager.store.read_lease(session_id)
        return lease is None or not self.manager.leases.other_holder_lives(lease)

    def _attach_from_store(self, session_id: str) -> Attached:
        """`replay: "none"` on a session nobody drives: answered from the store alone (its row and its
        inbox splices), so reattaching a long session costs no full load. The session is opened for
        driving right after, by the follower or by the first request that needs it, and the events
        from `last_seq` on reach the connection as they would have: no gap, no duplicate."""
        info = self.manager.info(session_id)
        self.read_only[session_id] = info.last_seq
        self.follower.follow(session_id, None, announce_takeover=False)
        return Attached(
            info.status,
            info.title,
            info.last_seq,
            self.stored_inbox(session_id),
            from_store=True,
            mode=self.stored_mode(session_id),
            plan=self.stored_plan(session_id),
        )

    def detach(self, session_id: str) -> None:
        """Stop following the session; an idle session driven here is released at once (its lease
        goes, so another window can drive it), a running one when its turn ends."""
        if self.read_only.pop(session_id, None) is not None:
            self.follower.forget(session_id)
            self._give_back(session_id)
            return
        hosted = self.sessions.get(session_id)
        if hosted is None:
            self.manager.info(session_id)  # an unknown session is an error; a known one: nothing to do
            return
        self._unfollow(hosted)
        hosted.detached = True
        if self._release_if_idle(session_id):
            return
        unsubscribe: Callable[[], None] | None = None

        def on_status(event: Event) -> None:
            if event.type == STATUS and StatusChanged.of(event).status == "idle" and unsubscribe is not None:
                unsubscribe()
                # Not from inside the publish: releasing flushes the log.
                asyncio.get_running_loop().call_soon(self._release_if_idle, session_id)

        unsubscribe = hosted.agent.subscribe(on_status)

    def _give_back(self, session_id: str) -> None:
        """A session this connection no longer follows read-only: its handover request goes, and a lease
        handed to this process that it has not picked up is released (nobody else could take it)."""
        self.open_args.pop(session_id, None)
        self.forced.discard(session_id)
        store, leases = self.manager.store, self.manager.leases
        store.clear_handover(session_id, requester=leases.holder)
        if session_id not in self.sessions:
            leases.release(session_id)

    def processes_dir(self, session_id: str) -> Path:
        """Where a session's background processes keep their output (removed with the session)."""
        return self.state_dir / "processes" / session_id

    def _release_if_idle(self, session_id: str) -> bool:
        hosted = self.sessions.get(session_id)
        if hosted is None or not hosted.detached:
            return True  # followed again meanwhile: it stays
        if not hosted.agent.running:
            hosted.stop_processes_now("session-close")  # recorded while the log is still ours
        if not self.manager.release_idle_session(session_id):
            return False
        self._cleanup(hosted, deleted=False)  # its tools go with it; a later open builds them again
        return True

    # ---- reading -----------------------------------------------------------------------------------------

    def info(self, session_id: str) -> SessionInfo:
        return self.manager.info(session_id)

    def list_sessions(
        self, cwd: str | None, limit: int | None = None, before: int | None = None
    ) -> SessionPage:
        return self.manager.store.list_page(cwd, limit=limit, before=before)

    def inbox(self, session_id: str) -> dict[str, Any]:
        """The pending items: from the agent when driven here, else as the stored splices leave them."""
        try:
            return self.session(session_id).inbox()
        except SessionBusyError:
            return self.stored_inbox(session_id)

    def stored_model_settings(self, session_id: str) -> ModelSettings:
        """The model settings the session's log last recorded (a session another process drives)."""
        stored = self.manager.store.load_events_of_type(session_id, SESSION_SETTINGS)
        if not stored:
            return ModelSettings()
        chosen = SessionSettingsSet.of(stored[-1])
        return ModelSettings(chosen.model, chosen.thinking, chosen.reasoning_effort)

    def stored_sandbox_choice(self, session_id: str) -> SandboxMode | None:
        """The sandbox mode the session's log last recorded as its own (None: the configured one)."""
        stored = self.manager.store.load_events_of_type(session_id, SESSION_SETTINGS)
        return SessionSettingsSet.of(stored[-1]).sandbox if stored else None

    def stored_mode(self, session_id: str) -> str:
        """The mode the session's log last recorded ("ask" when none)."""
        modes = self.manager.store.load_events_of_type(session_id, SESSION_MODE)
        return SessionModeSet.of(modes[-1]).mode if modes else "ask"

    def stored_plan(self, session_id: str) -> PlanUpdated | None:
        """The current plan by the session's log (only the events the plan is folded from are read)."""
        store = self.manager.store
        updates = store.load_events_of_type(session_id, PLAN_UPDATED)
        if not updates:
            return None  # no plan was ever made (cuts only take a plan back): no turn start to read
        others = sorted(PLAN_EVENTS - {PLAN_UPDATED})
        events = [*updates, *(e for kind in others for e in store.load_events_of_type(session_id, kind))]
        return current_plan(sorted(events, key=lambda e: e.seq or 0))

    # ---- background processes (tools/processes.py) -----------------------------------------------------

    def commands_of(self, session_id: str) -> dict[str, Any]:
        """The custom slash commands and skills of the session's folder and of `$DSH_HOME`
        (`tools/library.py`), read now; `{commands, skills, problems}`."""
        hosted = self.sessions.get(session_id)
        cwd = hosted.workspace.cwd if hosted is not None else self.manager.info(session_id).cwd
        return self.commands_in(cwd)

    def commands_in(self, cwd: str | os.PathLike[str] | None) -> dict[str, Any]:
        """As `commands_of`, for a folder (a client before its first session)."""
        commands, skills = scan_commands(cwd, self.state_dir), scan_skills(cwd, self.state_dir)
        return {
            "commands": [c.to_json() for c in commands.commands],
            "skills": [s.to_json() for s in skills.skills],
            "problems": [*commands.problems, *skills.problems],
        }

    def process_list(self, session_id: str) -> list[dict[str, Any]]:
        """The session's background processes: live from this process when it drives the session,
        else as its log says (a session no daemon drives has none running, whatever its log says)."""
        hosted = self.sessions.get(session_id)
        if hosted is not None and hosted.agent.log.lease_lost is None:
            return hosted.processes()
        self.manager.info(session_id)  # UnknownSessionError for a session that does not exist
        store, leases = self.manager.store, self.manager.leases
        events = [e for kind in sorted(PROCESS_EVENTS) for e in store.load_events_of_type(session_id, kind)]
        listed = [e.to_json() for e in fold_processes(sorted(events, key=lambda e: e.seq or 0))]
        lease = store.read_lease(session_id)
        if lease is None or not leases.other_holder_lives(lease):  # its processes died with their daemon
            for item in listed:
                item["running"] = False
        return listed

    def process_output(self, session_id: str, process_id: str, max_chars: int) -> dict[str, Any]:
        """The newest output of one of the session's processes, from its file (so also after a
        restart, and for a session another process drives)."""
        known = {p["processId"]: p for p in self.process_list(session_id)}
        process = known.get(process_id)
        if process is None:
            raise invalid_params(f"no background process {shown(process_id)} in session {session_id}")
        text, truncated = tail_text(self.processes_dir(session_id) / f"{process_id}.log", max_chars)
        return {"processId": process_id, "text": text, "truncated": truncated, "running": process["running"]}

    async def process_stop(self, session_id: str, process_id: str) -> dict[str, Any]:
        """The person's stop (drives the session; another process's: `session_busy`)."""
        hosted = self.session(session_id)
        try:
            return await hosted.stop_process(process_id)
        except ProcessNotFound as exc:
            raise invalid_params(str(exc)) from None

    async def review_start(
        self, session_id: str, base: str | None, commit: str | None, instructions: str | None
    ) -> dict[str, Any]:
        """Drives the session (another process's: `session_busy`)."""
        if base is not None and commit is not None:
            raise invalid_params("dsh/review/start: give base or commit, not both")
        target = (
            ReviewTarget("base", base)
            if base is not None
            else ReviewTarget("commit", commit)
            if commit is not None
            else ReviewTarget("uncommitted")
        )
        return await self.session(session_id).start_review(target, instructions or None)

    def review_list(self, session_id: str) -> dict[str, Any]:
        """The session's live review findings (and its finished reviews), from its log: also for a
        session another process drives, and after a restart."""
        hosted = self.sessions.get(session_id)
        if hosted is not None and hosted.agent.log.lease_lost is None:
            return review_listing(hosted.reviews())
        self.manager.info(session_id)  # UnknownSessionError for a session that does not exist
        store = self.manager.store
        events = [e for kind in sorted(REVIEW_EVENTS) for e in store.load_events_of_type(session_id, kind)]
        return review_listing(fold_reviews(sorted(events, key=lambda e: e.seq or 0)))

    def mode(self, session_id: str) -> str:
        hosted = self.sessions.get(session_id)
        if hosted is not None and hosted.agent.log.lease_lost is None:
            return hosted.mode
        return self.stored_mode(session_id)

    def refuse_a_childs_changes(self, session_id: str) -> None:
        """A subagent's session is driven by its parent's `run_subagent` call: a client may follow it
        (attach answers `readOnly`), not send to it or change it (`session_busy`, `reason:
        "subagent"`, naming the parent). Raises `unknown_session` for an unknown id."""
        parent_id = self.manager.info(session_id).parent_id
        if parent_id is not None:
            raise session_busy_because(
                session_id,
                f"it is a subagent's session, driven by its parent {parent_id[:8]}'s run_subagent call; "
                "it can be followed, not changed (send to the parent)",
                reason="subagent",
                parentId=parent_id,
            )

    def set_mode(self, session_id: str, mode: str, *, method: str) -> None:
        """Drives the session (another process's: `session_busy`)."""
        self.refuse_a_childs_changes(session_id)
        if mode not in SESSION_MODES:
            raise invalid_params(
                f"{method}: mode must be one of {', '.join(SESSION_MODES)}, not {shown(mode)}"
            )
        chosen: SessionMode = "plan" if mode == "plan" else "ask"
        if mode == "accept-edits":
            chosen = "accept-edits"
        self.session(session_id).set_mode_durably(chosen)

    def stored_inbox(self, session_id: str) -> dict[str, Any]:
        """The pending items as the stored splices leave them (a session another process drives)."""
        lists: dict[str, list[InboxItem]] = {"next-turn": [], "next-step": []}
        for event in self.manager.store.load_events_of_type(session_id, INBOX_SPLICED):
            apply_splice(lists, event.data, event.seq, event.time)
        return {
            "nextTurn": [item_wire(item, "next-turn") for item in lists["next-turn"]],
            "nextStep": [item_wire(item, "next-step") for item in lists["next-step"]],
        }

    def transcript(self, session_id: str, before_turn: int | None, limit: int | None) -> dict[str, Any]:
        """A page of rendered turns (at most `limit`: by default 20, at most 100), from memory when
        this process drives the session, else from the store (read-only: a session another process
        drives, or one nobody has open)."""
        limit = TRANSCRIPT_DEFAULT_LIMIT if limit is None else min(limit, TRANSCRIPT_MAX_LIMIT)
        try:
            return self._transcript(session_id, before_turn, limit)
        except ModelError as exc:  # a stored event of the wrong shape
            raise CorruptSessionError(f"session {session_id} cannot be read: {exc}") from exc

    def _transcript(self, session_id: str, before_turn: int | None, limit: int) -> dict[str, Any]:
        settings_before = self._settings_before(session_id)
        hosted = self.sessions.get(session_id)
        if hosted is not None and hosted.agent.log.lease_lost is None:
            events = hosted.agent.log.events
            page = transcript_page(reversed(events), len(events) - 1, before_turn, limit, settings_before)
            return page.to_json()
        store = self.manager.store
        last_seq = store.session_info(session_id).last_seq
        up_to = last_seq
        if before_turn is not None:  # a page deep in history: start reading at that turn, not at the end
            start = store.turn_start_seq(session_id, before_turn)
            up_to = last_seq if start is None else start - 1
        newest_first = store.iter_events_backward(session_id, up_to)
        try:
            return transcript_page(newest_first, last_seq, before_turn, limit, settings_before).to_json()
        finally:
            newest_first.close()

    def _settings_before(self, session_id: str) -> SettingsBefore:
        """What a page compares its first `session/settings` with (read only when a page has one)."""
        logged: list[Event] | None = None

        def before(seq: int) -> Mapping[str, Any] | None:
            nonlocal logged
            if logged is None:
                logged = self.logged_events(session_id, frozenset({SESSION_SETTINGS}))
            earlier = [e for e in logged if (e.seq or 0) < seq]
            return earlier[-1].data if earlier else None

        return before

    def logged_events(self, session_id: str, types: frozenset[str]) -> list[Event]:
        """The session's durable events of `types`, in log order, without reading its whole log: from
        this process's log when it drives the session, else from the store (another process's, or
        one nobody has open)."""
        hosted = self.sessions.get(session_id)
        if hosted is not None and hosted.agent.log.lease_lost is None:
            return hosted.events_of(types)
        store = self.manager.store
        stored = [e for kind in sorted(types) for e in store.load_events_of_type(session_id, kind)]
        return sorted(stored, key=lambda e: e.seq or 0)

    def usage(self, session_id: str) -> dict[str, Any]:
        """`dsh/session/usage`: the session's tokens and cost summed over its turns' durable
        `turn/usage` (model/usage.py, the fold ACP's `usage_update` cost uses too), and once it has
        started subagents, theirs apart (`subagents`; a child never starts one: subagents/toolsets.py)."""
        answer = self._own_usage(session_id).to_json()
        subagents = self.subagents_usage(session_id)
        if subagents is not None:
            answer["subagents"] = subagents
        return answer

    def subagents_usage(self, session_id: str) -> dict[str, Any] | None:
        """`usage`'s `subagents`: the turns of the sessions `session_id` started as subagents, summed;
        None while it has started none (a session not created yet included). A child whose log cannot
        be read is left out and logged: it does not hide what the others cost, nor the session's own."""
        children = [child for child, _call in self.manager.store.children_of(session_id)]
        if not children:
            return None
        totals = UsageTotals()
        for child in children:
            try:
                totals = totals.added(self._own_usage(child))
            except CorruptSessionError as exc:
                logger.warning("session %s: a subagent's cost is left out: %s", session_id, exc)
        return {"sessions": len(children), **totals.to_json()}

    def _own_usage(self, session_id: str) -> UsageTotals:
        try:
            turns = self.logged_events(session_id, frozenset({USAGE}))
            return summed(TurnUsage.of(e).usage for e in turns)
        except ModelError as exc:  # a stored event of the wrong shape
            raise CorruptSessionError(f"session {session_id} cannot be read: {exc}") from exc

    # ---- changing sessions -----------------------------------------------------------------------------

    def rename(self, session_id: str, title: str, *, method: str) -> None:
        """A new title (whitespace collapsed, 1–200 characters): a durable `session/title` unless it is
        the title already. Driving the session is required (another process's: `session_busy`)."""
        title = collapse_title(title)
        if not 1 <= len(title) <= MAX_TITLE_CHARS:
            raise invalid_params(
                f"{method}: 'title' must hold 1 to {MAX_TITLE_CHARS} characters "
                f"after collapsing whitespace (got {len(title)})"
            )
        hosted = self.session(session_id)
        if self.manager.info(session_id).title != title:
            self.manager.write_title(hosted.agent, title)

    async def rewind(
        self, session_id: str, before_turn: int, *, files: bool, conversation: bool, force: bool
    ) -> dict[str, Any]:
        """Restore the files the agent changed since turn `before_turn` began and/or cut the
        conversation back to then (host/history.py); refused while a turn runs."""
        self.refuse_a_childs_changes(session_id)
        return await history.rewind(
            self, session_id, before_turn, files=files, conversation=conversation, force=force
        )

    def checkpoints_of(self, session_id: str) -> dict[str, Any]:
        return history.checkpoint_turns(self, session_id)

    async def turn_diff(self, session_id: str, turn: int | None) -> dict[str, Any]:
        """The files turn `turn` (default: the last one still in the conversation) changed, by hunk."""
        return await turndiff.turn_diff(self, session_id, turn)

    async def keep_hunks(
        self, session_id: str, turn: int, path: str, hunks: Sequence[int] | None
    ) -> dict[str, Any]:
        return await turndiff.keep_durably(self, session_id, turn, path, hunks)

    async def undo_hunks(
        self, session_id: str, turn: int, path: str, hunks: Sequence[int] | None
    ) -> dict[str, Any]:
        """Take back hunks of a turn's change to a file, three-way; refused while a turn runs."""
        return await turndiff.undo_durably(self, session_id, turn, path, hunks)

    def fork(self, session_id: str, at_turn: int, message: UserMessage | None) -> str:
        return history.fork(self, session_id, at_turn, message)

    def delete(self, session_id: str, *, remove_worktree: bool = False) -> None:
        """Remove the session (rows, pending items, the connection's view of it). Refused with
        `session_busy` while a turn runs here or another live process drives it. Its worktree, if it
        has one, stays (listed without a session) unless `remove_worktree` (folder and branch)."""
        worktree = self.manager.store.worktree_of(session_id)
        try:
            self.manager.delete_session(session_id)
        except SessionRunningError as exc:
            raise session_busy_because(
                session_id,
                "a turn is running in this dsh-daemon; cancel it or wait, then delete",
                reason="running",
            ) from exc
        except SessionBusyError as exc:
            raise session_busy_because(
                session_id,
                f"it is driven by another dsh-daemon (pid {exc.pid} on {exc.host}); it can be deleted "
                "once that process lets it go",
                reason="leased",
                holderPid=exc.pid,
                holderHost=exc.host,
            ) from exc
        self.read_only.pop(session_id, None)
        self.follower.forget(session_id)
        hosted = self.sessions.get(session_id)
        if hosted is not None:
            self._cleanup(hosted, deleted=True)
        else:
            self.front_end.session_closed(session_id, deleted=True)
        shutil.rmtree(self.processes_dir(session_id), ignore_errors=True)  # its processes' output
        self._in_worktree.discard(session_id)
        if worktree is not None and (remove_worktree or not Path(worktree.path).exists()):
            if remove_worktree:
                remove_worktree_folder(worktree, delete_branch=True)
            self.manager.store.forget_worktree(worktree.path)

    async def close_session(self, session_id: str) -> None:
        """Stop driving the session here: a running turn ends aborted, queued input stays parked."""
        hosted = self.sessions.pop(session_id, None)
        if hosted is None:
            return
        self._unfollow(hosted)
        hosted.stop_processes_now("session-close")  # recorded while the log is still ours
        try:
            await self.manager.close_session(session_id)
        finally:
            self._cleanup(hosted, deleted=False)

    def _unfollow(self, hosted: HostedSession) -> None:
        if hosted._unfollow is not None:
            hosted._unfollow()
        hosted._unfollow, hosted.followed = None, False

    def _cleanup(self, hosted: HostedSession, *, deleted: bool) -> None:
        """The one way out of the table: the connection stops following, the MCP servers stop (their
        process trees killed, in the background), the front end forgets what it kept."""
        session_id = hosted.session_id
        if self.sessions.get(session_id) is hosted:
            del self.sessions[session_id]
        self._unfollow(hosted)
        self._close_tools(hosted.tools)
        self.front_end.session_closed(session_id, deleted=deleted)

    def _close_tools(self, tools: SessionTools | None) -> None:
        if tools is not None:
            tools.close_in_background(self._tasks)

    async def aclose(self) -> None:
        """D6: running turns end aborted{shutdown}; queues stay parked for the next attach. MCP servers
        end with their sessions, after the turns' tool calls; then the provider's pooled connections."""
        await self.follower.close()
        await self.handover.close()
        for session_id in list(self.read_only):
            try:
                self._give_back(session_id)
            except Exception:
                logger.exception("could not give session %s back", session_id)
        for hosted in list(self.sessions.values()):
            hosted.stop_processes_now("shutdown")  # recorded before the store closes
        await self.manager.close()
        for hosted in list(self.sessions.values()):
            self._cleanup(hosted, deleted=False)
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.provider.aclose()


def capped_budget(budget: TurnBudget | None, max_steps: int | None) -> TurnBudget | None:
    """The configured turn budget, its steps capped at `max_steps` (a subagent's) when given."""
    if max_steps is None:
        return budget
    if budget is None:
        return TurnBudget(steps=max_steps)
    steps = max_steps if budget.steps is None else min(budget.steps, max_steps)
    return dataclasses.replace(budget, steps=steps)


def _logged_message_ids(events: Sequence[Event]) -> set[str]:
    """The ids of every message the log's inbox splices inserted."""
    ids: set[str] = set()
    for event in events:
        if event.type == INBOX_SPLICED:
            for item in event.data.get("inserted", ()):  # each a message (its id at the top)
                if isinstance(item.get("id"), str):
                    ids.add(item["id"])
    return ids


def _ended_for_handover(hosted: HostedSession) -> bool:
    """Whether the session's last turn ended aborted to hand it over (its queue then waits here)."""
    event = last_of(hosted.agent.log.events, TURN_END)
    reason = event.data.get("reason") if event is not None else None
    return isinstance(reason, dict) and reason.get("kind") == "aborted" and reason.get("cause") == "handover"
