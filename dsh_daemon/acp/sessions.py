"""ACP sessions over the shared core: one `SessionManager` (store, leases, repair), each session's
agent wired with the coding tools, the system prompt, the client's files and the ACP approver, and
its events translated for this connection.

Every operation that queues input is synchronous (committed before it returns), so requests take
effect in the order they arrive.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsh_daemon.acp.context import PromptParts
from dsh_daemon.acp.files import ClientFiles, FsCapabilities
from dsh_daemon.acp.permissions import AcpApprover
from dsh_daemon.acp.prompts import PromptBook
from dsh_daemon.acp.rpc import Connection
from dsh_daemon.acp.transport import RequestId
from dsh_daemon.acp.updates import Translator
from dsh_daemon.agent.hooks import Hooks
from dsh_daemon.agent.inbox import (
    Target,
)
from dsh_daemon.agent.loop import Agent, AgentDisposedError, AgentOptions
from dsh_daemon.agent.tools import Approver, ToolRegistry
from dsh_daemon.host import errors
from dsh_daemon.host.manager import SessionManager
from dsh_daemon.host.options import DaemonOptions
from dsh_daemon.host.paths import is_directory
from dsh_daemon.host.wiring import SessionTools, session_hooks, wire_session_tools
from dsh_daemon.mcp.config import ServerSource
from dsh_daemon.model.events import Event
from dsh_daemon.tools.documents import DocumentSource
from dsh_daemon.tools.edits import EditApplier
from dsh_daemon.tools.workspace import Workspace

logger = logging.getLogger(__name__)

CANCEL_SETTLE_S = 10.0


@dataclass
class Wiring:
    """What a session's agent is built from (made before the agent exists)."""

    files: ClientFiles
    tools: SessionTools  # the coding tools, their workspace, the session's MCP servers
    translator: Translator

    @property
    def workspace(self) -> Workspace:
        return self.tools.workspace


@dataclass
class OpenSession:
    agent: Agent
    wiring: Wiring
    book: PromptBook = field(default_factory=PromptBook)
    unsubscribe: Callable[[], None] | None = None


def iso_time(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).isoformat().replace("+00:00", "Z")


def context_window(options: DaemonOptions) -> int | None:
    window = getattr(options.provider, "context_window", None)
    value = window(options.provider.model) if callable(window) else None
    return value if isinstance(value, int) else None


