"""The server's session hub: opens sessions, wires each one (tools, hooks, approver, progress) and
forwards its events to this connection. Everything that touches the agent core lives here, so the
wire module (app.py) answers `initialize` without importing any of it (cold start).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.workspace import TextDocument

from dsh_daemon.agent.hooks import Hooks
from dsh_daemon.agent.inbox import (
    InboxItem,
    apply_splice,
    item_wire,
)
from dsh_daemon.agent.loop import Agent, AgentOptions
from dsh_daemon.agent.system_prompt import PromptConfig
from dsh_daemon.agent.tools import Approver
from dsh_daemon.host import errors
from dsh_daemon.host.manager import MAX_TITLE_CHARS, SessionManager, SessionRunningError, collapse_title
from dsh_daemon.host.options import DaemonOptions, parse_options
from dsh_daemon.host.wiring import SessionTools, session_hooks, wire_session_tools
from dsh_daemon.mcp.client import McpTools
from dsh_daemon.mcp.config import ServerSource
from dsh_daemon.model.events import INBOX_SPLICED, STATUS, Event
from dsh_daemon.model.inbox import PRESETS
from dsh_daemon.model.messages import UserMessage
from dsh_daemon.model.provider import Provider
from dsh_daemon.server.context import (
    AmbientState,
    ContextDocument,
    ContextSource,
    ambient_problem,
    build_context_message,
    snapshot_hook,
)
from dsh_daemon.server.editor_files import EditorDocuments, WorkspaceEditApplier
from dsh_daemon.server.eventwire import send_event
from dsh_daemon.server.follow import ReadOnlyFollower
from dsh_daemon.server.params import ContextSpec
from dsh_daemon.server.permissions import ClientApprover
from dsh_daemon.server.progress import TurnProgress
from dsh_daemon.session.lease import SessionBusyError
from dsh_daemon.session.store import UnknownSessionError
from dsh_daemon.session.transcript import transcript_page
from dsh_daemon.tools.config import ToolConfig
from dsh_daemon.tools.documents import DocumentSource
from dsh_daemon.tools.edits import DiskEditApplier, EditApplier
from dsh_daemon.tools.factory import ToolKit
from dsh_daemon.tools.policy import PermissionPolicy
from dsh_daemon.tools.workspace import Workspace as ToolWorkspace

logger = logging.getLogger(__name__)

AMBIENT_KEYS = ("activeUri", "selection", "visibleRange", "diagnostics")


@dataclass
class HubConfig:
    state_dir: Path
    env: Mapping[str, str]
    flags: Mapping[str, Any]
    init_options: Mapping[str, Any]
    workspace_roots: list[str]
    client_capabilities: types.ClientCapabilities | None
    options: DaemonOptions | None = None  # parsed at initialize; parsed here when not given

    def __post_init__(self) -> None:
        if self.options is None:
            self.options = parse_options(
                self.state_dir, self.env, self.flags, self.init_options, what="initializationOptions"
            )

    @property
    def parsed(self) -> DaemonOptions:
        assert self.options is not None
        return self.options

    @property
    def permission_timeout_s(self) -> float:
        return self.parsed.permission_timeout_s

    @property
    def tool_config(self) -> ToolConfig:
        return self.parsed.tools


@dataclass
class SessionView:
    """This connection's state for one session."""

    agent: Agent
    subscribed: bool = False
    unsubscribe: Callable[[], None] | None = None
    detached: bool = False  # the client detached while a turn ran: the lease goes when it is idle


