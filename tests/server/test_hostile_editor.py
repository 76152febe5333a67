"""An editor that answers the daemon's own requests (`workspace/applyEdit`, `dsh/document/save`,
`dsh/editor/*`) wrongly, late, twice or never (issue 32, items 2, 8 and 9): every such request ends
as a typed tool error, a cancel ends a turn waiting on the editor, and `shutdown` + `exit`, stdin EOF
and SIGTERM end the process with the lease released, whatever the editor does.

The client is a byte-level pipe (tests/server/test_robustness.py's RawPipe) that answers the
daemon's requests by hand, so it can send what no LSP library would.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from dsh_daemon.agent.invariants import check_log
from dsh_daemon.model import events as ev
from tests.fakes.deepseek_server import FakeDeepSeek, Reply
from tests.server.harness import ROOT, daemon_env, text_reply, tool_call_stream
from tests.server.test_pipelining import _stored
from tests.server.test_robustness import RawPipe

ORIGINAL = "value = 1\n"
ALLOW = {name: "allow" for name in ("edit_file", "write_file", "diagnostics", "definition", "hover")}
NEVER_S = 600.0  # an editor timeout no test waits out: only the fix can end the wait
# what a raw Python failure would look like in a tool result (item 8: never shown to the model)
RAW_FAILURES = ("Traceback", "AttributeError", "TypeError", "KeyError", "NoneType", "object has no attribute")

# What the editor answers to one request: frames to write (each after its delay), given the request.
Answer = Callable[[dict[str, Any]], list[tuple[float, dict[str, Any]]]]


def result(value: Any) -> Answer:
    return lambda request: [(0.0, {"jsonrpc": "2.0", "id": request["id"], "result": value})]


def error_reply(request: dict[str, Any]) -> list[tuple[float, dict[str, Any]]]:
    return [(0.0, {"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32603, "message": "boom"}})]


def never(request: dict[str, Any]) -> list[tuple[float, dict[str, Any]]]:
    return []


def unknown_id(request: dict[str, Any]) -> list[tuple[float, dict[str, Any]]]:
    return [(0.0, {"jsonrpc": "2.0", "id": f"{request['id']}-not-mine", "result": {"applied": True}})]


def twice(value: Any) -> Answer:
    return lambda request: [(0.0, {"jsonrpc": "2.0", "id": request["id"], "result": value})] * 2


def late(value: Any, delay_s: float) -> Answer:
    return lambda request: [(delay_s, {"jsonrpc": "2.0", "id": request["id"], "result": value})]


class HostileEditor:
    """Answers the daemon's requests to the client as `answers[method]` says (default: never)."""

    def __init__(self, pipe: RawPipe, answers: dict[str, Answer]) -> None:
        self.pipe = pipe
        self.answers = answers
        self.requests: list[dict[str, Any]] = []
        self.sent = 0  # answers written
        self._seen = 0
        self._task = asyncio.ensure_future(self._serve())
        self._sends: set[asyncio.Task[None]] = set()

    async def _serve(self) -> None:
        while True:
            while self._seen < len(self.pipe.messages):
                message = self.pipe.messages[self._seen]
                self._seen += 1
                if "method" in message and "id" in message:
                    self.requests.append(message)
                    answer = self.answers.get(message["method"], never)
                    for delay, frame in answer(message):
                        task = asyncio.ensure_future(self._send(delay, frame))
                        self._sends.add(task)
                        task.add_done_callback(self._sends.discard)
            await asyncio.sleep(0.005)

    async def _send(self, delay: float, frame: dict[str, Any]) -> None:
        await asyncio.sleep(delay)
        if self.pipe.proc.returncode is None and self.pipe.proc.stdin is not None:
            try:
                self.pipe.frame(frame)
                self.sent += 1
            except (BrokenPipeError, ConnectionResetError):
                pass

    def of(self, method: str) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["method"] == method]

    def stop(self) -> None:
        self._task.cancel()
        for task in self._sends:
            task.cancel()


