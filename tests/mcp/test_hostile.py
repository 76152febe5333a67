"""Hostile MCP servers (issue 18 items 4 and 5), through the real daemon (ACP mode, whose log is a
file the tests read): huge results are cut, read linearly; a call is bounded by its timeout and
stopped by a cancel; garbage, deep JSON and a chatty stderr are counted and summarised, never logged
line by line; a server that keeps violating the protocol is marked `failed`."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.acp.harness import RawAcp, raw_acp
from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.harness import tool_call_stream

HOSTILE = Path(__file__).with_name("hostile_server.py")
MB = 1024 * 1024


def hostile(**extra: Any) -> dict[str, Any]:
    env = {k: str(v) for k, v in extra.pop("env", {}).items()}
    return {"command": sys.executable, "args": [str(HOSTILE)], "env": env, **extra}


def call(name: str, args: dict[str, Any], call_id: str = "call_1") -> Reply:
    return Reply.stream(tool_call_stream([(call_id, f"mcp__h__{name}", args)]))


async def start(raw: RawAcp, state: Path, server: dict[str, Any]) -> str:
    meta = {"thinking": False, "mcpServers": {"h": server}, "tools": {"permissions": {"mcp__h": "allow"}}}
    init = await raw.call("initialize", {"protocolVersion": 1, "_meta": {"dsh": meta}})
    assert "result" in init, init
    new = await raw.call("session/new", {"cwd": str(state / "work"), "mcpServers": []})
    return str(new["result"]["sessionId"])


async def status(raw: RawAcp, state_name: str) -> dict[str, Any]:
    message = await raw.until(
        lambda m: m.get("method") == "_dsh/mcp/status" and m["params"]["state"] == state_name
    )
    return dict(message["params"])


def prompt(raw: RawAcp, sid: str, text: str = "go") -> int:
    return raw.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]})


def tool_messages(fake: FakeDeepSeek, index: int) -> list[str]:
    return [m["content"] for m in fake.requests[index].json["messages"] if m["role"] == "tool"]


def log_of(state: Path) -> str:
    return (state / "daemon.log").read_text(errors="replace")


# ---- item 4: large results, timeouts, cancel -----------------------------------------------------------


async def test_a_result_over_the_message_cap_is_cut_with_a_marker(tmp_path: Path, fake: FakeDeepSeek) -> None:
    state = tmp_path / "state"
    fake.script(
        call("big", {"size": 20 * MB}),
        call("big", {"size": 17 * MB, "idLast": True}, "call_2"),
        call("echo", {"text": "still here"}, "call_3"),
        Reply.stream(text_stream(["done"])),
    )
    async with raw_acp(state, fake) as raw:
        sid = await start(raw, state, hostile())  # the default cap: 16 MiB
        answer = await raw.response(prompt(raw, sid))
        assert answer["result"]["stopReason"] == "end_turn", answer
    first, second, third = tool_messages(fake, 3)
    for text in (first, second):
        assert text.startswith("0123456789abcdef0123"), text[:100]
        assert "MCP result cut: the server sent" in text, text[-400:]
        assert "over the 16,777,216-byte limit (maxMessageBytes)" in text, text[-400:]
        assert len(text) < 70_000  # and the result budget applies after it
    assert third == "still here"
    log = log_of(state)
    assert log.count("cut to the 16,777,216-byte limit") == 2 and "Traceback" not in log


async def test_a_result_over_the_cap_from_a_tool_with_an_output_schema_is_cut_the_same_way(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """The cut result has no `structuredContent` (it was in the dropped rest), which the SDK's
    output-schema check would turn into an error: it is the documented cut result all the same, and a
    result within the cap is still checked against the schema."""
    state = tmp_path / "state"
    fake.script(
        call("shaped", {"size": 17 * MB}),
        call("shaped", {"size": 12}, "call_2"),
        Reply.stream(text_stream(["done"])),
    )
    async with raw_acp(state, fake) as raw:
        sid = await start(raw, state, hostile())  # the default cap: 16 MiB
        answer = await raw.response(prompt(raw, sid))
        assert answer["result"]["stopReason"] == "end_turn", answer
    cut, small = tool_messages(fake, 2)
    assert cut.startswith("0123456789abcdef0123"), cut[:200]
    assert "MCP result cut: the server sent" in cut and "MCP_ERROR" not in cut, cut[-400:]
    assert "over the 16,777,216-byte limit (maxMessageBytes)" in cut, cut[-400:]
    assert small == "0123456789ab"
    assert "Traceback" not in log_of(state)


async def test_a_call_is_bounded_by_its_timeout_and_told_it_was_cancelled(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    state = tmp_path / "state"
    notes = tmp_path / "notes.txt"
    fake.script(call("sleep", {}), Reply.stream(text_stream(["gave up"])))
    async with raw_acp(state, fake) as raw:
        sid = await start(raw, state, hostile(toolTimeoutS=1, env={"HOSTILE_LOG": notes}))
        answer = await raw.response(prompt(raw, sid))
        assert answer["result"]["stopReason"] == "end_turn", answer
    (text,) = tool_messages(fake, 1)
    assert "no answer from sleep within 1 s (toolTimeoutS)" in text, text
    lines = notes.read_text().splitlines()
    assert lines[0].startswith("sleeping ") and lines[1].startswith(f"cancelled {lines[0].split()[1]}"), lines


async def test_cancel_stops_an_mcp_call_in_flight(tmp_path: Path, fake: FakeDeepSeek) -> None:
    state = tmp_path / "state"
    notes = tmp_path / "notes.txt"
    fake.script(call("sleep", {}))
    async with raw_acp(state, fake) as raw:
        sid = await start(raw, state, hostile(env={"HOSTILE_LOG": notes}))
        asked = prompt(raw, sid)
        for _ in range(500):  # the server has the call
            if notes.exists() and notes.read_text():
                break
            await asyncio.sleep(0.02)
        raw.send({"method": "session/cancel", "params": {"sessionId": sid}})
        answer = await raw.response(asked)
        assert answer["result"]["stopReason"] == "cancelled", answer
        for _ in range(500):
            if "cancelled" in notes.read_text():
                break
            await asyncio.sleep(0.02)
    lines = notes.read_text().splitlines()
    assert lines[1].startswith(f"cancelled {lines[0].split()[1]}: the turn was cancelled"), lines


# ---- item 5: chatty and garbage servers ----------------------------------------------------------------


async def test_a_server_flooding_garbage_is_summarised_and_marked_failed(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    state = tmp_path / "state"
    fake.script(Reply.stream(text_stream(["works without it"])))
    async with raw_acp(state, fake) as raw:
        sid = await start(raw, state, hostile(env={"HOSTILE_FLOOD": 20_000, "HOSTILE_STDERR": 3 * MB}))
        failed = await status(raw, "failed")
        assert "keeps violating the protocol" in failed["error"], failed
        assert failed["stderr"][-1] == "the last stderr line" and len(failed["stderr"]) <= 20, failed
        assert sum(len(line) for line in failed["stderr"]) <= 4_000
        answer = await raw.response(prompt(raw, sid))
        assert answer["result"]["stopReason"] == "end_turn"
    assert "mcp__h__echo" not in {t["function"]["name"] for t in fake.requests[0].json.get("tools", [])}
    log = log_of(state)
    assert "Traceback" not in log
    assert log.count("malformed message dropped") == 3, log[-3000:]  # the first few, then a summary
    assert "malformed lines dropped in the last" in log
    assert len(log) < 20_000, len(log)
    # stderr is kept as a bounded tail (its last lines end up in the failure's message), never logged
    # line by line: 3 MB of it leave a handful of lines
    assert log.count("a chatty server writes") <= 4


async def test_garbage_and_deep_json_mid_session_are_dropped_and_the_call_answered(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    state = tmp_path / "state"
    fake.script(
        call("garbage", {"lines": 500, "text": "after garbage"}),
        call("deep", {"depth": 100_000, "text": "after deep"}, "call_2"),
        Reply.stream(text_stream(["done"])),
    )
    async with raw_acp(state, fake) as raw:
        sid = await start(raw, state, hostile())
        answer = await raw.response(prompt(raw, sid))
        assert answer["result"]["stopReason"] == "end_turn", answer
    assert tool_messages(fake, 2) == ["after garbage", "after deep"]
    log = log_of(state)
    assert "Traceback" not in log and "Fatal Python error" not in log
    assert log.count("malformed message dropped") == 3  # the first few of the window, with a sample
    assert "501 malformed lines dropped in the last" in log  # the deep line is one of them


class _GarbageSse(BaseHTTPRequestHandler):
    """A streamable-HTTP MCP endpoint whose answer to `initialize` is an SSE stream of garbage events
    (then, too late, the real answer)."""

    garbage = 3_000

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if body.get("method") != "initialize":
            self.send_response(202)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        events = b"".join(b"event: message\ndata: not json %d\n\n" % i for i in range(self.garbage))
        answer = {"jsonrpc": "2.0", "id": body["id"], "result": {
            "protocolVersion": body["params"]["protocolVersion"], "capabilities": {},
            "serverInfo": {"name": "garbage", "version": "1"}}}  # fmt: skip
        with contextlib.suppress(OSError):
            self.wfile.write(events + b"event: message\ndata: " + json.dumps(answer).encode() + b"\n\n")

    def do_GET(self) -> None:
        self.send_response(405)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        return None


async def test_an_http_server_sending_garbage_events_is_summarised_and_marked_failed(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    state = tmp_path / "state"
    http = ThreadingHTTPServer(("127.0.0.1", 0), _GarbageSse)
    threading.Thread(target=http.serve_forever, daemon=True).start()
    fake.script(Reply.stream(text_stream(["works without it"])))
    try:
        async with raw_acp(state, fake) as raw:
            url = f"http://127.0.0.1:{http.server_address[1]}/mcp"
            sid = await start(raw, state, {"url": url})
            failed = await status(raw, "failed")
            assert "keeps violating the protocol" in failed["error"], failed
            answer = await raw.response(prompt(raw, sid))
            assert answer["result"]["stopReason"] == "end_turn"
    finally:
        http.shutdown()
    log = log_of(state)
    assert "Traceback" not in log and "Error parsing SSE message" not in log, log[-3000:]
    assert log.count("malformed message dropped") == 3
