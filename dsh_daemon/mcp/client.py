"""One session's MCP servers: started with the session, stopped with it, their tools in its registry.

Each server runs in a task of its own that holds the SDK's transport and `ClientSession` (their
context managers must be entered and left by one task); tool calls from the agent go through that
session. A server that fails to start or exits is reported (`on_status`, and the log), and its tools
stop being offered; a call to one fails with `MCP_UNAVAILABLE`. Nothing fails the session or the turn.

stdio servers carry `proctree`'s marker in their environment, so closing a server kills whatever it
left behind (grandchildren that ignored the end of stdin included), and so does the daemon's exit.
They are spoken to through `stdio.py` (linear reading, each message capped at `maxMessageBytes`),
not the SDK's stdio client. What a server does wrong is counted per server (`monitor.py`): malformed
messages are logged a few at a time and summarised, a server that keeps sending them is stopped and
marked `failed`, and its stderr is kept as a bounded tail for `mcp/status`.

A tool call waits at most `toolTimeoutS`; a call that times out or whose turn is cancelled is
abandoned at once and the server is sent `notifications/cancelled` for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal as signals
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from dsh_daemon.agent.hooks import PreStepContext, PreStepDecision
from dsh_daemon.agent.tools import Allow, Ask, Deny, PreExecuteDecision, ToolCall, ToolRegistry
from dsh_daemon.mcp.config import SESSION_MODE, HttpServer, ServerConfig, StdioServer
from dsh_daemon.mcp.monitor import ProtocolMonitor, ProtocolViolationError, StderrTail
from dsh_daemon.mcp.stdio import CALL_MARKER, StdioChannel, stdio_transport
from dsh_daemon.mcp.tools import (
    PREFIX,
    McpCallError,
    McpTool,
    Progress,
    ServerGoneError,
    make_spec,
    tool_name,
)
from dsh_daemon.tools import proctree
from dsh_daemon.tools.config import SandboxMode
from dsh_daemon.tools.factory import ToolKit
from dsh_daemon.tools.policy import PermissionPolicy
from dsh_daemon.tools.sandboxing import SandboxUnavailable

if TYPE_CHECKING:
    from mcp import ClientSession
    from mcp.types import CallToolResult, Tool

    from dsh_daemon.agent.signal import AbortSignal
    from dsh_daemon.tools.sandboxing import CommandSandbox

log = logging.getLogger(__name__)

State = Literal["starting", "ready", "failed", "exited", "stopped"]
StatusSink = Callable[[dict[str, Any]], None]
STOP_TIMEOUT_S = 6.0  # a stdio server gets 2 s after stdin closes, then 2 s after SIGTERM
CANCEL_NOTICE_S = 1.0  # a server too busy to take `notifications/cancelled` at once is not waited for


class ServerConnection:
    """One MCP server: its task, state and tools."""

    def __init__(
        self,
        config: ServerConfig,
        cwd: str | None,
        changed: Callable[[ServerConnection], None],
        sandbox: CommandSandbox | None = None,
    ):
        self.config = config
        self.name = config.name
        self.cwd = cwd
        self.sandbox = sandbox  # the session's: a server configured `sandbox` is started through it
        self.state: State = "starting"
        self.error: str | None = None
        self.tools: list[Tool] = []
        self._changed = changed
        self._session: ClientSession | None = None
        self._settled = asyncio.Event()  # the start is over: ready or failed
        self._stop = asyncio.Event()  # asked to stop, or gone: the task unwinds the connection
        self._ended = asyncio.Event()  # not running any more (calls under way fail at once)
        self._calls: set[asyncio.Future[CallToolResult]] = set()
        self._task: asyncio.Task[None] | None = None
        self._tree: proctree.ProcessTree | None = None
        self.monitor = ProtocolMonitor(self.name)
        self._channel: StdioChannel | None = None
        self._stderr = StderrTail()
        self._notices: set[asyncio.Task[None]] = set()

    @property
    def running(self) -> bool:
        return self.state == "ready"

    def unavailable_reason(self) -> str:
        what = {
            "starting": "has not started yet",
            "failed": "failed to start",
            "exited": "exited",
            "stopped": "was stopped",
            "ready": "is running",
        }[self.state]
        detail = f": {self.error}" if self.error else ""
        return f"MCP server {self.name!r} {what}{detail}; its tools are not available"

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"mcp server {self.name}")

    async def settled(self) -> None:
        self.start()
        await self._settled.wait()

    async def call(
        self, tool: str, arguments: Mapping[str, Any], progress: Progress | None = None
    ) -> CallToolResult:
        """The server's answer to one `tools/call`, within `toolTimeoutS`. Cancelled (the turn was),
        timed out or cut short by the server's end, the call is abandoned at once, and the server is
        told with `notifications/cancelled`."""
        from mcp.shared.exceptions import McpError
        from mcp.types import CONNECTION_CLOSED

        session = self._session
        if session is None or not self.running:
            raise ServerGoneError(self.unavailable_reason())
        marker = uuid.uuid4().hex
        ended = asyncio.ensure_future(self._ended.wait())
        on_progress = None
        if progress is not None:
            report = progress

            async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                report(progress, total, message)

        answer = asyncio.ensure_future(
            session.call_tool(
                tool, dict(arguments), progress_callback=on_progress, meta={CALL_MARKER: marker}
            )
        )
        self._calls.add(answer)  # held until it is over, cancelled or not
        answer.add_done_callback(self._calls.discard)
        timeout = self.config.tool_timeout_s
        try:
            await asyncio.wait({answer, ended}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            self._abandon(answer, marker, "the turn was cancelled")
            raise
        finally:
            ended.cancel()
        if not answer.done():
            if self._ended.is_set():
                answer.cancel()
                raise ServerGoneError(f"{self.unavailable_reason()} (during the call)")
            self._abandon(answer, marker, f"no answer within {timeout:g} s")
            raise McpCallError(
                f"no answer from {tool} within {timeout:g} s (toolTimeoutS); the call was cancelled"
            )
        if answer.cancelled():
            raise ServerGoneError(f"{self.unavailable_reason()} (during the call)")
        cut = self._cut_answer(marker)
        if cut is not None:
            # The SDK checks a result against the tool's output schema, and the cut one's
            # `structuredContent` was in the dropped rest: the cut result stands, whatever that check says.
            with contextlib.suppress(Exception):
                answer.result()  # retrieved, so a failed check is not logged as never retrieved
            return cut
        try:
            return answer.result()
        except McpError as exc:
            if exc.error.code == CONNECTION_CLOSED or not self.running:
                self._gone("exited", "the connection closed during the call")
                raise ServerGoneError(f"{self.unavailable_reason()} (during the call)") from exc
            raise McpCallError(exc.error.message) from exc
        except Exception as exc:
            if not self.running:
                raise ServerGoneError(f"{self.unavailable_reason()} (during the call)") from exc
            raise McpCallError(f"{type(exc).__name__}: {exc}") from exc

    def _cut_answer(self, marker: str) -> CallToolResult | None:
        """The cut result the transport put in place of this call's answer (over `maxMessageBytes`),
        or None; either way the call's request id is forgotten."""
        from mcp.types import CallToolResult

        channel = self._channel
        if channel is None:
            return None
        request_id = channel.call_ids.pop(marker, None)
        cut = None if request_id is None else channel.cut_answers.pop(request_id, None)
        return None if cut is None else CallToolResult.model_validate(cut)

    def _abandon(self, answer: asyncio.Future[CallToolResult], marker: str, reason: str) -> None:
        """Stop waiting for a call, and tell the server (without waiting for that either)."""
        answer.cancel()
        channel, session = self._channel, self._session
        request_id = channel.call_ids.pop(marker, None) if channel is not None else None
        if session is None or request_id is None or not self.running:
            return
        log.info("MCP server %s: call %s abandoned: %s", self.name, request_id, reason)
        task = asyncio.ensure_future(self._send_cancelled(session, request_id, reason))
        self._notices.add(task)
        task.add_done_callback(self._notices.discard)

    async def _send_cancelled(self, session: ClientSession, request_id: str | int, reason: str) -> None:
        from mcp.types import CancelledNotification, CancelledNotificationParams, ClientNotification

        notice = ClientNotification(
            CancelledNotification(params=CancelledNotificationParams(requestId=request_id, reason=reason))
        )
        with contextlib.suppress(Exception):
            await asyncio.wait_for(session.send_notification(notice), CANCEL_NOTICE_S)

    async def stop(self) -> None:
        """Close the connection and end the server (its whole process tree)."""
        self._stop.set()
        task = self._task
        if task is not None and not task.done() and self.state == "starting":
            task.cancel()  # a start under way is abandoned, not waited for
        if task is not None and not task.done():
            try:
                await asyncio.wait_for(asyncio.shield(task), STOP_TIMEOUT_S)
            except TimeoutError:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
            except BaseException:
                log.debug("MCP server %s: stop", self.name, exc_info=True)
        if self.state in ("starting", "ready"):
            self.state = "stopped"
        self._settled.set()
        self._kill_tree()

    # ---- the server's task ---------------------------------------------------------------------------------

    async def _run(self) -> None:
        try:
            await self._serve()
        except asyncio.CancelledError:
            self._gone("stopped", None)
            raise
        except BaseException as exc:
            violation = _violation(exc)
            if violation is not None:  # keeps breaking the protocol: failed, whatever the phase
                self._gone("failed", f"stopped: {violation}")
            elif self.state == "starting":
                self._gone("failed", self._describe(exc))
            elif self.state == "ready":
                self._gone("exited", self._describe(exc))
            if not isinstance(exc, Exception):
                raise
        finally:
            self._session = None
            self._settled.set()
            self._ended.set()
            self._kill_tree()

    async def _serve(self) -> None:
        import anyio
        from mcp import ClientSession
        from mcp.shared.message import SessionMessage

        async with contextlib.AsyncExitStack() as stack:
            streams = await self._open_transport(stack)
            read, write = streams[0], streams[1]
            proxy_send, proxy_read = anyio.create_memory_object_stream[SessionMessage | Exception](0)
            group = await stack.enter_async_context(anyio.create_task_group())
            group.start_soon(self._pump, read, proxy_send)
            session = await stack.enter_async_context(ClientSession(proxy_read, write))
            with anyio.fail_after(self.config.startup_timeout_s):
                await session.initialize()
                self.tools = await self._list_tools(session)
            if self.state != "starting":  # the transport closed meanwhile
                raise ConnectionError("the server closed the connection")
            self._session = session
            self.state = "ready"
            self._settled.set()
            self._changed(self)
            await self._stop.wait()
            group.cancel_scope.cancel()

    async def _open_transport(self, stack: contextlib.AsyncExitStack) -> tuple[Any, ...]:
        config = self.config
        if isinstance(config, StdioServer) and config.sandbox is not None:
            mode = self._confinement(config)
            if mode is not None:
                return await self._open_confined(stack, config, mode)
        if isinstance(config, StdioServer):
            proctree.become_subreaper()  # orphans of the server are re-parented to us, then found
            self._tree = tree = proctree.ProcessTree(0)
            try:
                read, write, channel = await stack.enter_async_context(
                    stdio_transport(
                        config.command,
                        config.args,
                        {**dict(config.env), **tree.env},
                        config.cwd or self.cwd,
                        max_bytes=config.max_message_bytes,
                        monitor=self.monitor,
                    )
                )
            except OSError as exc:
                raise ConnectionError(f"cannot start {config.command!r}: {exc.strerror or exc}") from exc
            self._channel = channel
            self._stderr = channel.stderr
            tree.started(channel.process.pid)
            proctree.register(tree)
            return read, write
        assert isinstance(config, HttpServer)
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        client = await stack.enter_async_context(create_mcp_http_client(headers=dict(config.headers)))
        http_streams: tuple[Any, ...] = await stack.enter_async_context(
            streamable_http_client(config.url, http_client=client)
        )
        return http_streams

    def _confinement(self, config: StdioServer) -> SandboxMode | None:
        """The mode a server configured `sandbox` runs in (None: unconfined, because the session's
        own mode is full-access, which the person chose). `ConnectionError` when there is no
        sandbox to start it in: it is refused, never started unconfined."""
        if self.sandbox is None:
            raise ConnectionError(
                f"refused: {config.name} is configured to run in the sandbox and this session has none; "
                "it is never started unconfined"
            )
        if config.sandbox == SESSION_MODE:
            mode = self.sandbox.chosen_mode  # the session's own choice, else the configured one
            if mode == "full-access":
                log.info("MCP server %s: the session runs full-access, so it runs unconfined", config.name)
                return None
            return mode
        return "read-only" if config.sandbox == "read-only" else "workspace-write"

    async def _open_confined(
        self, stack: contextlib.AsyncExitStack, config: StdioServer, mode: SandboxMode
    ) -> tuple[Any, ...]:
        from dsh_daemon.mcp.sandboxed import start_sandboxed

        sandbox = self.sandbox
        assert sandbox is not None
        cwd = config.cwd or self.cwd or str(Path.cwd())

        async def start(argv: Sequence[str], base_env: Mapping[str, str]) -> Any:
            return await start_sandboxed(sandbox, mode, argv, env=base_env, own_env=dict(config.env), cwd=cwd)

        try:
            read, write, channel = await stack.enter_async_context(
                stdio_transport(
                    config.command,
                    config.args,
                    dict(config.env),
                    cwd,
                    max_bytes=config.max_message_bytes,
                    monitor=self.monitor,
                    start=start,
                )
            )
        except SandboxUnavailable as exc:
            raise ConnectionError(
                f"refused: {config.name} is configured to run in the sandbox ({mode}) and its confinement "
                f"cannot be had ({exc}); it is never started unconfined"
            ) from exc
        except OSError as exc:
            raise ConnectionError(f"cannot start {config.command!r}: {exc.strerror or exc}") from exc
        self._channel = channel
        self._stderr = channel.stderr
        log.info("MCP server %s started confined (%s), pid %d", config.name, mode, channel.process.pid)
        return read, write

    async def _pump(self, source: Any, sink: Any) -> None:
        """Messages from the transport to the session; their end is the server's end. What the
        transport could not read (the HTTP transport hands such errors on) is counted, not passed."""
        try:
            async with sink:
                async for item in source:
                    if isinstance(item, Exception):
                        self.monitor.malformed(str(item), type(item).__name__)
                        continue
                    await sink.send(item)
        finally:
            if not self._stop.is_set() and self.state == "ready":
                if self._channel is not None:
                    await self._channel.stderr_drained()  # its last words say why
                self._gone("exited", "the server closed its connection")

    async def _list_tools(self, session: ClientSession) -> list[Tool]:
        tools: list[Tool] = []
        cursor: str | None = None
        for _ in range(100):  # a server paging forever is not followed forever
            page = await session.list_tools(cursor)
            tools.extend(page.tools)
            cursor = page.nextCursor
            if not cursor:
                break
        return tools

    def _gone(self, state: State, error: str | None) -> None:
        if self.state in ("failed", "exited", "stopped"):
            return
        self.state = state
        if error is not None:
            tail = self._stderr_tail()
            self.error = f"{error}; stderr: {tail}" if tail else error
        self._settled.set()
        self._ended.set()
        self._stop.set()
        if state != "stopped":
            self._changed(self)

    def _describe(self, exc: BaseException) -> str:
        while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
            exc = exc.exceptions[0]
        if isinstance(exc, TimeoutError):
            return f"no answer to initialize within {self.config.startup_timeout_s:g} s"
        from mcp.types import CONNECTION_CLOSED

        if getattr(getattr(exc, "error", None), "code", None) == CONNECTION_CLOSED:
            return "the server closed the connection (it exited)"
        text = str(exc) or type(exc).__name__
        return text if isinstance(exc, ConnectionError) else f"{type(exc).__name__}: {text}"

    def _stderr_tail(self) -> str:
        lines = [" ".join(line.split()) for line in self._stderr.lines(3)]
        tail = " | ".join(lines)
        return tail if len(tail) <= 500 else "…" + tail[-499:]

    def _kill_tree(self) -> None:
        tree = self._tree
        if tree is None or tree.root <= 0:  # root 0 would be our own process group
            return
        with contextlib.suppress(OSError):
            tree.signal(signals.SIGKILL)
        proctree.forget_finished()

    def status(self) -> dict[str, Any]:
        data: dict[str, Any] = {"server": self.name, "state": self.state, "transport": self.config.transport}
        if self.error:
            data["error"] = self.error
        stderr = self._stderr.lines()
        if stderr and self.state in ("failed", "exited"):
            data["stderr"] = stderr  # the last lines it wrote there (bounded), to see why
        if self.monitor.total:
            data["malformed"] = self.monitor.total
        return data


