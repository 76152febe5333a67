"""The tools inside the real loop: scripted model calls, the permission seam answered by a test
approver, cancellation while a permission request is pending, and D3 timing of the file notice."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from dsh_daemon.agent.loop import Agent, AgentOptions
from dsh_daemon.agent.signal import AbortSignal
from dsh_daemon.agent.tools import PermissionOutcome, PermissionRequest
from dsh_daemon.host.manager import SessionManager
from dsh_daemon.llm.scripted import Script, ScriptedProvider, reply
from dsh_daemon.model import events as ev
from dsh_daemon.model.events import Event
from dsh_daemon.model.messages import ToolCallBlock, ToolResultBlock, UserMessage
from dsh_daemon.tools.factory import ToolKit, build_tool_registry
from dsh_daemon.tools.workspace import Workspace
from tests.tools.conftest import gone, pid_in


def tool_call(call_id: str, name: str, **args: Any) -> tuple[str, str, str]:
    return (call_id, name, json.dumps(args))


@dataclass
class ScriptedApprover:
    """Answers from a list; "wait" blocks until the turn's signal fires (like an editor dialog that
    is still open when the person presses stop)."""

    answers: list[PermissionOutcome | str]
    requests: list[PermissionRequest] = field(default_factory=list)
    resolved: list[str] = field(default_factory=list)
    asked: asyncio.Event = field(default_factory=asyncio.Event)

    async def request_permission(self, request: PermissionRequest, signal: AbortSignal) -> PermissionOutcome:
        self.requests.append(request)
        self.asked.set()
        answer = self.answers.pop(0)
        if answer != "wait":
            self.resolved.append(answer)
            return answer  # type: ignore[return-value]
        try:
            await signal.wait()
        except asyncio.CancelledError:
            # The core may cancel the request itself once the turn is aborted: still resolved cancelled.
            self.resolved.append(f"cancelled (signal aborted={signal.aborted})")
            raise
        self.resolved.append(f"cancelled (signal aborted={signal.aborted})")
        return "cancelled"


@dataclass
class Session:
    manager: SessionManager
    provider: ScriptedProvider
    approvers: dict[str, ScriptedApprover]
    root: Path

    def create(self) -> Agent:
        return self.manager.create(cwd=str(self.root))

    async def prompt(self, agent: Agent, text: str) -> None:
        agent.followup(UserMessage.create(text))
        await agent.when_idle()


UNCONFINED = {"sandbox": "full-access"}


@pytest.fixture
async def make_session(tmp_path: Path, root: Path) -> AsyncIterator[Any]:
    managers: list[SessionManager] = []

    def make(
        script: Sequence[Script], answers: Sequence[str] = (), config: dict[str, Any] | None = None
    ) -> Session:
        provider = ScriptedProvider(script)
        approvers: dict[str, ScriptedApprover] = {}
        kits: dict[str, ToolKit] = {}

        def kit(sid: str) -> ToolKit:
            # One kit per session: the server will do the same (tools and hooks share state).
            if sid not in kits:
                # Commands unconfined by default: these tests are about asking, cancelling and killing
                # (tests/tools/test_command.py runs the command plumbing confined too).
                kits[sid] = build_tool_registry(Workspace([root]), config=config or UNCONFINED)
            return kits[sid]

        def approver(sid: str) -> ScriptedApprover:
            approvers[sid] = ScriptedApprover(list(answers))
            return approvers[sid]

        manager = SessionManager(
            tmp_path / f"state{len(managers)}",
            provider=provider,
            options=lambda: AgentOptions(model="m"),
            tools=lambda sid: kit(sid).registry,
            hooks=lambda sid: kit(sid).hooks,
            approver=approver,
        )
        managers.append(manager)
        return Session(manager, provider, approvers, root)

    yield make
    for manager in managers:
        await manager.close()


def turn_ends(agent: Agent) -> list[dict[str, Any]]:
    return [dict(e.data["reason"]) for e in agent.log.events if e.type == ev.TURN_END]


def tool_results(messages: Sequence[Any]) -> dict[str, ToolResultBlock]:
    """A request's tool results by the scripted provider's call id (the scripts name calls by it)."""
    provider_ids = {
        b.id: b.provider_call_id for m in messages for b in m.content if isinstance(b, ToolCallBlock)
    }
    out: dict[str, ToolResultBlock] = {}
    for message in messages:
        for block in message.content:
            if isinstance(block, ToolResultBlock):
                out[provider_ids[block.tool_call_id]] = block
    return out


def provider_id(agent: Agent, call_id: str) -> str:
    """The scripted provider's id of the daemon's call `call_id`."""
    for event in agent.log.events:
        if event.type == ev.ASSISTANT_MESSAGE:
            for block in event.data["message"]["content"]:
                if block["type"] == "tool-call" and block["id"] == call_id:
                    return str(block.get("providerId", call_id))
    raise KeyError(call_id)


async def test_reject_is_an_error_result_the_model_reads_and_the_turn_goes_on(make_session: Any) -> None:
    session = make_session(
        [reply("", tool_calls=[tool_call("c1", "write_file", path="a.txt", content="x")]), reply("fine")],
        answers=["reject"],
    )
    agent = session.create()
    await session.prompt(agent, "write a.txt")
    approver = session.approvers[agent.session_id]
    [request] = approver.requests
    assert (provider_id(agent, request.call.call_id), request.call.name, request.title) == (
        "c1",
        "write_file",
        "Write a.txt",
    )
    assert not (session.root / "a.txt").exists()
    assert len(session.provider.requests) == 2
    result = tool_results(session.provider.requests[1].messages)["c1"]
    assert result.is_error and "rejected" in result.text
    assert turn_ends(agent) == [{"kind": "completed"}]


async def test_allow_always_is_not_asked_again_in_that_session(make_session: Any) -> None:
    first_turn = [
        reply("", tool_calls=[tool_call("c1", "write_file", path="a.txt", content="a")]),
        reply("", tool_calls=[tool_call("c2", "write_file", path="b.txt", content="b")]),
        reply("done"),
    ]
    second_turn = [
        reply("", tool_calls=[tool_call("c3", "write_file", path="c.txt", content="c")]),
        reply("", tool_calls=[tool_call("c4", "run_command", command="echo one")]),
        reply("", tool_calls=[tool_call("c5", "run_command", command="echo two")]),
        reply("done"),
    ]
    other_session = [
        reply("", tool_calls=[tool_call("c6", "write_file", path="d.txt", content="d")]),
        reply("ok"),
    ]
    session = make_session(
        [*first_turn, *second_turn, *other_session], answers=["allow-always", "allow-once", "allow-once"]
    )
    agent = session.create()
    await session.prompt(agent, "write a and b")
    await session.prompt(agent, "write c, run twice")
    approver = session.approvers[agent.session_id]
    # Asked once for write_file (allow-always), then for each run_command (allow-once is not remembered).
    assert [provider_id(agent, r.call.call_id) for r in approver.requests] == ["c1", "c4", "c5"]
    assert [r.title for r in approver.requests] == ["Write a.txt", "Run: echo one", "Run: echo two"]
    assert agent.always_allowed == {"write_file"}
    for name in ("a", "b", "c"):
        assert (session.root / f"{name}.txt").read_text() == name
    assert turn_ends(agent) == [{"kind": "completed"}, {"kind": "completed"}]
    # A different session starts with nothing remembered.
    other = session.create()
    await session.prompt(other, "write d")
    assert [provider_id(other, r.call.call_id) for r in session.approvers[other.session_id].requests] == [
        "c6"
    ]


async def test_cancel_while_a_permission_request_is_pending(make_session: Any) -> None:
    session = make_session(
        [reply("", tool_calls=[tool_call("c1", "run_command", command="touch ran")]), reply("unreachable")],
        answers=["wait"],
    )
    agent = session.create()
    agent.followup(UserMessage.create("run it"))
    approver = session.approvers[agent.session_id]
    await asyncio.wait_for(approver.asked.wait(), 10)
    assert approver.resolved == []  # pending
    agent.cancel("user")
    await asyncio.wait_for(agent.when_idle(), 10)
    assert approver.resolved == ["cancelled (signal aborted=True)"]
    assert turn_ends(agent) == [{"kind": "aborted", "cause": "user"}]
    assert not (session.root / "ran").exists()
    assert len(session.provider.requests) == 1
    [result] = [e for e in agent.log.events if e.type == ev.TOOL_RESULT]
    assert result.data["error"]["name"] == "run_command"


async def test_the_editor_cancelling_the_request_cancels_the_turn_and_keeps_the_queue(
    make_session: Any,
) -> None:
    session = make_session(
        [reply("", tool_calls=[tool_call("c1", "edit_file", path="f.txt", old_string="a", new_string="b")])],
        answers=["cancelled"],
    )
    (session.root / "f.txt").write_text("a\n")
    agent = session.create()
    agent.followup(UserMessage.create("edit"))
    agent.followup(UserMessage.create("queued while the first turn runs"))
    await asyncio.wait_for(agent.when_idle(), 10)
    assert turn_ends(agent) == [{"kind": "aborted", "cause": "user"}]
    assert (session.root / "f.txt").read_text() == "a\n"
    assert len(agent.inbox) == 1  # cancel(keep_inbox=True): the queued prompt stays parked


async def test_changed_file_notice_enters_after_the_whole_batch(make_session: Any) -> None:
    batch = [
        tool_call("c1", "read_file", path="a.py"),
        tool_call("c2", "run_command", command="echo 'changed' > a.py"),
        tool_call("c3", "read_file", path="b.py"),
    ]
    session = make_session(
        [reply("", tool_calls=batch), reply("noted")],
        config={"permissions": {"run_command": "allow"}, **UNCONFINED},
    )
    (session.root / "a.py").write_text("original\n")
    (session.root / "b.py").write_text("b\n")
    agent = session.create()
    await session.prompt(agent, "look")
    messages = session.provider.requests[1].messages
    results = tool_results(messages)
    calls = {b.id: b.provider_call_id for m in messages for b in m.content if isinstance(b, ToolCallBlock)}
    assert not any(r.is_error for r in results.values()), results
    roles = [
        ("result", calls[next(b.tool_call_id for b in m.content if isinstance(b, ToolResultBlock))])
        if any(isinstance(b, ToolResultBlock) for b in m.content)
        else (m.role, dict(m.source).get("kind"))
        for m in messages
    ]
    # The notice (from c2's post-execute) waits for the whole batch's results (D3).
    assert roles[-4:] == [("result", "c1"), ("result", "c2"), ("result", "c3"), ("user", "plugin")]
    notice = messages[-1]
    assert dict(notice.source) == {"kind": "plugin", "plugin": "dsh-tools", "form": "notice"}
    assert notice.text.startswith("Note: a.py changed on disk")


async def test_command_output_streams_live_through_the_loop(make_session: Any) -> None:
    command = "printf 'one\\n'; while [ ! -f go ]; do sleep 0.01; done; printf 'two\\n'"
    session = make_session(
        [reply("", tool_calls=[tool_call("c1", "run_command", command=command)]), reply("ok")],
        answers=["allow-once"],
    )
    agent = session.create()
    live: list[str] = []

    def watch(event: Event) -> None:
        if event.type == ev.TOOL_OUTPUT:
            assert provider_id(agent, event.data["callId"]) == "c1"
            live.append(str(event.data["text"]))
            (session.root / "go").write_text("")

    agent.subscribe(watch)
    await session.prompt(agent, "run")
    assert live == ["one\n", "two\n"]
    [result] = [e for e in agent.log.events if e.type == ev.TOOL_RESULT]
    assert result.data["meta"] == {"exitCode": 0, "truncated": False}
    assert tool_results(session.provider.requests[1].messages)["c1"].text == "one\ntwo\n[exit code 0]"


async def test_edit_results_carry_the_diff_meta_in_the_log(make_session: Any) -> None:
    session = make_session(
        [
            reply("", tool_calls=[tool_call("c1", "edit_file", path="m.py", old_string="1", new_string="2")]),
            reply("ok"),
        ],
        answers=["allow-once"],
    )
    (session.root / "m.py").write_text("x = 1\n")
    agent = session.create()
    await session.prompt(agent, "edit")
    [result] = [e for e in agent.log.events if e.type == ev.TOOL_RESULT]
    meta = result.data["meta"]
    assert meta["path"] == str(session.root / "m.py")
    assert meta["diff"] == "--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"
    assert set(meta) == {"path", "diff", "beforeHash", "afterHash", "created"}


async def test_cancelling_the_turn_kills_a_running_command_and_its_children(make_session: Any) -> None:
    command = "sh -c 'sleep 30 & echo PID=$!; wait'"
    session = make_session(
        [reply("", tool_calls=[tool_call("c1", "run_command", command=command)]), reply("unreachable")],
        config={"permissions": {"run_command": "allow"}, **UNCONFINED},
    )
    agent = session.create()
    live: list[str] = []
    started = asyncio.Event()

    def watch(event: Event) -> None:
        if event.type == ev.TOOL_OUTPUT:
            live.append(str(event.data["text"]))
            started.set()

    agent.subscribe(watch)
    agent.followup(UserMessage.create("run"))
    await asyncio.wait_for(started.wait(), 10)
    agent.cancel("user")
    await asyncio.wait_for(agent.when_idle(), 10)
    assert await gone(pid_in("".join(live)))
    assert turn_ends(agent) == [{"kind": "aborted", "cause": "user"}]
    [result] = [e for e in agent.log.events if e.type == ev.TOOL_RESULT]
    assert result.data["error"] == {"name": "run_command", "code": "CANCELLED"}
