"""Spawn `dsh-daemon acp` over real pipes, pointed at the fake DeepSeek server: with the official ACP
SDK's client (`AcpDaemon`), or as raw NDJSON lines (`RawAcp`) for what the SDK cannot send."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, spawn_agent_process
from acp.client.connection import ClientSideConnection
from acp.connection import StreamDirection, StreamEvent
from acp.schema import (
    AllowedOutcome,
    BooleanConfigOptionCapabilities,
    ClientCapabilities,
    ClientSessionCapabilities,
    DeniedOutcome,
    FileSystemCapabilities,
    PermissionOption,
    ReadTextFileResponse,
    RequestPermissionResponse,
    SessionConfigOptionsCapabilities,
    ToolCallUpdate,
    WriteTextFileResponse,
)

from tests.acp.schema_check import WireChecker
from tests.fakes.deepseek_server import FakeDeepSeek
from tests.server.harness import daemon_env

COMMAND = (sys.executable, "-m", "dsh_daemon", "acp")
TIMEOUT_S = 20.0


UNCONFINED_CONFIG = '{"tools": {"sandbox": "full-access"}}\n'


def _unconfined_unless_configured(state: Path) -> None:
    """These tests' workspace (state/work) lies inside DSH_HOME, which a confined command cannot see:
    commands run full-access (as before the sandbox) unless a test wrote its own config.json.
    tests/server/test_sandbox*.py test the sandbox itself over the wire."""
    config = state / "config.json"
    if not config.exists():
        config.write_text(UNCONFINED_CONFIG)


def _log_fd(state: Path) -> int:
    """The daemon's stderr: a log file in the test's state dir."""
    return os.open(state / "daemon.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)


class RecordingClient:
    """An ACP client that records everything the agent sends and answers permissions and files."""

    def __init__(self) -> None:
        self.wire: list[dict[str, Any]] = []  # every incoming message, in wire order (observer)
        self.permission_requests: list[dict[str, Any]] = []
        # an optionId; None: cancelled; "hang": never answered
        self.permission_answer: str | None = "allow-once"
        self.buffers: dict[str, str] = {}  # what fs/read_text_file answers (the editor's unsaved text)
        self.writes: list[tuple[str, str]] = []
        # Every message of the agent read by the Python SDK's models, losslessly (schema_check.py).
        self.schema = WireChecker()

    def observe(self, event: StreamEvent) -> None:
        if event.direction == StreamDirection.INCOMING:
            self.wire.append(event.message)
            self.schema.incoming(event.message)
        else:
            self.schema.outgoing(event.message)

    def updates(self, session_id: str | None = None, kind: str | None = None) -> list[dict[str, Any]]:
        out = []
        for message in self.wire:
            if message.get("method") != "session/update":
                continue
            params = message["params"]
            if session_id is not None and params["sessionId"] != session_id:
                continue
            if kind is not None and params["update"]["sessionUpdate"] != kind:
                continue
            out.append(params["update"])
        return out

    def call_updates(self, session_id: str) -> list[dict[str, Any]]:
        """The updates of the session's one tool call (the daemon names it, not the script)."""
        updates = [u for u in self.updates(session_id) if "toolCallId" in u]
        assert len({u["toolCallId"] for u in updates}) <= 1, updates
        return updates

    def text(self, session_id: str, kind: str = "agent_message_chunk") -> str:
        return "".join(u["content"].get("text", "") for u in self.updates(session_id, kind))

    # ---- the acp.interfaces.Client methods the daemon calls --------------------------------------------

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        return None

    async def request_permission(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption], **kwargs: Any
    ) -> RequestPermissionResponse:
        self.permission_requests.append(
            {
                "sessionId": session_id,
                "toolCall": tool_call.model_dump(by_alias=True, exclude_none=True),
                "options": [o.model_dump(by_alias=True, exclude_none=True) for o in options],
            }
        )
        if self.permission_answer == "hang":  # a person who has not decided yet
            await asyncio.Event().wait()
        if self.permission_answer is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=self.permission_answer)
        )

    async def read_text_file(
        self, session_id: str, path: str, line: int | None = None, limit: int | None = None, **kwargs: Any
    ) -> ReadTextFileResponse:
        if path in self.buffers:
            return ReadTextFileResponse(content=self.buffers[path])
        return ReadTextFileResponse(content=await asyncio.to_thread(Path(path).read_text, encoding="utf-8"))

    async def write_text_file(
        self, session_id: str, path: str, content: str, **kwargs: Any
    ) -> WriteTextFileResponse:
        self.writes.append((path, content))
        self.buffers[path] = content
        return WriteTextFileResponse()

    def on_connect(self, conn: Any) -> None:
        return None


