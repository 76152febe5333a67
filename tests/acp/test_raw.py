"""ACP over raw NDJSON lines: malformed lines, `$/cancel_request` on a queued prompt, and the
`_session/steering` / `_dsh/*` extensions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.acp.harness import RawAcp, raw_acp
from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream


async def start(raw: RawAcp, cwd: Path) -> str:
    init = await raw.call("initialize", {"protocolVersion": 1, "_meta": {"dsh": {"thinking": False}}})
    assert init["result"]["protocolVersion"] == 1
    caps = init["result"]["agentCapabilities"]
    assert caps["loadSession"] is True and caps["promptCapabilities"]["embeddedContext"] is True
    assert caps["_meta"]["steering"]["supported"] is True
    new = await raw.call("session/new", {"cwd": str(cwd), "mcpServers": []})
    return str(new["result"]["sessionId"])


def stalled(text: str) -> Reply:
    """A reply that streams `text` and then hangs before its finish: the turn runs until cancelled."""
    return Reply.stream(text_stream([text])[:2], tail="stall")


def prompt(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text}]


def is_chunk(text: str) -> Any:
    return lambda m: (
        m.get("method") == "session/update"
        and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
        and m["params"]["update"]["content"]["text"] == text
    )


async def test_malformed_lines_are_answered_and_the_daemon_keeps_going(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    async with raw_acp(tmp_path / "state", fake) as raw:
        raw.send_line(b"this is not json")
        parse_error = await raw.next()
        assert parse_error["id"] is None and parse_error["error"]["code"] == -32700
        raw.send_line(b"\xff\xfe garbage bytes")
        assert (await raw.next())["error"]["code"] == -32700
        raw.send_line(b'[{"jsonrpc":"2.0","id":1,"method":"initialize"}]')
        assert (await raw.next())["error"]["code"] == -32600
        raw.send_line(b'{"jsonrpc":"1.0","id":7,"method":"initialize","params":{}}')
        reply = await raw.next()
        assert reply["id"] == 7 and reply["error"]["code"] == -32600
        raw.send_line(b'{"jsonrpc":"2.0","id":{"a":1},"method":"initialize"}')
        reply = await raw.next()
        assert reply["id"] is None and reply["error"]["code"] == -32600
        raw.send_line(b'{"jsonrpc":"2.0","id":8,"method":5}')
        assert (await raw.next())["error"]["code"] == -32600
        raw.send_line(b"   ")  # a blank line is no message at all
        # Before initialize, a session method is refused; the daemon is still alive.
        early = await raw.call("session/new", {"cwd": str(tmp_path)})
        assert early["error"]["code"] == -32002
        sid = await start(raw, tmp_path / "state" / "work")
        assert (await raw.call("no/such/method", {}))["error"]["code"] == -32601
        bad = await raw.call("session/prompt", {"sessionId": sid, "prompt": "not blocks"})
        assert bad["error"]["code"] == -32602 and bad["error"]["data"]["code"] == "invalid_params"
        unknown = await raw.call("session/prompt", {"sessionId": "nope", "prompt": prompt("x")})
        assert unknown["error"]["data"]["code"] == "unknown_session"
        relative = await raw.call("session/new", {"cwd": "relative/dir", "mcpServers": []})
        assert relative["error"]["code"] == -32602
        raw.send({"method": "unknown/notification", "params": {}})  # ignored, no answer
        done = await raw.call("session/prompt", {"sessionId": sid, "prompt": prompt("still here?")})
        assert done["result"]["stopReason"] == "end_turn"
        # A response to nothing we asked is dropped silently.
        raw.send({"id": "dsh-999", "result": {}})
        assert "sessions" in (await raw.call("session/list", {}))["result"]


async def test_cancel_request_removes_a_queued_prompt(tmp_path: Path, fake: FakeDeepSeek) -> None:
    fake.script(stalled("working"), Reply.stream(text_stream(["third done"])))
    async with raw_acp(tmp_path / "state", fake) as raw:
        sid = await start(raw, tmp_path / "state" / "work")
        first = raw.request("session/prompt", {"sessionId": sid, "prompt": prompt("first")})
        await raw.until(is_chunk("working"))
        second = raw.request("session/prompt", {"sessionId": sid, "prompt": prompt("second")})
        third = raw.request("session/prompt", {"sessionId": sid, "prompt": prompt("third")})
        listed = await raw.call("_dsh/inbox/list", {"sessionId": sid})
        assert [m["content"][0]["text"] for m in listed["result"]["nextTurn"]] == ["second", "third"]
        raw.send({"method": "$/cancel_request", "params": {"requestId": second}})
        cancelled = await raw.response(second)
        assert cancelled["error"]["code"] == -32800
        raw.send({"method": "session/cancel", "params": {"sessionId": sid}})
        assert (await raw.response(first))["result"]["stopReason"] == "cancelled"
        assert (await raw.response(third))["result"]["stopReason"] == "end_turn"
        assert [r.json["messages"][-1]["content"] for r in fake.requests] == ["first", "third"]


async def test_steering_inject_wake_and_inbox_edits(tmp_path: Path, fake: FakeDeepSeek) -> None:
    fake.script(
        stalled("step one"),
        Reply.stream(text_stream(["steered"])),
        Reply.stream(text_stream(["woken"])),
        Reply.stream(text_stream(["edited"])),
    )
    async with raw_acp(tmp_path / "state", fake) as raw:
        sid = await start(raw, tmp_path / "state" / "work")
        # Idle: an inject parks, it never starts a turn.
        injected = await raw.call("_dsh/inject", {"sessionId": sid, "prompt": prompt("context only")})
        assert injected["result"]["messageId"]
        assert (await raw.call("_dsh/inbox/list", {"sessionId": sid}))["result"]["nextStep"][0][
            "verb"
        ] == "inject"
        first = raw.request("session/prompt", {"sessionId": sid, "prompt": prompt("go")})
        await raw.until(is_chunk("step one"))
        # Running: a steer joins the turn at its next step.
        steer = await raw.call("_session/steering", {"sessionId": sid, "prompt": prompt("use v2")})
        assert steer["result"] == {"outcome": "injected"}
        queued = raw.request("session/prompt", {"sessionId": sid, "prompt": prompt("old text")})
        items = (await raw.call("_dsh/inbox/list", {"sessionId": sid}))["result"]["nextTurn"]
        replaced = await raw.call(
            "_dsh/inbox/replace",
            {"sessionId": sid, "messageId": items[0]["id"], "prompt": prompt("new text")},
        )
        new_id = replaced["result"]["messageId"]
        moved = await raw.call(
            "_dsh/inbox/move", {"sessionId": sid, "messageId": new_id, "target": "next-turn", "index": 0}
        )
        assert moved["result"] == {}
        missing = await raw.call("_dsh/inbox/remove", {"sessionId": sid, "messageId": "nope"})
        assert missing["result"] == {"removed": False}
        raw.send({"method": "session/cancel", "params": {"sessionId": sid}})
        assert (await raw.response(first))["result"]["stopReason"] == "cancelled"
        # The steer was kept with the queue and ran after the cancel; the replaced prompt was answered.
        assert (await raw.response(queued))["result"]["stopReason"] == "end_turn"
        contents = [r.json["messages"][-1]["content"] for r in fake.requests]
        assert contents[0] == "go" and "new text" in contents and "old text" not in contents
        woke = await raw.call("_dsh/wake", {"sessionId": sid})
        assert woke["result"] == {"started": False}  # nothing pending any more


async def test_session_delete_removes_a_session_and_refuses_a_running_one_in_words(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """Issue 24.11: `session/delete` (advertised), refused with a reason while a turn runs."""
    async with raw_acp(tmp_path / "state", fake) as raw:
        init = await raw.call("initialize", {"protocolVersion": 1, "_meta": {"dsh": {"thinking": False}}})
        caps = init["result"]["agentCapabilities"]["sessionCapabilities"]
        assert caps["delete"] == {} and caps["additionalDirectories"] == {}
        sid = str(
            (await raw.call("session/new", {"cwd": str(tmp_path), "mcpServers": []}))["result"]["sessionId"]
        )
        fake.script(stalled("working"))
        running = raw.request("session/prompt", {"sessionId": sid, "prompt": prompt("go")})
        await raw.until(is_chunk("working"))
        busy = await raw.call("session/delete", {"sessionId": sid})
        assert busy["error"]["code"] == -32803 and "turn is running" in busy["error"]["message"]
        raw.send({"method": "session/cancel", "params": {"sessionId": sid}})
        assert (await raw.response(running))["result"]["stopReason"] == "cancelled"
        assert (await raw.call("session/delete", {"sessionId": sid}))["result"] == {}
        listed = await raw.call("session/list", {})
        assert listed["result"]["sessions"] == []
