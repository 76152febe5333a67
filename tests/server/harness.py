"""Spawn the real daemon (`python -m dsh_daemon`) over real pipes with a pytest-lsp client, pointed
at a fake DeepSeek server on loopback."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.protocol import JsonRPCNotification, JsonRPCRequestMessage, JsonRPCResponseMessage
from pytest_lsp import LanguageClient
from pytest_lsp.client import make_test_lsp_client

from tests.fakes.deepseek_server import DONE, USAGE_A, FakeDeepSeek, Reply, _choice, _data, text_stream

ROOT = Path(__file__).resolve().parents[2]

PermissionHandler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]] | dict[str, Any]]


def tool_call_stream(calls: Iterable[tuple[str, str, Mapping[str, Any]]], text: str = "") -> tuple[str, ...]:
    """A non-thinking stream whose reply is `text` then the given (id, name, arguments) tool calls."""
    lines = [_data(_choice('{"role":"assistant","content":""}'))]
    if text:
        lines.append(_data(_choice(json.dumps({"content": text}))))
    for index, (call_id, name, args) in enumerate(calls):
        first = {
            "tool_calls": [
                {
                    "index": index,
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": ""},
                }
            ]
        }
        rest = {"tool_calls": [{"index": index, "function": {"arguments": json.dumps(args)}}]}
        lines += [_data(_choice(json.dumps(first))), _data(_choice(json.dumps(rest)))]
    lines += [_data(_choice('{"content":""}', '"tool_calls"'), USAGE_A), DONE]
    return tuple(lines)


def text_reply(text: str, **kwargs: Any) -> Reply:
    return Reply.stream(text_stream([text]), **kwargs)


class Daemon:
    """A running daemon plus everything it sent: `events` (dsh/event params, in order)."""

    def __init__(self, client: LanguageClient, state: Path, fake: FakeDeepSeek) -> None:
        self.client = client
        self.state = state
        self.fake = fake
        self.events: list[dict[str, Any]] = []
        self.permission_requests: list[dict[str, Any]] = []
        self.on_permission: PermissionHandler = lambda p: {"outcome": "allow-once"}
        self.applied_edits: list[Any] = []
        # what the editor answers to workspace/applyEdit (given the params as JSON); default: applied
        self.on_apply_edit: Callable[[dict[str, Any]], dict[str, Any]] = lambda p: {"applied": True}
        self.initialized: Any = None  # the initialize result

    async def request(self, method: str, params: Any) -> Any:
        return await self.client.protocol.send_request_async(method, params)

    def notify(self, method: str, params: Any) -> None:
        self.client.protocol.notify(method, params)

    async def new_session(self, **params: Any) -> str:
        return (await self.request("dsh/session/new", params))["sessionId"]

    def of(self, session_id: str, *types_: str) -> list[dict[str, Any]]:
        return [
            e for e in self.events if e["sessionId"] == session_id and (not types_ or e["type"] in types_)
        ]

    def call_id(self, session_id: str, provider_id: str) -> str:
        """The daemon's id of the session's (latest) call the provider named `provider_id`: scripts name
        calls by the provider's ids, the wire by the daemon's (protocol.md §2)."""
        found = [
            block["id"]
            for event in self.of(session_id, "assistant/message")
            for block in event["data"]["message"]["content"]
            if block["type"] == "tool-call" and block.get("providerId", block["id"]) == provider_id
        ]
        if not found:
            raise KeyError(provider_id)
        return str(found[-1])

    def provider_id(self, session_id: str, call_id: str) -> str:
        """The id the provider gave the daemon's call `call_id`."""
        for event in self.of(session_id, "assistant/message"):
            for block in event["data"]["message"]["content"]:
                if block["type"] == "tool-call" and block["id"] == call_id:
                    return str(block.get("providerId", call_id))
        raise KeyError(call_id)

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 45.0) -> None:
        """Waits until `predicate()` holds. The timeout only bounds a failure: a test never waits it out
        when things go right, and 15 s was too short for a turn on a loaded CI machine."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not predicate():
            if loop.time() > deadline:
                # each event cut short: a request/header's system prompt would hide the ones after it
                last = "\n".join(json.dumps(e)[:300] for e in self.events[-12:])
                raise AssertionError(f"timed out waiting; the last events:\n{last}")
            await asyncio.sleep(0.01)

    async def wait_event(self, session_id: str, type_: str, count: int = 1) -> dict[str, Any]:
        await self.wait_for(lambda: len(self.of(session_id, type_)) >= count)
        return self.of(session_id, type_)[count - 1]

    async def wait_idle_turn(self, session_id: str, turns: int = 1) -> list[dict[str, Any]]:
        await self.wait_for(lambda: len(self.of(session_id, "turn/end")) >= turns)
        await self.wait_for(
            lambda: (self.of(session_id, "agent/status") or [{}])[-1].get("data", {}).get("status") == "idle"
        )
        return [e["data"]["reason"] for e in self.of(session_id, "turn/end")]


def raw_client() -> LanguageClient:
    client = make_test_lsp_client()

    def raw(obj: Any, cls: type) -> Any:
        return cls(**obj)

    for message_type in (JsonRPCRequestMessage, JsonRPCNotification, JsonRPCResponseMessage):
        client.protocol._converter.register_structure_hook(message_type, raw)
    return client


# Commands unconfined and asked about, as before the sandbox (issue 41): for tests of permission
# prompts and of command plumbing that are not about confinement.
UNCONFINED = {"thinking": False, "tools": {"sandbox": "full-access"}}


def daemon_env(state: Path, fake: FakeDeepSeek, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DEEPSEEK_", "DSH_"))}
    env.update(
        {
            "DSH_HOME": str(state),
            "DEEPSEEK_API_KEY": "sk-test-secret-key-0000",
            "DEEPSEEK_BASE_URL": fake.base_url,
            "HOME": str(state / "home"),  # nothing may touch the real ~
            "PYTHONPATH": str(ROOT),
            "DSH_WIRE_CHECK": "1",  # every result is checked against its declared type (model/methods.py)
        }
    )
    env.update(extra)
    return env


async def start_daemon(
    state: Path,
    fake: FakeDeepSeek,
    *,
    apply_edit: bool = True,
    init_options: Mapping[str, Any] | None = None,
    root: Path | None = None,
    env: Mapping[str, str] | None = None,
    dsh_client: Mapping[str, Any] | None = None,
    setup: Callable[[LanguageClient, Daemon], None] | None = None,
    args: Sequence[str] = (),
    module: str = "dsh_daemon",
) -> Daemon:
    """`dsh_client`: the client's `capabilities.experimental.dsh` (what it offers the daemon);
    `setup`: registers more client handlers before the daemon starts; `args`: the command line after
    `python -m dsh_daemon`; `module`: what runs instead of `dsh_daemon` (`tests.fakes.kill_points`)."""
    client = raw_client()
    daemon = Daemon(client, state, fake)

    @client.feature("dsh/event")
    def on_event(params: Any) -> None:
        daemon.events.append(params)

    @client.feature("dsh/requestPermission")
    async def on_permission(params: Any) -> Any:
        daemon.permission_requests.append(params)
        answer = daemon.on_permission(params)
        if asyncio.iscoroutine(answer) or isinstance(answer, Awaitable):
            answer = await answer
        return answer

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    def on_apply_edit(params: Any) -> Any:
        edit = client.protocol._converter.unstructure(params)
        daemon.applied_edits.append(edit)
        return daemon.on_apply_edit(edit)

    if setup is not None:
        setup(client, daemon)
    (state / "home").mkdir(parents=True, exist_ok=True)
    await client.start_io(sys.executable, "-m", module, *args, env=daemon_env(state, fake, **(env or {})))
    root = root or state / "work"
    root.mkdir(parents=True, exist_ok=True)
    daemon.initialized = await client.initialize_session(
        types.InitializeParams(
            capabilities=types.ClientCapabilities(
                window=types.WindowClientCapabilities(work_done_progress=True),
                workspace=types.WorkspaceClientCapabilities(apply_edit=apply_edit),
                experimental={"dsh": dict(dsh_client)} if dsh_client is not None else None,
            ),
            root_uri=root.as_uri(),
            initialization_options=dict(init_options or {"thinking": False}),
        )
    )
    return daemon


async def stop_daemon(daemon: Daemon) -> None:
    try:
        await asyncio.wait_for(daemon.client.shutdown_session(), 10)
    finally:
        await daemon.client.stop()
