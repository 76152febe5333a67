"""What a black-box review of protocol.md found (§1, §3, §11, §14), each pinned by a test."""

from __future__ import annotations

import json
from pathlib import Path

from lsprotocol import types

from dsh_daemon.session.store import SessionStore
from tests.fakes.deepseek_server import FakeDeepSeek
from tests.server.harness import start_daemon, stop_daemon, text_reply
from tests.server.test_pipelining import _close
from tests.server.test_robustness import RawPipe, spawn
from tests.server.test_tools_e2e import run_turn


async def _initialized(state: Path, fake: FakeDeepSeek) -> RawPipe:
    pipe = await spawn(state, fake)
    await pipe.call(0, "initialize", {"capabilities": {}, "initializationOptions": {"thinking": False}})
    pipe.frame({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    return pipe


async def test_notification_methods_sent_as_requests_are_refused_and_not_acted_on(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    pipe = await _initialized(tmp_path / "state", fake)
    for msg_id, method in ((1, "exit"), (2, "dsh/context/didChange")):
        reply = await pipe.call(msg_id, method, {"activeUri": "file:///x.py"} if msg_id == 2 else None)
        assert reply["error"]["code"] == -32601, reply
    assert "result" in await pipe.call(3, "dsh/session/list", {})  # still running: exit was not acted on
    await _close(pipe)


async def test_members_json_rpc_does_not_define_are_ignored(tmp_path: Path, fake: FakeDeepSeek) -> None:
    pipe = await _initialized(tmp_path / "state", fake)
    pipe.frame({"jsonrpc": "2.0", "id": "x1", "method": "dsh/session/new", "params": {}, "foo": None})
    reply = await pipe.reply("x1")
    assert "sessionId" in reply["result"], reply
    await _close(pipe)


async def test_a_null_request_id_and_a_second_initialize_are_invalid_requests(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    pipe = await _initialized(tmp_path / "state", fake)
    pipe.frame({"jsonrpc": "2.0", "id": None, "method": "dsh/session/list", "params": {}})
    again = await pipe.call(5, "initialize", {"capabilities": {}})
    assert again["error"]["code"] == -32600
    nulls = [m for m in pipe.messages if m.get("id") is None and "error" in m]
    assert nulls and nulls[0]["error"]["code"] == -32600
    await _close(pipe)


async def test_a_new_session_title_follows_the_rename_rules(tmp_path: Path, fake: FakeDeepSeek) -> None:
    pipe = await _initialized(tmp_path / "state", fake)
    spaced = await pipe.call(1, "dsh/session/new", {"title": "  My   title  "})
    empty = await pipe.call(2, "dsh/session/new", {"title": ""})
    long = await pipe.call(3, "dsh/session/new", {"title": "x" * 201})
    assert long["error"]["code"] == -32602 and long["error"]["data"]["code"] == "invalid_params"
    listed = (await pipe.call(4, "dsh/session/list", {}))["result"]["sessions"]
    titles = {s["sessionId"]: s["title"] for s in listed}
    assert titles[spaced["result"]["sessionId"]] == "My title"
    assert titles[empty["result"]["sessionId"]] is None
    await _close(pipe)


async def test_compacting_an_empty_session_writes_nothing(tmp_path: Path, fake: FakeDeepSeek) -> None:
    state = tmp_path / "state"
    pipe = await _initialized(state, fake)
    sid = (await pipe.call(1, "dsh/session/new", {}))["result"]["sessionId"]
    assert (await pipe.call(2, "dsh/session/compact", {"sessionId": sid}))["result"] == {"compacted": False}
    await _close(pipe)
    store = SessionStore(state)
    try:
        assert store.load_events(sid) == []
    finally:
        store.close()
    assert fake.requests == []


async def test_a_settings_change_keeps_a_flat_api_key_given_at_start(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    d = await start_daemon(
        tmp_path / "state",
        fake,
        init_options={"apiKey": "sk-from-initialize", "thinking": False},
        env={"DEEPSEEK_API_KEY": ""},
    )
    fake.script(text_reply("one"))
    sid = await d.new_session()
    d.client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"dsh": {"provider": {"model": "other-model"}}})
    )
    await run_turn(d, sid)
    (request,) = fake.requests
    assert request.json["model"] == "other-model"
    assert request.headers["authorization"] == "Bearer sk-from-initialize"
    assert "sk-from-initialize" not in json.dumps(d.events)
    await stop_daemon(d)


async def test_an_echoed_client_value_is_cut_to_200_characters(tmp_path: Path, fake: FakeDeepSeek) -> None:
    pipe = await _initialized(tmp_path / "state", fake)
    reply = await pipe.call(1, "dsh/inbox/list", {"sessionId": "s" * 1000})
    data = reply["error"]["data"]
    assert data["code"] == "unknown_session" and len(data["sessionId"]) <= 200
    assert data["sessionId"].endswith("(1000 characters)")
    await _close(pipe)
