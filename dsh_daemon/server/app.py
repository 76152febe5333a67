"""The pygls server: a thin adapter from `dsh/*` JSON-RPC to the session host (see protocol.md).

Each handler validates its params (clear `-32602` errors), calls the host, and answers. The host, and
with it the agent core, the store and the provider, is imported and built on the first `dsh/*`
request, so `initialize` is answered as fast as a bare pygls server.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
import os
from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException
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
from dsh_daemon.host import errors
from dsh_daemon.host.options import (
    NON_PROVIDER_KEYS,
    DaemonOptions,
    OptionsError,
    parse_options,
    parse_session_servers,
)
from dsh_daemon.host.paths import checked_path
from dsh_daemon.model.inbox import Target
from dsh_daemon.server import params
from dsh_daemon.server.errors import DshError

if TYPE_CHECKING:
    from dsh_daemon.model.messages import UserMessage
    from dsh_daemon.server.frontend import LspFrontEnd

logger = logging.getLogger(__name__)

PROTOCOL_VERSION = 1
CLIENT_SOURCE_KINDS_REFUSED = frozenset({"tool", "model"})
LIST_MAX_LIMIT = 1000  # sessions in one dsh/session/list page
INIT_OPTIONS = "initializationOptions"  # how option errors name what they came in


def converter_factory() -> Any:
    conv = default_converter()  # type: ignore[no-untyped-call]  # pygls leaves it unannotated

    def raw(obj: Any, cls: type) -> Any:  # custom methods keep plain dicts (pygls would build objects)
        return cls(**obj)

    def raw_with_params(obj: Any, cls: type) -> Any:  # `params` may be left out entirely
        return cls(**{"params": None, **obj})

    conv.register_structure_hook(JsonRPCRequestMessage, raw_with_params)
    conv.register_structure_hook(JsonRPCNotification, raw_with_params)
    conv.register_structure_hook(JsonRPCResponseMessage, raw)
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
                "sendContext": True,  # `context` on sends and inbox/replace (§4)
                "inboxItems": True,  # verb, wakeup, queuedAt, target, context on pending items (§5)
                "deltaOffsets": True,  # `offset` on assistant/delta (§7)
                "permissionEvents": True,  # permission/requested|resolved, dsh/permissions/* (§8)
                "transcript": True,  # dsh/session/transcript; attach `replay: "none"` (§3)
                "sessionManagement": True,  # rename, delete, list paging + lastPrompt, session/title (§3)
                "detach": True,  # dsh/session/detach (§3)
                "liveReadOnly": True,  # a read-only attach follows the store; session/lease (§3)
                "configurationChange": True,  # workspace/didChangeConfiguration (§1)
                "mcpServers": True,  # MCP servers' tools, `mcp/status` events (§12)
            }
        }
        return result


@dataclass
class Settings:
    """Everything the daemon knows at start; `initializationOptions` refine it."""

    state_dir: Path
    flags: Mapping[str, Any] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))


class Daemon:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.server = LanguageServer(
            "dsh-daemon", __version__, protocol_cls=DshProtocol, converter_factory=converter_factory
        )
        self.init: types.InitializeParams | None = None
        self.options: DaemonOptions | None = None  # initializationOptions, parsed at initialize
        self._front_end: LspFrontEnd | None = None
        self.shutting_down = False
        self._closing: asyncio.Future[None] | None = None
        register(self)

    @property
    def front_end(self) -> LspFrontEnd:
        """The session host and this front end's side of it, built on the first `dsh/*` request."""
        if self.shutting_down:
            raise errors.shutting_down()
        if self.init is None or self.options is None:
            raise errors.not_initialized()
        if self._front_end is None:
            from dsh_daemon.server.frontend import LspFrontEnd

            p = self.init
            folders = [to_fs_path(f.uri) for f in p.workspace_folders or []]
            root = to_fs_path(p.root_uri) if p.root_uri else p.root_path
            roots = [r for r in [*folders, root] if r]
            self._front_end = LspFrontEnd(
                self.server, self.settings.state_dir, self.options, roots, p.capabilities
            )
        return self._front_end

    async def close(self) -> None:
        """D6: running turns end aborted{shutdown}; queues stay parked for the next attach. Every
        caller (shutdown, exit, EOF, SIGTERM) waits for the one close: a second caller must not close
        the store under the first one's turns while they are still writing their `turn/end`."""
        self.shutting_down = True
        if self._closing is None:
            self._closing = asyncio.ensure_future(self._close_front_end())
        await asyncio.shield(self._closing)

    async def _close_front_end(self) -> None:
        if self._front_end is not None:
            await self._front_end.close()
            self._front_end = None


