"""A seq a client saw is never reused after a crash (issue 18 item 3), over the wire.

The window: a session's first prompt publishes its title, `turn/start` and the claim at once, and
they are written behind (within 100 ms); the step's pre-step hooks meanwhile wait for the session's
MCP servers to start (one here never answers). The daemon is SIGKILLed as soon as the client has
seen `turn/start`: usually inside the window, so those events never reach the disk."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any

from tests.fakes.deepseek_server import FakeDeepSeek
from tests.server.harness import start_daemon, stop_daemon, text_reply

SILENT_SERVER = {
    "command": sys.executable,
    "args": ["-c", "import time; time.sleep(60)"],
    "startupTimeoutS": 60,
}
ATTEMPTS = 8


def durable(events: list[dict[str, Any]], sid: str) -> dict[int, dict[str, Any]]:
    return {e["seq"]: e for e in events if e["sessionId"] == sid and e.get("seq") is not None}


async def killed_after_turn_start(state: Path, fake: FakeDeepSeek) -> tuple[str, dict[int, dict[str, Any]]]:
    """A first prompt, a SIGKILL right after its turn/start reached the client; what the client saw."""
    first = await start_daemon(
        state, fake, init_options={"thinking": False, "mcpServers": {"slow": SILENT_SERVER}}
    )
    sid = await first.new_session()
    await first.request("dsh/followup", {"sessionId": sid, "message": {"content": "hello there"}})
    await first.wait_event(sid, "turn/start")
    server = first.client._server
    assert server is not None
    server.send_signal(signal.SIGKILL)
    await server.wait()
    await first.client.stop()
    return sid, durable(first.events, sid)


async def test_seqs_seen_before_a_sigkill_are_never_reused(tmp_path: Path, fake: FakeDeepSeek) -> None:
    landed = 0
    for attempt in range(ATTEMPTS):
        state = tmp_path / f"state-{attempt}"
        sid, seen = await killed_after_turn_start(state, fake)
        assert {"session/title", "turn/start"} <= {e["type"] for e in seen.values()}

        # a client that saw everything reattaches after its last seq
        fake.script(text_reply("hello again"))
        second = await start_daemon(state, fake)
        last_seen = max(seen)
        attached = await second.request("dsh/session/attach", {"sessionId": sid, "afterSeq": last_seen})
        assert attached["lastSeq"] >= last_seen
        replayed = durable(second.events, sid)
        # the session goes on; then every seq the first client saw holds what it saw, or a gap
        await second.request("dsh/followup", {"sessionId": sid, "message": {"content": "again"}})
        await second.wait_idle_turn(sid)
        second.events.clear()
        await second.request("dsh/session/attach", {"sessionId": sid})
        stored = durable(second.events, sid)
        await stop_daemon(second)
        assert sorted(stored) == list(range(len(stored)))  # contiguous from 0
        lost = []
        for seq, event in seen.items():
            assert seq in stored, (attempt, seq, "a seen seq is free for the next event")
            if stored[seq]["type"] == "log/gap":
                assert stored[seq]["data"]["from"] <= seq <= stored[seq]["data"]["to"]
                lost.append(seq)
            else:
                assert (stored[seq]["type"], stored[seq]["data"]) == (event["type"], event["data"]), seq
        if lost:  # the reattach after the last seen seq said so
            gaps = [e for e in replayed.values() if e["type"] == "log/gap"]
            assert gaps and gaps[0]["data"]["from"] <= min(lost), (attempt, lost, replayed)
            landed += 1
        if landed >= 2:
            break
    assert landed, f"no SIGKILL of {ATTEMPTS} landed before the write-behind commit"
