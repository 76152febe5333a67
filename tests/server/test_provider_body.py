"""A failed turn carries the provider's answer body (`error.providerBody`, protocol.md §7) for a person
reading the log, with the configured API key redacted: the real daemon over real pipes, the fake
DeepSeek on loopback answering 400, 429 and 500 with a JSON body that echoes the key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fakes.deepseek_server import FakeDeepSeek, Reply
from tests.server.harness import start_daemon, stop_daemon

KEY = "sk-test-secret-key-0000"  # the key tests/server/harness.py gives the daemon


def _body(status: int) -> str:
    return json.dumps(
        {
            "error": {
                "message": f"request {status} refused for key {KEY}",
                "type": "invalid_request_error" if status == 400 else "server_error",
                "param": None,
                "code": status,
                "echo": {"authorization": f"Bearer {KEY}"},
            }
        }
    )


@pytest.mark.parametrize(
    ("status", "code", "attempts"), [(400, "INVALID_REQUEST", 1), (429, "RATE_LIMIT", 6), (500, "SERVER", 6)]
)
async def test_the_body_is_on_the_wire_the_key_is_not(
    tmp_path: Path, fake: FakeDeepSeek, status: int, code: str, attempts: int
) -> None:
    state = tmp_path / "state"
    d = await start_daemon(state, fake)
    # 429 and 500 are retried (5 times, at once: Retry-After 0) before the turn fails.
    fake.script(*(Reply.error(status, _body(status), retry_after="0") for _ in range(attempts)))
    sid = await d.new_session()
    await d.request("dsh/followup", {"sessionId": sid, "message": {"content": "go"}})
    await d.wait_idle_turn(sid)
    (end,) = d.of(sid, "turn/end")
    error = end["data"]["reason"]["error"]
    assert end["data"]["reason"]["kind"] == "error" and error["code"] == code and error["status"] == status
    assert error["providerBody"] == _body(status).replace(KEY, "[redacted]")
    assert KEY not in error["message"] and "[redacted]" in error["message"]
    retries = d.of(sid, "llm/retry")
    assert len(retries) == attempts - 1
    assert all(r["data"]["error"]["providerBody"] == error["providerBody"] for r in retries)
    # The transcript page's turn end says it too; the key is nowhere on the wire or on disk.
    page = await d.request("dsh/session/transcript", {"sessionId": sid})
    assert page["turns"][0]["end"]["error"]["providerBody"] == error["providerBody"]
    assert KEY not in json.dumps(d.events) and KEY not in json.dumps(page)
    await stop_daemon(d)
    for path in state.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


async def test_a_long_body_is_cut_after_the_key_is_redacted(tmp_path: Path, fake: FakeDeepSeek) -> None:
    """A key that straddles the cut leaves no part of itself behind: redaction comes first."""
    body = "<html>" + "x" * (2000 - 6 - 5) + KEY + "y" * 5000 + "</html>"
    d = await start_daemon(tmp_path / "state", fake)
    fake.script(Reply.error(400, body, content_type="text/html"))
    sid = await d.new_session()
    await d.request("dsh/followup", {"sessionId": sid, "message": {"content": "go"}})
    await d.wait_idle_turn(sid)
    (end,) = d.of(sid, "turn/end")
    provider_body = end["data"]["reason"]["error"]["providerBody"]
    assert len(provider_body) == 2001 and provider_body.endswith("[reda…")
    assert provider_body == body.replace(KEY, "[redacted]")[:2000] + "…"
    assert KEY[:5] not in json.dumps(d.events)
    await stop_daemon(d)