class McpTools:
    """The MCP servers of one session, wired into its tool registry and hooks.

    `modes()` gives the current `tools.permissions`: a tool named there exactly is the permission
    policy's to decide; otherwise `mcp__{server}` sets the mode of all of a server's tools, and the
    default is `ask`. A `deny` tool is not offered at all.
    """

    def __init__(
        self,
        servers: Mapping[str, ServerConfig],
        registry: ToolRegistry,
        modes: Callable[[], Mapping[str, str]],
        on_status: StatusSink,
        cwd: str | None = None,
        sandbox: CommandSandbox | None = None,
    ) -> None:
        self.registry = registry
        self.modes = modes
        self.on_status = on_status
        self.connections = {
            k: ServerConnection(config, cwd, self._changed, sandbox) for k, config in servers.items()
        }
        self._mine: dict[str, McpTool] = {}
        self._closed = False

    def start(self) -> None:
        """Start every server (needs a running event loop; else the first step starts them)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return
        for connection in self.connections.values():
            connection.start()

    async def wait_ready(self) -> None:
        """Every server has started or failed (each bounded by its `startupTimeoutS`)."""
        if not self._closed:
            await asyncio.gather(*(c.settled() for c in self.connections.values()))

    def status(self) -> list[dict[str, Any]]:
        return [c.status() | {"tools": self._tool_names(c)} for c in self.connections.values()]

    async def aclose(self) -> None:
        self._closed = True
        await asyncio.gather(*(c.stop() for c in self.connections.values()), return_exceptions=True)

    # ---- hooks ---------------------------------------------------------------------------------------------

    async def pre_step(
        self, ctx: PreStepContext, proceed: Callable[[], Awaitable[PreStepDecision]]
    ) -> PreStepDecision:
        """A step's request is built once every server has started or failed: the tools it offers do
        not depend on how fast a server came up."""
        await ctx.signal.race(self.wait_ready())
        return await proceed()

    async def pre_execute(self, call: ToolCall, signal: AbortSignal) -> PreExecuteDecision | None:
        tool = self._mine.get(call.name)
        if tool is None or self.registry.get(call.name) is not tool:
            return None
        if not tool.server.running:
            return Allow()  # it fails at once (MCP_UNAVAILABLE): nobody is asked about it
        modes = self.modes()
        if call.name in modes:
            return None  # named exactly: the permission policy decides
        mode = modes.get(f"{PREFIX}{tool.server.name}", "ask")
        if mode == "allow":
            return Allow()
        if mode == "deny":
            return Deny(f"{call.name} is disabled by the permission policy", reason="policy")
        return Ask(
            f"Run {tool.mcp_name} (MCP server {tool.server.name})",
            {"server": tool.server.name, "tool": tool.mcp_name},
        )

    # ---- state changes -------------------------------------------------------------------------------------

    def _changed(self, connection: ServerConnection) -> None:
        if connection.state == "ready":
            self._register(connection)
            log.info("MCP server %s ready: %d tools", connection.name, len(self._tool_names(connection)))
        else:
            log.warning("MCP server %s %s: %s", connection.name, connection.state, connection.error)
        if not self._closed:
            data = connection.status()
            if connection.state == "ready":
                data["tools"] = self._tool_names(connection)
            try:
                self.on_status(data)
            except Exception:
                log.exception("MCP status could not be sent")

    def _register(self, connection: ServerConnection) -> None:
        modes = self.modes()
        server_mode = modes.get(f"{PREFIX}{connection.name}")
        for tool in connection.tools:
            name = tool_name(connection.name, tool.name)
            if modes.get(name, server_mode) == "deny":
                continue  # a tool that can never run only costs the model tokens
            if name in self.registry.tools:
                log.warning("MCP server %s: tool %s skipped (the name is taken)", connection.name, name)
                continue
            try:
                spec = make_spec(name, tool)
            except (TypeError, ValueError) as exc:
                log.warning("MCP server %s: tool %s skipped: %s", connection.name, tool.name, exc)
                continue
            adapter = McpTool(spec, connection, tool.name)
            self._mine[name] = adapter
            self.registry.add(adapter)

    def _tool_names(self, connection: ServerConnection) -> list[str]:
        return [name for name, tool in self._mine.items() if tool.server is connection]


def _violation(exc: BaseException) -> ProtocolViolationError | None:
    """The protocol violation that ended a server's task, through anyio's exception groups."""
    if isinstance(exc, ProtocolViolationError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _violation(inner)
            if found is not None:
                return found
    return None


class _QuietSdkParseErrors(logging.Filter):
    """The SDK's HTTP transport logs a traceback for every message it cannot parse (3,226 in 5 s from
    one broken server); it also hands each error on, where `ProtocolMonitor` counts them per server."""

    NOISE = ("Error parsing SSE message", "Error parsing JSON response", "Failed to parse JSONRPC message")

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(self.NOISE)


for _name in ("mcp.client.streamable_http", "mcp.client.stdio"):
    logging.getLogger(_name).addFilter(_QuietSdkParseErrors())


def attach(
    kit: ToolKit, servers: Mapping[str, ServerConfig], on_status: StatusSink, cwd: str | None
) -> McpTools | None:
    """Wire a session's servers into its tool kit (its registry, `pre_step` and `pre_execute` hooks;
    the modes are the kit's permission policy's, which `workspace/didChangeConfiguration` updates) and
    start them. None when there are none."""
    if not servers:
        return None
    policy = next((h for h in kit.hooks.pre_execute if isinstance(h, PermissionPolicy)), None)
    modes: Callable[[], Mapping[str, str]] = (lambda: policy.modes) if policy is not None else dict
    tools = McpTools(servers, kit.registry, modes, on_status, cwd, kit.sandbox)
    kit.hooks.pre_step.append(tools.pre_step)
    kit.hooks.pre_execute.append(tools.pre_execute)
    tools.start()
    return tools
