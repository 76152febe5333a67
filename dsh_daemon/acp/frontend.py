"""The ACP front end: the port the session host wires sessions through (`host/port.py`), and what
this connection keeps per session it drives: the client's files, how the session's events become
`session/update`s, and which `session/prompt` each turn answers.

Every operation that queues input is synchronous (committed before it returns), so requests take
effect in the order they arrive.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsh_daemon.acp.context import PromptParts
from dsh_daemon.acp.files import ClientFiles, FsCapabilities
from dsh_daemon.acp.permissions import AcpApprover
from dsh_daemon.acp.prompts import PromptBook
from dsh_daemon.acp.rpc import Connection
from dsh_daemon.acp.sessionstate import config_options, mode_state
from dsh_daemon.acp.terminals import AcpEditor, ClientTerminals
from dsh_daemon.acp.transport import RequestId
from dsh_daemon.acp.updates import Translator, iso_time
from dsh_daemon.host.early import EarlySessions
from dsh_daemon.host.errors import WireError
from dsh_daemon.host.hosted import HostedSession
from dsh_daemon.host.options import DaemonOptions, ServerSource
from dsh_daemon.host.port import (
    Approver,
    DocumentSource,
    EditApplier,
    EditorServices,
    FrontEndHooks,
    NoEditor,
    Workspace,
)
from dsh_daemon.host.sessions import HOLDER_CHECK_S, DrivenElsewhere, SessionHost
from dsh_daemon.host.worktree_sessions import stored_worktree
from dsh_daemon.model.events import SESSION_LEASE, SESSION_MODE, SESSION_SETTINGS, Event
from dsh_daemon.model.inbox import PRESETS, Target
from dsh_daemon.model.usage import UsageTotals

logger = logging.getLogger(__name__)


@dataclass
class AcpSession:
    """What this connection keeps for one session it drives."""

    files: ClientFiles  # the session's document source, edit applier and buffer prefetch
    translator: Translator  # its events as `session/update`s
    book: PromptBook  # which turn answers which `session/prompt`


@dataclass
class AcpView:
    """What this connection keeps for a session it loaded while another process drives it: the
    session's events as updates, and the prompts sent meanwhile (kept durably in the store, run here
    once the holder lets go). Becomes the driven session's state when the lease comes here."""

    translator: Translator
    book: PromptBook
    workspace: Workspace
    deferred: list[str]  # message ids of the prompts kept for the holder to let go
    watch: asyncio.Task[None] | None = None  # while prompts are kept: is the holder still answering?
    replaying: bool = False  # the load's replay of the log is being delivered (not followed live)

    def close(self) -> None:
        """No longer followed here: prompts still waiting are answered `cancelled`."""
        if self.watch is not None:
            self.watch.cancel()
        self.book.close()