def _events(pipe: RawPipe, session_id: str, type_: str) -> list[dict[str, Any]]:
    return [
        m["params"]
        for m in pipe.messages
        if m.get("method") == "dsh/event"
        and m["params"]["sessionId"] == session_id
        and m["params"]["type"] == type_
    ]


async def _until(predicate: Callable[[], bool], what: str, pipe: RawPipe, timeout: float = 45.0) -> None:
    """Waits until `predicate()` holds; the timeout only bounds a failure."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(
                f"timed out waiting for {what}: {[json.dumps(m)[:300] for m in pipe.messages[-6:]]}"
            )
        await asyncio.sleep(0.01)


SPAWNED: list[asyncio.subprocess.Process] = []


@pytest.fixture(autouse=True)
def _no_daemon_outlives_its_test() -> Iterator[None]:
    """A failing test (a daemon that hangs, as before the fix) leaves no process behind."""
    yield
    while SPAWNED:
        proc = SPAWNED.pop()
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()


async def spawn_logged(state: Path, fake: FakeDeepSeek, stderr: Path) -> RawPipe:
    """The daemon with its stderr in a file (a pipe nobody reads could fill and stall it)."""
    (state / "home").mkdir(parents=True, exist_ok=True)
    with stderr.open("ab") as log:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "dsh_daemon",
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
            env=daemon_env(state, fake), cwd=ROOT,
        )  # fmt: skip
    SPAWNED.append(proc)
    return RawPipe(proc)


async def open_session(
    tmp_path: Path,
    fake: FakeDeepSeek,
    *,
    timeout_s: float = NEVER_S,
    dsh: dict[str, Any] | None = None,
    name: str = "a",
) -> tuple[RawPipe, str, Path]:
    """A daemon whose client applies edits through `workspace/applyEdit`, with one session in a work
    folder holding `a.py`; (the pipe, the session id, the work folder)."""
    state, work = tmp_path / "state", tmp_path / "work"
    work.mkdir(exist_ok=True)
    if not (work / "a.py").exists():
        (work / "a.py").write_text(ORIGINAL)
    pipe = await spawn_logged(state, fake, tmp_path / f"stderr-{name}.log")
    capabilities: dict[str, Any] = {"workspace": {"applyEdit": True}}
    if dsh is not None:
        capabilities["experimental"] = {"dsh": dsh}
    options = {
        "thinking": False,
        "tools": {"permissions": ALLOW, "limits": {"editor_request_timeout_s": timeout_s}},
    }
    init = {"capabilities": capabilities, "rootUri": work.as_uri(), "initializationOptions": options}
    await pipe.call(0, "initialize", init)
    pipe.frame({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    created = await pipe.call(1, "dsh/session/new", {"cwd": str(work)})
    return pipe, created["result"]["sessionId"], work


def edit_call(call_id: str = "call_edit") -> Reply:
    args = {"path": "a.py", "old_string": "value = 1", "new_string": "value = 2"}
    return Reply.stream(tool_call_stream([(call_id, "edit_file", args)]))


def tool_results(pipe: RawPipe, session_id: str) -> list[dict[str, Any]]:
    return [e["data"] for e in _events(pipe, session_id, "tool/result")]


def result_text(data: dict[str, Any]) -> str:
    (block,) = data["message"]["content"]
    return "".join(part.get("text", "") for part in block["content"])


async def send(pipe: RawPipe, msg_id: Any, session_id: str, text: str) -> None:
    reply = await pipe.call(
        msg_id, "dsh/followup", {"sessionId": session_id, "message": {"id": f"m-{msg_id}", "content": text}}
    )
    assert "result" in reply, reply


async def shutdown_and_exit(pipe: RawPipe) -> int:
    """`shutdown`, its reply, then `exit`; the exit code once the process has ended. (The waits only
    bound a failure: before the fix neither the reply nor the end ever came.)"""
    reply = await pipe.call("bye", "shutdown", None, timeout=30)
    assert reply == {"jsonrpc": "2.0", "id": "bye", "result": None}, reply
    pipe.frame({"jsonrpc": "2.0", "method": "exit"})
    return await asyncio.wait_for(pipe.proc.wait(), 30)


async def lease_is_free(tmp_path: Path, fake: FakeDeepSeek, session_id: str) -> None:
    """A second process attaches the session as its driver (not read-only): the lease was released."""
    pipe, _, _ = await open_session(tmp_path, fake, name="second")
    try:
        attached = await pipe.call(9, "dsh/session/attach", {"sessionId": session_id, "afterSeq": 0})
        assert "result" in attached, attached
        assert "readOnly" not in attached["result"], attached["result"]
    finally:
        assert await shutdown_and_exit(pipe) == 0


def no_raw_failures(tmp_path: Path) -> None:
    for log in tmp_path.glob("stderr-*.log"):
        text = log.read_text(errors="replace")
        assert "Traceback" not in text, text[-3000:]


# ---- item 2: every malformed or missing answer is a typed failure -------------------------------------


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (result(None), "is not an object (it is null)"),
        (result({}), "'applied' must be a boolean, not null"),
        (result({"applied": "yes"}), "'applied' must be a boolean, not a string"),
        (result({"applied": False, "failureReason": 5}), "'failureReason' must be a string, not a number"),
        (result([1, 2]), "is not an object (it is list)"),
        (error_reply, "answered workspace/applyEdit with an error: boom"),
        (unknown_id, "did not answer workspace/applyEdit within 1 s"),
        (never, "did not answer workspace/applyEdit within 1 s"),
    ],
    ids=["null", "empty", "applied-string", "reason-number", "array", "error", "unknown-id", "never"],
)
async def test_an_unusable_apply_edit_answer_ends_the_edit_as_a_typed_error_and_the_turn_goes_on(
    tmp_path: Path, fake: FakeDeepSeek, answer: Answer, expected: str
) -> None:
    fake.script(edit_call(), text_reply("noted"))
    pipe, sid, work = await open_session(tmp_path, fake, timeout_s=1.0)
    editor = HostileEditor(pipe, {"workspace/applyEdit": answer})
    try:
        await send(pipe, 2, sid, "edit it")
        await _until(lambda: len(_events(pipe, sid, "turn/end")) == 1, "the turn's end", pipe)
        (data,) = tool_results(pipe, sid)
        assert data["error"]["code"] == "EDITOR_UNAVAILABLE", data
        text = result_text(data)
        assert expected in text, text
        assert "may or may not be in the editor" in text
        assert not any(raw in text for raw in RAW_FAILURES), text
        assert _events(pipe, sid, "turn/end")[0]["data"]["reason"] == {"kind": "completed"}
        assert len(editor.of("workspace/applyEdit")) == 1
        assert (work / "a.py").read_text() == ORIGINAL  # the daemon wrote nothing behind the editor
        assert await shutdown_and_exit(pipe) == 0
    finally:
        editor.stop()
    no_raw_failures(tmp_path)
    log = _stored(tmp_path / "state", sid)
    assert check_log(log, []) == []


async def test_a_second_answer_and_a_late_one_are_dropped_and_the_daemon_keeps_serving(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    fake.script(edit_call("c1"), text_reply("one"), edit_call("c2"), text_reply("two"))
    pipe, sid, _ = await open_session(tmp_path, fake, timeout_s=1.0)
    # the first request is answered twice (refused both times), the second only after its timeout
    answers = iter(
        [twice({"applied": False, "failureReason": "read-only buffer"}), late({"applied": True}, 2.0)]
    )
    editor = HostileEditor(pipe, {"workspace/applyEdit": lambda request: next(answers)(request)})
    try:
        await send(pipe, 2, sid, "first")
        await _until(lambda: len(_events(pipe, sid, "turn/end")) == 1, "the first turn's end", pipe)
        await send(pipe, 3, sid, "second")
        await _until(lambda: len(_events(pipe, sid, "turn/end")) == 2, "the second turn's end", pipe)
        first, second = tool_results(pipe, sid)
        assert first["error"]["code"] == "EDIT_CONFLICT" and "read-only buffer" in result_text(first)
        assert second["error"]["code"] == "EDITOR_UNAVAILABLE"
        assert "did not answer workspace/applyEdit within 1 s" in result_text(second)
        # the late answer comes, and changes nothing: the daemon still answers
        await _until(lambda: editor.sent == 3, "the late answer", pipe)
        listed = await pipe.call(4, "dsh/session/list", {})
        assert [s["sessionId"] for s in listed["result"]["sessions"]] == [sid]
        assert await shutdown_and_exit(pipe) == 0
    finally:
        editor.stop()
    no_raw_failures(tmp_path)


# ---- item 2: cancel, queued prompts, shutdown, EOF and SIGTERM while the editor never answers ----------


async def test_a_cancel_ends_a_turn_waiting_on_the_editor_and_the_queued_prompt_then_runs(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    fake.script(edit_call(), text_reply("queued one ran"))
    pipe, sid, _ = await open_session(tmp_path, fake)  # an editor timeout no test waits out
    editor = HostileEditor(pipe, {"workspace/applyEdit": never})
    try:
        await send(pipe, 2, sid, "edit it")
        await _until(lambda: bool(editor.of("workspace/applyEdit")), "the applyEdit request", pipe)
        await send(pipe, 3, sid, "and then this")  # queued behind the waiting turn
        cancelled = await pipe.call(4, "dsh/cancel", {"sessionId": sid, "keepInbox": True})
        assert cancelled == {"jsonrpc": "2.0", "id": 4, "result": {}}
        # The reply comes after the aborted turn's end (not after the cancel's 10 s bound, with the
        # turn still waiting on the editor).
        ends = [e["data"]["reason"] for e in _events(pipe, sid, "turn/end")]
        assert ends == [{"kind": "aborted", "cause": "user"}]
        (data,) = tool_results(pipe, sid)
        assert data["error"]["code"] == "CANCELLED"
        # the editor is told the request is withdrawn
        withdrawn = [m for m in pipe.messages if m.get("method") == "$/cancelRequest"]
        assert [m["params"]["id"] for m in withdrawn] == [editor.of("workspace/applyEdit")[0]["id"]]
        woke = await pipe.call(5, "dsh/wake", {"sessionId": sid})
        assert woke["result"] == {"started": True}
        await _until(lambda: len(_events(pipe, sid, "turn/end")) == 2, "the queued prompt's turn", pipe)
        assert _events(pipe, sid, "turn/end")[1]["data"]["reason"] == {"kind": "completed"}
        assert await shutdown_and_exit(pipe) == 0
    finally:
        editor.stop()
    no_raw_failures(tmp_path)


@pytest.mark.parametrize("how", ["shutdown+exit", "eof", "sigterm"])
async def test_the_process_ends_and_the_lease_is_released_while_the_editor_never_answers(
    tmp_path: Path, fake: FakeDeepSeek, how: str
) -> None:
    fake.script(edit_call())
    pipe, sid, _ = await open_session(tmp_path, fake)  # an editor timeout no test waits out
    editor = HostileEditor(pipe, {"workspace/applyEdit": never})
    try:
        await send(pipe, 2, sid, "edit it")
        await _until(lambda: bool(editor.of("workspace/applyEdit")), "the applyEdit request", pipe)
        if how == "shutdown+exit":
            assert await shutdown_and_exit(pipe) == 0
        else:
            if how == "eof":
                assert pipe.proc.stdin is not None
                pipe.proc.stdin.close()
            else:
                pipe.proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(pipe.proc.wait(), 30)  # bounds a failure: before the fix it hung
    finally:
        editor.stop()
    no_raw_failures(tmp_path)
    log = _stored(tmp_path / "state", sid)
    assert [e.data["reason"] for e in log if e.type == ev.TURN_END] == [
        {"kind": "aborted", "cause": "shutdown"}
    ]
    assert check_log(log, []) == []
    await lease_is_free(tmp_path, fake, sid)
