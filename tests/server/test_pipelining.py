"""Pipelined requests (issue 8): frames written back to back, without waiting for replies, are applied
in arrival order, and every acknowledged message ends entered, pending, or discarded on request."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path
from typing import Any

from dsh_daemon.agent.invariants import check_log, unaccounted
from dsh_daemon.model import events as ev
from dsh_daemon.session.store import SessionStore
from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.test_robustness import RawPipe, spawn


def _frame(msg_id: Any, method: str, params: Any) -> bytes:
    body = json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


async def _open(state: Path, fake: FakeDeepSeek) -> tuple[RawPipe, str]:
    pipe = await spawn(state, fake)
    await pipe.call(0, "initialize", {"capabilities": {}, "initializationOptions": {"thinking": False}})
    pipe.frame({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    created = await pipe.call(1, "dsh/session/new", {})
    return pipe, created["result"]["sessionId"]


async def _close(pipe: RawPipe) -> None:
    await pipe.call("bye", "shutdown")
    pipe.frame({"jsonrpc": "2.0", "method": "exit"})
    await pipe.proc.wait()


def _events(pipe: RawPipe, type_: str) -> list[dict[str, Any]]:
    return [
        m["params"] for m in pipe.messages if m.get("method") == "dsh/event" and m["params"]["type"] == type_
    ]


async def _until(pipe: RawPipe, type_: str, count: int) -> None:
    for _ in range(1500):
        if len(_events(pipe, type_)) >= count:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"no {count}x {type_}: {pipe.messages[-6:]}")


def _stored(state: Path, session_id: str) -> list[ev.Event]:
    store = SessionStore(state)
    try:
        return store.load_events(session_id)
    finally:
        store.close()


async def test_a_cancel_pipelined_before_a_steer_does_not_abort_the_turn_the_steer_starts(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    state = tmp_path / "state"
    fake.script(Reply.stream(text_stream(["steered"])))
    pipe, sid = await _open(state, fake)
    for i in (1, 2):
        await pipe.call(
            f"i{i}", "dsh/inject", {"sessionId": sid, "message": {"id": f"p{i}", "content": "ctx"}}
        )
    pipe.write(
        _frame("c", "dsh/cancel", {"sessionId": sid, "keepInbox": True})
        + _frame("s", "dsh/steer", {"sessionId": sid, "message": {"id": "s1", "content": "go"}})
    )
    assert (await pipe.reply("c"))["result"] == {}
    assert (await pipe.reply("s"))["result"] == {"messageId": "s1"}
    await _until(pipe, ev.TURN_END, 1)
    assert _events(pipe, ev.TURN_END)[0]["data"]["reason"] == {"kind": "completed"}
    entered = [e["data"]["id"] for e in _events(pipe, ev.USER_MESSAGE)]
    assert entered == ["p1", "p2", "s1"]
    await _close(pipe)
    assert check_log(_stored(state, sid), []) == []


async def test_a_followup_pipelined_after_a_keep_inbox_cancel_runs_after_the_aborted_turn(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    state = tmp_path / "state"
    fake.script(
        Reply.stream(text_stream(["slow"] * 200), delay=0.05),
        Reply.stream(text_stream(["second"])),
    )
    pipe, sid = await _open(state, fake)
    await pipe.call("f1", "dsh/followup", {"sessionId": sid, "message": {"id": "a", "content": "first"}})
    await _until(pipe, ev.ASSISTANT_DELTA, 1)
    pipe.write(
        _frame("c", "dsh/cancel", {"sessionId": sid, "keepInbox": True})
        + _frame("f2", "dsh/followup", {"sessionId": sid, "message": {"id": "b", "content": "second"}})
    )
    await pipe.reply("c")
    await pipe.reply("f2")
    await _until(pipe, ev.TURN_END, 2)
    reasons = [e["data"]["reason"] for e in _events(pipe, ev.TURN_END)]
    assert reasons == [{"kind": "aborted", "cause": "user"}, {"kind": "completed"}]
    assert [e["data"]["id"] for e in _events(pipe, ev.USER_MESSAGE)] == ["a", "b"]
    await _close(pipe)


async def test_soak_random_pipelined_cancels_sends_and_edits_lose_nothing(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """Bursts of random frames, each written in one go against a slowly streaming fake; after every
    burst the stored log is sound and every acknowledged message is entered, pending or discarded."""
    rng = random.Random(8)
    state = tmp_path / "state"
    fake.script(*[Reply.stream(text_stream(["w"] * 6), delay=0.01) for _ in range(400)])
    pipe, sid = await _open(state, fake)
    acknowledged: set[str] = set()
    counter = 0
    for burst in range(12):
        frames: list[bytes] = []
        sends: dict[str, str] = {}
        for _ in range(rng.randint(2, 8)):
            counter += 1
            rid = f"r{counter}"
            kind = rng.choice(["followup", "steer", "inject", "send", "cancel", "cancel", "wake", "edit"])
            if kind == "cancel":
                frames.append(_frame(rid, "dsh/cancel", {"sessionId": sid, "keepInbox": rng.random() < 0.6}))
            elif kind == "wake":
                frames.append(_frame(rid, "dsh/wake", {"sessionId": sid}))
            elif kind == "edit":
                victim = f"m{rng.randint(max(1, counter - 6), counter)}"
                action = rng.choice(["remove", "replace", "move"])
                params: dict[str, Any] = {"sessionId": sid, "messageId": victim}
                if action == "replace":
                    params["message"] = {"id": f"m{counter}", "content": "edited"}
                    sends[rid] = f"m{counter}"
                if action == "move":
                    params.update(target=rng.choice(["next-turn", "next-step"]), index=0)
                frames.append(_frame(rid, f"dsh/inbox/{action}", params))
            else:
                params = {"sessionId": sid, "message": {"id": f"m{counter}", "content": f"m{counter}"}}
                if kind == "send":
                    params.update(target=rng.choice(["next-turn", "next-step"]), wakeup=rng.random() < 0.5)
                frames.append(_frame(rid, f"dsh/{kind}", params))
                sends[rid] = f"m{counter}"
        pipe.write(b"".join(frames))
        for rid, message_id in sends.items():
            reply = await pipe.reply(rid)
            if "result" in reply:
                acknowledged.add(message_id)
        for frame in frames:  # every frame is answered
            await pipe.reply(json.loads(frame.split(b"\r\n\r\n", 1)[1])["id"])
        if burst % 3 == 2:
            await pipe.call(f"settle{burst}", "dsh/cancel", {"sessionId": sid, "keepInbox": True})
            events = _stored(state, sid)
            inbox = (await pipe.call(f"list{burst}", "dsh/inbox/list", {"sessionId": sid}))["result"]
            pending = [m["id"] for m in inbox["nextTurn"] + inbox["nextStep"]]
            assert check_log(events, pending) == [], burst
            assert unaccounted(events, acknowledged, pending) == set(), burst
    await _close(pipe)
    assert len(acknowledged) > 20