class SessionHub:
    def __init__(self, server: LanguageServer, config: HubConfig) -> None:
        self.server = server
        self.config = config
        self.views: dict[str, SessionView] = {}
        self.ambient_default = AmbientState()
        self.ambient: dict[str, AmbientState] = {}
        self.kits: dict[str, ToolKit] = {}
        self.mcp: dict[str, McpTools] = {}  # each session's MCP servers (stopped with the hub)
        self._mcp_closing: set[asyncio.Task[None]] = set()
        self.workspaces: dict[str, ToolWorkspace] = {}  # each session's tool roots and cwd
        # sessions this connection attached while another process drove them: last seq delivered
        self.read_only: dict[str, int] = {}
        self.follower = ReadOnlyFollower(self)  # tails the store for them
        provider, options = self._provider()
        self.prompt_config = self._prompt_config()
        self.manager = SessionManager(
            config.state_dir,
            provider=provider,
            options=options,
            tools=lambda sid: self._kit(sid).registry,
            hooks=self._hooks_for,
            approver=self.new_approver,
            durable_auto_title=True,  # clients see a session's title change live (`session/title`)
        )
        self.manager.start_heartbeat()

    # ---- wiring --------------------------------------------------------------------------------------

    def _provider(self) -> tuple[Provider, Callable[[], AgentOptions]]:
        from dsh_daemon.llm.deepseek import make_provider

        # The model is read at each request, so a configuration change applies to the next one.
        return make_provider(self.config.parsed.provider), lambda: AgentOptions(
            model=self.config.parsed.provider.model
        )

    def apply_options(self, options: DaemonOptions) -> None:
        """`workspace/didChangeConfiguration`: provider settings, tool permissions and the permission
        timeout take effect from the next model request or tool call; a request or call under way
        finishes on the old ones. (Tool limits, shell and the system prompt apply to sessions opened
        from now on.)"""
        self.config.options = options
        reconfigure = getattr(self.manager.provider, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(options.provider)
        for kit in self.kits.values():
            for hook in kit.hooks.pre_execute:
                if isinstance(hook, PermissionPolicy):
                    hook.modes = dict(options.tools.permissions)
        for view in self.views.values():
            view.agent.options = dataclasses.replace(view.agent.options, model=options.provider.model)
            approver = view.agent.approver
            if isinstance(approver, ClientApprover):
                approver.timeout_s = options.permission_timeout_s

    def _kit(
        self, session_id: str, cwd: str | None = None, mcp_servers: ServerSource | None = None
    ) -> ToolKit:
        """The session's tools (`cwd`: of a session not stored yet; else read from the store), its MCP
        servers' included (the configured ones, and `mcp_servers` given at `dsh/session/new`)."""
        kit = self.kits.get(session_id)
        if kit is None:
            if cwd is None:
                cwd = self.manager.store.session_info(session_id).cwd
            workspace = self._tool_workspace(cwd)
            tools = wire_session_tools(self, session_id, workspace, self.config.parsed, mcp_servers)
            if tools.mcp is not None:
                self.mcp[session_id] = tools.mcp
            kit = self.kits[session_id] = tools.kit
            self.workspaces[session_id] = workspace
        return kit

    # ---- the front-end port (host/port.py) ---------------------------------------------------------------

    def document_source(self, session_id: str, workspace: ToolWorkspace) -> DocumentSource:
        return EditorDocuments(self.server)

    def edit_applier(self, session_id: str, workspace: ToolWorkspace) -> EditApplier:
        documents = EditorDocuments(self.server)
        disk = DiskEditApplier(workspace)
        return WorkspaceEditApplier(self.server, documents, disk, lambda: self.config.client_capabilities)

    def new_approver(self, session_id: str) -> Approver:
        timeout = self.config.permission_timeout_s
        return ClientApprover(self.server.protocol, session_id, timeout, self._announcer(session_id))

    def report_mcp_status(self, session_id: str, data: Mapping[str, Any]) -> None:
        self._announcer(session_id)("mcp/status", dict(data))

    def _close_mcp(self, session_id: str) -> None:
        """Stop the session's MCP servers (their process trees killed), in the background."""
        mcp = self.mcp.pop(session_id, None)
        if mcp is not None:
            task = asyncio.get_running_loop().create_task(mcp.aclose())
            self._mcp_closing.add(task)
            task.add_done_callback(self._mcp_closing.discard)

    def _tool_workspace(self, cwd: str | None) -> ToolWorkspace:
        """Roots: the editor's workspace folders plus the session cwd (when it is a directory)."""
        roots = [r for r in self.config.workspace_roots if Path(r).is_dir()]
        if cwd is not None and not Path(cwd).is_dir():
            cwd = None
        if cwd is not None and not any(Path(cwd).resolve().is_relative_to(Path(r).resolve()) for r in roots):
            roots.append(cwd)
        if not roots:
            roots = [os.getcwd()]
        return ToolWorkspace(roots, cwd=cwd)

    def _hooks_for(self, session_id: str) -> Hooks:
        kit = self._kit(session_id)
        tools = SessionTools(kit, self.workspaces[session_id], self.mcp.get(session_id))
        snapshot = snapshot_hook(self.ambient_for(session_id), lambda: self._context_source(session_id))
        return session_hooks(tools, self.prompt_config, pre_step=[snapshot])

    def _prompt_config(self) -> PromptConfig:
        return self.config.parsed.agent

    def ambient_for(self, session_id: str) -> AmbientState:
        return self.ambient.setdefault(session_id, AmbientState(dict(self.ambient_default.state)))

    def _context_source(self, session_id: str) -> ContextSource:
        """Editor context of a session: synced documents, else files inside its tool roots."""
        self._kit(session_id)
        return ContextSource(self._workspace, self.workspaces[session_id])

    def _workspace(self) -> Any:
        try:
            return self.server.workspace
        except Exception:
            return None

    # ---- sessions ------------------------------------------------------------------------------------

    def agent(self, session_id: str) -> Agent:
        return self.view(session_id).agent

    def view(self, session_id: str) -> SessionView:
        """The session opened for driving by this process (opening it if needed)."""
        view = self.views.get(session_id)
        if view is not None and view.agent.log.lease_lost is None:
            return view
        if view is not None:  # taken over by another process: forget it and ask the store again
            del self.views[session_id]
        # Unknown, driven elsewhere, or unreadable: the StoreError says which (host/manager.py).
        agent = self.manager.open(session_id)
        view = self._adopt(agent)
        delivered = self.read_only.pop(session_id, None)
        if delivered is not None:
            # Attached read-only before; now driven here: continue the stream from where it stopped.
            self._replay(session_id, [e for e in agent.log.events if e.seq is not None and e.seq > delivered])
            self._subscribe(view)
        return view

    def _adopt(self, agent: Agent) -> SessionView:
        view = SessionView(agent)
        self.views[agent.session_id] = view
        caps = self.config.client_capabilities
        if caps and caps.window and caps.window.work_done_progress:
            progress = TurnProgress(
                self.server, agent.session_id, lambda: agent.cancel("user", keep_inbox=True)
            )
            agent.subscribe(progress.on_event)
        return view

    def _subscribe(self, view: SessionView) -> None:
        if view.subscribed:
            return
        session_id = view.agent.session_id
        protocol = self.server.protocol

        def forward(event: Event) -> None:
            payload: dict[str, Any] = {"sessionId": session_id, "type": event.type, "data": event.data}
            if event.seq is not None:
                payload["seq"] = event.seq
            send_event(protocol, payload)

        view.unsubscribe = view.agent.subscribe(forward)
        view.subscribed = True
        view.detached = False

    def notify_event(self, session_id: str, type_: str, data: dict[str, Any]) -> None:
        """A live (seq-less) event of this hub's own, to the connection."""
        send_event(self.server.protocol, {"sessionId": session_id, "type": type_, "data": data})

    def send_stored_events(self, session_id: str, events: list[Event]) -> None:
        self._replay(session_id, events)

    def inbox_json(self, session_id: str) -> dict[str, Any]:
        """`dsh/inbox/list`: from the agent when driven here, else (read-only) from the stored splices."""
        try:
            return self.agent(session_id).inbox.to_json()
        except SessionBusyError:
            return self._stored_inbox(session_id)

    def _stored_inbox(self, session_id: str) -> dict[str, Any]:
        """The pending items as the stored splices leave them (a session another process drives)."""
        lists: dict[str, list[InboxItem]] = {"next-turn": [], "next-step": []}
        for event in self.manager.store.load_events_of_type(session_id, INBOX_SPLICED):
            apply_splice(lists, event.data, event.seq, event.time)
        return {
            "nextTurn": [item_wire(item, "next-turn") for item in lists["next-turn"]],
            "nextStep": [item_wire(item, "next-step") for item in lists["next-step"]],
        }

    def detach(self, session_id: str) -> None:
        """Stop sending this session's events here; an idle session driven here is released at once
        (its lease goes, so another window can drive it), a running one when its turn ends."""
        if self.read_only.pop(session_id, None) is not None:
            self.follower.forget(session_id)
            return
        view = self.views.get(session_id)
        if view is None:
            try:  # an unknown session is an error; a known one: nothing to do
                self.manager.info(session_id)
            except UnknownSessionError as exc:
                raise errors.unknown_session(session_id) from exc
            return
        if view.unsubscribe is not None:
            view.unsubscribe()
        view.unsubscribe, view.subscribed, view.detached = None, False, True
        if not self._release_if_idle(session_id):
            unsubscribe: Callable[[], None] | None = None

            def on_status(event: Event) -> None:
                if event.type == STATUS and event.data.get("status") == "idle" and unsubscribe is not None:
                    unsubscribe()
                    # Not from inside the publish: releasing flushes the log.
                    asyncio.get_running_loop().call_soon(self._release_if_idle, session_id)

            unsubscribe = view.agent.subscribe(on_status)

    def _release_if_idle(self, session_id: str) -> bool:
        view = self.views.get(session_id)
        if view is None or not view.detached:
            return True  # re-attached meanwhile: it stays
        if not self.manager.release_idle_session(session_id):
            return False
        del self.views[session_id]
        # Its tools go with it (MCP servers stop); a later open builds them again.
        self._close_mcp(session_id)
        self.kits.pop(session_id, None)
        self.workspaces.pop(session_id, None)
        return True

    def _replay(self, session_id: str, events: list[Event]) -> None:
        protocol = self.server.protocol
        for event in events:
            payload = {"sessionId": session_id, "seq": event.seq, "type": event.type, "data": event.data}
            send_event(protocol, payload)

    def new_session(self, cwd: str | None, title: str | None, mcp_servers: ServerSource | None = None) -> str:
        """All or nothing: what can fail is built before the session row exists, and a failure while
        creating it removes the row and the lease again (no half-made session for a later attach)."""
        session_id = str(uuid.uuid4())
        try:
            self._kit(session_id, cwd, mcp_servers)
            agent = self.manager.create(cwd=cwd, title=title, session_id=session_id)
        except BaseException:
            self._discard_new_session(session_id)
            raise
        view = self._adopt(agent)
        # What creation logged (a given title's `session/title`) goes out first: seqs start at 0.
        self._replay(session_id, list(agent.log.events))
        self._subscribe(view)
        return session_id

    def _discard_new_session(self, session_id: str) -> None:
        self.kits.pop(session_id, None)
        self._close_mcp(session_id)
        self.workspaces.pop(session_id, None)
        self.manager.agents.pop(session_id, None)
        store = self.manager.store
        try:
            if not store.has_session(session_id):
                return
            # A session that never answered its creating request has no history: drop it whole.
            store.delete_session(session_id, holder=self.manager.leases.holder)
        except Exception:
            logger.exception("could not remove the half-created session %s", session_id)

    def list_sessions(
        self, cwd: str | None, limit: int | None = None, before: int | None = None
    ) -> dict[str, Any]:
        """`{sessions, hasMore?}`: most recently updated first; without `limit`, every session;
        `hasMore` when paging (`limit` or `before` given)."""
        page = self.manager.store.list_page(cwd, limit=limit, before=before)
        out = []
        for info in page.sessions:
            row = info.to_json()
            row.pop("lastSeq", None)
            out.append(row)
        result: dict[str, Any] = {"sessions": out}
        if limit is not None or before is not None:
            result["hasMore"] = page.has_more
        return result

    def transcript(self, session_id: str, before_turn: int | None, limit: int) -> dict[str, Any]:
        """A page of rendered turns, from memory when this process drives the session, else from the
        store (read-only: a session another process drives, or one nobody has open)."""
        view = self.views.get(session_id)
        if view is not None and view.agent.log.lease_lost is None:
            events = view.agent.log.events
            return transcript_page(reversed(events), len(events) - 1, before_turn, limit).to_json()
        store = self.manager.store
        try:
            last_seq = store.session_info(session_id).last_seq
        except UnknownSessionError as exc:
            raise errors.unknown_session(session_id) from exc
        up_to = last_seq
        if before_turn is not None:  # a page deep in history: start reading at that turn, not at the end
            start = store.turn_start_seq(session_id, before_turn)
            up_to = last_seq if start is None else start - 1
        newest_first = store.iter_events_backward(session_id, up_to)
        try:
            return transcript_page(newest_first, last_seq, before_turn, limit).to_json()
        finally:
            newest_first.close()

    def rename_durably(self, session_id: str, title: str) -> None:
        """A new title (whitespace collapsed, 1–200 characters): a durable `session/title` unless it is
        the title already. Driving the session is required (another process's: `session_busy`)."""
        title = collapse_title(title)
        if not 1 <= len(title) <= MAX_TITLE_CHARS:
            raise errors.invalid_params(
                f"dsh/session/rename: 'title' must hold 1 to {MAX_TITLE_CHARS} characters "
                f"after collapsing whitespace (got {len(title)})"
            )
        agent = self.agent(session_id)
        if self.manager.info(session_id).title != title:
            self.manager.write_title(agent, title)

    def delete_durably(self, session_id: str) -> None:
        """Remove the session (rows, pending items, this connection's subscription). Refused with
        `session_busy` while a turn runs here or another live process drives it."""
        try:
            self.manager.delete_session(session_id)
        except UnknownSessionError as exc:
            raise errors.unknown_session(session_id) from exc
        except SessionRunningError as exc:
            raise errors.session_busy_because(
                session_id,
                "a turn is running in this dsh-daemon; cancel it or wait, then delete",
                reason="running",
            ) from exc
        except SessionBusyError as exc:
            raise errors.session_busy_because(
                session_id,
                f"it is driven by another dsh-daemon (pid {exc.pid} on {exc.host}); it can be deleted "
                "once that process lets it go",
                reason="leased",
                holderPid=exc.pid,
                holderHost=exc.host,
            ) from exc
        view = self.views.pop(session_id, None)
        if view is not None and view.unsubscribe is not None:
            view.unsubscribe()
        for table in (self.kits, self.workspaces, self.ambient, self.read_only):
            table.pop(session_id, None)
        self._close_mcp(session_id)
        self.follower.forget(session_id)

    def attach(self, session_id: str, after_seq: int, replay: bool = True) -> dict[str, Any]:
        """Replay (unless not `replay`) the durable events after `after_seq`, then follow live ones;
        without replay the reply's `lastSeq` is where the live stream starts."""
        if not replay and session_id not in self.views and self._nobody_drives(session_id):
            return self._attach_from_store(session_id)
        try:
            view = self.view(session_id)
        except SessionBusyError as exc:
            # Leased by another live process: history only, read from the store.
            if replay:
                events = self.manager.read(session_id, after_seq)
                self._replay(session_id, events)
                self.read_only[session_id] = events[-1].seq if events else after_seq  # type: ignore[assignment]
                info = self.manager.info(session_id)
            else:
                info = self.manager.info(session_id)
                self.read_only[session_id] = info.last_seq
            data = errors.session_busy(session_id, exc.pid, exc.host).wire_data()
            self.follower.follow(session_id, (exc.pid, exc.host))
            return {
                "sessionId": session_id,
                "status": info.status,
                "title": info.title,
                "lastSeq": info.last_seq,
                "inbox": self._stored_inbox(session_id),
                "readOnly": True,
                # {pid, host} as in `session/lease`, beside the session_busy data it used to be alone
                "holder": {"pid": data.get("holderPid"), "host": data.get("holderHost"), **data},
            }
        agent = view.agent
        # Replay from memory (it includes events not yet written behind) and subscribe in the same
        # synchronous stretch: no event can fall between the two, and none is sent twice.
        if replay:
            self._replay(session_id, [e for e in agent.log.events if e.seq is not None and e.seq > after_seq])
        self._subscribe(view)
        result = {
            "sessionId": session_id,
            "status": agent.status,
            "title": self.manager.info(session_id).title,
            "lastSeq": agent.log.next_seq - 1,
            "inbox": agent.inbox.to_json(),
            "permissionRequests": self.approver(session_id).open_requests(),
        }
        mcp = self.mcp.get(session_id)
        if mcp is not None:  # the `mcp/status` a client attaching now has missed
            result["mcpServers"] = mcp.status()
        return result

    def _nobody_drives(self, session_id: str) -> bool:
        lease = self.manager.store.read_lease(session_id)
        return lease is None or not self.manager.leases.other_holder_lives(lease)

    def _attach_from_store(self, session_id: str) -> dict[str, Any]:
        """`replay: "none"` on a session nobody drives: answered from the store alone (its row and its
        inbox splices), so reattaching a long session costs no full load. The session is opened for
        driving right after, by the follower or by the first request that needs it, and the events
        from `lastSeq` on reach this connection as they would have: no gap, no duplicate."""
        info = self.manager.info(session_id)
        self.read_only[session_id] = info.last_seq
        self.follower.follow(session_id, None, announce_takeover=False)
        return {
            "sessionId": session_id,
            "status": info.status,
            "title": info.title,
            "lastSeq": info.last_seq,
            "inbox": self._stored_inbox(session_id),
            "permissionRequests": [],  # nothing is open: nobody drives the session
        }

    # ---- permissions ---------------------------------------------------------------------------------

    def _announcer(self, session_id: str) -> Callable[[str, dict[str, Any]], None]:
        """Live permission events for the session, sent only while this connection follows it."""

        def announce(type_: str, data: dict[str, Any]) -> None:
            view = self.views.get(session_id)
            if view is not None and view.subscribed:
                self.notify_event(session_id, type_, data)

        return announce

    def approver(self, session_id: str) -> ClientApprover:
        approver = self.agent(session_id).approver
        if not isinstance(approver, ClientApprover):  # every session this hub opens gets one
            raise errors.internal_error("this session has no client approver")
        return approver

    def grants(self, session_id: str) -> list[dict[str, Any]]:
        """The session's "allow always" answers: a whole tool, or one exact command."""
        out = []
        for scope in sorted(self.agent(session_id).always_allowed):
            tool, sep, rest = scope.partition(":")
            out.append({"scope": scope, "tool": tool, **({"command": rest} if sep else {})})
        return out

    def revoke_grants(self, session_id: str, scope: str | None) -> int:
        allowed = self.agent(session_id).always_allowed
        dropped = set(allowed) if scope is None else ({scope} & allowed)
        allowed.difference_update(dropped)
        return len(dropped)

    def send(
        self,
        session_id: str,
        message: UserMessage,
        target: str,
        wakeup: bool,
        attachments: Sequence[UserMessage] = (),
        verb: str | None = None,
    ) -> str:
        # A refused send (duplicate id, shut down) leaves as its typed error (errors.wire_error).
        return self.agent(session_id).send(
            message,
            target=target,  # type: ignore[arg-type]
            wakeup=wakeup,
            attachments=attachments,
            verb=verb,
        )

    def inbox_replace(
        self,
        session_id: str,
        message_id: str,
        message: UserMessage,
        attachments: Sequence[UserMessage] | None = None,
    ) -> None:
        self.agent(session_id).inbox.replace(message_id, message, attachments)

    def inbox_move(self, session_id: str, message_id: str, target: str, index: int) -> None:
        self.agent(session_id).inbox.move(message_id, target, index)  # type: ignore[arg-type]

    def context_add(self, session_id: str, spec: ContextSpec, delivery: str) -> str:
        (message,) = self.context_messages(session_id, (spec,))
        target, wakeup = PRESETS[delivery]
        return self.send(session_id, message, target, wakeup, verb="context")

    def context_messages(self, session_id: str, specs: Sequence[ContextSpec]) -> tuple[UserMessage, ...]:
        """Editor messages for `specs`, built now: the text as it is at this moment, in the order
        given. Any spec that cannot be read fails the whole request, before anything is queued."""
        self.view(session_id)  # unknown session first, before reading any file
        source = self._context_source(session_id)
        out = []
        for spec in specs:
            diagnostics = spec.diagnostics
            if spec.kind == "diagnostics" and diagnostics is None:
                state = self.ambient_for(session_id).state
                if state.get("activeUri") == spec.uri:
                    diagnostics = state.get("diagnostics")
            if spec.kind == "diagnostics" and source.synced(spec.uri) is None:
                # Diagnostics are the editor's, not the file's: nothing is read from disk for them.
                document = ContextDocument(TextDocument(spec.uri, ""), from_editor=False)
            else:
                document = source.document_now(spec.uri)
            out.append(build_context_message(document, spec.uri, spec.kind, spec.range, diagnostics))
        return tuple(out)

    def workspace_folders_changed(self, roots: list[str]) -> None:
        """Tools of every open session follow the editor's folders (each keeps its own cwd)."""
        self.config.workspace_roots = roots
        for kit in self.kits.values():
            for tool in kit.registry.tools.values():
                workspace = getattr(tool, "workspace", None)
                if workspace is not None:
                    workspace.replace_roots(roots)
                    break  # one Workspace object is shared by all tools of a session

    def context_did_change(self, raw: Mapping[str, Any]) -> None:
        state = {k: v for k, v in raw.items() if k in AMBIENT_KEYS}
        problem = ambient_problem(state)
        if problem is not None:
            logger.warning("dsh/context/didChange dropped: %s", problem)
            return
        session_id = raw.get("sessionId")
        if isinstance(session_id, str):
            self.ambient_for(session_id).state = state
            return
        self.ambient_default.state = state  # no session named: every session of this connection
        for sid, view in self.views.items():
            if view.subscribed:
                self.ambient_for(sid).state = state

    async def close(self) -> None:
        """D6: running turns end aborted{shutdown}; queues stay parked for the next attach."""
        await self.follower.close()
        await self.manager.close()
        for session_id in list(self.mcp):
            self._close_mcp(session_id)
        if self._mcp_closing:  # MCP servers end with their sessions: after the turns' tool calls
            await asyncio.gather(*self._mcp_closing, return_exceptions=True)
        close_provider = getattr(self.manager.provider, "aclose", None)
        if close_provider is not None:
            await close_provider()  # pooled provider connections
