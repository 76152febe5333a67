"""The LSP front end: the port the session host wires sessions through (`host/port.py`), how their
events reach the editor (`dsh/event`), and the editor context only an LSP client gives (synced
documents, `dsh/context/add`, the ambient `dsh/context/didChange` state).

Everything that touches the agent core lives behind the host; this module is built on the first
`dsh/*` request, so the wire module (app.py) answers `initialize` without importing any of it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path
from pygls.workspace import TextDocument

from dsh_daemon.host.early import EarlySessions
from dsh_daemon.host.editor_context import editor_source, git_diff_message, terminal_message
from dsh_daemon.host.errors import internal_error, session_busy
from dsh_daemon.host.hosted import HostedSession
from dsh_daemon.host.options import DaemonOptions
from dsh_daemon.host.port import (
    Approver,
    DiskEditApplier,
    DocumentSource,
    EditApplier,
    EditorServices,
    FrontEndHooks,
    Workspace,
)
from dsh_daemon.host.sessions import SessionHost
from dsh_daemon.model.events import MCP_STATUS, TURN_START, Event
from dsh_daemon.model.inbox import PRESETS, Target
from dsh_daemon.model.messages import UserMessage
from dsh_daemon.model.methods import ContextDidChangeParams
from dsh_daemon.model.provider import Provider
from dsh_daemon.model.wire import ContextRef
from dsh_daemon.server.client_requests import ClientRequests
from dsh_daemon.server.context import (
    AmbientState,
    ContextDocument,
    ContextSource,
    build_context_message,
    snapshot_hook,
)
from dsh_daemon.server.editor import ClientDsh, LspEditor
from dsh_daemon.server.eventwire import send_event
from dsh_daemon.server.files import EditorDocuments, WorkspaceEditApplier
from dsh_daemon.server.params import json_of
from dsh_daemon.server.permissions import LspApprover
from dsh_daemon.server.progress import TurnProgress

logger = logging.getLogger(__name__)

AMBIENT_KEYS = ("activeUri", "selection", "visibleRange", "diagnostics")


class LspFrontEnd:
    def __init__(
        self,
        server: LanguageServer,
        state_dir: Path,
        options: DaemonOptions,
        roots: Sequence[str],
        client_capabilities: types.ClientCapabilities | None,
        *,
        provider: Provider | None = None,
        early: EarlySessions | None = None,
    ) -> None:
        """`early`: sessions created before this front end (`Daemon.new_early`), wired by the caller
        with `host.adopt_early_sessions` once this is built."""
        self.server = server
        # the connection's requests to the client, on the tools' behalf; `close` ends them all
        self.requests = ClientRequests(server.protocol)
        self.client_capabilities = client_capabilities
        self.ambient_default = AmbientState()
        self.ambient: dict[str, AmbientState] = {}  # kept while the session exists (a detach keeps it)
        self.progress: dict[str, TurnProgress] = {}
        # clients see a session's title change live (`session/title`)
        self.host = SessionHost(
            state_dir, options, self, roots=roots, durable_auto_title=True, provider=provider, early=early
        )

    def session(self, session_id: str) -> HostedSession:
        """The session, driven by this process (opened if needed)."""
        return self.host.session(session_id)

    def driven(self, session_id: str) -> HostedSession:
        """The session, for a request that changes it: a subagent's session is refused (its parent
        drives it; it can only be followed)."""
        self.host.refuse_a_childs_changes(session_id)
        return self.host.session(session_id)

    # ---- the front-end port (host/port.py) ---------------------------------------------------------

    def document_source(self, session_id: str, workspace: Workspace) -> DocumentSource:
        return EditorDocuments(self.server)

    def edit_applier(self, session_id: str, workspace: Workspace) -> EditApplier:
        documents = EditorDocuments(self.server)
        disk = DiskEditApplier(workspace)
        return WorkspaceEditApplier(
            self.server,
            self.requests,
            documents,
            disk,
            lambda: self.client_capabilities,
            self._editor_timeout_s,
            self._editor(),
        )

    def editor_services(self, session_id: str, workspace: Workspace) -> EditorServices:
        return self._editor()

    def _editor(self) -> LspEditor:
        return LspEditor(
            self.server, self.requests, lambda: ClientDsh.of(self.client_capabilities), self._editor_timeout_s
        )

    def _editor_timeout_s(self) -> float:
        """Read at each request: a configuration change applies to the next one."""
        return self.host.options.tools.limits.editor_request_timeout_s

    def new_approver(self, session_id: str) -> Approver:
        timeout = lambda: self.host.options.permission_timeout_s  # noqa: E731  (read at each request)
        return LspApprover(self.server.protocol, session_id, timeout, self._announcer(session_id))

    def session_hooks(self, session_id: str, workspace: Workspace) -> FrontEndHooks:
        source = ContextSource(self._editor_workspace, workspace)
        return FrontEndHooks(pre_step=[snapshot_hook(self.ambient_for(session_id), lambda: source)])

    def report_mcp_status(self, session_id: str, data: Mapping[str, Any]) -> None:
        self._announcer(session_id)(MCP_STATUS, dict(data))

    def observe(self, session_id: str, event: Event) -> None:
        caps = self.client_capabilities
        if not (caps and caps.window and caps.window.work_done_progress):
            return
        progress = self.progress.get(session_id)
        if progress is None and event.type == TURN_START:
            progress = self.progress[session_id] = TurnProgress(
                self.server, session_id, lambda: self._cancel_keeping_inbox(session_id)
            )
        if progress is not None:
            progress.on_event(event)

    def deliver(self, session_id: str, event: Event, *, replayed: bool) -> None:
        payload: dict[str, Any] = {"sessionId": session_id, "type": event.type, "data": event.data}
        if event.seq is not None:
            payload["seq"] = event.seq
        send_event(self.server.protocol, payload)

    def session_closed(self, session_id: str, *, deleted: bool) -> None:
        self.progress.pop(session_id, None)
        if deleted:
            self.ambient.pop(session_id, None)

    def _cancel_keeping_inbox(self, session_id: str) -> None:
        """`window/workDoneProgress/cancel`: the turn stops, the queue stays."""
        hosted = self.host.sessions.get(session_id)
        if hosted is not None:
            hosted.cancel("user", keep_inbox=True)

    def _announcer(self, session_id: str) -> Callable[[str, dict[str, Any]], None]:
        """Live events of the front end's own (permissions, MCP servers), sent only while the
        connection follows the session."""

        def announce(type_: str, data: dict[str, Any]) -> None:
            if self.host.is_followed(session_id):
                send_event(self.server.protocol, {"sessionId": session_id, "type": type_, "data": data})

        return announce

    def _editor_workspace(self) -> Any:
        try:
            return self.server.workspace
        except Exception:
            return None

    # ---- sessions ------------------------------------------------------------------------------------

    def list_sessions(
        self, cwd: str | None, limit: int | None = None, before: int | None = None
    ) -> dict[str, Any]:
        """`{sessions, hasMore?}`: most recently updated first; without `limit`, every session;
        `hasMore` when paging (`limit` or `before` given)."""
        page = self.host.list_sessions(cwd, limit, before)
        out = []
        for info in page.sessions:
            row = info.to_json()
            row.pop("lastSeq", None)
            out.append(row)
        result: dict[str, Any] = {"sessions": out}
        if limit is not None or before is not None:
            result["hasMore"] = page.has_more
        return result

    def attach(self, session_id: str, after_seq: int, replay: bool = True) -> dict[str, Any]:
        attached = self.host.attach(session_id, after_seq, replay)
        result: dict[str, Any] = {
            "sessionId": session_id,
            "status": attached.status,
            "title": attached.title,
            "lastSeq": attached.last_seq,
            "inbox": attached.inbox,
            "mode": attached.mode,
        }
        if attached.plan is not None:
            result["plan"] = attached.plan.data()
        if attached.holder is not None:
            holder = attached.holder
            data = session_busy(session_id, holder.pid, holder.host).wire_data()
            result["readOnly"] = True
            # {pid, host} as in `session/lease`, beside the session_busy data it used to be alone
            result["holder"] = {"pid": holder.pid, "host": holder.host, **data}
        elif attached.parent_id is not None:  # a subagent's: followed, never driven by a client
            result["readOnly"] = True
            result["parentId"] = attached.parent_id
        elif attached.from_store:
            result["permissionRequests"] = []  # nothing is open: nobody drives the session
        else:
            result["permissionRequests"] = self.approver(session_id).open_requests()
            if attached.mcp_servers is not None:  # the `mcp/status` a client attaching now has missed
                result["mcpServers"] = attached.mcp_servers
            if attached.sandbox is not None:  # and the last `sandbox/status`
                result["sandbox"] = attached.sandbox
            if attached.hooks_untrusted is not None:  # and the project's hooks still waiting
                result["hooksUntrusted"] = attached.hooks_untrusted
        return result

    def approver(self, session_id: str) -> LspApprover:
        approver = self.session(session_id).approver
        if not isinstance(approver, LspApprover):  # every session this front end opens gets one
            raise internal_error("this session has no client approver")
        return approver

    # ---- editor context ------------------------------------------------------------------------------

    def ambient_for(self, session_id: str) -> AmbientState:
        return self.ambient.setdefault(session_id, AmbientState(dict(self.ambient_default.state)))

    def context_add(self, session_id: str, spec: ContextRef, delivery: str) -> str:
        (message,) = self.context_messages(session_id, (spec,))
        target, wakeup = PRESETS[delivery]
        return self.driven(session_id).send(message, target, wakeup, verb="context")

    def send(
        self,
        session_id: str,
        message: UserMessage,
        target: Target,
        wakeup: bool,
        specs: Sequence[ContextRef],
        verb: str,
    ) -> tuple[str, tuple[UserMessage, ...]]:
        """The message queued with its editor context, read now; (its id, the context messages)."""
        attachments = self.context_messages(session_id, specs) if specs else ()
        return self.driven(session_id).send(message, target, wakeup, attachments, verb), attachments

    def context_messages(self, session_id: str, specs: Sequence[ContextRef]) -> tuple[UserMessage, ...]:
        """Editor messages for `specs`, built now: the text as it is at this moment, in the order
        given. Any spec that cannot be read fails the whole request, before anything is queued."""
        hosted = self.session(session_id)  # unknown session first, before reading any file
        source = ContextSource(self._editor_workspace, hosted.workspace)
        out = []
        for spec in specs:
            if spec.kind == "gitDiff":  # the editor's text: nothing is read here
                path = to_fs_path(spec.uri) or spec.uri
                out.append(git_diff_message(path, spec.diff or "", editor_source(spec.uri, "gitDiff")))
                continue
            if spec.terminal is not None:  # the editor's record of a terminal command: nothing is read
                out.append(terminal_message(spec.terminal, editor_source(spec.uri, "terminal")))
                continue
            diagnostics = json_of(spec.diagnostics)
            if spec.kind == "diagnostics" and diagnostics is None:
                state = self.ambient_for(session_id).state
                if state.get("activeUri") == spec.uri:
                    diagnostics = state.get("diagnostics")
            if spec.kind == "diagnostics" and source.synced(spec.uri) is None:
                # Diagnostics are the editor's, not the file's: nothing is read from disk for them.
                document = ContextDocument(TextDocument(spec.uri, ""), from_editor=False)
            else:
                document = source.document_now(spec.uri)
            rng = json_of(spec.range)
            out.append(build_context_message(document, spec.uri, spec.kind, rng, diagnostics))
        return tuple(out)

    def context_did_change(self, params: ContextDidChangeParams, raw: Mapping[str, Any]) -> None:
        """The editor's ambient state (already checked against its declaration), kept as it came."""
        state = {k: v for k, v in raw.items() if k in AMBIENT_KEYS and v is not None}
        if params.session_id is not None:
            self.ambient_for(params.session_id).state = state
            return
        self.ambient_default.state = state  # no session named: every session of this connection
        for sid in self.host.sessions:
            if self.host.is_followed(sid):
                self.ambient_for(sid).state = state

    async def close(self) -> None:
        self.requests.close("the daemon is shutting down")
        await self.host.aclose()
