"""Context window and compaction end to end (issue 14 items 3-4), against the fake DeepSeek server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.fakes.deepseek_server import FakeDeepSeek
from tests.server.harness import Daemon, start_daemon, stop_daemon, text_reply


def _durable(daemon: Daemon, sid: str, type_: str) -> list[dict[str, Any]]:
    return [e for e in daemon.of(sid, type_) if "seq" in e]


async def test_context_usage_is_durable_and_replayed_on_attach(tmp_path: Path, fake: FakeDeepSeek) -> None:
    fake.script(text_reply("one"))
    state = tmp_path / "state"
    d = await start_daemon(state, fake, init_options={"thinking": False, "contextWindow": {"m-test": 5000}})
    try:
        sid = await d.new_session()
        await d.request("dsh/followup", {"sessionId": sid, "message": {"content": "hi"}})
        await d.wait_idle_turn(sid, 1)
        # The default model's window (DeepSeek V4: 1M tokens); `used` is the request's prompt tokens.
        [usage] = _durable(d, sid, "context/usage")
        assert usage["data"] == {"turn": 1, "step": 1, "used": 12, "window": 1_000_000}
    finally:
        await stop_daemon(d)
    d = await start_daemon(state, fake, init_options={"thinking": False})
    try:
        await d.request("dsh/session/attach", {"sessionId": sid})
        assert [e["data"] for e in _durable(d, sid, "context/usage")] == [usage["data"]]
    finally:
        await stop_daemon(d)


async def test_compaction_over_the_wire(tmp_path: Path, fake: FakeDeepSeek) -> None:
    """Manual compact, then an overflow that compacts and retries: each summarising call carries
    `x-dsh-purpose: compaction`, and every request rebuilds from the log."""
    from dsh_daemon.agent.derive import rebuild_requests
    from dsh_daemon.llm.serialize import encode_body, request_body
    from dsh_daemon.model.provider import ModelRequest
    from dsh_daemon.session.store import SessionStore

    fake.script(text_reply("one"), text_reply("SUMMARY by hand"), text_reply("two"))
    state = tmp_path / "state"
    d = await start_daemon(state, fake)
    try:
        sid = await d.new_session()
        await d.request("dsh/followup", {"sessionId": sid, "message": {"content": "first"}})
        await d.wait_idle_turn(sid, 1)
        result = await d.request("dsh/session/compact", {"sessionId": sid})
        assert result["compacted"] is True, result
        await d.wait_idle_turn(sid, 2)
        await d.request("dsh/followup", {"sessionId": sid, "message": {"content": "second"}})
        await d.wait_idle_turn(sid, 3)
        fake.fail_next(1, 400)  # DeepSeek's "maximum context length" body
        fake.script(text_reply("SUMMARY after overflow"), text_reply("three"))
        await d.request("dsh/followup", {"sessionId": sid, "message": {"content": "third"}})
        reasons = await d.wait_idle_turn(sid, 4)
        assert reasons[-1] == {"kind": "completed"}
        compacted = _durable(d, sid, "context/compacted")
        assert [c["data"]["reason"] for c in compacted] == ["manual", "overflow"]
    finally:
        await stop_daemon(d)
    purposes = [r.headers.get("x-dsh-purpose") for r in fake.requests]
    assert purposes == [None, "compaction", None, None, "compaction", None]
    summarising = fake.requests[1].json
    assert "thinking" not in summarising or summarising["thinking"] == {"type": "disabled"}
    assert "tools" not in summarising
    last = fake.requests[-1].json["messages"]
    assert last[1]["content"].endswith("SUMMARY after overflow") and last[2]["content"] == "third"
    store = SessionStore(state)
    try:
        rebuilt: list[ModelRequest] = rebuild_requests(store.load_events(sid))
        bodies = [encode_body(request_body(r, default_model="deepseek-v4-flash")) for r in rebuilt]
        # The store keeps JSON objects with sorted keys, so compare parsed bodies (lists keep order).
        assert [json.loads(b) for b in bodies] == [r.json for r in fake.requests]
    finally:
        store.close()
