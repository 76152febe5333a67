"""The pygls server: a thin adapter from `dsh/*` JSON-RPC to the session host (see protocol.md).

Each handler validates its params (clear `-32602` errors), calls the host, and answers. The host, and
with it the agent core, the store and the provider, is imported and built on the first `dsh/*`
request, so `initialize` is answered as fast as a bare pygls server; a first `dsh/session/new` is
answered before it is, from the store alone (`Daemon.new_early`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
import os
from collections.abc import Awaitable, Callable, Generator, Iterator, Mapping
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
from dsh_daemon.host.config_file import ProblemReporter
from dsh_daemon.host.options import (
    NON_PROVIDER_KEYS,
    DaemonOptions,
    OptionsError,
    ServerSource,
    parse_options,
    parse_session_servers,
)
from dsh_daemon.host.paths import checked_path
from dsh_daemon.host.preload import preload_in_background, settle
from dsh_daemon.host.startup_gc import resume_collection
from dsh_daemon.server import params
from dsh_daemon.server.capabilities import DSH_CAPABILITIES, READ_FROM_CLIENT
from dsh_daemon.server.errors import DshError
from dsh_daemon.server.roots import check_root_uris
from dsh_daemon.server.settings import INIT_OPTIONS, Settings
from dsh_daemon.server.stdout import flush_made, set_delta_window

if TYPE_CHECKING:
    from dsh_daemon.host.early import EarlySessions
    from dsh_daemon.model import methods as m
    from dsh_daemon.model.inbox import Target
    from dsh_daemon.server.early_init import EarlyInitialize
    from dsh_daemon.server.frontend import LspFrontEnd

logger = logging.getLogger(__name__)

LIST_MAX_LIMIT = 1000  # sessions in one dsh/session/list page
# What the first dsh/* request imports (the front end, the declarations), loaded after `initialized`.
PRELOAD = ("dsh_daemon.server.frontend", "dsh_daemon.model.methods")
# What a first `dsh/session/new` is answered with (`Daemon.new_early`): loaded first; the rest waits
# for that answer, or this long when none comes (an editor sends it as soon as it can).
PRELOAD_FIRST = ("dsh_daemon.host.early",)
PRELOAD_HOLD_S = 0.1
# The requests whose handler imports nothing beyond PRELOAD_FIRST (server/transport.py: `dispatch`).
FIRST_PRELOADED_ONLY = frozenset({"dsh/session/new"})


class _Declarations:
    """`model/methods.py`, imported on first use: building its declarations costs more than the rest
    of answering `initialize`, so the first `dsh/*` request pays for it (as it pays for the host)."""

    def __getattr__(self, name: str) -> Any:
        from dsh_daemon.model import methods

        return getattr(methods, name)


if not TYPE_CHECKING:
    m = _Declarations()


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
    # The id of an `initialize` answered before pygls was loaded (server/early_init.py): pygls still
    # handles it, for its own state, but its reply has left already.
    answered_early: Any = None

    def _send_response(self, msg_id: Any, result: Any = None, error: Any = None) -> None:
        if self.answered_early is not None and msg_id == self.answered_early:
            self.answered_early = None
            if error is not None:  # the early path vouched for these params: a drift, not a client's mistake
                logger.error("the initialize answered early failed when pygls handled it: %s", error)
            return
        super()._send_response(msg_id, result, error)

    @lsp_method(types.INITIALIZE)
    def lsp_initialize(self, params: types.InitializeParams) -> Any:
        result = yield from super().lsp_initialize(params)
        result.capabilities.experimental = {"dsh": DSH_CAPABILITIES}
        return result


class Daemon:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.server = LanguageServer(
            "dsh-daemon", __version__, protocol_cls=DshProtocol, converter_factory=converter_factory
        )
        self.init: types.InitializeParams | None = None
        self.options: DaemonOptions | None = None  # initializationOptions, parsed at initialize
        self._options_parsed_early: DaemonOptions | None = None  # by server/early_init.py
        self._front_end: LspFrontEnd | None = None
        self._early: EarlySessions | None = None  # sessions created before the front end (`new_early`)
        self.shutting_down = False
        self._closing: asyncio.Future[None] | None = None
        # config.json's left-out entries: a warning the editor shows (the terminal chat prints it)
        self.file_problems = ProblemReporter(
            lambda text: self.server.window_show_message(
                types.ShowMessageParams(types.MessageType.Warning, text)
            )
        )
        register(self)

    def adopt_early_initialize(self, early: EarlyInitialize) -> None:
        """The `initialize` answered before pygls was loaded (server/early_init.py), handled by pygls
        now, its reply suppressed: pygls' state (workspace, client capabilities) and the daemon's are
        as if pygls had answered it. Client capabilities pygls cannot read are left out, and the
        editor is told (the reply that accepted them has left)."""
        protocol = self.server.protocol
        assert isinstance(protocol, DshProtocol)
        message, dropped = _structured_initialize(protocol, early.message)
        if dropped:
            logger.warning("client capabilities pygls cannot read, ignored: %s", ", ".join(dropped))
            self.server.window_show_message(
                types.ShowMessageParams(
                    types.MessageType.Warning,
                    f"dsh: client capabilities ignored (not readable as LSP): {', '.join(dropped)}",
                )
            )
        self._options_parsed_early = early.options
        protocol.answered_early = early.message["id"]
        try:
            protocol.handle_message(message)
        finally:
            self._options_parsed_early = None

    def adopt_early_sessions(self, early: EarlySessions) -> None:
        """A first `dsh/session/new` answered before pygls was loaded (server/early_init.py), from the
        store alone as `new_early` answers it: wired the same way, right after."""
        self._early = early
        asyncio.get_running_loop().call_soon(self._build_front_end)

    def _check_ready(self) -> tuple[types.InitializeParams, DaemonOptions]:
        if self.shutting_down:
            raise errors.shutting_down()
        if self.init is None or self.options is None:
            raise errors.not_initialized()
        return self.init, self.options

    @property
    def front_end(self) -> LspFrontEnd:
        """The session host and this front end's side of it, built on the first `dsh/*` request that
        needs it (or right after a `new_early` reply). Sessions created before it (`new_early`) are
        wired here, before anything can use them."""
        p, options = self._check_ready()
        if self._front_end is None:
            settle()  # the machinery is imported by the preload (waited for here), or now
            from dsh_daemon.server.frontend import LspFrontEnd

            folders = [to_fs_path(f.uri) for f in p.workspace_folders or []]
            root = to_fs_path(p.root_uri) if p.root_uri else p.root_path
            roots = [r for r in [*folders, root] if r]
            self._front_end = LspFrontEnd(
                self.server,
                self.settings.state_dir,
                options,
                roots,
                p.capabilities,
                early=self._early,
            )
        if self._early is not None and self._early.pending:
            self._front_end.host.adopt_early_sessions(self._early, self._tell_not_set_up)
        return self._front_end

    def new_early(self, cwd: str, servers: ServerSource) -> str:
        """Issue 20.2 for the LSP front end: a `dsh/session/new` before the front end is built (the
        connection's first, typically sent right after `initialized` while the preload still imports
        the agent, the tools and the provider) is answered from the store alone: the session's row and
        lease (`host/early.py`). Its tools, agent and provider are wired right after the reply, or by
        the first request that needs the front end, whichever comes first (`front_end`), so a send
        that comes at once waits for them. Everything here is among PRELOAD_FIRST (the read loop waited
        for those only): nothing else may be imported here."""
        self._check_ready()
        from dsh_daemon.host.early import EarlySessions

        if self._early is None:
            self._early = EarlySessions(self.settings.state_dir)
        session_id = self._early.create_durably(cwd, (), servers).session_id
        logger.info("session %s: created before the session machinery, wired after its reply", session_id)
        asyncio.get_running_loop().call_soon(self._build_front_end)
        return session_id

    def _build_front_end(self) -> None:
        """Right after a `new_early` reply: the front end built and the early sessions wired (unless a
        request behind the reply has done it already). A failure is the next request's to report."""
        if self.shutting_down:
            return
        flush_made(self.server.protocol)  # the reply leaves first: building waits for the preload
        try:
            self.front_end  # noqa: B018  (built, and the early sessions wired, as a side effect)
        except Exception:
            logger.exception("the session host could not be built")
        # The start's collection pass waited for this reply (server/transport.py); now, while the
        # client reads it, with the session machinery's objects among those it then freezes.
        resume_collection()

    def _tell_not_set_up(self, session_id: str, reason: str) -> None:
        """A session answered early whose tools or agent could not be set up (it is gone again)."""
        self.server.window_show_message(
            types.ShowMessageParams(
                types.MessageType.Error, f"dsh: session {session_id} could not be set up: {reason}"
            )
        )

    async def close(self) -> None:
        """D6: running turns end aborted{shutdown}; queues stay parked for the next attach. Every
        caller (shutdown, exit, EOF, SIGTERM) waits for the one close: a second caller must not close
        the store under the first one's turns while they are still writing their `turn/end`."""
        self.shutting_down = True
        if self._front_end is not None:
            # First, before any turn is waited for: whatever waits on the editor (a turn's tool, a
            # rewind) ends now, whatever the editor does.
            self._front_end.requests.close("the daemon is shutting down")
        if self._closing is None:
            self._closing = asyncio.ensure_future(self._close_front_end())
        await asyncio.shield(self._closing)

    async def _close_front_end(self) -> None:
        if self._front_end is not None:
            await self._front_end.close()
            self._front_end = None
        elif self._early is not None:
            self._early.close()  # no host took the early sessions over: their leases go