class AcpFrontEnd:
    def __init__(
        self,
        connection: Connection,
        state_dir: Path,
        options: DaemonOptions,
        fs: FsCapabilities,
        *,
        terminal: bool = False,
        booleans: bool = False,
        early: EarlySessions | None = None,
    ) -> None:
        """`early`: sessions created before this front end (`Daemon.session_new`), wired by the
        caller with `host.adopt_early` once this is built."""
        self.connection = connection
        self.fs = fs
        self.terminal = terminal  # the client offers `terminal/*`
        self.booleans = booleans  # the client takes boolean config options (sessionstate.takes_booleans)
        self.driven: dict[str, AcpSession] = {}
        self.viewing: dict[str, AcpView] = {}  # sessions loaded while another process drives them
        # Per session, the ids of the messages this connection sent: another's prompt entering the
        # conversation is shown as a user message (Translator.live), so its answer starts a reply
        # of its own instead of being glued onto the last one shown.
        self.sent_here: dict[str, set[str]] = {}
        self.host = SessionHost(state_dir, options, self, early=early)

    # ---- the front-end port (host/port.py) ---------------------------------------------------------------

    def document_source(self, session_id: str, workspace: Workspace) -> DocumentSource:
        # The first the port hears of a session being wired: what this connection keeps for it starts
        # here (or goes on from its read-only view). One ClientFiles is its document source and its
        # edit applier. A later call (a rewind asks for the documents again) gets the same one: a new
        # state would drop the translator's (the calls announced, the plan) and the waiting prompts.
        driven = self.driven.get(session_id)
        if driven is not None:
            return driven.files
        view = self.viewing.pop(session_id, None)
        if view is not None and view.watch is not None:
            view.watch.cancel()  # driven here now: its kept prompts run here
        translator = self._translator(session_id, workspace) if view is None else view.translator
        files = ClientFiles(self.connection, session_id, workspace, self.fs)
        self.driven[session_id] = AcpSession(files, translator, PromptBook() if view is None else view.book)
        return files

    def _translator(self, session_id: str, workspace: Workspace) -> Translator:
        options = self.host.options.provider
        subagents = self.host.subagents_usage(session_id)  # a session loaded: what its children cost
        return Translator(
            lambda update: self.connection.notify(
                "session/update", {"sessionId": session_id, "update": update}
            ),
            send_live=lambda update: self.connection.send_update_mergeable(session_id, update),
            cwd=str(workspace.cwd),
            context_window=options.context_window(options.model),
            title=lambda: self._title(session_id),
            config_options=lambda mode: self.config_options(session_id, mode),
            sent_here=lambda message_id: message_id in self.sent_here.get(session_id, ()),
            subagent_usage=UsageTotals() if subagents is None else UsageTotals.from_json(subagents),
        )

    def edit_applier(self, session_id: str, workspace: Workspace) -> EditApplier:
        return self.driven[session_id].files

    def editor_services(self, session_id: str, workspace: Workspace) -> EditorServices:
        # ACP has no method for diagnostics, language features or unsaved buffers: none are offered.
        # Its terminals are, when the client advertises them: `run_command` runs there (issue 24.6).
        if not self.terminal:
            return NoEditor()
        translator = self.driven[session_id].translator
        return AcpEditor(ClientTerminals(self.connection, session_id, translator))

    def new_approver(self, session_id: str) -> Approver:
        translator = self.driven[session_id].translator
        timeout = lambda: self.host.options.permission_timeout_s  # noqa: E731  (read at each request)
        return AcpApprover(self.connection, session_id, translator, timeout)

    def session_hooks(self, session_id: str, workspace: Workspace) -> FrontEndHooks:
        # The editor's buffers are fetched before the permission policy, so a preview shows their text.
        return FrontEndHooks(pre_execute=[self.driven[session_id].files.prefetch])

    def report_mcp_status(self, session_id: str, data: Mapping[str, Any]) -> None:
        self.connection.notify("_dsh/mcp/status", {"sessionId": session_id, **data})

    def observe(self, session_id: str, event: Event) -> None:
        state = self.driven.get(session_id)
        if state is not None:
            state.book.on_event(event)

    def deliver(self, session_id: str, event: Event, *, replayed: bool) -> None:
        state: AcpSession | AcpView | None = self.driven.get(session_id) or self.viewing.get(session_id)
        if state is None and session_id in self.host.read_only:
            state = self._view_after_handover(session_id)
        if state is None:
            return
        if event.type == SESSION_LEASE:
            self._lease_changed(session_id, state, event)
            return
        if replayed:
            state.translator.replay(event)
            if (
                isinstance(state, AcpView)
                and not state.replaying
                and event.type in (SESSION_MODE, SESSION_SETTINGS)
            ):
                # The driving process changed the session's own settings: followed live, they move
                # this client's pickers too (a load's replay leaves that to its answer's options).
                state.translator.options_changed()
        else:
            state.translator.live(event)

    def session_closed(self, session_id: str, *, deleted: bool) -> None:
        state = self.driven.pop(session_id, None)
        if state is not None:
            state.book.close()  # every prompt still waiting is answered `cancelled`
        if deleted:
            view = self.viewing.pop(session_id, None)
            if view is not None:
                view.close()

    # ---- following a session another process drives ------------------------------------------------

    def _view(self, session_id: str, workspace: Workspace) -> AcpView:
        view = self.viewing.get(session_id)
        if view is None:
            view = AcpView(self._translator(session_id, workspace), PromptBook(), workspace, [])
            self.viewing[session_id] = view
        return view

    def _view_after_handover(self, session_id: str) -> AcpView:
        """This process handed the session over to another (it asked): the connection follows on."""
        workspace = self.host.viewer_workspace(session_id)
        return self._view(session_id, workspace)

    def _lease_changed(self, session_id: str, state: AcpSession | AcpView, event: Event) -> None:
        """Who drives the session, said in words in the chat (ACP has no such update)."""
        holder = event.data.get("holder")
        if event.data.get("readOnly") and isinstance(holder, Mapping):
            state.translator.notice(
                f"This chat is now driven by another dsh-daemon (process {holder.get('pid')}); "
                "you see it live here, and a prompt you send runs here once that process lets go."
            )
        # Whoever drives it now, the session's own choices are the durable ones: show them (a
        # picker left on a choice another process changed would lie).
        state.translator.options_changed()

    def _title(self, session_id: str) -> str | None:
        try:
            return self.host.info(session_id).title
        except Exception:
            return None

    # ---- sessions ------------------------------------------------------------------------------------

    def session(self, session_id: str) -> HostedSession:
        """A session this connection opened (`session/new`, `load` or `resume`)."""
        return self.host.followed(session_id)

    def new(self, cwd: str, extra_roots: Sequence[str], mcp_servers: ServerSource | None = None) -> str:
        return self.host.create(cwd, extra_roots=extra_roots, mcp_servers=mcp_servers).session_id

    def load(
        self,
        session_id: str,
        cwd: str | None,
        extra_roots: Sequence[str],
        mcp_servers: ServerSource | None = None,
    ) -> None:
        """Replay the durable log as updates, then continue live: replay and subscription happen in one
        synchronous stretch, so no event falls between them and none is sent twice."""
        try:
            hosted = self.host.session(session_id, cwd=cwd, extra_roots=extra_roots, mcp_servers=mcp_servers)
        except DrivenElsewhere as busy:
            self._load_driven_elsewhere(session_id, cwd, extra_roots, mcp_servers, busy, replay=True)
            return
        self.host.follow(hosted)
        self.driven[session_id].translator.title_changed()

    def _load_driven_elsewhere(
        self,
        session_id: str,
        cwd: str | None,
        extra_roots: Sequence[str],
        mcp_servers: ServerSource | None,
        busy: DrivenElsewhere,
        *,
        replay: bool,
    ) -> None:
        """Issue 24.1: the session is open in another process. Its history is replayed from the store,
        its live events followed, and the holder is asked to let go: an idle holder hands it over at
        once (the connection drives it within a poll); a running one when its turn ends (a prompt sent
        meanwhile is kept durably and runs here then)."""
        host = self.host
        host.open_args[session_id] = (cwd, extra_roots, mcp_servers)
        view = self._view(session_id, host.viewer_workspace(session_id, cwd, extra_roots))
        view.replaying = True
        try:
            attached = host.attach(session_id, -1, replay=replay)
        finally:
            view.replaying = False
        view.translator.title_changed()
        if attached.holder is None:
            return  # let go meanwhile: driven here already
        try:
            host.check_holder_answers(session_id)
        except WireError:
            view.translator.notice(
                f"This chat is held by process {busy.pid} on this host, which has not answered as a "
                "dsh-daemon for a while: it cannot hand the chat over, so a prompt sent here is refused "
                "until that process ends (you see the chat as it is)."
            )
        else:
            if attached.status == "running":
                view.translator.notice(
                    f"This chat is open in another dsh-daemon (process {busy.pid}) that is running a turn: "
                    "you see it live here. A prompt you send now is kept and runs here once it has "
                    "finished (that turn and the prompts queued there)."
                )
        host.take_over(session_id)  # (should a stopped holder come back, it hands the chat over)

    def resume(
        self,
        session_id: str,
        cwd: str | None,
        extra_roots: Sequence[str],
        mcp_servers: ServerSource | None = None,
    ) -> None:
        try:
            hosted = self.host.session(session_id, cwd=cwd, extra_roots=extra_roots, mcp_servers=mcp_servers)
        except DrivenElsewhere as busy:
            self._load_driven_elsewhere(session_id, cwd, extra_roots, mcp_servers, busy, replay=False)
            return
        self.host.follow(hosted, replay=False)

    async def close_session(self, session_id: str) -> None:
        """Stop driving the session here: a running turn ends aborted, queued input stays parked."""
        view = self.viewing.pop(session_id, None)
        if view is not None:
            view.close()  # its kept prompts stay in the store: whoever drives the session runs them
            self.host.detach(session_id)
            return
        self.session(session_id)
        await self.host.close_session(session_id)

    def list(self, cwd: str | None) -> list[dict[str, Any]]:
        """The sessions to resume. One nobody has prompted yet (no prompt, nothing queued) is left out,
        also when this connection has it open: clients create a session per new chat, and a list
        filled with empty ones buries the real work (ACP clients show it as their history; a
        CodeCompanion chat asks for it from its own new, empty session, which is no work to resume)."""
        out = []
        for info in self.host.list_sessions(cwd).sessions:
            if info.last_prompt is None and not info.pending:
                continue
            row: dict[str, Any] = {
                "sessionId": info.session_id,
                "cwd": info.cwd or "",
                "updatedAt": iso_time(info.updated_at),
                "_meta": {"dsh": {"status": info.status, "pending": info.pending}},
            }
            if info.title:
                row["title"] = info.title
            if info.parent_id is not None:  # a subagent's session: a client may nest or hide it
                row["_meta"]["dsh"]["parentId"] = info.parent_id
            worktree = stored_worktree(self.host, info.session_id)
            if worktree is not None:  # a session in its own worktree (protocol.md §20)
                row["_meta"]["dsh"]["worktree"] = worktree
            out.append(row)
        return out

    def config_options(self, session_id: str, mode: str | None = None) -> builtins.list[dict[str, Any]]:
        """ACP `SessionConfigOption`s: the mode, the model picker, thinking on/off, the reasoning
        effort, the sandbox (`mode`: the one just set, when the caller knows it)."""
        host = self.host
        models, current = host.model_settings(session_id)
        chosen = mode if mode is not None else host.mode(session_id)
        _choice, sandbox = host.sandbox_setting(session_id)
        configured = host.options.tools.sandbox.mode
        return config_options(models, current, chosen, booleans=self.booleans, sandbox=(sandbox, configured))

    def modes(self, session_id: str) -> dict[str, Any]:
        """ACP `SessionModeState`: the session's mode and the three there are."""
        return mode_state(self.host.mode(session_id))

    def workspace(self, session_id: str) -> Workspace:
        view = self.viewing.get(session_id)
        if view is not None and session_id not in self.driven:
            return view.workspace
        return self.session(session_id).workspace

    # ---- input ---------------------------------------------------------------------------------------

    def _mark_sent(self, session_id: str, parts: PromptParts) -> None:
        sent = self.sent_here.setdefault(session_id, set())
        sent.add(parts.message.id)
        sent.update(a.id for a in parts.attachments)

    def send(self, session_id: str, parts: PromptParts, preset: str) -> str:
        """`parts` sent the way `preset` (followup, steer, inject) sends."""
        target, wakeup = PRESETS[preset]
        self.host.refuse_a_childs_changes(session_id)  # a subagent's session is its parent's to drive
        self._mark_sent(session_id, parts)
        return self.session(session_id).send(parts.message, target, wakeup, parts.attachments, preset)

    def prompt(self, session_id: str, request_id: RequestId, parts: PromptParts) -> Any:
        """Queue a followup; the future resolves with the answer of the turn that claims it. A session
        another process drives keeps the prompt durably until that process lets go (then it runs here;
        or in whichever process drives the session next, should this one end first)."""
        self.host.refuse_a_childs_changes(session_id)  # a subagent's session is its parent's to drive
        view = self.viewing.get(session_id)
        if view is not None and session_id not in self.driven:
            self.host.check_holder_answers(session_id)  # no handover will come from a silent holder
            future = view.book.add(request_id, parts.message.id)
            self._mark_sent(session_id, parts)
            try:
                self.host.defer_send(session_id, parts.message, parts.attachments)
            except BaseException:
                view.book.drop(parts.message.id)
                raise
            view.deferred.append(parts.message.id)
            logger.info("session %s: prompt %s kept until its holder lets go", session_id, request_id)
            self.host.take_over(session_id)
            if view.watch is None or view.watch.done():
                view.watch = asyncio.get_running_loop().create_task(self._watch_holder(session_id, view))
            return future
        self.session(session_id)
        book = self.driven[session_id].book
        future = book.add(request_id, parts.message.id)
        try:
            self.send(session_id, parts, "followup")
        except BaseException:
            book.drop(parts.message.id)
            raise
        return future

    async def _watch_holder(self, session_id: str, view: AcpView) -> None:
        """While prompts are kept for a holder to let go: should it stop heartbeating (stopped,
        hung, gone with its pid taken by another program), they are withdrawn and answered
        `session_busy` naming it, rather than kept for a handover that will not come."""
        while view.deferred and self.viewing.get(session_id) is view and session_id not in self.driven:
            await asyncio.sleep(HOLDER_CHECK_S)
            if not view.deferred or self.viewing.get(session_id) is not view or session_id in self.driven:
                return
            try:
                self.host.check_holder_answers(session_id)
            except WireError as silent:
                for message_id in view.deferred:
                    self.host.drop_deferred_send(session_id, message_id)
                view.deferred.clear()
                view.book.fail(silent)
                logger.warning("session %s: kept prompts withdrawn: %s", session_id, silent.message)
                return
            except Exception:  # the store could not be read (a deleted session): the next poll says so
                logger.exception("session %s: checking its holder failed", session_id)

    def revoke(self, request_id: RequestId) -> bool:
        """`$/cancel_request` for a prompt: removed from the queue (answered -32800) if still pending."""
        for session_id, state in self.driven.items():
            prompt = state.book.find(request_id)
            hosted = self.host.sessions.get(session_id)
            if prompt is None or hosted is None:
                continue
            if prompt.turn is not None:
                return False  # already running: only session/cancel stops it
            prompt.revoked = True
            if not hosted.remove(prompt.message_id):
                prompt.revoked = False
                return False
            logger.info("session %s: queued prompt %s removed by $/cancel_request", session_id, request_id)
            return True
        return False

    def cancel(self, session_id: str) -> None:
        """Abort the running turn, keep the queue, then run it once the aborted turn has ended. On a
        session another process drives: the prompts kept for it here are withdrawn (`cancelled`)."""
        view = self.viewing.get(session_id)
        if view is not None and session_id not in self.driven:
            for message_id in view.deferred:
                self.host.drop_deferred_send(session_id, message_id)
            view.deferred.clear()
            view.book.close()
            return
        self.session(session_id).cancel_then_wake()

    def inbox_replace(self, session_id: str, message_id: str, parts: PromptParts) -> None:
        hosted = self.session(session_id)
        book = self.driven[session_id].book
        book.rebind(message_id, parts.message.id)
        self._mark_sent(session_id, parts)
        try:
            hosted.replace(message_id, parts.message, parts.attachments or None)
        except BaseException:
            book.rebind(parts.message.id, message_id)
            raise

    def inbox_move(self, session_id: str, message_id: str, target: Target, index: int) -> None:
        hosted = self.session(session_id)
        with self.driven[session_id].book.moving(message_id):
            hosted.move(message_id, target, index)

    async def close(self) -> None:
        """D6: running turns end aborted{shutdown}; queued input stays parked for the next load. A
        prompt kept for another process to let go is answered `cancelled` here (it stays in the
        store, for whichever process drives the session next): the shutdown waits for every answer,
        and the holder may not let go for as long as it likes."""
        for view in self.viewing.values():
            view.close()
        await self.host.aclose()
