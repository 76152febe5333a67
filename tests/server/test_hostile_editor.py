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
import random
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from dsh_daemon.agent.invariants import check_log
from dsh_daemon.agent.toolrun import ABORTED_BEFORE_DISPATCH
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
    progress: bool = False,
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
    if progress:  # the daemon asks window/workDoneProgress/create at each turn
        capabilities["window"] = {"workDoneProgress": True}
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


# ---- item 8: answers of the right shape with wrong inner types ----------------------------------------


def _call(name: str, args: dict[str, Any]) -> Reply:
    return Reply.stream(tool_call_stream([("call_x", name, args)]))


@pytest.mark.parametrize(
    ("dsh", "call", "answers", "code", "expected"),
    [
        (
            {"diagnostics": True},
            _call("diagnostics", {"path": "a.py"}),
            {
                "dsh/editor/diagnostics": result(
                    {"items": [{"uri": "file:///x.py", "diagnostics": [{"range": "x"}]}]}
                )
            },
            "EDITOR_UNAVAILABLE",
            "'items[0].diagnostics[0].range' must be an object, not a string",
        ),
        (
            {"languageFeatures": ["definition"]},
            _call("definition", {"path": "a.py", "line": 1, "symbol": "value"}),
            {"dsh/editor/definition": result({"locations": 5})},
            "EDITOR_UNAVAILABLE",
            "'locations' must be an array, not a number",
        ),
        (
            {"languageFeatures": ["definition"]},
            _call("definition", {"path": "a.py", "line": 1, "symbol": "value"}),
            {
                "dsh/editor/definition": result(
                    {"locations": [{"uri": "file:///x.py", "range": {"start": 1}}]}
                )
            },
            "EDITOR_UNAVAILABLE",
            "'locations[0].range.start' must be an object, not a number",
        ),
        (
            {"documentSave": True},
            edit_call(),
            {
                "workspace/applyEdit": result({"applied": True}),
                "dsh/document/save": result({"saved": [], "failed": 5}),
            },
            None,  # the edit is made; the note says why the editor's save cannot be believed
            "the editor did not save a.py (the editor's answer to dsh/document/save is malformed: "
            "'failed' must be an array, not a number)",
        ),
    ],
    ids=["diagnostics-range", "definition-locations", "definition-position", "save-failed"],
)
async def test_a_malformed_inner_field_reaches_the_model_as_a_typed_error_naming_it(
    tmp_path: Path,
    fake: FakeDeepSeek,
    dsh: dict[str, Any],
    call: Reply,
    answers: dict[str, Answer],
    code: str | None,
    expected: str,
) -> None:
    fake.script(call, text_reply("noted"))
    pipe, sid, _ = await open_session(tmp_path, fake, timeout_s=NEVER_S, dsh=dsh)
    editor = HostileEditor(pipe, answers)
    try:
        await send(pipe, 2, sid, "look")
        await _until(lambda: len(_events(pipe, sid, "turn/end")) == 1, "the turn's end", pipe)
        (data,) = tool_results(pipe, sid)
        text = result_text(data)
        assert (data.get("error") or {}).get("code") == code, data
        assert expected in text, text
        assert not any(raw in text for raw in RAW_FAILURES), text
        assert await shutdown_and_exit(pipe) == 0
    finally:
        editor.stop()
    no_raw_failures(tmp_path)


# ---- item 9: the hostile-editor soak -------------------------------------------------------------------

SOAK_TURNS = 10
SOAK_TIMEOUT_S = 0.5
SOAK_DSH = {"documentSave": True, "diagnostics": True, "languageFeatures": ["definition", "hover"]}


def _good(request: dict[str, Any]) -> Any:
    method = request["method"]
    if method == "workspace/applyEdit":
        return {"applied": True}
    if method == "dsh/document/save":
        return {"saved": request["params"]["uris"]}
    if method == "dsh/editor/diagnostics":
        return {"items": []}
    if method == "dsh/editor/hover":
        return {"contents": "int"}
    if method == "window/workDoneProgress/create":
        return None
    return {"locations": []}


