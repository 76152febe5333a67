"""End-to-end over real pipes: the real daemon process, a pytest-lsp client, a fake DeepSeek on loopback."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from pygls.exceptions import JsonRpcException

from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.harness import Daemon, start_daemon, stop_daemon, text_reply


def texts(request_json: dict) -> list[str]:
    """The conversation's message texts (the system prompt is tested in test_system_prompt.py)."""
    return [m.get("content") for m in request_json["messages"] if m["role"] != "system"]


async def test_followup_streams_a_turn_and_events_carry_seq_only_when_durable(daemon: Daemon) -> None:
    daemon.fake.script(Reply.stream(text_stream(["Hel", "lo", "!"])))
    sid = await daemon.new_session()
    result = await daemon.request("dsh/followup", {"sessionId": sid, "message": {"content": "hi"}})
    assert isinstance(result["messageId"], str)
    assert await daemon.wait_idle_turn(sid) == [{"kind": "completed"}]
    events = daemon.of(sid)
    durable = [e for e in events if "seq" in e]
    assert [e["seq"] for e in durable] == list(range(len(durable)))
    live_types = {e["type"] for e in events if "seq" not in e}
    assert {"agent/status", "assistant/delta", "agent/inbox/inserted", "agent/inbox/claimed"} <= live_types
    assert "".join(e["data"]["delta"]["text"] for e in daemon.of(sid, "assistant/delta")) == "Hello!"
    (message,) = daemon.of(sid, "assistant/message")
    assert message["data"]["message"]["content"] == [{"type": "text", "text": "Hello!"}]
    assert texts(daemon.fake.requests[0].json) == ["hi"]


async def test_send_with_target_and_wakeup(daemon: Daemon) -> None:
    sid = await daemon.new_session()
    parked = await daemon.request(
        "dsh/send",
        {
            "sessionId": sid,
            "message": {"id": "client-id-1", "content": "later"},
            "target": "next-turn",
            "wakeup": False,
        },
    )
    assert parked == {"messageId": "client-id-1"}
    listing = await daemon.request("dsh/inbox/list", {"sessionId": sid})
    assert [m["id"] for m in listing["nextTurn"]] == ["client-id-1"]
    assert (await daemon.request("dsh/wake", {"sessionId": sid})) == {"started": True}
    await daemon.wait_idle_turn(sid)
    assert (await daemon.request("dsh/wake", {"sessionId": sid})) == {"started": False}
    assert texts(daemon.fake.requests[0].json) == ["later"]


async def test_inject_while_idle_opens_no_turn_and_reaches_the_next_request(daemon: Daemon) -> None:
    sid = await daemon.new_session()
    await daemon.request(
        "dsh/inject",
        {"sessionId": sid, "message": {"content": "ctx", "source": {"kind": "plugin", "plugin": "test"}}},
    )
    await asyncio.sleep(0.2)
    assert daemon.of(sid, "turn/start") == []
    assert daemon.fake.requests == []
    await daemon.request("dsh/followup", {"sessionId": sid, "message": {"content": "question"}})
    await daemon.wait_idle_turn(sid)
    assert texts(daemon.fake.requests[0].json) == ["ctx", "question"]


async def test_steer_during_a_slow_stream_lands_in_the_next_step(daemon: Daemon) -> None:
    daemon.fake.script(Reply.stream(text_stream(["a", "b", "c", "d", "e"]), delay=0.1), text_reply("done"))
    sid = await daemon.new_session()
    await daemon.request("dsh/followup", {"sessionId": sid, "message": {"content": "start"}})
    await daemon.wait_event(sid, "assistant/delta")
    await daemon.request("dsh/steer", {"sessionId": sid, "message": {"content": "focus"}})
    await daemon.wait_idle_turn(sid)
    assert len(daemon.of(sid, "turn/start")) == 1
    assert [e["data"]["step"] for e in daemon.of(sid, "step/start")] == [1, 2]
    second = daemon.fake.requests[1].json["messages"]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "user"]
    assert second[-1]["content"] == "focus"


