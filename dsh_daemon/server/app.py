"""The pygls server: a thin adapter from `dsh/*` JSON-RPC to the agent core (see protocol.md).

Each handler validates its params (clear `-32602` errors), calls the core, and answers. Agent events
are forwarded as `dsh/event` notifications to this connection for the sessions it created or attached.
Nothing here blocks the event loop for long; stdin is read on its own thread (transport.py).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.protocol import (
    JsonRPCNotification,
    JsonRPCRequestMessage,
    JsonRPCResponseMessage,
    LanguageServerProtocol,
    default_converter,
)
from pygls.protocol.language_server import lsp_method
from pygls.uris import to_fs_path

from dsh_daemon import __version__
from dsh_daemon.agent.events import Event
from dsh_daemon.agent.hooks import Hooks
from dsh_daemon.agent.inbox import DuplicateMessageIdError, InvalidSpliceError, UnknownMessageError
from dsh_daemon.agent.loop import Agent, AgentDisposedError, AgentOptions
from dsh_daemon.agent.provider import Provider
from dsh_daemon.agent.tools import ToolRegistry
from dsh_daemon.server import errors, params
from dsh_daemon.server.context import AmbientState, build_context_message, snapshot_hook
from dsh_daemon.server.editor_files import EditorDocuments, WorkspaceEditApplier
from dsh_daemon.server.permissions import ClientApprover
from dsh_daemon.server.progress import TurnProgress
from dsh_daemon.session.lease import SessionBusyError
from dsh_daemon.session.manager import SessionManager
from dsh_daemon.session.store import SessionInfo, UnknownSessionError
from dsh_daemon.tools.edits import DiskEditApplier
from dsh_daemon.tools.factory import ToolKit, build_tool_registry
from dsh_daemon.tools.workspace import Workspace as ToolWorkspace

log = logging.getLogger(__name__)

PROTOCOL_VERSION = 1
# initializationOptions keys the server reads itself; everything else is provider configuration.
SERVER_OPTION_KEYS = frozenset({"permissionTimeoutS", "tools"})
CLIENT_SOURCE_KINDS_REFUSED = frozenset({"tool", "model"})


def converter_factory() -> Any:
    conv = default_converter()

    def raw(obj: Any, cls: type) -> Any:  # custom methods keep plain dicts (tooling.md §1.2)
        return cls(**obj)

    for message_type in (JsonRPCRequestMessage, JsonRPCNotification, JsonRPCResponseMessage):
        conv.register_structure_hook(message_type, raw)
    return conv


class DshProtocol(LanguageServerProtocol):
    @lsp_method(types.INITIALIZE)
    def lsp_initialize(self, params: types.InitializeParams) -> Any:
        result = yield from super().lsp_initialize(params)
        result.capabilities.experimental = {
            "dsh": {
                "protocolVersion": PROTOCOL_VERSION,
                "version": __version__,
                "sessions": True,
                "inboxEdits": True,
                "editorContext": ["file", "selection", "diagnostics", "snapshot"],
            }
        }
        return result


@dataclass
class Settings:
    """Everything the daemon needs to know at start; `initializationOptions` may refine it."""

    state_dir: Path
    flags: Mapping[str, Any] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    provider: Provider | None = None  # injected (tests); otherwise built from the provider config
    permission_timeout_s: float = 300.0


@dataclass
class SessionView:
    """This connection's state for one session."""

    agent: Agent
    subscribed: bool = False
    unsubscribe: Callable[[], None] | None = None