def _wrong_inside(request: dict[str, Any]) -> Any:
    return {
        "workspace/applyEdit": {"applied": 1},
        "dsh/document/save": {"saved": [7]},
        "dsh/editor/diagnostics": {"items": [{"uri": 5, "diagnostics": []}]},
        "dsh/editor/hover": {"contents": ["a"]},
    }.get(request["method"], {"locations": [{"uri": None}]})


def hostile_answer(rng: random.Random) -> Answer:
    """One of the ways an editor can answer a request wrongly (or rightly), picked at random."""

    def answer(request: dict[str, Any]) -> list[tuple[float, dict[str, Any]]]:
        kind = rng.choice(["good", "null", "empty", "inner", "error", "unknown", "never", "twice", "late"])
        frame: dict[str, Any] = {"jsonrpc": "2.0", "id": request["id"]}
        if kind == "never" or (kind == "null" and request["method"] == "window/workDoneProgress/create"):
            return []
        if kind == "error":
            return error_reply(request)
        if kind == "unknown":
            return unknown_id(request)
        value = {"null": None, "empty": {}, "inner": _wrong_inside(request)}.get(kind, _good(request))
        frame["result"] = value
        if kind == "twice":
            return [(0.0, frame), (rng.random() * SOAK_TIMEOUT_S, frame)]
        if kind == "late":
            return [(SOAK_TIMEOUT_S * (1.5 + rng.random()), frame)]
        return [(rng.random() * SOAK_TIMEOUT_S / 4, frame)]

    return answer


@pytest.mark.parametrize("seed", [1, 2])
async def test_soak_every_request_answered_wrongly_late_twice_or_never_then_a_clean_shutdown(
    tmp_path: Path, fake: FakeDeepSeek, seed: int
) -> None:
    rng = random.Random(seed)
    pipe, sid, work = await open_session(
        tmp_path, fake, timeout_s=SOAK_TIMEOUT_S, dsh=SOAK_DSH, progress=True
    )
    answer = hostile_answer(rng)
    editor = HostileEditor(pipe, {m: answer for m in _SOAK_METHODS})
    cancelled = 0
    try:
        for turn in range(SOAK_TURNS):
            calls = [
                (
                    f"e{turn}",
                    "edit_file",
                    {"path": "a.py", "old_string": "value = 1", "new_string": f"v = {turn}"},
                ),
                (f"d{turn}", "diagnostics", {"path": "a.py"}),
                (f"f{turn}", "definition", {"path": "a.py", "line": 1, "symbol": "value"}),
                (f"h{turn}", "hover", {"path": "a.py", "line": 1, "symbol": "value"}),
            ]
            # the step after the tools gets the fake's default text reply, so a cancelled turn leaves
            # nothing scripted behind for the next one
            assert fake.pending == 0
            fake.script(Reply.stream(tool_call_stream(calls)))
            asked = len(editor.requests)
            await send(pipe, f"s{turn}", sid, f"turn {turn}")
            if turn % 3 == 2:  # now and then the person cancels while the editor is being asked
                await _until(lambda a=asked: len(editor.requests) > a, "a request to the editor", pipe)
                reply = await pipe.call(f"c{turn}", "dsh/cancel", {"sessionId": sid, "keepInbox": True})
                assert reply["result"] == {}, reply
                cancelled += 1
            ended = turn + 1
            await _until(lambda n=ended: len(_events(pipe, sid, "turn/end")) == n, f"turn {turn}'s end", pipe)
            await _until(
                lambda: _events(pipe, sid, "agent/status")[-1]["data"]["status"] == "idle", "idle", pipe
            )
        reasons = [e["data"]["reason"]["kind"] for e in _events(pipe, sid, "turn/end")]
        assert len(reasons) == SOAK_TURNS and reasons.count("completed") >= SOAK_TURNS - cancelled, reasons
        results = tool_results(pipe, sid)
        assert results, "no tool ran"
        for data in results:
            text = result_text(data)
            assert not any(raw in text for raw in RAW_FAILURES), text
            code = (data.get("error") or {}).get("code")
            assert code in (
                None,
                "EDITOR_UNAVAILABLE",
                "EDIT_CONFLICT",
                "CANCELLED",
                ABORTED_BEFORE_DISPATCH,
            ), data
        assert {r["method"] for r in editor.requests} == set(_SOAK_METHODS)
        assert await shutdown_and_exit(pipe) == 0
    finally:
        editor.stop()
    no_raw_failures(tmp_path)
    assert (work / "a.py").read_text() == ORIGINAL  # only the editor was asked to change it
    assert check_log(_stored(tmp_path / "state", sid), []) == []
    await lease_is_free(tmp_path, fake, sid)


