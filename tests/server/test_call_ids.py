"""The daemon owns tool-call ids on the wire (issue 32.7). An OpenAI-compatible server may reuse ids
such as `call_0` across turns: every event, permission request and transcript item must still name
each call by an id of its own, and the provider must get its history back with its own ids."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.fakes.deepseek_server import FakeDeepSeek, Reply
from tests.server.harness import Daemon, start_daemon, stop_daemon, text_reply, tool_call_stream


def edit(path: Path, old: str, new: str) -> Reply:
    args = {"path": str(path), "old_string": old, "new_string": new}
    return Reply.stream(tool_call_stream([("call_0", "edit_file", args)]))


async def run_turn(daemon: Daemon, sid: str, text: str, turns: int) -> None:
    await daemon.request("dsh/followup", {"sessionId": sid, "message": {"content": text}})
    assert (await daemon.wait_idle_turn(sid, turns))[-1] == {"kind": "completed"}


def tool_items(page: dict[str, Any]) -> list[dict[str, Any]]:
    return [i for t in reversed(page["turns"]) for i in t["items"] if i["type"] == "tool"]


def provider_ids(body: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The call ids of a request body's assistant tool calls and of its tool results, in order."""
    messages = body["messages"]
    calls = [c["id"] for m in messages if m["role"] == "assistant" for c in m.get("tool_calls", ())]
    results = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    return calls, results


async def test_a_provider_reusing_call_0_in_two_turns_gets_two_call_ids(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    from dsh_daemon.agent.derive import rebuild_requests
    from dsh_daemon.llm.serialize import encode_body, request_body
    from dsh_daemon.session.store import SessionStore

    work = tmp_path / "work"
    work.mkdir()
    target = work / "notes.txt"
    target.write_text("one\n")
    state = tmp_path / "state"
    fake.script(
        edit(target, "one", "two"), text_reply("first"), edit(target, "two", "three"), text_reply("second")
    )
    d = await start_daemon(state, fake, apply_edit=False, root=work)
    try:
        sid = await d.new_session(cwd=str(work))
        await run_turn(d, sid, "first edit", 1)
        await run_turn(d, sid, "second edit", 2)
        assert target.read_text() == "three\n"

        calls = [e["data"]["callId"] for e in d.of(sid, "tool/call")]
        assert len(calls) == 2 and len(set(calls)) == 2 and "call_0" not in calls
        # Every place a client reads a call id names the daemon's.
        results = [e["data"] for e in d.of(sid, "tool/result")]
        assert [r["callId"] for r in results] == calls
        assert [r["message"]["source"]["callId"] for r in results] == calls
        assert [r["message"]["content"][0]["toolCallId"] for r in results] == calls
        assert [p["callId"] for p in d.permission_requests] == calls
        assert [e["data"]["callId"] for e in d.of(sid, "permission/requested")] == calls
        assert [e["data"]["callId"] for e in d.of(sid, "permission/resolved")] == calls
        blocks = [
            b
            for e in d.of(sid, "assistant/message")
            for b in e["data"]["message"]["content"]
            if b["type"] == "tool-call"
        ]
        assert [b["id"] for b in blocks] == calls
        assert [b["providerId"] for b in blocks] == ["call_0", "call_0"]  # kept for the provider only
        live = [e["data"]["delta"] for e in d.of(sid, "assistant/delta")]
        assert [x["id"] for x in live if x["type"] == "tool-call" and "id" in x] == calls
        page = await d.request("dsh/session/transcript", {"sessionId": sid, "limit": 10})
        assert [i["callId"] for i in tool_items(page)] == calls

        # The provider got its own ids back, `call_0` twice, as it sent them.
        assert [provider_ids(r.json) for r in fake.requests] == [
            ([], []),
            (["call_0"], ["call_0"]),
            (["call_0"], ["call_0"]),
            (["call_0", "call_0"], ["call_0", "call_0"]),
        ]
    finally:
        await stop_daemon(d)

    # Byte for byte what the log rebuilds; a new daemon replays the same ids.
    store = SessionStore(state)
    try:
        rebuilt = rebuild_requests(store.load_events(sid))
        bodies = [encode_body(request_body(r, default_model="deepseek-v4-flash")) for r in rebuilt]
        assert [json.loads(b) for b in bodies] == [r.json for r in fake.requests]
    finally:
        store.close()
    again = await start_daemon(state, fake, apply_edit=False, root=work)
    try:
        await again.request("dsh/session/attach", {"sessionId": sid})
        await again.wait_for(lambda: len(again.of(sid, "tool/result")) == 2)
        assert [e["data"]["callId"] for e in again.of(sid, "tool/call")] == calls
        assert [e["data"]["callId"] for e in again.of(sid, "tool/result")] == calls
        page = await again.request("dsh/session/transcript", {"sessionId": sid, "limit": 10})
        assert [i["callId"] for i in tool_items(page)] == calls
    finally:
        await stop_daemon(again)