async def test_cancel_without_and_with_keep_inbox(daemon: Daemon) -> None:
    daemon.fake.script(Reply.stream(text_stream(["x"] * 50), delay=0.2))
    sid = await daemon.new_session()
    await daemon.request("dsh/followup", {"sessionId": sid, "message": {"content": "one"}})
    await daemon.request("dsh/followup", {"sessionId": sid, "message": {"content": "queued"}})
    await daemon.wait_event(sid, "assistant/delta")
    assert await daemon.request("dsh/cancel", {"sessionId": sid, "keepInbox": True}) == {}
    await daemon.wait_idle_turn(sid)
    listing = await daemon.request("dsh/inbox/list", {"sessionId": sid})
    assert [m["content"][0]["text"] for m in listing["nextTurn"]] == ["queued"]
    reason = daemon.of(sid, "turn/end")[0]["data"]["reason"]
    assert reason == {"kind": "aborted", "cause": "user"}
    assert await daemon.fake.wait_disconnect(0)  # the HTTP stream was closed at once

    daemon.fake.script(Reply.stream(text_stream(["y"] * 50), delay=0.2))
    await daemon.request("dsh/wake", {"sessionId": sid})
    await daemon.wait_event(sid, "assistant/delta", count=2)
    await daemon.request("dsh/followup", {"sessionId": sid, "message": {"content": "tail"}})
    await daemon.request("dsh/cancel", {"sessionId": sid})
    await daemon.wait_idle_turn(sid, 2)
    listing = await daemon.request("dsh/inbox/list", {"sessionId": sid})
    assert listing == {"nextTurn": [], "nextStep": []}
    discarded = daemon.of(sid, "agent/inbox/discarded")
    assert [e["data"]["message"]["content"][0]["text"] for e in discarded] == ["tail"]


async def test_inbox_edits(daemon: Daemon) -> None:
    sid = await daemon.new_session()
    for text in ("a", "b", "c"):
        await daemon.request(
            "dsh/send",
            {
                "sessionId": sid,
                "message": {"id": text, "content": text},
                "target": "next-turn",
                "wakeup": False,
            },
        )
    assert await daemon.request("dsh/inbox/remove", {"sessionId": sid, "messageId": "b"}) == {"removed": True}
    assert await daemon.request("dsh/inbox/remove", {"sessionId": sid, "messageId": "b"}) == {
        "removed": False
    }
    await daemon.request(
        "dsh/inbox/move", {"sessionId": sid, "messageId": "c", "target": "next-turn", "index": 0}
    )
    await daemon.request(
        "dsh/inbox/replace", {"sessionId": sid, "messageId": "a", "message": {"id": "a2", "content": "A!"}}
    )
    listing = await daemon.request("dsh/inbox/list", {"sessionId": sid})
    assert [m["id"] for m in listing["nextTurn"]] == ["c", "a2"]
    with pytest.raises(JsonRpcException) as missing:
        await daemon.request(
            "dsh/inbox/replace", {"sessionId": sid, "messageId": "zz", "message": {"content": "x"}}
        )
    assert missing.value.data["code"] == "unknown_message"


async def test_session_list_and_titles_from_the_first_prompt(daemon: Daemon, tmp_path: Path) -> None:
    project = str(tmp_path / "state" / "work" / "project")  # inside the workspace root
    sid = await daemon.new_session(cwd=project)
    await daemon.request(
        "dsh/followup", {"sessionId": sid, "message": {"content": "Fix the   flaky test\nplease"}}
    )
    await daemon.wait_idle_turn(sid)
    listing = await daemon.request("dsh/session/list", {"cwd": project})
    (session,) = listing["sessions"]
    assert session["sessionId"] == sid and session["cwd"] == project
    assert session["title"] == "Fix the flaky test please"
    assert session["status"] == "idle" and session["pending"] == 0
    assert set(session) >= {"createdAt", "updatedAt"}
    assert (await daemon.request("dsh/session/list", {"cwd": "/elsewhere"})) == {"sessions": []}


