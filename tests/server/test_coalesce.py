"""Deltas merged for a client that falls behind (protocol.md §7, "A client that falls behind").

The real daemon over real pipes, a client that reads its stdout only when the test says so. A client
that has not read what came before gets the deltas of a block merged, with exact offsets, and no
event overtakes them; a client that reads as they come gets one notification per delta. Nothing
here measures a time: the fake provider's gates pace the stream, and the store says when the turn
is over.
"""

from __future__ import annotations

import fcntl
import itertools
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

import pytest

from dsh_daemon.session.store import SessionStore
from tests.fakes.deepseek_server import DONE, USAGE_A, FakeDeepSeek, Gate, Reply, Write, _choice, _data, wire
from tests.server.harness import ROOT, daemon_env, text_reply, tool_call_stream

TIMEOUT_S = 60.0


class RawLsp:
    """The daemon spoken to in LSP frames; stdout read only by `read_*`, never in the background."""

    def __init__(
        self, state: Path, fake: FakeDeepSeek, init_options: dict[str, Any] | Literal[False] | None = None
    ) -> None:
        (state / "home").mkdir(parents=True, exist_ok=True)
        (state / "work").mkdir(parents=True, exist_ok=True)
        self.state = state
        self.log = open(state / "daemon.log", "wb")  # closed in `close`
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "dsh_daemon"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            env=daemon_env(state, fake),
            cwd=ROOT,
        )
        assert self.proc.stdout is not None
        # Room for a whole turn's output while the test does not read (Linux pipes hold 64 KiB).
        fcntl.fcntl(self.proc.stdout.fileno(), fcntl.F_SETPIPE_SZ, 1 << 20)
        self.received: list[dict[str, Any]] = []
        self._ids = 0
        if init_options is False:
            return  # the test initializes
        result = self.call(
            "initialize",
            {
                "processId": None,
                "rootUri": (state / "work").as_uri(),
                "capabilities": {},
                "initializationOptions": init_options or {"thinking": False},
            },
        )
        assert "capabilities" in result
        self.notify("initialized", {})

    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def notify(self, method: str, params: Any) -> None:
        self._send({"method": method, "params": params})

    def request(self, method: str, params: Any) -> int:
        self._ids += 1
        self._send({"id": self._ids, "method": method, "params": params})
        return self._ids

    def call(self, method: str, params: Any) -> Any:
        request_id = self.request(method, params)
        message = self.read_until(lambda m: m.get("id") == request_id and "method" not in m)
        assert "result" in message, message
        return message["result"]

    def read_one(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        length = None
        while True:
            line = self.proc.stdout.readline()
            assert line, "the daemon closed its stdout"
            if line in (b"\r\n", b"\n"):
                break
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        assert length is not None
        message: dict[str, Any] = json.loads(self.proc.stdout.read(length))
        self.received.append(message)
        return message

    def read_until(self, predicate: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        while True:
            message = self.read_one()
            if predicate(message):
                return message

    def read_until_idle(self) -> dict[str, Any]:
        """Until the daemon says its agent is idle (the turn's last event)."""
        return self.read_until(
            lambda m: (
                m.get("method") == "dsh/event"
                and m["params"]["type"] == "agent/status"
                and m["params"]["data"]["status"] == "idle"
            )
        )

    def events(self, session_id: str) -> list[dict[str, Any]]:
        return [
            m["params"]
            for m in self.received
            if m.get("method") == "dsh/event" and m["params"]["sessionId"] == session_id
        ]

    def close(self) -> None:
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            assert self.proc.stdout is not None
            self.proc.stdout.read()  # whatever is left, so the daemon is never stuck writing it
            self.proc.wait(10)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self.log.close()


@pytest.fixture
def fake() -> Iterator[FakeDeepSeek]:
    with FakeDeepSeek() as server:
        yield server


@pytest.fixture
def lsp(tmp_path: Path, fake: FakeDeepSeek, request: pytest.FixtureRequest) -> Iterator[RawLsp]:
    options = getattr(request, "param", None)
    client = RawLsp(tmp_path / "state", fake, options)
    try:
        yield client
    finally:
        client.close()


def _content(piece: str) -> str:
    return _data(_choice(json.dumps({"content": piece}, ensure_ascii=False)))


def _reasoning(piece: str) -> str:
    return _data(_choice(json.dumps({"reasoning_content": piece}, ensure_ascii=False)))


def _stream(lines: Sequence[str]) -> list[str]:
    return [
        _data(_choice('{"role":"assistant","content":""}')),
        *lines,
        _data(_choice('{"content":""}', '"stop"'), USAGE_A),
        DONE,
    ]


def _wait_turn_stored(state: Path, session_id: str) -> None:
    """Until the daemon has stored the turn's end: every event of the turn has been handed to its
    writer (events are sent before they are stored)."""
    store = SessionStore(state)
    deadline = time.monotonic() + TIMEOUT_S
    while not store.load_events_of_type(session_id, "turn/end"):
        assert time.monotonic() < deadline, "the turn never ended"
        time.sleep(0.05)


def _utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def _check_block(deltas: list[dict[str, Any]], kind: str, expected: str) -> None:
    """The block's notifications join to `expected`, each starting where the one before ended."""
    mine = [d["data"] for d in deltas if d["data"]["delta"]["type"] == kind]
    assert "".join(d["delta"]["text"] for d in mine) == expected
    at = 0
    for data in mine:
        assert data["offset"] == at
        at += _utf16(data["delta"]["text"])


def test_a_client_that_does_not_read_gets_the_deltas_merged_in_order(lsp: RawLsp, fake: FakeDeepSeek) -> None:
    reasoning = [f"think {i} " for i in range(300)]
    text = [f"w{i}😀 " if i % 7 == 0 else f"w{i} " for i in range(5000)]  # offsets in UTF-16 units
    lines = [_reasoning(p) for p in reasoning] + [_content(p) for p in text]
    fake.script(Reply.stream(_stream(lines)))
    session_id = lsp.call("dsh/session/new", {})["sessionId"]
    lsp.call("dsh/followup", {"sessionId": session_id, "message": {"content": "hi"}})
    _wait_turn_stored(lsp.state, session_id)  # stdout not read meanwhile: the client is behind
    lsp.read_until_idle()

    events = lsp.events(session_id)
    deltas = [e for e in events if e["type"] == "assistant/delta"]
    _check_block(deltas, "reasoning", "".join(reasoning))
    _check_block(deltas, "text", "".join(text))
    # The deltas of the first read all leave as they are (a pass of the daemon's loop writes what it
    # made); one read holds at most a few hundred of them.
    assert len(deltas) * 4 < len(lines), f"{len(deltas)} notifications for {len(lines)} deltas"
    # After them, unread: a delta leaves only when another event makes it, never two of one block in
    # a row.
    types = [e["type"] for e in events]
    first = types.index("assistant/delta")
    after_first_read = next(i for i in range(first, len(types)) if types[i] != "assistant/delta")
    for before, after in itertools.pairwise(events[after_first_read:]):
        if before["type"] == after["type"] == "assistant/delta":
            assert before["data"]["delta"]["type"] != after["data"]["delta"]["type"]
    # Nothing overtakes a held delta: every other event of the step comes after the last one.
    last_delta = max(i for i, t in enumerate(types) if t == "assistant/delta")
    assert types.index("assistant/message") > last_delta
    assert types.index("turn/end") > last_delta
    # The durable log holds every delta as it came, whatever the wire merged.
    chunks = SessionStore(lsp.state).load_events_of_type(session_id, "assistant/chunk")
    stored = [d for c in chunks for d in c.data["deltas"]]
    assert "".join(d["text"] for d in stored if d["type"] == "text") == "".join(text)


def test_a_client_that_reads_as_they_come_gets_one_notification_per_delta(
    lsp: RawLsp, fake: FakeDeepSeek
) -> None:
    # Two deltas per write (one HTTP read, one pass of the daemon's loop), and the next write only
    # once the client has read both and the durable chunk that holds them (the only other event a
    # stream writes): the client has read everything each time, so no delta is merged.
    pairs = [(f"a{i} ", f"b{i}😀 ") for i in range(12)]
    fake.script(_paired_reply(pairs))
    session_id = lsp.call("dsh/session/new", {})["sessionId"]
    lsp.call("dsh/followup", {"sessionId": session_id, "message": {"content": "hi"}})

    def stored_text() -> str:
        chunks = [e for e in lsp.events(session_id) if e["type"] == "assistant/chunk"]
        return "".join(d["text"] for c in chunks for d in c["data"]["deltas"])

    sent = ""
    for i, (a, b) in enumerate(pairs):
        fake.open_gate(f"pair{i}")
        sent += a + b
        lsp.read_until(lambda _m, sent=sent: stored_text() == sent)
    lsp.read_until(lambda m: m.get("method") == "dsh/event" and m["params"]["type"] == "turn/end")

    deltas = [e for e in lsp.events(session_id) if e["type"] == "assistant/delta"]
    assert [d["data"]["delta"]["text"] for d in deltas] == [p for pair in pairs for p in pair]
    _check_block(deltas, "text", sent)


def _paired_reply(pairs: Sequence[tuple[str, str]]) -> Reply:
    """A stream whose deltas come two per write, each write held at a gate `pair{i}`."""
    actions: list[Any] = [Write(wire([_data(_choice('{"role":"assistant","content":""}'))]))]
    for i, (a, b) in enumerate(pairs):
        actions += [Gate(f"pair{i}"), Write(wire([_content(a), _content(b)]))]
    actions.append(Write(wire(_stream([])[1:])))
    return Reply(actions=tuple(actions))


@pytest.mark.parametrize("lsp", [{"thinking": False, "deltaCoalesceMs": 1000}], indirect=True)
def test_a_window_merges_the_deltas_of_one_read_even_for_a_client_that_keeps_up(
    lsp: RawLsp, fake: FakeDeepSeek
) -> None:
    pairs = [(f"a{i} ", f"b{i}😀 ") for i in range(6)]
    fake.script(_paired_reply(pairs))
    session_id = lsp.call("dsh/session/new", {})["sessionId"]
    lsp.call("dsh/followup", {"sessionId": session_id, "message": {"content": "hi"}})

    def is_delta(message: dict[str, Any]) -> bool:
        return message.get("method") == "dsh/event" and message["params"]["type"] == "assistant/delta"

    for i in range(len(pairs)):
        fake.open_gate(f"pair{i}")
        lsp.read_until(is_delta)  # both deltas of the write, in one notification
    lsp.read_until(lambda m: m.get("method") == "dsh/event" and m["params"]["type"] == "turn/end")
    deltas = [e for e in lsp.events(session_id) if e["type"] == "assistant/delta"]
    assert [d["data"]["delta"]["text"] for d in deltas] == [a + b for a, b in pairs]
    _check_block(deltas, "text", "".join(a + b for a, b in pairs))


@pytest.mark.parametrize("value", [-1, "10", True, 1e9, None])
def test_a_bad_window_is_refused_at_initialize(tmp_path: Path, fake: FakeDeepSeek, value: Any) -> None:
    client = RawLsp(tmp_path / "state", fake, False)
    try:
        request_id = client.request(
            "initialize",
            {
                "processId": None,
                "rootUri": (tmp_path / "state" / "work").as_uri(),
                "capabilities": {},
                "initializationOptions": {"thinking": False, "deltaCoalesceMs": value},
            },
        )
        answer = client.read_until(lambda m: m.get("id") == request_id)
        if value is None:  # absent: the default
            assert "result" in answer
        else:
            assert answer["error"]["code"] == -32602
            assert "deltaCoalesceMs" in answer["error"]["message"]
    finally:
        client.close()


@pytest.mark.parametrize(
    # unconfined: the sandbox (tests/sandbox) is not what this is about
    "lsp",
    [{"thinking": False, "tools": {"sandbox": "full-access", "permissions": {"run_command": "allow"}}}],
    indirect=True,
)
def test_command_output_is_merged_for_a_client_that_does_not_read(lsp: RawLsp, fake: FakeDeepSeek) -> None:
    # Printed a line at a time, so the daemon reads it in many pieces (many live tool/output events).
    command = "for i in $(seq 1 200); do echo line$i; sleep 0.002; done"
    fake.script(
        Reply.stream(tool_call_stream([("call_1", "run_command", {"command": command})])), text_reply("ran")
    )
    session_id = lsp.call("dsh/session/new", {"cwd": str(lsp.state / "work")})["sessionId"]
    lsp.call("dsh/followup", {"sessionId": session_id, "message": {"content": "run it"}})
    _wait_turn_stored(lsp.state, session_id)  # stdout not read meanwhile
    lsp.read_until_idle()
    events = lsp.events(session_id)
    outputs = [e for e in events if e["type"] == "tool/output"]
    assert "".join(e["data"]["text"] for e in outputs).split() == [f"line{i}" for i in range(1, 201)]
    for before, after in itertools.pairwise(events):  # each one left only because another event came
        assert not before["type"] == after["type"] == "tool/output"
    types = [e["type"] for e in events]
    assert types.index("tool/result") > max(i for i, t in enumerate(types) if t == "tool/output")
