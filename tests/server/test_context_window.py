"""Context window and compaction end to end (issue 14 items 3-4), against the fake DeepSeek server."""

from __future__ import annotations

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
