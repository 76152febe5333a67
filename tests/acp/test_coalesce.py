"""ACP: live chunks merged for a client that falls behind (protocol.md, ACP mode, "A client that
falls behind").

The real `dsh-daemon acp` over real pipes, a client that reads its stdout only when the test says
so. Nothing here measures a time: the fake provider's gates pace the stream, and the store says
when the turn is over.
"""

from __future__ import annotations

import fcntl
import json
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from dsh_daemon.session.store import SessionStore
from tests.acp.harness import COMMAND
from tests.fakes.deepseek_server import FakeDeepSeek, Gate, Reply, Write, text_stream, wire
from tests.server.harness import ROOT, daemon_env

TIMEOUT_S = 60.0


class RawLines:
    """`dsh-daemon acp` spoken to in NDJSON; stdout read only by `read_*`, never in the background."""

    def __init__(self, state: Path, fake: FakeDeepSeek, options: dict[str, Any] | None = None) -> None:
        (state / "home").mkdir(parents=True, exist_ok=True)
        (state / "work").mkdir(parents=True, exist_ok=True)
        self.state = state
        self.log = open(state / "daemon.log", "wb")  # closed in `close`
        self.proc = subprocess.Popen(
            COMMAND,
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
        self.call("initialize", {"protocolVersion": 1, "_meta": {"dsh": options or {"thinking": False}}})
        new = self.call("session/new", {"cwd": str(state / "work"), "mcpServers": []})
        self.session_id = str(new["sessionId"])

    def request(self, method: str, params: Any) -> int:
        assert self.proc.stdin is not None
        self._ids += 1
        line = json.dumps({"jsonrpc": "2.0", "id": self._ids, "method": method, "params": params})
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()
        return self._ids

    def call(self, method: str, params: Any) -> Any:
        request_id = self.request(method, params)
        message = self.read_until(lambda m: m.get("id") == request_id and "method" not in m)
        assert "result" in message, message
        return message["result"]

    def read_until(self, predicate: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            assert line, "the daemon closed its stdout"
            message: dict[str, Any] = json.loads(line)
            self.received.append(message)
            if predicate(message):
                return message

    def chunks(self, kind: str = "agent_message_chunk") -> list[tuple[int, str]]:
        """(index among everything received, text) of each chunk of `kind`."""
        return [
            (i, m["params"]["update"]["content"]["text"])
            for i, m in enumerate(self.received)
            if m.get("method") == "session/update" and m["params"]["update"]["sessionUpdate"] == kind
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
def acp(tmp_path: Path, fake: FakeDeepSeek, request: pytest.FixtureRequest) -> Iterator[RawLines]:
    client = RawLines(tmp_path / "state", fake, getattr(request, "param", None))
    try:
        yield client
    finally:
        client.close()


def _prompt(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text}]


def test_a_client_that_does_not_read_gets_the_chunks_merged_in_order(
    acp: RawLines, fake: FakeDeepSeek
) -> None:
    pieces = [f"w{i}😀 " if i % 7 == 0 else f"w{i} " for i in range(5000)]
    fake.script(Reply.stream(text_stream(pieces)))
    request_id = acp.request("session/prompt", {"sessionId": acp.session_id, "prompt": _prompt("hi")})
    store = SessionStore(acp.state)
    deadline = time.monotonic() + TIMEOUT_S
    while not store.load_events_of_type(acp.session_id, "turn/end"):  # stdout unread meanwhile
        assert time.monotonic() < deadline, "the turn never ended"
        time.sleep(0.05)
    answer = acp.read_until(lambda m: m.get("id") == request_id and "method" not in m)
    assert answer["result"]["stopReason"] == "end_turn"

    chunks = acp.chunks()
    assert "".join(text for _, text in chunks) == "".join(pieces)
    # The deltas of the first read leave as they are (one read holds at most a few hundred), the
    # rest merged while they stay unread.
    assert len(chunks) * 4 < len(pieces), f"{len(chunks)} chunks for {len(pieces)} deltas"
    # Nothing overtakes a held chunk: the prompt's answer comes after the last one.
    assert chunks[-1][0] < len(acp.received) - 1


def _paired_reply(pairs: list[tuple[str, str]]) -> Reply:
    """A stream whose deltas come two per write, each write held at a gate `pair{i}`."""
    lines = text_stream([p for pair in pairs for p in pair])
    actions: list[Any] = [Write(wire(lines[:1]))]
    for i in range(len(pairs)):
        actions += [Gate(f"pair{i}"), Write(wire(lines[1 + 2 * i : 3 + 2 * i]))]
    actions.append(Write(wire(lines[1 + 2 * len(pairs) :])))
    return Reply(actions=tuple(actions))


def _is_chunk(message: dict[str, Any]) -> bool:
    return (
        message.get("method") == "session/update"
        and message["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    )


def test_a_client_that_reads_as_they_come_gets_one_chunk_per_delta(acp: RawLines, fake: FakeDeepSeek) -> None:
    # Two deltas per write (one pass of the daemon's loop), the next write only once the client has
    # read both: it never falls behind, so none is merged.
    pairs = [(f"a{i} ", f"b{i}😀 ") for i in range(20)]
    fake.script(_paired_reply(pairs))
    request_id = acp.request("session/prompt", {"sessionId": acp.session_id, "prompt": _prompt("hi")})
    for i in range(len(pairs)):
        fake.open_gate(f"pair{i}")
        acp.read_until(_is_chunk)
        acp.read_until(_is_chunk)
    acp.read_until(lambda m: m.get("id") == request_id and "method" not in m)
    assert [text for _, text in acp.chunks()] == [p for pair in pairs for p in pair]


@pytest.mark.parametrize("acp", [{"thinking": False, "deltaCoalesceMs": 1000}], indirect=True)
def test_a_window_merges_the_chunks_of_one_read(acp: RawLines, fake: FakeDeepSeek) -> None:
    pairs = [(f"a{i} ", f"b{i}😀 ") for i in range(5)]
    fake.script(_paired_reply(pairs))
    request_id = acp.request("session/prompt", {"sessionId": acp.session_id, "prompt": _prompt("hi")})
    for i in range(len(pairs)):
        fake.open_gate(f"pair{i}")
        acp.read_until(_is_chunk)  # both deltas of the write, in one chunk
    acp.read_until(lambda m: m.get("id") == request_id and "method" not in m)
    assert [text for _, text in acp.chunks()] == [a + b for a, b in pairs]