def typed_errors(handler: Callable[..., Any]) -> Callable[..., Any]:
    """Every failure of a handler leaves as a typed error (`host/errors.py: wire_error`): a client's
    mistake as what it is, a store that cannot be read as `session_unreadable`, anything else as
    `internal_error` (logged, no traceback on the wire)."""
    if inspect.isgeneratorfunction(handler):

        @functools.wraps(handler)
        def generator_wrapper(*args: Any) -> Generator[Any, Any, Any]:
            with _typed_failures():
                return (yield from handler(*args))

        return generator_wrapper

    if inspect.iscoroutinefunction(handler):

        @functools.wraps(handler)
        async def async_wrapper(*args: Any) -> Any:
            with _typed_failures():
                return await handler(*args)

        return async_wrapper

    @functools.wraps(handler)
    def wrapper(*args: Any) -> Any:
        with _typed_failures():
            return handler(*args)

    return wrapper


@contextlib.contextmanager
def _typed_failures() -> Iterator[None]:
    try:
        yield
    except JsonRpcException:
        raise
    except Exception as exc:
        raise DshError(_typed(exc)) from exc


def _typed(exc: Exception) -> errors.WireError:
    typed = errors.wire_error(exc)
    if typed is not None:
        return typed
    logger.exception("dsh handler failed")
    return errors.internal_error(f"{type(exc).__name__}: {exc}")