class Daemon:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.server = LanguageServer(
            "dsh-daemon", __version__, protocol_cls=DshProtocol, converter_factory=converter_factory
        )
        self.manager: SessionManager | None = None
        self.views: dict[str, SessionView] = {}
        self.ambient_default = AmbientState()
        self.ambient: dict[str, AmbientState] = {}
        self.kits: dict[str, ToolKit] = {}
        self.workspace_roots: list[str] = []
        self.tool_config: Mapping[str, Any] = {}
        self.client_capabilities: types.ClientCapabilities | None = None
        self.shutting_down = False
        register(self)

    # ---- set-up --------------------------------------------------------------------------------------

    def start_manager(self, init_options: Mapping[str, Any]) -> None:
        provider, options = self._provider(init_options)
        self.manager = SessionManager(
            self.settings.state_dir,
            provider=provider,
            options=options,
            tools=self._tools_for,
            hooks=self._hooks_for,
            approver=self._approver_for,
        )
        self.manager.start_heartbeat()

    def _provider(
        self, init_options: Mapping[str, Any]
    ) -> tuple[Provider | None, Callable[[], AgentOptions]]:
        if self.settings.provider is not None:
            model = str(self.settings.flags.get("model") or init_options.get("model") or "scripted-model")
            return self.settings.provider, lambda: AgentOptions(model=model)
        from dsh_daemon.llm.config import ConfigError, load_provider_config
        from dsh_daemon.llm.deepseek import make_provider

        provider_options = {k: v for k, v in init_options.items() if k not in SERVER_OPTION_KEYS}
        try:
            config = load_provider_config(
                self.settings.state_dir, self.settings.env, self.settings.flags, provider_options
            )
        except ConfigError as exc:
            raise errors.invalid_params(f"invalid dsh-daemon configuration: {exc}") from exc
        return make_provider(config), lambda: AgentOptions(model=config.model)

    def _kit(self, session_id: str) -> ToolKit:
        kit = self.kits.get(session_id)
        if kit is None:
            assert self.manager is not None
            workspace = self._tool_workspace(self.manager.store.session_info(session_id).cwd)
            documents = EditorDocuments(self.server)
            applier = WorkspaceEditApplier(
                self.server, documents, DiskEditApplier(workspace), lambda: self.client_capabilities
            )
            kit = build_tool_registry(workspace, documents, applier, self.tool_config)
            self.kits[session_id] = kit
        return kit

    def _tool_workspace(self, cwd: str | None) -> ToolWorkspace:
        """Roots: the editor's workspace folders plus the session cwd (when it is a directory)."""
        roots = [r for r in self.workspace_roots if Path(r).is_dir()]
        if cwd is not None and not Path(cwd).is_dir():
            cwd = None
        if cwd is not None and not any(Path(cwd).resolve().is_relative_to(Path(r).resolve()) for r in roots):
            roots.append(cwd)
        if not roots:
            roots = [os.getcwd()]
        return ToolWorkspace(roots, cwd=cwd)

    def _tools_for(self, session_id: str) -> ToolRegistry:
        return self._kit(session_id).registry

    def _hooks_for(self, session_id: str) -> Hooks:
        ambient = self._ambient_for(session_id)
        kit = self._kit(session_id).hooks
        return Hooks(
            pre_step=[snapshot_hook(ambient, lambda: self._workspace())],
            pre_execute=list(kit.pre_execute),
            post_execute=list(kit.post_execute),
        )

    def _approver_for(self, session_id: str) -> ClientApprover:
        return ClientApprover(self.server.protocol, session_id, self.settings.permission_timeout_s)

    def _ambient_for(self, session_id: str) -> AmbientState:
        return self.ambient.setdefault(session_id, AmbientState(dict(self.ambient_default.state)))

    def _workspace(self) -> Any:
        try:
            return self.server.workspace
        except Exception:
            return None

    # ---- sessions ------------------------------------------------------------------------------------

    def require_manager(self) -> SessionManager:
        if self.shutting_down:
            raise errors.shutting_down()
        if self.manager is None:
            raise errors.not_initialized()
        return self.manager

    def view(self, session_id: str) -> SessionView:
        """The session opened for driving by this process (opening it if needed)."""
        view = self.views.get(session_id)
        if view is not None:
            return view
        manager = self.require_manager()
        try:
            agent = manager.open(session_id)
        except UnknownSessionError as exc:
            raise errors.unknown_session(session_id) from exc
        except SessionBusyError as exc:
            raise errors.session_busy(session_id, exc.pid, exc.host) from exc
        return self._adopt(agent)

    def _adopt(self, agent: Agent) -> SessionView:
        view = SessionView(agent)
        self.views[agent.session_id] = view
        progress = TurnProgress(self.server, agent.session_id, lambda: agent.cancel("user", keep_inbox=True))
        if self._client_supports_progress():
            agent.subscribe(progress.on_event)
        return view

    def subscribe(self, view: SessionView) -> None:
        if view.subscribed:
            return
        session_id = view.agent.session_id
        notify = self.server.protocol.notify

        def forward(event: Event) -> None:
            payload: dict[str, Any] = {"sessionId": session_id, "type": event.type, "data": event.data}
            if event.seq is not None:
                payload["seq"] = event.seq
            notify("dsh/event", payload)

        view.unsubscribe = view.agent.subscribe(forward)
        view.subscribed = True

    def replay(self, session_id: str, events: list[Event]) -> None:
        notify = self.server.protocol.notify
        for event in events:
            notify(
                "dsh/event",
                {"sessionId": session_id, "seq": event.seq, "type": event.type, "data": event.data},
            )

    def _client_supports_progress(self) -> bool:
        caps = self.client_capabilities
        return bool(caps and caps.window and caps.window.work_done_progress)

    async def close(self) -> None:
        """D6: running turns end aborted{shutdown}; queues stay parked for the next attach."""
        self.shutting_down = True
        if self.manager is not None:
            await self.manager.close()
            self.manager = None