def _structured_initialize(protocol: DshProtocol, data: dict[str, Any]) -> tuple[Any, list[str]]:
    """The early `initialize` as pygls' message, and the client capability sections left out because
    pygls cannot structure them (the early path vouches for everything else: server/early_init.py)."""
    try:
        return protocol.structure_message(data), []
    except JsonRpcException:
        pass
    params = data["params"]
    capabilities = params["capabilities"]
    kept: dict[str, Any] = {}
    dropped: list[str] = []

    def readable(name: str, section: Any) -> bool:
        try:
            protocol.structure_message({**data, "params": {**params, "capabilities": {name: section}}})
        except JsonRpcException:
            return False
        return True

    for name, section in capabilities.items():
        if readable(name, section):
            kept[name] = section
            continue
        dropped.append(name)
        read = READ_FROM_CLIENT.get(name)  # the part the early reply was computed from, when readable
        if isinstance(section, dict) and read in section and readable(name, {read: section[read]}):
            kept[name] = {read: section[read]}
    trimmed = {**data, "params": {**params, "capabilities": kept}}
    return protocol.structure_message(trimmed), dropped


async def _settled(work: Awaitable[Any]) -> Any:
    """`await work`, for a generator handler's `yield`: its exception is returned, not raised (pygls
    would not throw it back into the generator, whose typed errors say what failed)."""
    try:
        return await work
    except Exception as exc:
        return exc


