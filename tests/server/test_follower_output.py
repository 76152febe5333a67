"""Live command output for a window that follows a session another daemon drives (protocol.md §3,
"Read-only attach"): two daemons on one state directory, over real pipes, as two editor windows."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import sqlite3
import sys
from pathlib import Path
from typing import Any

from pygls.lsp.server import LanguageServer

from dsh_daemon.host.follow import POLL_S
from dsh_daemon.host.options import parse_options
from dsh_daemon.model.events import Event
from dsh_daemon.model.jsonvalue import freeze_json
from dsh_daemon.model.messages import UserMessage
from dsh_daemon.server.frontend import LspFrontEnd
from dsh_daemon.session.liveoutput import SHARED_CHARS_PER_CALL
from dsh_daemon.session.store import SessionStore
from tests.fakes.deepseek_server import FakeDeepSeek, Reply
from tests.server.harness import Daemon, start_daemon, stop_daemon, text_reply, tool_call_stream

# (the workspace is under DSH_HOME here, which a confined command cannot see: full-access)
ALLOW_COMMANDS = {
    "thinking": False,
    "tools": {"permissions": {"run_command": "allow"}, "sandbox": "full-access"},
}
# A command that prints for a while (its own sleeps pace it; the test waits on events, never on time).
PRINTS = "for i in $(seq 1 40); do echo line $i; sleep 0.02; done"
PRINTED = "".join(f"line {i}\n" for i in range(1, 41))


def output_of(daemon: Daemon, sid: str, provider_id: str) -> str:
    """The output of the call the provider named `provider_id`, as this connection got it."""
    call_id = daemon.call_id(sid, provider_id)
    return "".join(e["data"]["text"] for e in daemon.of(sid, "tool/output") if e["data"]["callId"] == call_id)


def positions(events: list[dict[str, Any]], call_id: str) -> dict[str, list[int]]:
    """Where the call's tool/call, tool/output and tool/result stand in one connection's stream."""
    found: dict[str, list[int]] = {"tool/call": [], "tool/output": [], "tool/result": []}
    for index, event in enumerate(events):
        if event["type"] in found and event["data"].get("callId") == call_id:
            found[event["type"]].append(index)
    return found


async def test_a_follower_gets_the_drivers_command_output_in_order_and_once(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    state = tmp_path / "state"
    driver = await start_daemon(state, fake, init_options=ALLOW_COMMANDS)
    follower = await start_daemon(state, fake, init_options=ALLOW_COMMANDS)
    try:
        fake.script(
            Reply.stream(tool_call_stream([("c1", "run_command", {"command": PRINTS})])),
            text_reply("ran it"),
        )
        sid = await driver.new_session()
        attached = await follower.request("dsh/session/attach", {"sessionId": sid})
        assert attached["readOnly"] is True
        await driver.request("dsh/followup", {"sessionId": sid, "message": {"content": "run it"}})
        await driver.wait_idle_turn(sid)
        await follower.wait_for(lambda: bool(follower.of(sid, "turn/end")))

        # The driver's connection got the output live, once (no second copy from the store).
        assert output_of(driver, sid, "c1") == PRINTED
        # The follower got the same text, as `tool/output` events, after the call, before its result.
        assert output_of(follower, sid, "c1") == PRINTED
        seen = positions(follower.events, follower.call_id(sid, "c1"))
        assert len(seen["tool/call"]) == 1 and len(seen["tool/result"]) == 1
        assert seen["tool/output"], seen
        assert seen["tool/call"][0] < min(seen["tool/output"])
        assert max(seen["tool/output"]) < seen["tool/result"][0]
        # Coalesced: fewer events than lines the command printed one by one.
        assert len(seen["tool/output"]) <= len(driver.of(sid, "tool/output"))
        # Output carries no seq: the follower's durable stream stays contiguous, as the driver's.
        for daemon in (driver, follower):
            seqs = [e["seq"] for e in daemon.of(sid) if "seq" in e]
            assert seqs == list(range(len(seqs)))
            assert all("seq" not in e for e in daemon.of(sid, "tool/output"))
        # The log holds no output (the model's history is the log's); the shared rows are elsewhere.
        with sqlite3.connect(state / "sessions.sqlite3") as db:
            types = {t for (t,) in db.execute("SELECT DISTINCT type FROM events WHERE session_id=?", (sid,))}
            shared = "".join(
                t
                for (t,) in db.execute("SELECT text FROM tool_output WHERE session_id=? ORDER BY id", (sid,))
            )
        assert not any("output" in t for t in types), types
        assert shared == PRINTED
    finally:
        await stop_daemon(driver)
        await stop_daemon(follower)


async def test_a_follower_that_attached_when_the_command_was_over_gets_no_stale_output(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """A finished call's output is not replayed (its result holds what the model saw)."""
    state = tmp_path / "state"
    driver = await start_daemon(state, fake, init_options=ALLOW_COMMANDS)
    follower = await start_daemon(state, fake, init_options=ALLOW_COMMANDS)
    try:
        fake.script(
            Reply.stream(tool_call_stream([("c1", "run_command", {"command": "echo once"})])),
            text_reply("ran it"),
            text_reply("two"),
        )
        sid = await driver.new_session()
        await driver.request("dsh/followup", {"sessionId": sid, "message": {"content": "run it"}})
        await driver.wait_idle_turn(sid)
        await follower.request("dsh/session/attach", {"sessionId": sid})
        assert follower.of(sid, "tool/result")  # the history, replayed
        await driver.request("dsh/followup", {"sessionId": sid, "message": {"content": "again"}})
        await follower.wait_for(lambda: len(follower.of(sid, "turn/end")) == 2)
        assert follower.of(sid, "tool/output") == []
    finally:
        await stop_daemon(driver)
        await stop_daemon(follower)