def register(daemon: Daemon) -> None:
    server = daemon.server
    feature = server.feature

    def dsh(method: str) -> Callable[[Callable[..., Any]], Any]:
        return lambda handler: feature(method)(typed_errors(handler))

    @server.feature(types.INITIALIZE)
    @typed_errors
    def on_initialize(ls: LanguageServer, p: types.InitializeParams) -> None:
        options = p.initialization_options
        # Every option is parsed here, once: a bad one is refused in this reply, where the editor shows it.
        settings = daemon.settings
        daemon.options = parse_options(
            settings.state_dir, settings.env, settings.flags, options, what=INIT_OPTIONS
        )
        daemon.init = p

    @server.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    def on_folders(ls: LanguageServer, p: types.DidChangeWorkspaceFoldersParams) -> None:
        # pygls has already updated ls.workspace; the tools' roots follow.
        if daemon._front_end is not None:
            folders = [to_fs_path(f.uri) for f in ls.workspace.folders.values()]
            root = to_fs_path(ls.workspace.root_uri) if ls.workspace.root_uri else None
            daemon._front_end.host.set_roots([r for r in [*folders, root] if r])

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    def on_configuration(ls: LanguageServer, p: types.DidChangeConfigurationParams) -> None:
        settings = p.settings.get("dsh") if isinstance(p.settings, Mapping) else None
        if daemon.init is None or daemon.shutting_down or not isinstance(settings, Mapping):
            return  # not ours (another section, or pull-model clients that send null)
        init = daemon.init.initialization_options
        merged = merge_settings(init if isinstance(init, Mapping) else {}, settings)
        try:
            options = parse_options(
                daemon.settings.state_dir,
                daemon.settings.env,
                daemon.settings.flags,
                merged,
                what=INIT_OPTIONS,
            )
        except OptionsError as exc:
            # Nothing changes; the editor shows why (a notification has no reply to carry the error).
            ls.window_show_message(
                types.ShowMessageParams(types.MessageType.Error, f"dsh: settings not applied: {exc}")
            )
            return
        daemon.options = options
        if daemon._front_end is not None:
            daemon._front_end.host.reconfigure(options)

    @server.feature(types.SHUTDOWN)
    def on_shutdown(ls: LanguageServer, *_: Any) -> Generator[Any, Any, None]:
        # A generator: `shutting_down` is set while the frame is dispatched, before any frame behind it.
        daemon.shutting_down = True
        yield daemon.close, (), {}

    @server.feature(types.EXIT)
    def on_exit(ls: LanguageServer, *_: Any) -> None:
        # An `exit` pipelined right behind `shutdown` follows a shutdown all the same (exit code 0);
        # `serve` then waits for that shutdown's close to finish before the process ends.
        if daemon.shutting_down:
            ls.protocol._shutdown = True

    @dsh("dsh/session/new")
    def session_new(ls: LanguageServer, raw: Any) -> dict[str, Any]:
        method = "dsh/session/new"
        p = params.as_object(raw, method)
        cwd = params.opt_str(p, "cwd", method)
        cwd = _absolute(ls, checked_path(cwd, method, "cwd")) if cwd else _default_cwd(ls)
        _check_inside_workspace(ls, cwd, method)
        title = params.opt_str(p, "title", method)
        if title is not None:
            from dsh_daemon.host.manager import MAX_TITLE_CHARS, collapse_title

            # The same rule as a rename: whitespace collapsed, at most 200 characters; "" = no title.
            title = collapse_title(title) or None
            if title is not None and len(title) > MAX_TITLE_CHARS:
                raise errors.invalid_params(
                    f"{method}: 'title' must hold at most {MAX_TITLE_CHARS} characters after collapsing "
                    f"whitespace (got {len(title)})"
                )
        servers = parse_session_servers(p.get("mcpServers"), f"{method}: mcpServers")
        return {"sessionId": daemon.front_end.host.create(cwd, title=title, mcp_servers=servers).session_id}

    @dsh("dsh/session/list")
    def session_list(ls: LanguageServer, raw: Any) -> dict[str, Any]:
        method = "dsh/session/list"
        p = params.as_object(raw, method)
        cwd = params.opt_str(p, "cwd", method)
        limit = _opt_positive(p, "limit", method, LIST_MAX_LIMIT)
        before = params.opt_int(p, "before", method)
        return daemon.front_end.list_sessions(_absolute(ls, cwd) if cwd else None, limit, before)

    @dsh("dsh/session/attach")
    def session_attach(ls: LanguageServer, raw: Any) -> dict[str, Any]:
        method = "dsh/session/attach"
        p = params.as_object(raw, method)
        session_id = params.req_str(p, "sessionId", method)
        after = params.opt_int(p, "afterSeq", method)
        replay = params.one_of(p, "replay", method, ("all", "none"), "all")
        return daemon.front_end.attach(session_id, -1 if after is None else after, replay == "all")

    # ---- session management (protocol.md §3): transcript, rename, delete ------------------------------

    @dsh("dsh/session/transcript")
    def session_transcript(ls: LanguageServer, raw: Any) -> dict[str, Any]:
        method = "dsh/session/transcript"
        p = params.as_object(raw, method)
        session_id = params.req_str(p, "sessionId", method)
        before_turn = _opt_positive(p, "beforeTurn", method, None)
        limit = _opt_positive(p, "limit", method, None)  # the host applies the default and the cap
        return daemon.front_end.host.transcript(session_id, before_turn, limit)

    @dsh("dsh/session/rename")
    def session_rename(ls: LanguageServer, raw: Any) -> dict[str, Any]:
        method = "dsh/session/rename"
        p = params.as_object(raw, method)
        session_id = params.req_str(p, "sessionId", method)
        daemon.front_end.host.rename(session_id, params.req_str(p, "title", method), method=method)
        return {}

    @dsh("dsh/session/delete")
    def session_delete(ls: LanguageServer, raw: Any) -> dict[str, Any]:
        method = "dsh/session/delete"
        p = params.as_object(raw, method)
        daemon.front_end.host.delete(params.req_str(p, "sessionId", method))
        return {}

    @dsh("dsh/session/detach")
    def session_detach(ls: LanguageServer, raw: Any) -> dict[str, Any]:
        method = "dsh/session/detach"
        daemon.front_end.host.detach(params.req_str(params.as_object(raw, method), "sessionId", method))
        return {}

    def _client_message(p: Mapping[str, Any], method: str) -> UserMessage:
        message = params.message(p, method)
        if message.source.get("kind") in CLIENT_SOURCE_KINDS_REFUSED:
            raise errors.invalid_params(
                f"{method}: a client message cannot have source kind {message.source['kind']!r}"
            )
        return message

    def _send(method: str, raw: Any, target: str | None, wakeup: bool | None) -> dict[str, Any]:
        # Synchronous on purpose (context files included): each send is queued while its frame is
        # dispatched, so pipelined sends, cancels and edits apply in arrival order.
        p = params.as_object(raw, method)
        session_id = params.req_str(p, "sessionId", method)
        message = _client_message(p, method)
        if target is None:
            target = params.one_of(p, "target", method, params.TARGETS)
        if wakeup is None:
            wakeup = params.req_bool(p, "wakeup", method)
        specs = params.opt_context(p, "context", method) or ()
        verb = method.removeprefix("dsh/")
        chosen: Target = "next-turn" if target == "next-turn" else "next-step"
        message_id, attachments = daemon.front_end.send(session_id, message, chosen, wakeup, specs, verb)
        reply: dict[str, Any] = {"messageId": message_id}
        if attachments:
            reply["contextIds"] = [m.id for m in attachments]
        return reply

    dsh("dsh/send")(lambda ls, raw: _send("dsh/send", raw, None, None))
    dsh("dsh/followup")(lambda ls, raw: _send("dsh/followup", raw, "next-turn", True))
    dsh("dsh/steer")(lambda ls, raw: _send("dsh/steer", raw, "next-step", True))
    dsh("dsh/inject")(lambda ls, raw: _send("dsh/inject", raw, "next-step", False))

    @dsh("dsh/cancel")
    def cancel(ls: LanguageServer, raw: Any) -> Generator[Any, Any, dict[str, Any]]:
        # A generator handler: pygls runs it up to its first `yield` while it dispatches the frame, so
        # the cancel acts on what was running when it arrived. (An `async def` would run only after the
        # frames pipelined behind it, and abort the turn a following send had just started.)
        method = "dsh/cancel"
        p = params.as_object(raw, method)
        session_id = params.req_str(p, "sessionId", method)
        keep = params.opt_bool(p, "keepInbox", method, False)
        cause = params.one_of(p, "cause", method, ("user", "hook"), "user")
        session = daemon.front_end.session(session_id)
        session.cancel(cause, keep_inbox=keep)
        yield session.until_settled, (), {}
        return {}

    @dsh("dsh/session/compact")
    async def session_compact(ls: LanguageServer, raw: Any) -> dict[str, Any]:
        p = params.as_object(raw, "dsh/session/compact")
        session = daemon.front_end.session(params.req_str(p, "sessionId", "dsh/session/compact"))
        return await session.compact()

    @dsh("dsh/wake")
    def wake(ls: LanguageServer, raw: Any) -> dict[str, Any]:
        p = params.as_object(raw, "dsh/wake")
        return {"started": daemon.front_end.session(params.req_str(p, "sessionId", "dsh/wake")).wake()}

    @dsh("dsh/inbox/list")
    def inbox_list(ls: LanguageServer, raw: Any) -> dict[str, Any]:
        p = params.as_object(raw, "dsh/inbox/list")
        return daemon.front_end.host.inbox(params.req_str(p, "sessionId", "dsh/inbox/list"))

    @dsh("dsh/inbox/remove")
    def inbox_remove(ls: LanguageServer, raw: Any) -> dict[str, Any]:
        method = "dsh/inbox/remove"
        p = params.as_object(raw, method)
        session = daemon.front_end.session(params.req_str(p, "sessionId", method))
        return {"removed": session.remove(params.req_str(p, "messageId", method))}

    @dsh("dsh/inbox/replace")
    def inbox_replace(ls: LanguageServer, raw: Any) -> dict[str, Any]:
        method = "dsh/inbox/replace"
        p = params.as_object(raw, method)
        session_id = params.req_str(p, "sessionId", method)
        old_id = params.req_str(p, "messageId", method)
        message = _client_message(p, method)
        specs = params.opt_context(p, "context", method)
        front_end = daemon.front_end
        attachments = None if specs is None else front_end.context_messages(session_id, specs)
        front_end.session(session_id).replace(old_id, message, attachments)
        reply: dict[str, Any] = {"messageId": message.id}
        if attachments:
            reply["contextIds"] = [m.id for m in attachments]
        return reply

    @dsh("dsh/inbox/move")
    def inbox_move(ls: LanguageServer, raw: Any) -> dict[str, Any]:
        method = "dsh/inbox/move"
        p = params.as_object(raw, method)
        session_id = params.req_str(p, "sessionId", method)
        message_id = params.req_str(p, "messageId", method)
        target: Target = (
            "next-turn" if params.one_of(p, "target", method, params.TARGETS) == "next-turn" else "next-step"
        )
        index = params.opt_int(p, "index", method)
        daemon.front_end.session(session_id).move(message_id, target, -1 if index is None else index)
        return {}

    @dsh("dsh/permissions/list")
    def permissions_list(ls: LanguageServer, raw: Any) -> dict[str, Any]:
        method = "dsh/permissions/list"
        session_id = params.req_str(params.as_object(raw, method), "sessionId", method)
        front_end = daemon.front_end
        grants = front_end.session(session_id).grants()
        return {"grants": grants, "open": front_end.approver(session_id).open_requests()}

    @dsh("dsh/permissions/revoke")
    def permissions_revoke(ls: LanguageServer, raw: Any) -> dict[str, Any]:
        method = "dsh/permissions/revoke"
        p = params.as_object(raw, method)
        session_id = params.req_str(p, "sessionId", method)
        return {
            "revoked": daemon.front_end.session(session_id).revoke_grants(params.opt_str(p, "scope", method))
        }

    @dsh("dsh/permissions/respond")
    def permissions_respond(ls: LanguageServer, raw: Any) -> dict[str, Any]:
        method = "dsh/permissions/respond"
        p = params.as_object(raw, method)
        session_id = params.req_str(p, "sessionId", method)
        call_id = params.req_str(p, "callId", method)
        outcome = params.one_of(p, "outcome", method, ("allow-once", "allow-always", "reject", "cancelled"))
        return {"answered": daemon.front_end.approver(session_id).respond(call_id, outcome)}

    @dsh("dsh/context/add")
    def context_add(ls: LanguageServer, raw: Any) -> dict[str, Any]:
        # Synchronous like the sends: queued in arrival order (the safe reader never blocks).
        method = "dsh/context/add"
        p = params.as_object(raw, method)
        session_id = params.req_str(p, "sessionId", method)
        spec = params.context_spec(p, method)
        delivery = params.one_of(p, "delivery", method, params.DELIVERIES, "inject")
        return {"messageId": daemon.front_end.context_add(session_id, spec, delivery)}

    @dsh("dsh/context/didChange")
    def context_did_change(ls: LanguageServer, raw: Any) -> None:
        if isinstance(raw, Mapping) and daemon.init is not None and not daemon.shutting_down:
            daemon.front_end.context_did_change(raw)


