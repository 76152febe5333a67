"""Prompts that carry their own editor context (issue 10 item 1): `context` on dsh/followup, dsh/send
and dsh/inbox/replace, built at send time, queued and claimed as one item with the prompt."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from dsh_daemon.agent.invariants import check_log, unaccounted
from dsh_daemon.model import events as ev
from dsh_daemon.session.store import SessionStore
from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.harness import Daemon, text_reply
from tests.server.test_pipelining import _close, _events, _frame, _stored, _until
from tests.server.test_robustness import RawPipe, spawn


def _open_doc(daemon: Daemon, uri: str, text: str, version: int = 1) -> None:
    daemon.client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            types.TextDocumentItem(uri=uri, language_id="python", version=version, text=text)
        )
    )


def _replace_all(daemon: Daemon, uri: str, text: str, version: int) -> None:
    daemon.client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )


def _lines(first: int, last_exclusive: int) -> dict[str, Any]:
    return {"start": {"line": first, "character": 0}, "end": {"line": last_exclusive, "character": 0}}


def _workspace(tmp_path: Path) -> Path:
    return tmp_path / "state" / "work"  # the root the `daemon` fixture's editor opened


def _stored_log(daemon: Daemon, session_id: str) -> list[ev.Event]:
    store = SessionStore(daemon.state)
    try:
        return store.load_events(session_id)
    finally:
        store.close()


async def test_a_queued_prompt_keeps_the_selection_as_it_was_when_sent(
    daemon: Daemon, tmp_path: Path
) -> None:
    path = _workspace(tmp_path) / "calc.py"
    path.write_text("def add(a, b):\n    return a + b\n")
    uri = path.as_uri()
    _open_doc(daemon, uri, "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n")
    daemon.fake.script(Reply.stream(text_stream(["w"] * 30), delay=0.03), text_reply("explained"))
    sid = await daemon.new_session()
    await daemon.request("dsh/followup", {"sessionId": sid, "message": {"content": "first task"}})
    await daemon.wait_event(sid, "assistant/delta")

    sent = await daemon.request(
        "dsh/followup",
        {
            "sessionId": sid,
            "message": {"id": "q1", "content": "explain this"},
            "context": [{"uri": uri, "kind": "selection", "range": _lines(3, 5)}],
        },
    )
    assert sent["messageId"] == "q1" and len(sent["contextIds"]) == 1
    (context_id,) = sent["contextIds"]
    listed = await daemon.request("dsh/inbox/list", {"sessionId": sid})
    (item,) = listed["nextTurn"]
    assert item["id"] == "q1" and item["verb"] == "followup" and item["target"] == "next-turn"
    assert [c["id"] for c in item["context"]] == [context_id]
    assert "def sub" in item["context"][0]["content"][0]["text"]

    # The person edits the buffer after pressing Enter: the queued prompt keeps what it was sent with.
    _replace_all(daemon, uri, "def changed():\n    pass\n", version=2)
    await daemon.wait_idle_turn(sid, turns=2)

    first, second = daemon.fake.requests[0].json, daemon.fake.requests[1].json
    assert "def sub" not in str(first["messages"])  # never joined the running turn
    tail = second["messages"][-2:]
    assert "Selection in" in tail[0]["content"] and "lines 4-5" in tail[0]["content"]
    assert "return a - b" in tail[0]["content"] and "changed" not in tail[0]["content"]
    assert tail[1]["content"] == "explain this"
    entered = [e["data"]["id"] for e in daemon.of(sid, "user/message")]
    assert entered[-2:] == [context_id, "q1"]
    log = _stored_log(daemon, sid)
    assert check_log(log, []) == [] and unaccounted(log, {"q1", context_id}, []) == set()


async def test_removing_or_replacing_a_prompt_handles_its_context_with_it(
    daemon: Daemon, tmp_path: Path
) -> None:
    path = _workspace(tmp_path) / "notes.md"
    path.write_text("one\ntwo\nthree\n")
    uri = path.as_uri()
    sid = await daemon.new_session()
    context = [{"uri": uri, "kind": "file"}]
    a = await daemon.request(
        "dsh/send",
        {"sessionId": sid, "message": {"id": "a", "content": "A"}, "target": "next-turn", "wakeup": False,
         "context": context},
    )  # fmt: skip
    b = await daemon.request(
        "dsh/send",
        {"sessionId": sid, "message": {"id": "b", "content": "B"}, "target": "next-turn", "wakeup": False,
         "context": context},
    )  # fmt: skip
    assert await daemon.request("dsh/inbox/remove", {"sessionId": sid, "messageId": "a"}) == {"removed": True}
    discarded = [e["data"]["message"]["id"] for e in daemon.of(sid, "agent/inbox/discarded")]
    assert sorted(discarded) == sorted(["a", *a["contextIds"]])

    # replace without context keeps it; with `context: []` drops it; with new context swaps it.
    kept = await daemon.request(
        "dsh/inbox/replace", {"sessionId": sid, "messageId": "b", "message": {"id": "b2", "content": "B2"}}
    )
    assert "contextIds" not in kept
    (item,) = (await daemon.request("dsh/inbox/list", {"sessionId": sid}))["nextTurn"]
    assert item["id"] == "b2" and [c["id"] for c in item["context"]] == b["contextIds"]
    assert item["verb"] == "send" and item["wakeup"] is False
    await daemon.request(
        "dsh/inbox/replace",
        {"sessionId": sid, "messageId": "b2", "message": {"id": "b3", "content": "B3"}, "context": []},
    )
    (item,) = (await daemon.request("dsh/inbox/list", {"sessionId": sid}))["nextTurn"]
    assert item["id"] == "b3" and "context" not in item

    daemon.fake.script(text_reply("ok"))
    await daemon.request("dsh/wake", {"sessionId": sid})
    await daemon.wait_idle_turn(sid)
    assert [e["data"]["id"] for e in daemon.of(sid, "user/message")] == ["b3"]
    acknowledged = {"a", "b", "b2", "b3", *a["contextIds"], *b["contextIds"]}
    log = _stored_log(daemon, sid)
    assert check_log(log, []) == [] and unaccounted(log, acknowledged, []) == set()


@pytest.mark.parametrize(
    "context, problem",
    [
        ("not a list", "'context' must be an array"),
        ([{"kind": "file"}], "'context[0].uri'"),
        ([{"uri": "file:///x", "kind": "symbol"}], "'context[0].kind'"),
        ([{"uri": "file:///x", "kind": "selection"}], "'context[0].range'"),
        ([{"uri": "file:///etc/passwd", "kind": "file"}], "outside the workspace"),
    ],
)
async def test_bad_context_is_refused_and_queues_nothing(daemon: Daemon, context: Any, problem: str) -> None:
    sid = await daemon.new_session()
    with pytest.raises(JsonRpcException) as caught:
        await daemon.request(
            "dsh/followup", {"sessionId": sid, "message": {"id": "x", "content": "hi"}, "context": context}
        )
    assert caught.value.code == -32602 and problem in str(caught.value)
    assert (await daemon.request("dsh/inbox/list", {"sessionId": sid})) == {"nextTurn": [], "nextStep": []}
    assert daemon.of(sid, "agent/inbox/spliced") == []


async def test_context_add_pipelined_before_a_clearing_cancel_is_discarded_by_it(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """Arrival order: a context/add written before a cancel is queued before the cancel applies, so
    the cancel discards it (it used to be read in a worker thread and land after the cancel)."""
    state = tmp_path / "state"
    pipe, sid, work = await _open_in(state, fake)
    target = work / "ctx.txt"
    target.write_text("some context\n")
    pipe.write(
        _frame("a", "dsh/context/add", {"sessionId": sid, "uri": target.as_uri(), "kind": "file"})
        + _frame("c", "dsh/cancel", {"sessionId": sid})
        + _frame("l", "dsh/inbox/list", {"sessionId": sid})
    )
    added = (await pipe.reply("a"))["result"]["messageId"]
    await pipe.reply("c")
    assert (await pipe.reply("l"))["result"] == {"nextTurn": [], "nextStep": []}
    assert [e["data"]["message"]["id"] for e in _events(pipe, ev.INBOX_DISCARDED)] == [added]
    await _close(pipe)
    log = _stored(state, sid)
    assert check_log(log, []) == [] and unaccounted(log, {added}, []) == set()


async def test_a_steer_with_context_enters_both_at_the_next_step(tmp_path: Path, fake: FakeDeepSeek) -> None:
    state = tmp_path / "state"
    fake.script(Reply.stream(text_stream(["done"])))
    pipe, sid, work = await _open_in(state, fake)
    target = work / "a.txt"
    target.write_text("alpha\n")
    reply = await pipe.call(
        "s",
        "dsh/steer",
        {"sessionId": sid, "message": {"id": "s", "content": "use it"},
         "context": [{"uri": target.as_uri(), "kind": "file"}]},
    )  # fmt: skip
    (context_id,) = reply["result"]["contextIds"]
    await _until(pipe, ev.TURN_END, 1)
    assert [e["data"]["id"] for e in _events(pipe, ev.USER_MESSAGE)] == [context_id, "s"]
    await _close(pipe)


async def _open_in(state: Path, fake: FakeDeepSeek) -> tuple[RawPipe, str, Path]:
    """A raw-pipe daemon whose editor opened a workspace folder in the test's temp dir."""
    work = state.parent / "work"
    work.mkdir(parents=True, exist_ok=True)
    pipe = await spawn(state, fake)
    init = {"capabilities": {}, "rootUri": work.as_uri(), "initializationOptions": {"thinking": False}}
    await pipe.call(0, "initialize", init)
    pipe.frame({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    created = await pipe.call(1, "dsh/session/new", {"cwd": str(work)})
    return pipe, created["result"]["sessionId"], work