class AcpDaemon:
    def __init__(
        self, conn: ClientSideConnection, client: RecordingClient, state: Path, fake: FakeDeepSeek
    ) -> None:
        self.conn = conn
        self.client = client
        self.state = state
        self.fake = fake
        self.work = state / "work"

    async def new_session(self, cwd: Path | None = None) -> str:
        response = await self.conn.new_session(cwd=str(cwd or self.work), mcp_servers=[])
        return response.session_id

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = TIMEOUT_S) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not predicate():
            if loop.time() > deadline:
                raise AssertionError("timed out; last messages: " + json.dumps(self.client.wire[-6:])[:3000])
            await asyncio.sleep(0.01)


@contextlib.asynccontextmanager
async def acp_daemon(
    state: Path,
    fake: FakeDeepSeek,
    *,
    fs: bool = False,
    client: RecordingClient | None = None,
    terminal: bool = False,
    booleans: bool = False,
    env: dict[str, str] | None = None,
) -> AsyncIterator[AcpDaemon]:
    """`booleans`: the client advertises boolean config options
    (`clientCapabilities.session.configOptions.boolean`)."""
    client = client or RecordingClient()
    (state / "home").mkdir(parents=True, exist_ok=True)
    (state / "work").mkdir(parents=True, exist_ok=True)
    _unconfined_unless_configured(state)
    log = _log_fd(state)
    try:
        async with spawn_agent_process(
            client,
            *COMMAND,
            env=daemon_env(state, fake, DSH_LOG_LEVEL="INFO", **(env or {})),
            # The SDK terminates a child still running 2 s after stdin closed, racing its own exit
            # (ProcessLookupError) on a loaded machine: the daemon gets as long as it needs to shut down.
            transport_kwargs={"stderr": log, "shutdown_timeout": 30.0},
            observers=[client.observe],
        ) as (conn, _process):
            capabilities = ClientCapabilities(
                fs=FileSystemCapabilities(read_text_file=fs, write_text_file=fs),
                terminal=terminal,
                session=ClientSessionCapabilities(
                    config_options=SessionConfigOptionsCapabilities(boolean=BooleanConfigOptionCapabilities())
                )
                if booleans
                else None,
            )
            init = await asyncio.wait_for(
                conn.initialize(
                    protocol_version=PROTOCOL_VERSION,
                    client_capabilities=capabilities,
                    dsh={"thinking": False},
                ),
                TIMEOUT_S,
            )
            assert init.protocol_version == 1
            yield AcpDaemon(conn, client, state, fake)
            violations = client.schema.violations
            assert client.schema.checked > 0 and violations == [], json.dumps(
                violations, indent=1, default=str
            )[:4000]
    finally:
        os.close(log)


class RawAcp:
    """The daemon as a child process spoken to in raw NDJSON lines."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.received: list[dict[str, Any]] = []
        self._taken: set[int] = set()
        self._ids = 100

    def send_line(self, line: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line if line.endswith(b"\n") else line + b"\n")

    def send(self, message: dict[str, Any]) -> None:
        self.send_line(json.dumps({"jsonrpc": "2.0", **message}).encode())

    def request(self, method: str, params: Any) -> int:
        self._ids += 1
        self.send({"id": self._ids, "method": method, "params": params})
        return self._ids

    async def next(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = await asyncio.wait_for(self.process.stdout.readline(), TIMEOUT_S)
        assert line, "the daemon closed its stdout"
        message = json.loads(line)
        self.received.append(message)
        return message

    async def until(self, predicate: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """The first message, received before or from now on, that `predicate` accepts and no earlier
        `until` returned."""
        for index, message in enumerate(self.received):
            if index not in self._taken and predicate(message):
                self._taken.add(index)
                return message
        while True:
            message = await self.next()
            if predicate(message):
                self._taken.add(len(self.received) - 1)
                return message

    async def response(self, request_id: int | None) -> dict[str, Any]:
        return await self.until(lambda m: "method" not in m and m.get("id") == request_id)

    async def call(self, method: str, params: Any) -> dict[str, Any]:
        return await self.response(self.request(method, params))


@contextlib.asynccontextmanager
async def raw_acp(state: Path, fake: FakeDeepSeek) -> AsyncIterator[RawAcp]:
    (state / "home").mkdir(parents=True, exist_ok=True)
    (state / "work").mkdir(parents=True, exist_ok=True)
    _unconfined_unless_configured(state)
    log = _log_fd(state)
    try:
        process = await asyncio.create_subprocess_exec(
            *COMMAND,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=log,
            env=daemon_env(state, fake, DSH_LOG_LEVEL="INFO"),
            limit=1 << 24,
        )
        raw = RawAcp(process)
        try:
            yield raw
        finally:
            if process.stdin is not None:
                process.stdin.close()
            try:
                await asyncio.wait_for(process.wait(), 10)
            except TimeoutError:
                process.kill()
                await process.wait()
    finally:
        os.close(log)


async def settle(awaitable: Awaitable[Any]) -> Any:
    return await asyncio.wait_for(awaitable, TIMEOUT_S)