def _opt_positive(p: Mapping[str, Any], key: str, method: str, cap: int | None) -> int | None:
    """An optional integer >= 1 (`invalid_params` otherwise), lowered to `cap` when above it."""
    value = params.opt_int(p, key, method)
    if value is None:
        return None
    if value < 1:
        raise errors.invalid_params(f"{method}: '{key}' must be a positive integer")
    return value if cap is None else min(value, cap)


def merge_settings(base: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """`initializationOptions` with the editor's `dsh` settings over them; an object value (`provider`,
    `tools`, `agent`) is merged key by key, so a setting that names one key keeps the others (the API
    key passed at start among them). Provider keys given flat on either side count as `provider`'s."""
    return _merge(_provider_nested(base), _provider_nested(changes))


def _merge(base: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in changes.items():
        old = merged.get(key)
        if isinstance(old, Mapping) and isinstance(value, Mapping):
            merged[key] = _merge(old, value)
        else:
            merged[key] = value
    return merged


def _provider_nested(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Flat provider keys moved under `provider` (where they are merged with the nested ones)."""
    flat = {k: v for k, v in raw.items() if k not in NON_PROVIDER_KEYS and k != "provider"}
    out = {k: v for k, v in raw.items() if k in NON_PROVIDER_KEYS}
    nested = raw.get("provider")
    if nested is not None and not isinstance(nested, Mapping):
        out["provider"] = nested  # not an object: the parser says so
    elif flat or nested is not None:
        out["provider"] = {**flat, **(nested or {})}
    return out


def _absolute(ls: LanguageServer, path: str) -> str:
    """A client's path, made absolute against the workspace (not the daemon's own directory)."""
    expanded = os.path.expanduser(path)
    return os.path.normpath(os.path.join(_default_cwd(ls), expanded))


def _workspace_roots(ls: LanguageServer) -> list[str]:
    """The editor's workspace folders, else its root (empty: the editor named none)."""
    try:
        folders = list(ls.workspace.folders.values())
        root = ls.workspace.root_uri
    except Exception:
        folders, root = [], None
    paths = [to_fs_path(uri) for uri in [*(f.uri for f in folders), root] if uri]
    return [p for p in paths if p]


def _check_inside_workspace(ls: LanguageServer, cwd: str, method: str) -> None:
    """A session's cwd is one of its tool roots: one outside the editor's workspace would silently
    widen what the tools may touch. Without any workspace folder or root, any cwd is allowed."""
    roots = _workspace_roots(ls)
    if not roots:
        return
    try:
        real = Path(os.path.realpath(cwd))
        inside = any(real.is_relative_to(os.path.realpath(root)) for root in roots)
    except (OSError, ValueError) as exc:
        raise errors.invalid_params(f"{method}: 'cwd' cannot be used: {errors.shown(str(exc))}") from exc
    if not inside:
        raise errors.outside_workspace(
            f"{method}: cwd {errors.shown(cwd)} is outside the workspace folders "
            f"({errors.shown(', '.join(roots))})",
            cwd,
        )


def _default_cwd(ls: LanguageServer) -> str:
    """The first workspace folder, else the root, else the daemon's own directory."""
    try:
        folders = list(ls.workspace.folders.values())
        root = ls.workspace.root_uri
    except Exception:
        folders, root = [], None
    for uri in [*(f.uri for f in folders), root]:
        path = to_fs_path(uri) if uri else None
        if path:
            return path
    return os.getcwd()