MISSING = re.compile(
    r"\[… ([\d,]+) characters of output not shown here; the result keeps the beginning and end\]\n"
)


def account_for(shown: str, whole: str) -> int:
    """Check `shown` is `whole` with some stretches replaced by a line saying how long they were; the
    number of characters it says are missing."""
    position, missing = 0, 0
    pieces = MISSING.split(shown)  # text, count, text, count, …, text
    for index, piece in enumerate(pieces):
        if index % 2:
            skipped = int(piece.replace(",", ""))
            position += skipped
            missing += skipped
            continue
        assert whole[position : position + len(piece)] == piece, (position, piece[:80])
        position += len(piece)
    assert position == len(whole)
    return missing


async def test_a_chatty_commands_output_reaches_a_follower_bounded_and_accounted_for(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """300,000 characters at once, three times what the store keeps of a call: the follower gets the
    text it could read, and a line saying how much it missed wherever it missed some."""
    lines = 3_000
    printer = f"{sys.executable} -c \"for i in range({lines}): print('%06d' % i + 'x' * 93)\""
    whole = "".join(f"{i:06d}{'x' * 93}\n" for i in range(lines))
    state = tmp_path / "state"
    driver = await start_daemon(state, fake, init_options=ALLOW_COMMANDS)
    follower = await start_daemon(state, fake, init_options=ALLOW_COMMANDS)
    try:
        fake.script(
            Reply.stream(tool_call_stream([("c1", "run_command", {"command": printer})])),
            text_reply("ran it"),
        )
        sid = await driver.new_session()
        await follower.request("dsh/session/attach", {"sessionId": sid})
        await driver.request("dsh/followup", {"sessionId": sid, "message": {"content": "run it"}})
        await driver.wait_idle_turn(sid)
        await follower.wait_for(lambda: bool(follower.of(sid, "turn/end")))
        assert output_of(driver, sid, "c1") == whole
        shown = output_of(follower, sid, "c1")
        missing = account_for(shown, whole)
        assert MISSING.split(shown)[-1].endswith(f"{lines - 1:06d}{'x' * 93}\n")  # the end is shown
        assert missing < len(whole)
        with sqlite3.connect(state / "sessions.sqlite3") as db:
            (stored,) = db.execute(
                "SELECT sum(length(text)) FROM tool_output WHERE session_id=?", (sid,)
            ).fetchone()
        assert stored <= SHARED_CHARS_PER_CALL
    finally:
        await stop_daemon(driver)
        await stop_daemon(follower)


class Recording(LspFrontEnd):
    """An LSP front end (in-process, no client) that keeps what it would send its connection."""

    def __init__(self, *args: Any) -> None:
        self.sent: list[dict[str, Any]] = []
        super().__init__(*args)

    def deliver(self, session_id: str, event: Event, *, replayed: bool) -> None:
        self.sent.append({"type": event.type, "seq": event.seq, "data": dict(event.data)})


async def test_a_view_taken_over_by_a_request_before_its_poll_still_gets_the_output(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """The lease became free and a request of the follower's drove the session before its poll read
    the last events: the output it had not read goes between them as the poll would have sent it."""
    state, work = tmp_path / "state", tmp_path / "work"
    work.mkdir()
    env = {"DEEPSEEK_API_KEY": "sk-test-secret-key-0000", "DEEPSEEK_BASE_URL": fake.base_url}

    def front_end() -> Recording:
        options = parse_options(state, env, {}, ALLOW_COMMANDS, what="initializationOptions")
        return Recording(LanguageServer("t", "0"), state, options, [str(work)], None)

    driver, follower = front_end(), front_end()
    try:
        fake.script(
            Reply.stream(tool_call_stream([("c1", "run_command", {"command": "echo one; echo two"})])),
            text_reply("ran it"),
        )
        hosted = driver.host.create(str(work))
        sid = hosted.session_id
        assert follower.host.attach(sid, -1).holder is not None  # read-only
        await follower.host.follower.close()  # its poll never runs: the request below gets there first
        hosted.send(UserMessage.create("run it"), "next-turn", True)
        await hosted.agent.when_idle()
        await driver.host.close_session(sid)  # lets go
        follower.host.session(sid)  # a request of the follower's drives it now
        types = [e["type"] for e in follower.sent]
        texts = "".join(e["data"]["text"] for e in follower.sent if e["type"] == "tool/output")
        assert texts == "one\ntwo\n"
        outputs = [i for i, t in enumerate(types) if t == "tool/output"]
        assert types.index("tool/call") < outputs[0] and outputs[-1] < types.index("tool/result")
        seqs = [e["seq"] for e in follower.sent if e["seq"] is not None]
        assert seqs == list(range(len(seqs)))
    finally:
        await driver.close()
        await follower.close()


async def test_a_follower_whose_first_poll_reads_only_the_first_event_delivers_it_once(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """The driver's write-behind can put seq 0 alone on disk before a follower's poll: the follower's
    cursor must then stand at 0, not before it (`seq or delivered` kept it at -1: seq 0 twice, seen
    in CI as `[0, 0, 1, ...]`). Here the test is the driver: it holds the lease and writes the rows."""
    state = tmp_path / "state"
    store = SessionStore(state)
    store.create_session("s", title=None, cwd=None)
    assert store.write_lease("s", "test-driver", os.getpid(), socket.gethostname(), replace_holder=None)
    follower = await start_daemon(state, fake, init_options=ALLOW_COMMANDS)
    try:
        attached = await follower.request("dsh/session/attach", {"sessionId": "s"})
        assert attached["readOnly"] is True and attached["lastSeq"] == -1
        first = UserMessage.create("one").to_json()
        store.append_events("s", [Event("user/message", freeze_json(first), 0, 0)])
        await follower.wait_for(lambda: bool(follower.of("s", "user/message")))
        await asyncio.sleep(3 * POLL_S)  # polls that would deliver seq 0 again (there is no event to wait on)
        second = UserMessage.create("two").to_json()
        store.append_events("s", [Event("user/message", freeze_json(second), 1, 0)])
        await follower.wait_for(lambda: len(follower.of("s", "user/message")) >= 2)
        assert [e["seq"] for e in follower.of("s") if "seq" in e] == [0, 1]
    finally:
        await stop_daemon(follower)
        store.close()
