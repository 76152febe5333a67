"""Corrupt stored rows (issue 18 item 9): a session whose rows are not what this daemon writes is
refused when it is opened, as `session_unreadable` naming what is wrong, and its rows are left
exactly as they were; the next prompt gets the same typed answer, never -32603."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from pygls.exceptions import JsonRpcException

from tests.acp.harness import raw_acp
from tests.fakes.deepseek_server import FakeDeepSeek
from tests.server.harness import start_daemon, stop_daemon, text_reply

# (what to do to the stored rows, a word the error must name)
CORRUPTIONS: dict[str, tuple[str, str]] = {
    "turn number not a number": (
        "UPDATE events SET data='{\"turn\":\"x\"}' WHERE session_id=:sid AND type='turn/start'",
        "turn",
    ),
    "content block without a type": (
        "UPDATE events SET data=json_set(data, '$.content[0]', json('{\"text\":\"hi\"}')) "
        "WHERE session_id=:sid AND type='user/message'",
        "content",
    ),
    "assistant message missing": (
        "UPDATE events SET data=json_remove(data, '$.message') WHERE session_id=:sid AND type='assistant/message'",
        "message",
    ),
    "tool result content not an array": (
        "UPDATE events SET data=json_set(data, '$.message.content', 5) "
        "WHERE session_id=:sid AND type='tool/result'",
        "content",
    ),
    "tool call's provider id not a string": (
        "UPDATE events SET data=json_set(data, '$.message.content[#-1].providerId', 5) "
        "WHERE session_id=:sid AND type='assistant/message' "
        "AND json_extract(data, '$.message.content[#-1].type')='tool-call'",
        "providerId",
    ),
    "request header not an object": (
        "UPDATE events SET data=json_set(data, '$.header', 'nope') WHERE session_id=:sid AND type='request/header'",
        "header",
    ),
    "not JSON inside braces": (
        "UPDATE events SET data='{not json}' WHERE session_id=:sid AND type='step/end'",
        "JSON",
    ),
    "queued item without an id": (
        "UPDATE events SET data=json_remove(data, '$.inserted[0].id') "
        "WHERE session_id=:sid AND type='agent/inbox/spliced' AND seq=(SELECT max(seq) FROM events "
        "WHERE session_id=:sid AND type='agent/inbox/spliced')",
        "id",
    ),
    "summary row behind the log": (
        "UPDATE sessions SET last_seq=last_seq-1 WHERE session_id=:sid",
        "last",
    ),
    "summary row ahead of the log": (
        "UPDATE sessions SET last_seq=last_seq+3 WHERE session_id=:sid",
        "last",
    ),
}


def dump(db_path: Path, sid: str) -> list[Any]:
    db = sqlite3.connect(db_path)
    try:
        events = db.execute("SELECT * FROM events WHERE session_id=? ORDER BY seq", (sid,)).fetchall()
        row = db.execute("SELECT * FROM sessions WHERE session_id=?", (sid,)).fetchall()
        return [events, row]
    finally:
        db.close()


async def stored_session(state: Path, fake: FakeDeepSeek) -> str:
    """A session with a finished turn that ran a tool, and one queued prompt."""
    from tests.fakes.deepseek_server import Reply
    from tests.server.harness import tool_call_stream

    (state / "work").mkdir(parents=True, exist_ok=True)
    (state / "work" / "a.txt").write_text("hello\n")
    fake.script(
        Reply.stream(tool_call_stream([("c1", "read_file", {"path": "a.txt"})])),
        text_reply("done"),
    )
    d = await start_daemon(state, fake, root=state / "work")
    sid = await d.new_session()
    await d.request("dsh/followup", {"sessionId": sid, "message": {"content": "read it"}})
    await d.wait_idle_turn(sid)
    await d.request("dsh/inject", {"sessionId": sid, "message": {"content": "parked"}})
    await stop_daemon(d)
    return sid


@pytest.mark.parametrize("case", sorted(CORRUPTIONS))
async def test_a_corrupt_session_is_unreadable_on_open_and_left_untouched(
    tmp_path: Path, fake: FakeDeepSeek, case: str
) -> None:
    state = tmp_path / "state"
    sid = await stored_session(state, fake)
    statement, named = CORRUPTIONS[case]
    db = sqlite3.connect(state / "sessions.sqlite3")
    changed = db.execute(statement, {"sid": sid}).rowcount
    db.commit()
    db.close()
    assert changed >= 1, case
    before = dump(state / "sessions.sqlite3", sid)
    d = await start_daemon(state, fake, root=state / "work")
    for method, params in (
        ("dsh/session/attach", {"sessionId": sid}),
        ("dsh/followup", {"sessionId": sid, "message": {"content": "go on"}}),
        ("dsh/wake", {"sessionId": sid}),
    ):
        with pytest.raises(JsonRpcException) as error:
            await d.request(method, params)
        assert (error.value.code, error.value.data["code"]) == (-32803, "session_unreadable"), (
            case,
            method,
            error.value.message,
        )
        assert named in error.value.message, (case, error.value.message)
    await stop_daemon(d)
    assert dump(state / "sessions.sqlite3", sid) == before, case  # nothing was repaired or rewritten
    assert (
        b"Traceback" not in (state / "daemon.log").read_bytes() if (state / "daemon.log").exists() else True
    )


async def test_acp_answers_a_corrupt_session_as_unreadable(tmp_path: Path, fake: FakeDeepSeek) -> None:
    state = tmp_path / "state"
    sid = await stored_session(state, fake)
    db = sqlite3.connect(state / "sessions.sqlite3")
    db.execute(CORRUPTIONS["content block without a type"][0], {"sid": sid})
    db.commit()
    db.close()
    before = dump(state / "sessions.sqlite3", sid)
    async with raw_acp(state, fake) as raw:
        await raw.call("initialize", {"protocolVersion": 1, "_meta": {"dsh": {"thinking": False}}})
        loaded = await raw.call(
            "session/load", {"sessionId": sid, "cwd": str(state / "work"), "mcpServers": []}
        )
        assert loaded["error"]["data"]["code"] == "session_unreadable", loaded
        prompted = await raw.call(
            "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "x"}]}
        )
        assert prompted["error"]["code"] != -32603, prompted
    assert dump(state / "sessions.sqlite3", sid) == before