_SOAK_METHODS = (
    "window/workDoneProgress/create",
    "workspace/applyEdit",
    "dsh/document/save",
    "dsh/editor/diagnostics",
    "dsh/editor/definition",
    "dsh/editor/hover",
)


# ---- item 8: a huge answer is refused unread ---------------------------------------------------------

HUGE = 50 << 20  # 50 MiB, under the 64 MiB frame cap


async def test_an_answer_over_the_cap_is_refused_unread_as_a_typed_error_and_the_daemon_keeps_serving(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    fake.script(_call("hover", {"path": "a.py", "line": 1, "symbol": "value"}), text_reply("noted"))
    pipe, sid, _ = await open_session(tmp_path, fake, dsh={"languageFeatures": ["hover"]})
    editor = HostileEditor(pipe, {"dsh/editor/hover": result({"contents": "x" * HUGE})})
    try:
        await send(pipe, 2, sid, "hover it")
        await _until(lambda: len(_events(pipe, sid, "turn/end")) == 1, "the turn's end", pipe, timeout=120)
        (data,) = tool_results(pipe, sid)
        assert data["error"]["code"] == "EDITOR_UNAVAILABLE", data
        text = result_text(data)
        assert "the editor's answer to dsh/editor/hover was refused: the answer is 52,428,8" in text, text
        assert "over the cap of 8,388,608 bytes for an answer" in text, text
        # one for no request at all is dropped unread too; the next request is answered
        body = json.dumps({"jsonrpc": "2.0", "id": "nobody-asked", "result": {"x": "y" * HUGE}}).encode()
        pipe.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        listed = await pipe.call(3, "dsh/session/list", {}, timeout=120)
        assert [s["sessionId"] for s in listed["result"]["sessions"]] == [sid]
        assert not [m for m in pipe.messages if m.get("id") is None and "error" in m]  # nothing to answer
        assert await shutdown_and_exit(pipe) == 0
    finally:
        editor.stop()
    no_raw_failures(tmp_path)


# ---- item 2: a rewind waiting on the editor ----------------------------------------------------------


async def test_a_rewind_whose_apply_edit_is_never_answered_ends_and_sends_are_taken_again(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    fake.script(edit_call(), text_reply("edited"), text_reply("after the rewind"))
    pipe, sid, work = await open_session(tmp_path, fake, timeout_s=1.0)
    answers = iter([result({"applied": True}), never])  # the edit is applied; the rewind's never is
    editor = HostileEditor(pipe, {"workspace/applyEdit": lambda request: next(answers)(request)})
    try:
        await send(pipe, 2, sid, "edit it")
        await _until(lambda: len(_events(pipe, sid, "turn/end")) == 1, "the edit's turn", pipe)
        assert (work / "a.py").read_text() == "value = 2\n"  # no documentSave: the daemon wrote it
        rewound = await pipe.call(3, "dsh/session/rewind", {"sessionId": sid, "beforeTurn": 1})
        assert len(editor.of("workspace/applyEdit")) == 2
        (problem,) = rewound["result"]["notRestorable"]
        assert problem["path"] == str((work / "a.py").resolve())
        assert "not written: the editor did not answer workspace/applyEdit within 1 s" in problem["reason"]
        await send(pipe, 4, sid, "go on")  # not refused as "rewinding"
        await _until(lambda: len(_events(pipe, sid, "turn/end")) == 2, "the next turn", pipe)
        assert await shutdown_and_exit(pipe) == 0
    finally:
        editor.stop()
    no_raw_failures(tmp_path)
    assert check_log(_stored(tmp_path / "state", sid), []) == []
