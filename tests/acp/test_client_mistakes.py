"""Every mistake an ACP client can make in a request's params is answered `-32602` with a message that
names the field, never `-32603`, and prints no traceback (issue 18, item 2): lone UTF-16 surrogates in
any string, line numbers past any file's, paths the OS refuses to look at. Values echoed back are cut
to 200 characters, as on the LSP wire."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.acp.harness import raw_acp
from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream

LONE = "\ud800"  # a UTF-16 half that no UTF-8 store, file or pipe can hold


def text(value: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": value}]


def mistakes(sid: str, work: Path) -> list[tuple[str, str, dict[str, Any], str]]:
    """(name, method, params, what the message must name)."""
    file_uri = (work / "a.py").as_uri()
    digits = "9" * 5000
    return [
        ("surrogate sessionId (prompt)", "session/prompt", {"sessionId": "a" + LONE, "prompt": text("x")}, "sessionId"),
        ("surrogate sessionId (load)", "session/load", {"sessionId": LONE, "cwd": str(work), "mcpServers": []}, "sessionId"),
        ("surrogate sessionId (resume)", "session/resume", {"sessionId": LONE, "cwd": str(work), "mcpServers": []}, "sessionId"),
        ("surrogate sessionId (wake)", "_dsh/wake", {"sessionId": LONE}, "sessionId"),
        ("surrogate prompt text", "session/prompt", {"sessionId": sid, "prompt": text("x" + LONE)}, "prompt[0].text"),
        ("surrogate steering text", "_session/steering", {"sessionId": sid, "prompt": text(LONE)}, "prompt[0].text"),
        ("surrogate inject text", "_dsh/inject", {"sessionId": sid, "prompt": text(LONE)}, "prompt[0].text"),
        ("surrogate resource uri", "session/prompt",
         {"sessionId": sid, "prompt": [{"type": "resource", "resource": {"uri": "file:///x" + LONE, "text": "t"}}]},
         "prompt[0].resource.uri"),
        ("surrogate resource text", "session/prompt",
         {"sessionId": sid, "prompt": [{"type": "resource", "resource": {"uri": file_uri, "text": LONE}}]},
         "prompt[0].resource.text"),
        ("surrogate resource_link uri", "session/prompt",
         {"sessionId": sid, "prompt": [{"type": "resource_link", "uri": file_uri + LONE, "name": "a"}]},
         "prompt[0].uri"),
        ("surrogate resource_link name", "session/prompt",
         {"sessionId": sid, "prompt": [{"type": "resource_link", "uri": "https://example.com/", "name": LONE}]},
         "prompt[0].name"),
        ("surrogate list cwd", "session/list", {"cwd": "/x" + LONE}, "cwd"),
        ("surrogate messageId", "_dsh/inbox/remove", {"sessionId": sid, "messageId": LONE}, "messageId"),
        ("surrogate mcp server name", "session/new",
         {"cwd": str(work), "mcpServers": [{"name": LONE, "command": "/bin/true", "args": [], "env": []}]},
         "mcpServers[0].name"),
        ("5,000-digit #L in a resource", "session/prompt",
         {"sessionId": sid, "prompt": [{"type": "resource", "resource": {"uri": f"{file_uri}#L{digits}", "text": "t"}}]},
         "prompt[0].resource.uri"),
        ("5,000-digit #L in a resource_link", "session/prompt",
         {"sessionId": sid, "prompt": [{"type": "resource_link", "uri": f"{file_uri}#L1:{digits}", "name": "a"}]},
         "prompt[0].uri"),
        ("5,000-digit #L in a steer", "_session/steering",
         {"sessionId": sid, "prompt": [{"type": "resource_link", "uri": f"{file_uri}#L{digits}", "name": "a"}]},
         "prompt[0].uri"),
        # a URI `urlsplit` refuses (an unclosed IPv6 host) is the client's mistake too
        ("unsplittable resource uri", "session/prompt",
         {"sessionId": sid, "prompt": [{"type": "resource", "resource": {"uri": "file://[x/a.py", "text": "t"}}]},
         "prompt[0].resource.uri"),
        ("unsplittable resource_link uri", "session/prompt",
         {"sessionId": sid, "prompt": [{"type": "resource_link", "uri": "file://[::1/a.py", "name": "a"}]},
         "prompt[0].uri"),
        ("unsplittable uri in an inject", "_dsh/inject",
         {"sessionId": sid, "prompt": [{"type": "text", "text": "x"},
                                       {"type": "resource_link", "uri": "http://[x", "name": "a"}]},
         "prompt[1].uri"),
        ("cwd too long", "session/new", {"cwd": "/" + "a" * 5000, "mcpServers": []}, "cwd"),
        ("cwd component too long", "session/new", {"cwd": "/" + "a" * 300, "mcpServers": []}, "cwd"),
        ("extra root too long", "session/new",
         {"cwd": str(work), "mcpServers": [], "additionalDirectories": ["/" + "b" * 5000]},
         "additionalDirectories[0]"),
    ]  # fmt: skip


async def test_client_mistakes_are_invalid_params_naming_the_field(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    fake.script(Reply.stream(text_stream(["still here"])))
    async with raw_acp(tmp_path / "state", fake) as raw:
        work = tmp_path / "state" / "work"
        (work / "a.py").write_text("x = 1\n")
        await raw.call("initialize", {"protocolVersion": 1, "_meta": {"dsh": {"thinking": False}}})
        sid = (await raw.call("session/new", {"cwd": str(work), "mcpServers": []}))["result"]["sessionId"]
        wrong = []
        for name, method, params, field in mistakes(sid, work):
            error = (await raw.call(method, params)).get("error") or {}
            if not (
                error.get("code") == -32602
                and error.get("data", {}).get("code") == "invalid_params"
                and field in error.get("message", "")
            ):
                wrong.append(f"{name}: {json.dumps(error)[:300]}")
        assert wrong == []
        # a notification with a lone surrogate is dropped; the session still works
        raw.send({"method": "session/cancel", "params": {"sessionId": LONE}})
        done = await raw.call("session/prompt", {"sessionId": sid, "prompt": text("still here?")})
        assert done["result"]["stopReason"] == "end_turn"
    log = (tmp_path / "state" / "daemon.log").read_text()
    assert "Traceback" not in log and "internal_error" not in log


async def test_echoed_values_are_cut_to_200_characters(tmp_path: Path, fake: FakeDeepSeek) -> None:
    async with raw_acp(tmp_path / "state", fake) as raw:
        await raw.call("initialize", {"protocolVersion": 1})
        error = (await raw.call("_dsh/wake", {"sessionId": "x" * 5000}))["error"]
        assert error["data"]["code"] == "unknown_session"
        assert len(error["data"]["sessionId"]) <= 200 and len(error["message"]) <= 250
        relative = (await raw.call("session/new", {"cwd": "r" * 5000, "mcpServers": []}))["error"]
        assert relative["code"] == -32602 and len(relative["message"]) <= 300


async def test_a_number_python_will_not_decode_is_answered_with_the_requests_own_id(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """JSON allows integers of any length; Python refuses to convert one of more than 4,300 digits.
    That request is still a request: refused with its own id (not `id: null`), no traceback."""
    async with raw_acp(tmp_path / "state", fake) as raw:
        await raw.call("initialize", {"protocolVersion": 1})
        digits = b"9" * 5000
        raw.send_line(b'{"jsonrpc":"2.0","id":"big","method":"session/list","params":{"x":%s}}' % digits)
        answer = await raw.response("big")
        assert answer["error"]["code"] == -32600 and "4300 digits" in answer["error"]["message"], answer
        assert "set_int_max_str_digits" not in answer["error"]["message"]
        raw.send_line(b'{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":%s}}' % digits)
        assert "sessions" in (await raw.call("session/list", {}))["result"]
        assert not [m for m in raw.received if m.get("id") is None and "error" in m]
    log = (tmp_path / "state" / "daemon.log").read_text()
    assert "Traceback" not in log