def _session_json(info: SessionInfo) -> dict[str, Any]:
    out = info.to_json()
    out.pop("lastSeq", None)
    return out


def register(daemon: Daemon) -> None:
    server = daemon.server

    @server.feature(types.INITIALIZE)
    def on_initialize(ls: LanguageServer, p: types.InitializeParams) -> None:
        daemon.client_capabilities = p.capabilities
        init = p.initialization_options if isinstance(p.initialization_options, Mapping) else {}
        timeout = init.get("permissionTimeoutS")
        if isinstance(timeout, int | float) and not isinstance(timeout, bool) and timeout > 0:
            daemon.settings.permission_timeout_s = float(timeout)
        tools = init.get("tools")
        daemon.tool_config = tools if isinstance(tools, Mapping) else {}
        folders = [to_fs_path(f.uri) for f in p.workspace_folders or []]
        root = to_fs_path(p.root_uri) if p.root_uri else p.root_path
        daemon.workspace_roots = [r for r in [*folders, root] if r]
        daemon.start_manager(init)

    @server.feature(types.SHUTDOWN)
    async def on_shutdown(ls: LanguageServer, *_: Any) -> None:
        await daemon.close()

    @server.feature("dsh/session/new")
    def session_new(ls: LanguageServer, raw: Any) -> dict[str, Any]:
        p = params.as_object(raw, "dsh/session/new")
        cwd = params.opt_str(p, "cwd", "dsh/session/new") or _default_cwd(ls)
        title = params.opt_str(p, "title", "dsh/session/new")
        agent = daemon.require_manager().create(cwd=cwd, title=title)
        view = daemon._adopt(agent)
        daemon.subscribe(view)
        return {"sessionId": agent.session_id}

    @server.feature("dsh/session/list")
    def session_list(ls: LanguageServer, raw: Any) -> dict[str, Any]:
        p = params.as_object(raw, "dsh/session/list")
        cwd = params.opt_str(p, "cwd", "dsh/session/list")
        return {"sessions": [_session_json(s) for s in daemon.require_manager().list(cwd)]}

    @server.feature("dsh/session/attach")
    def session_attach(ls: LanguageServer, raw: Any) -> dict[str, Any]:
        method = "dsh/session/attach"
        p = params.as_object(raw, method)
        session_id = params.req_str(p, "sessionId", method)
        after = params.opt_int(p, "afterSeq", method)
        after_seq = -1 if after is None else after
        manager = daemon.require_manager()
        try:
            view = daemon.view(session_id)
        except errors.DshError as exc:
            if exc.data.get("code") != "session_busy":
                raise
            # Leased by another live process: history only, read from the store.
            events = manager.read(session_id, after_seq)
            daemon.replay(session_id, events)
            info = manager.info(session_id)
            return {
                "sessionId": session_id,
                "status": info.status,
                "lastSeq": info.last_seq,
                "inbox": {"nextTurn": [], "nextStep": []},
                "readOnly": True,
                "holder": exc.data,
            }
        agent = view.agent
        # Replay from memory (it includes events not yet written behind) and subscribe in the same
        # synchronous stretch: no event can fall between the two, and none is sent twice.
        daemon.replay(session_id, [e for e in agent.log.events if e.seq is not None and e.seq > after_seq])
        daemon.subscribe(view)
        return {
            "sessionId": session_id,
            "status": agent.status,
            "lastSeq": agent.log.next_seq - 1,
            "inbox": agent.inbox.to_json(),
        }

    def _send(method: str, raw: Any, target: str | None, wakeup: bool | None) -> dict[str, Any]:
        p = params.as_object(raw, method)
        session_id = params.req_str(p, "sessionId", method)
        message = params.message(p, method)
        if message.source.get("kind") in CLIENT_SOURCE_KINDS_REFUSED:
            raise errors.invalid_params(
                f"{method}: a client message cannot have source kind {message.source['kind']!r}"
            )
        if target is None:
            target = params.one_of(p, "target", method, params.TARGETS)
        if wakeup is None:
            wakeup = params.req_bool(p, "wakeup", method)
        agent = daemon.view(session_id).agent
        try:
            message_id = agent.send(message, target=target, wakeup=wakeup)  # type: ignore[arg-type]
        except DuplicateMessageIdError as exc:
            raise errors.duplicate_message_id(exc.message_id) from exc
        except AgentDisposedError as exc:
            raise errors.shutting_down() from exc
        return {"messageId": message_id}

    server.feature("dsh/send")(lambda ls, raw: _send("dsh/send", raw, None, None))
    server.feature("dsh/followup")(lambda ls, raw: _send("dsh/followup", raw, "next-turn", True))
    server.feature("dsh/steer")(lambda ls, raw: _send("dsh/steer", raw, "next-step", True))
    server.feature("dsh/inject")(lambda ls, raw: _send("dsh/inject", raw, "next-step", False))

    @server.feature("dsh/cancel")
    def cancel(ls: LanguageServer, raw: Any) -> dict[str, Any]:
        method = "dsh/cancel"
        p = params.as_object(raw, method)
        session_id = params.req_str(p, "sessionId", method)
        keep = params.opt_bool(p, "keepInbox", method, False)
        cause = params.one_of(p, "cause", method, ("user", "hook"), "user")
        daemon.view(session_id).agent.cancel(cause, keep_inbox=keep)
        return {}

    @server.feature("dsh/wake")
    def wake(ls: LanguageServer, raw: Any) -> dict[str, Any]:
        p = params.as_object(raw, "dsh/wake")
        session_id = params.req_str(p, "sessionId", "dsh/wake")
        return {"started": daemon.view(session_id).agent.wake()}

    @server.feature("dsh/inbox/list")
    def inbox_list(ls: LanguageServer, raw: Any) -> dict[str, Any]:
        p = params.as_object(raw, "dsh/inbox/list")
        return daemon.view(params.req_str(p, "sessionId", "dsh/inbox/list")).agent.inbox.to_json()

    @server.feature("dsh/inbox/remove")
    def inbox_remove(ls: LanguageServer, raw: Any) -> dict[str, Any]:
        method = "dsh/inbox/remove"
        p = params.as_object(raw, method)
        agent = daemon.view(params.req_str(p, "sessionId", method)).agent
        return {"removed": agent.inbox.remove(params.req_str(p, "messageId", method))}

    @server.feature("dsh/inbox/replace")
    def inbox_replace(ls: LanguageServer, raw: Any) -> dict[str, Any]:
        method = "dsh/inbox/replace"
        p = params.as_object(raw, method)
        agent = daemon.view(params.req_str(p, "sessionId", method)).agent
        old_id = params.req_str(p, "messageId", method)
        message = params.message(p, method)
        try:
            agent.inbox.replace(old_id, message)
        except UnknownMessageError as exc:
            raise errors.unknown_message(old_id) from exc
        except DuplicateMessageIdError as exc:
            raise errors.duplicate_message_id(exc.message_id) from exc
        return {"messageId": message.id}

    @server.feature("dsh/inbox/move")
    def inbox_move(ls: LanguageServer, raw: Any) -> dict[str, Any]:
        method = "dsh/inbox/move"
        p = params.as_object(raw, method)
        agent = daemon.view(params.req_str(p, "sessionId", method)).agent
        message_id = params.req_str(p, "messageId", method)
        target = params.one_of(p, "target", method, params.TARGETS)
        index = params.opt_int(p, "index", method)
        try:
            agent.inbox.move(message_id, target, -1 if index is None else index)  # type: ignore[arg-type]
        except UnknownMessageError as exc:
            raise errors.unknown_message(message_id) from exc
        except InvalidSpliceError as exc:
            raise errors.invalid_params(f"{method}: {exc}") from exc
        return {}

    @server.feature("dsh/context/add")
    def context_add(ls: LanguageServer, raw: Any) -> dict[str, Any]:
        method = "dsh/context/add"
        p = params.as_object(raw, method)
        session_id = params.req_str(p, "sessionId", method)
        uri = params.req_str(p, "uri", method)
        kind = params.one_of(p, "kind", method, params.CONTEXT_KINDS)
        delivery = params.one_of(p, "delivery", method, params.DELIVERIES, "inject")
        rng = p.get("range")
        if rng is not None and not isinstance(rng, Mapping):
            raise errors.invalid_params(f"{method}: 'range' must be an LSP Range")
        diagnostics = p.get("diagnostics")
        if diagnostics is not None and not isinstance(diagnostics, list):
            raise errors.invalid_params(f"{method}: 'diagnostics' must be an array of LSP Diagnostics")
        view = daemon.view(session_id)
        if kind == "diagnostics" and diagnostics is None:
            state = daemon._ambient_for(session_id).state
            if state.get("activeUri") == uri:
                diagnostics = state.get("diagnostics")
        message = build_context_message(daemon._workspace(), uri, kind, rng, diagnostics)
        target, wakeup = {
            "inject": ("next-step", False),
            "steer": ("next-step", True),
            "followup": ("next-turn", True),
        }[delivery]
        try:
            message_id = view.agent.send(message, target=target, wakeup=wakeup)  # type: ignore[arg-type]
        except AgentDisposedError as exc:
            raise errors.shutting_down() from exc
        return {"messageId": message_id}

    @server.feature("dsh/context/didChange")
    def context_did_change(ls: LanguageServer, raw: Any) -> None:
        if not isinstance(raw, Mapping):
            return
        state = {
            k: v for k, v in raw.items() if k in ("activeUri", "selection", "visibleRange", "diagnostics")
        }
        session_id = raw.get("sessionId")
        if isinstance(session_id, str):
            daemon._ambient_for(session_id).state = state
            return
        daemon.ambient_default.state = state  # no session named: every session of this connection
        for sid, view in daemon.views.items():
            if view.subscribed:
                daemon._ambient_for(sid).state = state


def _default_cwd(ls: LanguageServer) -> str | None:
    try:
        root = ls.workspace.root_uri
    except Exception:
        return None
    return to_fs_path(root) if root else None