class AcpSessions:
    def __init__(
        self, connection: Connection, state_dir: Path, options: DaemonOptions, fs: FsCapabilities
    ) -> None:
        from dsh_daemon.llm.deepseek import make_provider

        self.connection = connection
        self.options = options
        self.fs = fs
        self.wirings: dict[str, Wiring] = {}
        self._files: dict[str, ClientFiles] = {}  # between `document_source` and `_wire`
        self.sessions: dict[str, OpenSession] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        model = options.provider.model
        self.manager = SessionManager(
            state_dir,
            provider=make_provider(options.provider),
            options=lambda: AgentOptions(model=model),
            tools=self._tools,
            hooks=self._hooks,
            approver=self.new_approver,
        )
        self.manager.start_heartbeat()

    # ---- wiring --------------------------------------------------------------------------------------

    def _wire(
        self,
        session_id: str,
        cwd: str,
        extra_roots: Sequence[str] = (),
        mcp_servers: ServerSource | None = None,
    ) -> Wiring:
        wiring = self.wirings.get(session_id)
        if wiring is not None:
            return wiring
        roots = [cwd, *(r for r in extra_roots if is_directory(r))]
        workspace = Workspace(roots, cwd=cwd)
        tools = wire_session_tools(self, session_id, workspace, self.options, mcp_servers)
        files = self._files.pop(session_id)  # made by `document_source` for these tools
        translator = Translator(
            lambda update: self.connection.notify(
                "session/update", {"sessionId": session_id, "update": update}
            ),
            cwd=str(workspace.cwd),
            context_window=context_window(self.options),
            title=lambda: self._title(session_id),
        )
        wiring = Wiring(files, tools, translator)
        self.wirings[session_id] = wiring
        return wiring

    def _unwire(self, session_id: str) -> None:
        """Forget the session's wiring; its MCP servers stop (in the background)."""
        wiring = self.wirings.pop(session_id, None)
        if wiring is not None:
            wiring.tools.close_in_background(self._tasks)

    def _title(self, session_id: str) -> str | None:
        try:
            return self.manager.info(session_id).title
        except Exception:
            return None

    def _tools(self, session_id: str) -> ToolRegistry:
        return self.wirings[session_id].tools.kit.registry

    def _hooks(self, session_id: str) -> Hooks:
        wiring = self.wirings[session_id]
        # The editor's buffers are fetched before the permission policy, so a preview shows their text.
        return session_hooks(wiring.tools, self.options.agent, pre_execute=[wiring.files.prefetch])

    # ---- the front-end port (host/port.py) ---------------------------------------------------------------

    def document_source(self, session_id: str, workspace: Workspace) -> DocumentSource:
        # One ClientFiles per session is both its document source and its edit applier.
        files = self._files[session_id] = ClientFiles(self.connection, session_id, workspace, self.fs)
        return files

    def edit_applier(self, session_id: str, workspace: Workspace) -> EditApplier:
        return self._files[session_id]

    def new_approver(self, session_id: str) -> Approver:
        wiring = self.wirings[session_id]
        return AcpApprover(
            self.connection, session_id, lambda: wiring.translator, self.options.permission_timeout_s
        )

    def report_mcp_status(self, session_id: str, data: Mapping[str, Any]) -> None:
        self.connection.notify("_dsh/mcp/status", {"sessionId": session_id, **data})

    # ---- opening -------------------------------------------------------------------------------------

    def new(self, cwd: str, extra_roots: Sequence[str], mcp_servers: ServerSource | None = None) -> str:
        session_id = str(uuid.uuid4())
        try:
            self._wire(session_id, cwd, extra_roots, mcp_servers)
            agent = self.manager.create(cwd=cwd, session_id=session_id)
        except ValueError as exc:
            self._unwire(session_id)
            raise errors.invalid_params(f"session/new: {exc}") from exc
        except BaseException:
            self._unwire(session_id)
            raise
        self._subscribe(agent)
        return session_id

    def _open(
        self,
        session_id: str,
        cwd: str | None,
        extra_roots: Sequence[str] = (),
        mcp_servers: ServerSource | None = None,
    ) -> Agent:
        """The session, driven by this process (opened and wired if needed)."""
        state = self.sessions.get(session_id)
        if state is not None and state.agent.log.lease_lost is None:
            return state.agent
        if state is not None:
            self._forget(session_id)
        try:
            # Unknown, driven elsewhere, or unreadable: the StoreError says which (host/manager.py).
            stored = self.manager.info(session_id).cwd
            where = stored if stored and is_directory(stored) else (cwd or os.getcwd())
            self._wire(session_id, where, extra_roots, mcp_servers)
            return self.manager.open(session_id)
        except BaseException:
            self._unwire(session_id)
            raise

    def _subscribe(self, agent: Agent) -> OpenSession:
        session_id = agent.session_id
        state = self.sessions.get(session_id)
        if state is not None and state.agent is agent:
            return state
        state = OpenSession(agent, self.wirings[session_id])
        translator, book = state.wiring.translator, state.book

        def on_event(event: Event) -> None:
            translator.live(event)
            book.on_event(event)

        state.unsubscribe = agent.subscribe(on_event)
        self.sessions[session_id] = state
        return state

    def load(
        self,
        session_id: str,
        cwd: str | None,
        extra_roots: Sequence[str],
        mcp_servers: ServerSource | None = None,
    ) -> None:
        """Replay the durable log as updates, then continue live: replay and subscription happen in one
        synchronous stretch, so no event falls between them and none is sent twice."""
        agent = self._open(session_id, cwd, extra_roots, mcp_servers)
        translator = self.wirings[session_id].translator
        for event in [e for e in agent.log.events if e.seq is not None]:
            translator.replay(event)
        translator.title_changed()
        self._subscribe(agent)

    def resume(
        self,
        session_id: str,
        cwd: str | None,
        extra_roots: Sequence[str],
        mcp_servers: ServerSource | None = None,
    ) -> None:
        self._subscribe(self._open(session_id, cwd, extra_roots, mcp_servers))

    def state(self, session_id: str) -> OpenSession:
        """A session this connection opened (new, load or resume)."""
        state = self.sessions.get(session_id)
        if state is None:
            if session_id in self.wirings or self._known(session_id):
                shown = errors.shown(session_id)
                raise errors.invalid_params(f"session {shown} is not open here: session/load or resume it")
            raise errors.unknown_session(session_id)
        if state.agent.log.lease_lost is not None:
            lost = state.agent.log.lease_lost
            raise errors.session_busy(session_id, 0, str(lost))
        return state

    def _known(self, session_id: str) -> bool:
        try:
            self.manager.info(session_id)
        except Exception:
            return False
        return True

    def _forget(self, session_id: str) -> None:
        state = self.sessions.pop(session_id, None)
        self._unwire(session_id)
        if state is not None:
            if state.unsubscribe is not None:
                state.unsubscribe()
            state.book.close()

    async def close(self, session_id: str) -> None:
        """Stop driving the session here: a running turn ends aborted, queued input stays parked."""
        state = self.state(session_id)
        if state.unsubscribe is not None:
            state.unsubscribe()
        self.sessions.pop(session_id, None)
        try:
            await self.manager.close_session(session_id)
        finally:
            state.book.close()
            self._unwire(session_id)

    def list(self, cwd: str | None) -> list[dict[str, Any]]:
        out = []
        for info in self.manager.list_sessions(cwd):
            row: dict[str, Any] = {
                "sessionId": info.session_id,
                "cwd": info.cwd or "",
                "updatedAt": iso_time(info.updated_at),
                "_meta": {"dsh": {"status": info.status, "pending": info.pending}},
            }
            if info.title:
                row["title"] = info.title
            out.append(row)
        return out

    # ---- input ---------------------------------------------------------------------------------------

    def send(self, session_id: str, parts: PromptParts, target: Target, wakeup: bool, verb: str) -> str:
        agent = self.state(session_id).agent
        # A refused send (a duplicate id, a session shut down) leaves as its typed error (wire_error).
        return agent.send(
            parts.message, target=target, wakeup=wakeup, attachments=parts.attachments, verb=verb
        )

    def prompt(
        self, session_id: str, request_id: RequestId, parts: PromptParts
    ) -> asyncio.Future[dict[str, Any]]:
        """Queue a followup; the future resolves with the answer of the turn that claims it."""
        book = self.state(session_id).book
        future = book.add(request_id, parts.message.id)
        try:
            self.send(session_id, parts, "next-turn", True, "followup")
        except BaseException:
            book.drop(parts.message.id)
            raise
        return future

    def revoke(self, request_id: RequestId) -> bool:
        """`$/cancel_request` for a prompt: removed from the queue (answered -32800) if still pending."""
        for session_id, state in self.sessions.items():
            prompt = state.book.find(request_id)
            if prompt is None:
                continue
            if prompt.turn is not None:
                return False  # already running: only session/cancel stops it
            prompt.revoked = True
            if not state.agent.inbox.remove(prompt.message_id):
                prompt.revoked = False
                return False
            logger.info("session %s: queued prompt %s removed by $/cancel_request", session_id, request_id)
            return True
        return False

    def cancel(self, session_id: str) -> None:
        """Abort the running turn, keep the queue, then run it once the aborted turn has ended."""
        agent = self.state(session_id).agent
        agent.cancel("user", keep_inbox=True)

        async def run_queue() -> None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(agent.until_retired(), CANCEL_SETTLE_S)
            with contextlib.suppress(AgentDisposedError):
                agent.wake()

        task = asyncio.get_running_loop().create_task(run_queue())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def inbox_replace(self, session_id: str, message_id: str, parts: PromptParts) -> None:
        state = self.state(session_id)
        state.book.rebind(message_id, parts.message.id)
        try:
            state.agent.inbox.replace(message_id, parts.message, parts.attachments or None)
        except BaseException:
            state.book.rebind(parts.message.id, message_id)
            raise

    def inbox_move(self, session_id: str, message_id: str, target: Target, index: int) -> None:
        state = self.state(session_id)
        with state.book.moving(message_id):
            state.agent.inbox.move(message_id, target, index)

    def inbox_list(self, session_id: str) -> Mapping[str, Any]:
        return self.state(session_id).agent.inbox.to_json()

    def workspace(self, session_id: str) -> Workspace:
        return self.state(session_id).wiring.workspace

    async def shutdown(self) -> None:
        """D6: running turns end aborted{shutdown}; queued input stays parked for the next load."""
        for state in self.sessions.values():
            state.book.close()
        self.sessions.clear()
        await self.manager.close()
        for session_id in list(self.wirings):
            self._unwire(session_id)  # MCP servers end with their sessions
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        close_provider = getattr(self.manager.provider, "aclose", None)
        if close_provider is not None:
            await close_provider()