async def test_typed_errors(daemon: Daemon) -> None:
    sid = await daemon.new_session()
    cases = [
        ("dsh/followup", {"sessionId": "missing", "message": {"content": "x"}}, -32602, "unknown_session"),
        ("dsh/followup", {"sessionId": sid}, -32602, "invalid_params"),
        ("dsh/followup", {"sessionId": sid, "message": {"content": 5}}, -32602, "invalid_params"),
        (
            "dsh/send",
            {"sessionId": sid, "message": {"content": "x"}, "target": "later", "wakeup": True},
            -32602,
            "invalid_params",
        ),
        (
            "dsh/inject",
            {"sessionId": sid, "message": {"content": "x", "source": {"kind": "tool", "callId": "c"}}},
            -32602,
            "invalid_params",
        ),
        ("dsh/session/attach", {"sessionId": "missing"}, -32602, "unknown_session"),
    ]
    for method, params, code, data_code in cases:
        with pytest.raises(JsonRpcException) as error:
            await daemon.request(method, params)
        assert (error.value.code, error.value.data["code"]) == (code, data_code), method
    await daemon.request("dsh/inject", {"sessionId": sid, "message": {"id": "dup", "content": "x"}})
    with pytest.raises(JsonRpcException) as dup:
        await daemon.request("dsh/inject", {"sessionId": sid, "message": {"id": "dup", "content": "y"}})
    assert dup.value.data["code"] == "duplicate_message_id"
    with pytest.raises(JsonRpcException) as unknown:
        await daemon.request("dsh/nope", {})
    assert unknown.value.code == -32601


async def test_attach_after_reconnect_with_and_without_after_seq(tmp_path: Path, fake: FakeDeepSeek) -> None:
    state = tmp_path / "state"
    first = await start_daemon(state, fake)
    sid = await first.new_session()
    await first.request("dsh/followup", {"sessionId": sid, "message": {"content": "hello"}})
    await first.wait_idle_turn(sid)
    await first.request(
        "dsh/send",
        {"sessionId": sid, "message": {"content": "parked"}, "target": "next-turn", "wakeup": False},
    )
    seen = [e["seq"] for e in first.of(sid) if "seq" in e]
    await stop_daemon(first)

    second = await start_daemon(state, fake)
    result = await second.request("dsh/session/attach", {"sessionId": sid})
    # Durable events carry a seq; live-only ones (a `sandbox/status` as the session opens) do not.
    replayed = [e["seq"] for e in second.of(sid) if "seq" in e]
    assert replayed == seen  # everything, in order, before the reply
    assert result["lastSeq"] == seen[-1]
    assert result["status"] == "idle"
    assert [m["content"][0]["text"] for m in result["inbox"]["nextTurn"]] == ["parked"]

    middle = seen[len(seen) // 2]
    again = await second.request("dsh/session/attach", {"sessionId": sid, "afterSeq": middle})
    assert again["lastSeq"] == seen[-1]
    assert [e["seq"] for e in second.of(sid) if "seq" in e][len(replayed) :] == [
        s for s in seen if s > middle
    ]
    # live events continue after the attach with no gap and no duplicate
    await second.request("dsh/wake", {"sessionId": sid})
    await second.wait_idle_turn(sid)
    tail = [e["seq"] for e in second.of(sid) if "seq" in e][
        len(replayed) + len([s for s in seen if s > middle]) :
    ]
    assert tail == list(range(seen[-1] + 1, seen[-1] + 1 + len(tail)))
    await stop_daemon(second)


async def test_events_only_for_sessions_this_connection_created_or_attached(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    state = tmp_path / "state"
    d = await start_daemon(state, fake)
    mine = await d.new_session()
    other = (await d.request("dsh/session/new", {}))["sessionId"]
    await d.request("dsh/followup", {"sessionId": mine, "message": {"content": "x"}})
    await d.wait_idle_turn(mine)
    assert {e["sessionId"] for e in d.events} <= {mine, other}
    await stop_daemon(d)