async def _off_loop(work: Callable[..., Any], *args: Any) -> Any:
    """`work(*args)` in a thread, for a generator handler's `yield`: its exception is returned, not
    raised (pygls would not throw it back into the generator, whose typed errors say what failed)."""
    try:
        return await asyncio.to_thread(work, *args)
    except Exception as exc:
        return exc


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
    if not isinstance(exc, errors.WireError):
        # `wire_error` imports the layers' error classes: never beside the preload (a request answered
        # with the preload's first modules may fail here while it runs).
        settle()
    typed = errors.wire_error(exc)
    if typed is not None:
        return typed
    logger.exception("dsh handler failed")
    return errors.internal_error(f"{type(exc).__name__}: {exc}")


def register(daemon: Daemon) -> None:
    server = daemon.server
    feature = server.feature

    @server.feature(types.INITIALIZE)
    @typed_errors
    def on_initialize(ls: LanguageServer, p: types.InitializeParams) -> None:
        options = p.initialization_options
        # Every option is parsed here, once: a bad one is refused in this reply, where the editor shows it.
        settings = daemon.settings
        check_root_uris(p)
        daemon.options = daemon._options_parsed_early or parse_options(
            settings.state_dir, settings.env, settings.flags, options, what=INIT_OPTIONS
        )
        daemon.init = p
        set_delta_window(ls.protocol, daemon.options.delta_coalesce_s)

    @server.feature(types.INITIALIZED)
    def on_initialized(ls: LanguageServer, p: types.InitializedParams) -> None:
        # The session machinery loads while the editor gets to its first dsh/* request: after the
        # frames already written in this pass of the loop leave (the writer's flush runs first).
        if daemon.init is not None and daemon._front_end is None:
            asyncio.get_running_loop().call_soon(
                preload_in_background, PRELOAD, PRELOAD_FIRST, PRELOAD_HOLD_S
            )
        # after the initialize reply: the first moment the client takes notifications
        if daemon.options is not None:
            daemon.file_problems.report(daemon.options.file_problems)

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
        set_delta_window(ls.protocol, options.delta_coalesce_s)
        daemon.file_problems.report(options.file_problems)  # the file is read again: new mistakes
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

    # ---- the dsh methods (model/methods.py declares each one's params and result) -------------------

    def session_new(ls: LanguageServer, p: m.SessionNewParams) -> Generator[Any, Any, m.SessionNewResult]:
        method = "dsh/session/new"
        cwd = _session_cwd(ls, p.cwd, method)
        title = p.title
        if title is not None:
            from dsh_daemon.host.manager import MAX_TITLE_CHARS, collapse_title

            # The same rule as a rename: whitespace collapsed, at most 200 characters; "" = no title.
            title = collapse_title(title) or None
            if title is not None and len(title) > MAX_TITLE_CHARS:
                raise errors.invalid_params(
                    f"{method}: 'title' must hold at most {MAX_TITLE_CHARS} characters after collapsing "
                    f"whitespace (got {len(title)})"
                )
        servers = parse_session_servers(p.mcp_servers, f"{method}: mcpServers")
        host = daemon.front_end.host
        if p.worktree is None:
            return m.SessionNewResult(host.create(cwd, title=title, mcp_servers=servers).session_id)
        from dsh_daemon.host.worktree_sessions import create_in_worktree

        wanted = p.worktree
        made = yield (
            _settled,
            (create_in_worktree(host, cwd, wanted.branch, wanted.base, title=title, mcp_servers=servers),),
            {},
        )
        if isinstance(made, BaseException):
            raise made
        hosted = made
        return m.SessionNewResult(hosted.session_id)

    def session_list(ls: LanguageServer, p: m.SessionListParams) -> Generator[Any, Any, dict[str, Any]]:
        limit = None if p.limit is None else min(p.limit, LIST_MAX_LIMIT)
        # Read at dispatch (pipelined requests behind it see the same store); a worktree's figures
        # (git) are measured off the event loop.
        listed = daemon.front_end.list_sessions(_absolute(ls, p.cwd) if p.cwd else None, limit, p.before)
        ids = [row["sessionId"] for row in listed["sessions"]]
        from dsh_daemon.host import worktree_sessions

        rows = worktree_sessions.worktree_rows(daemon.front_end.host, ids) if ids else []
        if rows:
            figures = yield _off_loop, (worktree_sessions.figures_blocking, rows), {}
            if isinstance(figures, dict):
                for row in listed["sessions"]:
                    if row["sessionId"] in figures:
                        row["worktree"] = figures[row["sessionId"]]
        return listed

    async def worktree_list(ls: LanguageServer, p: m.WorktreeListParams) -> dict[str, Any]:
        from dsh_daemon.host import worktree_sessions

        repo = _absolute(ls, p.repo) if p.repo else None
        return {"worktrees": await worktree_sessions.list_worktrees(daemon.front_end.host, repo)}

    def worktree_method(name: str) -> Callable[..., Any]:
        async def handler(ls: LanguageServer, p: m.WorktreeParams) -> dict[str, Any]:
            from dsh_daemon.host import worktree_sessions

            do = getattr(worktree_sessions, name)
            result: dict[str, Any] = await do(daemon.front_end.host, p.session_id, p.path)
            return result

        return handler

    def session_attach(ls: LanguageServer, p: m.SessionAttachParams) -> dict[str, Any]:
        after = -1 if p.after_seq is None else p.after_seq
        return daemon.front_end.attach(p.session_id, after, p.replay == "all")

    def session_transcript(ls: LanguageServer, p: m.SessionTranscriptParams) -> dict[str, Any]:
        # The host applies the default limit and the cap.
        return daemon.front_end.host.transcript(p.session_id, p.before_turn, p.limit)

    def session_usage(ls: LanguageServer, p: m.SessionParams) -> dict[str, Any]:
        return daemon.front_end.host.usage(p.session_id)

    def session_rename(ls: LanguageServer, p: m.SessionRenameParams) -> m.Empty:
        daemon.front_end.host.rename(p.session_id, p.title, method="dsh/session/rename")
        return m.Empty()

    def session_delete(ls: LanguageServer, p: m.SessionDeleteParams) -> m.Empty:
        daemon.front_end.host.delete(p.session_id, remove_worktree=bool(p.remove_worktree))
        return m.Empty()

    def session_detach(ls: LanguageServer, p: m.SessionParams) -> m.Empty:
        daemon.front_end.host.detach(p.session_id)
        return m.Empty()

    def models_list(ls: LanguageServer, p: m.ModelsListParams) -> dict[str, Any]:
        from dsh_daemon.host.models import configured_models

        host = daemon.front_end.host
        if p.session_id is None:
            provider = host.options.provider
            return {"models": configured_models(provider), "current": provider.model}
        models, (model, _thinking, effort) = host.model_settings(p.session_id)
        return {"models": models, "current": model, "reasoningEffort": effort}

    def session_set_model(ls: LanguageServer, p: m.SessionSetModelParams) -> m.Empty:
        host, method = daemon.front_end.host, "dsh/session/setModel"
        if p.model is None and p.reasoning_effort is None:
            raise errors.invalid_params(f"{method}: give a model, a reasoningEffort or both")
        host.refuse_a_childs_changes(p.session_id)
        given: dict[str, object] = {"model": p.model, "reasoning_effort": p.reasoning_effort}
        changes = {k: v for k, v in given.items() if v is not None}
        host.set_model_settings(p.session_id, changes, method=method)
        return m.Empty()

    def session_set_mode(ls: LanguageServer, p: m.SessionSetModeParams) -> m.Empty:
        daemon.front_end.host.set_mode(p.session_id, p.mode, method="dsh/session/setMode")
        return m.Empty()

    def session_take_over(ls: LanguageServer, p: m.SessionTakeOverParams) -> m.Empty:
        daemon.front_end.host.take_over(p.session_id, force=p.force)
        return m.Empty()

    def session_hand_over(ls: LanguageServer, p: m.SessionParams) -> m.Empty:
        daemon.front_end.host.hand_over_now(p.session_id)
        return m.Empty()

    async def session_compact(ls: LanguageServer, p: m.SessionParams) -> dict[str, Any]:
        return await daemon.front_end.driven(p.session_id).compact()

    async def session_rewind(ls: LanguageServer, p: m.SessionRewindParams) -> dict[str, Any]:
        return await daemon.front_end.host.rewind(
            p.session_id, p.before_turn, files=p.files, conversation=p.conversation, force=p.force
        )

    def session_checkpoints(ls: LanguageServer, p: m.SessionParams) -> dict[str, Any]:
        return daemon.front_end.host.checkpoints_of(p.session_id)

    async def turn_diff(ls: LanguageServer, p: m.TurnDiffParams) -> dict[str, Any]:
        return await daemon.front_end.host.turn_diff(p.session_id, p.turn)

    async def turn_keep(ls: LanguageServer, p: m.TurnReviewParams) -> dict[str, Any]:
        return await daemon.front_end.host.keep_hunks(p.session_id, p.turn, p.path, p.hunks)

    async def turn_undo(ls: LanguageServer, p: m.TurnReviewParams) -> dict[str, Any]:
        return await daemon.front_end.host.undo_hunks(p.session_id, p.turn, p.path, p.hunks)

    def session_fork(ls: LanguageServer, p: m.SessionForkParams) -> m.SessionForkResult:
        message = None if p.message is None else params.client_message(p.message, "dsh/session/fork")
        return m.SessionForkResult(daemon.front_end.host.fork(p.session_id, p.at_turn, message))

    def sender(method: str, preset: str | None) -> Callable[..., m.SendResult]:
        verb = method.removeprefix("dsh/")

        def send(ls: LanguageServer, p: m.SendParams | m.PresetSendParams) -> m.SendResult:
            # Synchronous on purpose (context files included): each send is queued while its frame is
            # dispatched, so pipelined sends, cancels and edits apply in arrival order.
            message = params.client_message(p.message, method)
            target: Target
            if preset is None:
                target, wakeup = p.target, p.wakeup  # type: ignore[union-attr]
            else:
                from dsh_daemon.model.inbox import PRESETS  # not before `initialize`

                target, wakeup = PRESETS[preset]
            specs = params.context_refs(p.context, method) or ()
            message_id, attachments = daemon.front_end.send(
                p.session_id, message, target, wakeup, specs, verb
            )
            return m.SendResult(message_id, tuple(a.id for a in attachments) or None)

        return send

    def cancel(ls: LanguageServer, p: m.CancelParams) -> Generator[Any, Any, m.Empty]:
        # A generator handler: pygls runs it up to its first `yield` while it dispatches the frame, so
        # the cancel acts on what was running when it arrived. (An `async def` would run only after the
        # frames pipelined behind it, and abort the turn a following send had just started.)
        session = daemon.front_end.driven(p.session_id)
        session.cancel(p.cause, keep_inbox=p.keep_inbox, stop_processes=p.stop_processes)
        yield session.until_settled, (), {}
        return m.Empty()

    def process_list(ls: LanguageServer, p: m.SessionParams) -> dict[str, Any]:
        return {"processes": daemon.front_end.host.process_list(p.session_id)}

    def agents_list(ls: LanguageServer, p: m.AgentsListParams) -> dict[str, Any]:
        if (p.session_id is None) == (p.cwd is None):
            raise errors.invalid_params("dsh/agents/list: give either sessionId or cwd")
        if p.session_id is not None:
            return {"agents": daemon.front_end.host.agent_definitions(p.session_id)}
        # As a session's cwd would be (absolute, inside the workspace): the folder it would have.
        cwd = _session_cwd(ls, p.cwd, "dsh/agents/list")
        return {"agents": daemon.front_end.host.agent_definitions_in(cwd)}

    def process_output(ls: LanguageServer, p: m.ProcessOutputParams) -> dict[str, Any]:
        max_chars = min(p.max_chars or m.PROCESS_OUTPUT_DEFAULT_CHARS, m.PROCESS_OUTPUT_MAX_CHARS)
        return daemon.front_end.host.process_output(p.session_id, p.process_id, max_chars)

    async def process_stop(ls: LanguageServer, p: m.ProcessParams) -> dict[str, Any]:
        return await daemon.front_end.host.process_stop(p.session_id, p.process_id)

    async def review_start(ls: LanguageServer, p: m.ReviewStartParams) -> dict[str, Any]:
        return await daemon.front_end.host.review_start(p.session_id, p.base, p.commit, p.instructions)

    def review_list(ls: LanguageServer, p: m.SessionParams) -> dict[str, Any]:
        return daemon.front_end.host.review_list(p.session_id)

    def review_dismiss(ls: LanguageServer, p: m.ReviewDismissParams) -> m.ReviewDismissResult:
        return m.ReviewDismissResult(
            daemon.front_end.session(p.session_id).dismiss_finding_durably(p.finding_id)
        )

    def wake(ls: LanguageServer, p: m.SessionParams) -> m.WakeResult:
        return m.WakeResult(daemon.front_end.driven(p.session_id).wake())

    def inbox_list(ls: LanguageServer, p: m.SessionParams) -> dict[str, Any]:
        return daemon.front_end.host.inbox(p.session_id)

    def inbox_remove(ls: LanguageServer, p: m.InboxRemoveParams) -> m.InboxRemoveResult:
        return m.InboxRemoveResult(daemon.front_end.driven(p.session_id).remove(p.message_id))

    def inbox_replace(ls: LanguageServer, p: m.InboxReplaceParams) -> m.SendResult:
        method = "dsh/inbox/replace"
        message = params.client_message(p.message, method)
        specs = params.context_refs(p.context, method)
        front_end = daemon.front_end
        attachments = None if specs is None else front_end.context_messages(p.session_id, specs)
        front_end.driven(p.session_id).replace(p.message_id, message, attachments)
        return m.SendResult(message.id, tuple(a.id for a in attachments or ()) or None)

    def inbox_move(ls: LanguageServer, p: m.InboxMoveParams) -> m.Empty:
        index = -1 if p.index is None else p.index
        daemon.front_end.driven(p.session_id).move(p.message_id, p.target, index)
        return m.Empty()

    def permissions_list(ls: LanguageServer, p: m.SessionParams) -> dict[str, Any]:
        front_end = daemon.front_end
        grants = front_end.session(p.session_id).grants()
        return {"grants": grants, "open": front_end.approver(p.session_id).open_requests()}

    def permissions_revoke(ls: LanguageServer, p: m.PermissionsRevokeParams) -> m.PermissionsRevokeResult:
        return m.PermissionsRevokeResult(daemon.front_end.session(p.session_id).revoke_grants(p.scope))

    def permissions_respond(ls: LanguageServer, p: m.PermissionsRespondParams) -> m.PermissionsRespondResult:
        return m.PermissionsRespondResult(
            daemon.front_end.approver(p.session_id).respond(
                p.call_id, p.outcome, p.new_text, p.persist, p.unsaved, p.mode, p.feedback
            )
        )

    def commands_list(ls: LanguageServer, p: m.CommandsListParams) -> dict[str, Any]:
        if (p.session_id is None) == (p.cwd is None):
            raise errors.invalid_params("dsh/commands/list: give either sessionId or cwd")
        if p.session_id is not None:
            return daemon.front_end.host.commands_of(p.session_id)
        return daemon.front_end.host.commands_in(p.cwd)

    def project_trust(ls: LanguageServer, p: m.ProjectTrustParams) -> m.ProjectTrustResult:
        root, hooks, events = daemon.front_end.host.trust_project(p.root, method="dsh/project/trust")
        return m.ProjectTrustResult(root, hooks, events)

    def context_add(ls: LanguageServer, p: m.ContextAddParams) -> m.MessageIdResult:
        # Synchronous like the sends: queued in arrival order (the safe reader never blocks).
        method = "dsh/context/add"
        from dsh_daemon.model.wire import ContextRef

        spec = ContextRef(p.uri, p.kind, p.range, p.diagnostics, p.diff, p.terminal)
        params.context_refs((spec,), method, where="")
        return m.MessageIdResult(daemon.front_end.context_add(p.session_id, spec, p.delivery))

    handlers: dict[str, Callable[..., Any]] = {
        "dsh/session/list": session_list,
        "dsh/session/attach": session_attach,
        "dsh/session/detach": session_detach,
        "dsh/session/takeOver": session_take_over,
        "dsh/session/handOver": session_hand_over,
        "dsh/session/setMode": session_set_mode,
        "dsh/models/list": models_list,
        "dsh/session/setModel": session_set_model,
        "dsh/session/transcript": session_transcript,
        "dsh/session/usage": session_usage,
        "dsh/session/rename": session_rename,
        "dsh/session/delete": session_delete,
        "dsh/session/compact": session_compact,
        "dsh/session/rewind": session_rewind,
        "dsh/session/checkpoints": session_checkpoints,
        "dsh/turn/diff": turn_diff,
        "dsh/turn/keep": turn_keep,
        "dsh/turn/undo": turn_undo,
        "dsh/session/fork": session_fork,
        "dsh/send": sender("dsh/send", None),
        "dsh/followup": sender("dsh/followup", "followup"),
        "dsh/steer": sender("dsh/steer", "steer"),
        "dsh/inject": sender("dsh/inject", "inject"),
        "dsh/cancel": cancel,
        "dsh/wake": wake,
        "dsh/process/list": process_list,
        "dsh/review/start": review_start,
        "dsh/review/list": review_list,
        "dsh/review/dismiss": review_dismiss,
        "dsh/agents/list": agents_list,
        "dsh/worktree/list": worktree_list,
        "dsh/worktree/diff": worktree_method("diff"),
        "dsh/worktree/apply": worktree_method("apply"),
        "dsh/worktree/keep": worktree_method("keep"),
        "dsh/worktree/discard": worktree_method("discard"),
        "dsh/process/output": process_output,
        "dsh/process/stop": process_stop,
        "dsh/inbox/list": inbox_list,
        "dsh/project/trust": project_trust,
        "dsh/commands/list": commands_list,
        "dsh/inbox/remove": inbox_remove,
        "dsh/inbox/replace": inbox_replace,
        "dsh/inbox/move": inbox_move,
        "dsh/context/add": context_add,
        "dsh/permissions/list": permissions_list,
        "dsh/permissions/revoke": permissions_revoke,
        "dsh/permissions/respond": permissions_respond,
    }
    for name, handler in handlers.items():  # tests/server/test_declared.py: exactly the declared ones
        feature(name)(typed_errors(params.typed(name, handler)))

    typed_session_new = params.typed("dsh/session/new", session_new)

    @feature("dsh/session/new")
    @typed_errors
    def first_session_new(ls: LanguageServer, raw: Any) -> Any:
        # Before the front end is built, plain params (no title, each of its declared type) are
        # answered from the store alone (`Daemon.new_early`), with the checks `session_new` makes, in
        # its order; anything else is decoded and answered by `session_new`, as every later request.
        method = "dsh/session/new"
        plain = params.plain_session_new(raw) if daemon._front_end is None else None
        if plain is None:
            settle()  # the declarations (and for a title the session machinery): not beside the preload
            return (yield from typed_session_new(ls, raw))
        cwd = _session_cwd(ls, plain[0], method)
        servers = parse_session_servers(plain[1], f"{method}: mcpServers")
        return {"sessionId": daemon.new_early(cwd, servers)}

    @feature("dsh/context/didChange")
    def context_did_change(ls: LanguageServer, raw: Any) -> None:
        if daemon.init is None or daemon.shutting_down:
            return
        try:
            state = params.decode("dsh/context/didChange", raw)
        except errors.WireError as exc:  # a notification has no reply to carry the error: dropped, logged
            logger.warning("dsh/context/didChange dropped: %s", exc.message)
            return
        daemon.front_end.context_did_change(state, raw)


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


def _session_cwd(ls: LanguageServer, cwd: str | None, method: str) -> str:
    """A new session's cwd: the client's, made absolute, else the workspace's; inside the workspace."""
    path = _absolute(ls, checked_path(cwd, method, "cwd")) if cwd else _default_cwd(ls)
    _check_inside_workspace(ls, path, method)
    return path


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
