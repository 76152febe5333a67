"""Compact transcript (`dsh/session/transcript`) and attach `replay: "none"`: the renderer on its own,
then end to end over real pipes (the real daemon, a fake DeepSeek on loopback)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pygls.exceptions import JsonRpcException

from dsh_daemon.model.events import Event
from dsh_daemon.model.jsonvalue import freeze_json
from dsh_daemon.session.transcript import TEXT_CAP, page_events, render_turns, transcript_page
from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.harness import Daemon, start_daemon, stop_daemon, text_reply, tool_call_stream

# ---- the renderer (pure) ---------------------------------------------------------------------------


def _log(*specs: tuple[str, dict[str, Any]]) -> list[Event]:
    return [Event(kind, freeze_json(data), seq, 1000 + seq) for seq, (kind, data) in enumerate(specs)]


def _user(text: str, kind: str = "user", **source: Any) -> dict[str, Any]:
    return {
        "id": f"m-{text[:8]}",
        "role": "user",
        "content": [{"type": "text", "text": text}],
        "source": {"kind": kind, **source},
    }


def _turn(n: int, prompt: str, answer: str) -> list[tuple[str, dict[str, Any]]]:
    message = {
        "id": f"a{n}",
        "role": "assistant",
        "content": [{"type": "text", "text": answer}],
        "source": {},
    }
    return [
        ("agent/inbox/spliced", {"target": "next-turn", "start": 0, "inserted": [_user(prompt)]}),
        ("turn/start", {"turn": n}),
        ("step/start", {"turn": n, "step": 1}),
        ("user/message", _user(prompt)),
        ("assistant/message", {"turn": n, "step": 1, "message": message, "finishReason": "stop"}),
        ("step/end", {"turn": n, "step": 1}),
        ("turn/usage", {"turn": n, "usage": {"inputTokens": 3, "outputTokens": 2}}),
        ("turn/end", {"turn": n, "reason": {"kind": "completed"}}),
    ]


def test_render_a_turn_with_reasoning_tools_truncation_and_an_interrupted_reply() -> None:
    call = {"type": "tool-call", "id": "c1", "name": "read_file", "arguments": '{"path": "a"}'}
    lost = {"type": "tool-call", "id": "c2", "name": "run_command", "arguments": "{}"}
    big = "x" * (TEXT_CAP + 10)
    result = {
        "id": "r1",
        "role": "user",
        "content": [{"type": "tool-result", "toolCallId": "c1", "content": [{"type": "text", "text": big}]}],
        "source": {"kind": "tool", "callId": "c1"},
    }
    aborted = {
        "id": "r2",
        "role": "user",
        "content": [
            {
                "type": "tool-result",
                "toolCallId": "c2",
                "content": [{"type": "text", "text": "no"}],
                "isError": True,
            }
        ],
        "source": {"kind": "tool", "callId": "c2"},
    }
    first = {
        "id": "a1",
        "role": "assistant",
        "content": [
            {"type": "reasoning", "text": "think"},
            {"type": "text", "text": "Let me look."},
            call,
            lost,
        ],
        "source": {},
    }
    partial = {"id": "a2", "role": "assistant", "content": [{"type": "text", "text": "Half"}], "source": {}}
    events = _log(
        ("session/title", {"title": "t"}),
        ("turn/start", {"turn": 1}),
        ("step/start", {"turn": 1, "step": 1}),
        ("user/message", _user("sel " + big, "editor", uri="file:///a", contextKind="selection")),
        ("user/message", _user("explain")),
        ("assistant/chunk", {"turn": 1, "step": 1, "deltas": [{"type": "text", "text": "Let"}]}),
        ("assistant/message", {"turn": 1, "step": 1, "message": first, "finishReason": "tool_calls"}),
        (
            "tool/call",
            {"turn": 1, "step": 1, "callId": "c1", "name": "read_file", "arguments": '{"path": "a"}'},
        ),
        ("tool/result", {"turn": 1, "step": 1, "callId": "c1", "name": "read_file", "message": result}),
        (
            "tool/call",
            {
                "turn": 1,
                "step": 1,
                "callId": "c2",
                "name": "run_command",
                "arguments": "{}",
                "synthetic": True,
            },
        ),
        (
            "tool/result",
            {
                "turn": 1,
                "step": 1,
                "callId": "c2",
                "name": "run_command",
                "message": aborted,
                "error": {"name": "run_command", "code": "ABORTED_BEFORE_DISPATCH"},
            },
        ),
        ("step/end", {"turn": 1, "step": 1}),
        ("step/start", {"turn": 1, "step": 2}),
        ("assistant/chunk", {"turn": 1, "step": 2, "deltas": [{"type": "reasoning", "text": "hm"}]}),
        ("assistant/message", {"turn": 1, "step": 2, "message": partial, "interrupted": True}),
        ("step/end", {"turn": 1, "step": 2}),
        ("turn/end", {"turn": 1, "reason": {"kind": "aborted", "cause": "user"}}),
    )
    (turn,) = render_turns(events)
    assert (turn["turn"], turn["startSeq"], turn["endSeq"], turn["end"]) == (
        1,
        1,
        16,
        {"kind": "aborted", "cause": "user"},
    )
    assert "usage" not in turn
    editor, prompt, said, read, run, cut = turn["items"]
    assert editor["source"]["kind"] == "editor" and editor["truncated"] is True
    assert editor["length"] == len("sel " + big) and len(editor["text"]) == TEXT_CAP
    assert prompt == {
        "type": "message",
        "seq": 4,
        "step": 1,
        "id": "m-explain",
        "source": {"kind": "user"},
        "text": "explain",
    }
    assert said == {
        "type": "assistant",
        "seq": 6,
        "step": 1,
        "text": "Let me look.",
        "reasoning": "think",
        "finishReason": "tool_calls",
    }
    assert (read["callId"], read["name"], read["arguments"]) == ("c1", "read_file", '{"path": "a"}')
    assert read["result"]["truncated"] is True and read["result"]["length"] == len(big)
    assert len(read["result"]["output"]) == TEXT_CAP and "isError" not in read["result"]
    assert run["synthetic"] is True and run["result"]["isError"] is True
    assert run["result"]["error"]["code"] == "ABORTED_BEFORE_DISPATCH"
    assert cut == {"type": "assistant", "seq": 14, "step": 2, "text": "Half", "interrupted": True}


def test_an_open_step_shows_its_chunks_so_far() -> None:
    events = _log(
        ("turn/start", {"turn": 1}),
        ("step/start", {"turn": 1, "step": 1}),
        ("user/message", _user("go")),
        (
            "assistant/chunk",
            {
                "turn": 1,
                "step": 1,
                "deltas": [{"type": "reasoning", "text": "a"}, {"type": "text", "text": "He"}],
            },
        ),
        ("assistant/chunk", {"turn": 1, "step": 1, "deltas": [{"type": "text", "text": "llo"}]}),
    )
    (turn,) = render_turns(events)
    assert "end" not in turn
    assert turn["items"][-1] == {
        "type": "assistant",
        "seq": 4,
        "step": 1,
        "text": "Hello",
        "reasoning": "a",
        "partial": True,
    }


def test_process_and_notice_events_are_lines_of_the_page_also_between_turns() -> None:
    """A reloaded transcript keeps the lines the live events drew: a background process that started
    and ended (also after its turn: an item of the turn before it) and words about the session
    (before the first turn: an item of the first)."""
    notice = {"kind": "mcp", "level": "warning", "message": "MCP server files could not start."}
    started = {"processId": "p1", "name": "web", "command": "serve", "pid": 7, "confined": True, "turn": 1}
    events = _log(
        ("session/notice", notice),
        *_turn(1, "start it", "Started."),
        ("process/exited", {"processId": "p1", "exitCode": 0}),
        *_turn(2, "next", "Done."),
    )
    events.insert(5, Event("process/started", freeze_json(started), 99, 0))  # inside turn 1's step
    first, second = render_turns(events)
    lines = [(i["event"], i["seq"], i["step"]) for i in first["items"] if i["type"] == "event"]
    assert lines == [("session/notice", 0, None), ("process/started", 99, 1), ("process/exited", 9, None)]
    assert first["items"][0]["data"] == notice and first["items"][2]["data"] == started
    assert [i["type"] for i in first["items"]] == ["event", "message", "event", "assistant", "event"]
    assert [i["type"] for i in second["items"]] == ["message", "assistant"]
    # A page that starts after the first turn does not reach back for what came before it.
    (page_turn,) = transcript_page(reversed(events), events[-1].seq, None, 1).turns
    assert page_turn["turn"] == 2 and [i["type"] for i in page_turn["items"]] == ["message", "assistant"]


def test_a_mode_change_is_a_line_of_the_page() -> None:
    """`session/mode` (a person's setMode, an approved plan's) stays a line after a reload (issue 36.5)."""
    events = _log(
        *_turn(1, "plan it", "Planned."), ("session/mode", {"mode": "accept-edits", "planCallId": "c1"})
    )
    (turn,) = render_turns(events)
    lines = [(i["event"], i["data"]) for i in turn["items"] if i["type"] == "event"]
    assert lines == [("session/mode", {"mode": "accept-edits", "planCallId": "c1"})]


def _settings(
    model: str | None, effort: str | None, sandbox: str | None = None
) -> tuple[str, dict[str, Any]]:
    return ("session/settings", {"model": model, "reasoningEffort": effort, "sandbox": sandbox})


def test_a_model_change_is_a_line_of_the_page_and_a_sandbox_change_alone_is_not() -> None:
    """`session/settings` is an item when its model or effort differs from the settings logged before it
    (issue 36 leftover: the panel's "Model: …" line survives a reload); the sandbox riding along in the
    same event, or the same choice again, is no line."""
    events = _log(
        _settings(None, None, "read-only"),  # before any turn, and only the sandbox: no line
        _settings("deepseek-v4-pro", "max", "read-only"),
        *_turn(1, "p1", "a1"),
        _settings("deepseek-v4-pro", "max", "workspace-write"),  # the sandbox alone
        _settings("deepseek-v4-pro", "high", "workspace-write"),
        *_turn(2, "p2", "a2"),
        _settings(None, None, "workspace-write"),  # back to the configuration's model
    )
    first, second = render_turns(events)
    lines = [
        [(i["seq"], i["data"]["reasoningEffort"]) for i in t["items"] if i["type"] == "event"]
        for t in (first, second)
    ]
    assert lines == [[(1, "max"), (11, "high")], [(20, None)]]
    assert all(
        i["event"] == "session/settings" for t in (first, second) for i in t["items"] if i["type"] == "event"
    )


def test_a_page_compares_its_first_model_change_with_the_settings_before_the_page() -> None:
    specs = [_settings("deepseek-v4-pro", "max")]
    specs += [spec for n in range(1, 5) for spec in _turn(n, f"p{n}", f"a{n}")]
    specs.append(_settings("deepseek-v4-pro", "max", "read-only"))  # the sandbox alone, after turn 4
    specs.append(_settings("deepseek-v4-flash", "max", "read-only"))
    events = _log(*specs)
    logged = [e for e in events if e.type == "session/settings"]
    asked: list[int] = []

    def before(seq: int) -> Any:
        asked.append(seq)
        earlier = [e for e in logged if (e.seq or 0) < seq]
        return earlier[-1].data if earlier else None

    page = transcript_page(reversed(events), len(events) - 1, None, 1, before)
    (turn4,) = page.turns
    assert [(i["seq"], i["data"]["model"]) for i in turn4["items"] if i["type"] == "event"] == [
        (34, "deepseek-v4-flash")
    ]
    assert asked == [33]  # read once, for the page's first one; the next is compared with that
    # Without what came before the page, the sandbox change would look like a model change: the host
    # passes `settings_before`; the renderer alone cannot know.
    (alone,) = transcript_page(reversed(events), len(events) - 1, None, 1).turns
    assert [i["seq"] for i in alone["items"] if i["type"] == "event"] == [33, 34]


def test_pages_read_only_the_tail_they_need() -> None:
    events = _log(*[spec for n in range(1, 6) for spec in _turn(n, f"p{n}", f"a{n}")])
    read: list[int] = []

    def newest_first() -> Any:
        for event in reversed(events):
            read.append(event.seq or 0)
            yield event

    page = transcript_page(newest_first(), 39, None, 2)
    assert [t["turn"] for t in page.turns] == [5, 4] and page.has_more and page.last_seq == 39
    # Turn 3's turn/start: the turn before the page is read for the prompts queued during it, nothing older.
    assert min(read) == 17
    older = transcript_page(reversed(events), 39, 4, 2)
    assert [t["turn"] for t in older.turns] == [3, 2] and older.has_more
    oldest = transcript_page(reversed(events), 39, 2, 20)
    assert [t["turn"] for t in oldest.turns] == [1] and not oldest.has_more
    assert transcript_page(reversed(events), 39, 1, 20).turns == ()
    assert page_events(iter(()), None, 5) == ([], False)
    first = oldest.turns[0]
    assert [i["text"] for i in first["items"]] == ["p1", "a1"]
    assert first["usage"] == {"inputTokens": 3, "outputTokens": 2} and first["end"] == {"kind": "completed"}


def test_turns_a_cut_took_out_of_the_history_are_marked_on_every_page() -> None:
    # Turns 1-3, a rewind to before turn 2 (turns 2 and 3 cut), turn 4, a rewind to before turn 4.
    specs = [spec for n in range(1, 4) for spec in _turn(n, f"p{n}", f"a{n}")]
    specs.append(("conversation/cut", {"beforeTurn": 2}))
    specs += _turn(4, "p4", "a4")
    specs.append(("conversation/cut", {"beforeTurn": 4}))
    specs += _turn(5, "p5", "a5")
    events = _log(*specs)
    page = transcript_page(reversed(events), len(events) - 1, None, 20)
    assert {t["turn"]: t.get("cut", False) for t in page.turns} == {
        1: False,
        2: True,
        3: True,
        4: True,
        5: False,
    }
    # An older page knows the cut logged after it.
    older = transcript_page(reversed(events), len(events) - 1, 4, 2)
    assert {t["turn"]: t.get("cut", False) for t in older.turns} == {2: True, 3: True}


def test_a_prompt_that_waited_behind_a_running_turn_is_marked_queued_also_as_a_page_s_first_turn() -> None:
    """`queued` on a person's prompt that was sent while a turn ran (or not to wake one) and that a
    later turn took from the next-turn list, as the live reducers tag it; not on a steer, nor on a
    prompt that started its own turn; a moved one keeps it. The splice that queued the prompt of a
    page's first turn is in the turn before it, which the page reads without showing."""

    def claim(*ids: str, target: str = "next-turn") -> tuple[str, dict[str, Any]]:
        return (
            "agent/inbox/spliced",
            {"target": target, "start": 0, "inserted": [], "removedCount": len(ids), "removedIds": list(ids)},
        )

    waiting = _user("waited behind turn 1")
    steer = {**_user("steer it"), "verb": "steer"}
    events = _log(
        ("agent/inbox/spliced", {"target": "next-turn", "start": 0, "inserted": [_user("first")]}),
        claim("m-first"),
        ("turn/start", {"turn": 1}),
        ("step/start", {"turn": 1, "step": 1}),
        ("user/message", _user("first")),
        ("agent/inbox/spliced", {"target": "next-turn", "start": 0, "inserted": [waiting]}),
        ("agent/inbox/spliced", {"target": "next-step", "start": 0, "inserted": [steer]}),
        ("agent/inbox/spliced", {"target": "next-turn", "start": 0, "inserted": [waiting], "removedCount": 1,
                                 "removedIds": ["m-waited b"], "outcome": "moved"}),
        claim("m-steer it", target="next-step"),
        ("step/start", {"turn": 1, "step": 2}),
        ("user/message", _user("steer it")),
        ("turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
        claim("m-waited b"),
        ("turn/start", {"turn": 2}),
        ("step/start", {"turn": 2, "step": 1}),
        ("user/message", _user("waited behind turn 1")),
        ("turn/end", {"turn": 2, "reason": {"kind": "completed"}}),
    )  # fmt: skip

    def marks(turns: Any) -> list[tuple[int, str, bool]]:
        return [
            (t["turn"], i["text"], bool(i.get("queued")))
            for t in turns
            for i in t["items"]
            if i["type"] == "message"
        ]

    assert marks(render_turns(events)) == [
        (1, "first", False),
        (1, "steer it", False),
        (2, "waited behind turn 1", True),
    ]
    page = transcript_page(reversed(events), len(events) - 1, None, 1)
    assert [t["turn"] for t in page.turns] == [2] and page.has_more
    assert marks(page.turns) == [(2, "waited behind turn 1", True)]


# ---- end to end --------------------------------------------------------------------------------------


async def _turn_done(daemon: Daemon, sid: str, text: str, **extra: Any) -> None:
    done = len(daemon.of(sid, "turn/end"))
    await daemon.request("dsh/followup", {"sessionId": sid, "message": {"content": text}, **extra})
    await daemon.wait_idle_turn(sid, done + 1)


def _seqs(daemon: Daemon, sid: str) -> list[int]:
    return [e["seq"] for e in daemon.of(sid) if "seq" in e]


async def test_transcript_pages_turns_newest_first_with_tools_context_and_a_truncated_output(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    big = work / "big.txt"
    big.write_text("".join(f"line {i:05d} of a long file\n" for i in range(600)))
    small = work / "small.py"
    small.write_text("print('hi')\n")
    d = await start_daemon(tmp_path / "state", fake, root=work)
    try:
        sid = await d.new_session(cwd=str(work))
        fake.script(
            Reply.stream(tool_call_stream([("call_1", "read_file", {"path": str(big)})], text="Reading.")),
            text_reply("It is long."),
            text_reply("It prints hi."),
        )
        await _turn_done(d, sid, "read big.txt")
        await d.request(
            "dsh/context/add", {"sessionId": sid, "uri": small.as_uri(), "kind": "file", "delivery": "inject"}
        )
        await _turn_done(d, sid, "and   this one?")

        page = await d.request("dsh/session/transcript", {"sessionId": sid})
        assert page["lastSeq"] == _seqs(d, sid)[-1] and page["hasMore"] is False
        second, first = page["turns"]
        assert (second["turn"], first["turn"]) == (2, 1)
        assert first["end"] == {"kind": "completed"} and second["end"] == {"kind": "completed"}
        assert first["usage"]["inputTokens"] > 0 and first["startedAt"] <= first["endedAt"]

        prompt, said, tool, answer = first["items"]
        assert prompt["text"] == "read big.txt" and prompt["source"] == {"kind": "user"}
        assert said["type"] == "assistant" and said["text"] == "Reading." and said["step"] == 1
        assert (tool["type"], tool["callId"], tool["name"], tool["step"]) == (
            "tool",
            d.call_id(sid, "call_1"),
            "read_file",
            1,
        )
        result = tool["result"]
        assert result["truncated"] is True and len(result["output"]) == 4000 and result["length"] > 4000
        (logged,) = d.of(sid, "tool/result")
        assert result["seq"] == logged["seq"]
        assert (answer["text"], answer["step"], answer["finishReason"]) == ("It is long.", 2, "stop")

        context, question, reply = second["items"]
        assert context["source"]["kind"] == "editor" and context["source"]["uri"] == small.as_uri()
        assert "print('hi')" in context["text"] and "truncated" not in context
        assert question["text"] == "and   this one?"  # a person's prompt verbatim
        assert reply["text"] == "It prints hi."

        newest = await d.request("dsh/session/transcript", {"sessionId": sid, "limit": 1})
        assert [t["turn"] for t in newest["turns"]] == [2] and newest["hasMore"] is True
        older = await d.request("dsh/session/transcript", {"sessionId": sid, "beforeTurn": 2, "limit": 1})
        assert older["turns"] == [first] and older["hasMore"] is False

        bad = [
            ({"sessionId": sid, "limit": 0}, "invalid_params"),
            ({"sessionId": sid, "beforeTurn": "2"}, "invalid_params"),
            ({"sessionId": sid, "limit": True}, "invalid_params"),
            ({}, "invalid_params"),
            ({"sessionId": "nope"}, "unknown_session"),
        ]
        for params, code in bad:
            with pytest.raises(JsonRpcException) as error:
                await d.request("dsh/session/transcript", params)
            assert error.value.data["code"] == code, params
    finally:
        await stop_daemon(d)


async def test_attach_with_replay_none_then_the_transcript_then_exactly_the_events_after_last_seq(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    state = tmp_path / "state"
    first = await start_daemon(state, fake)
    sid = await first.new_session()
    await _turn_done(first, sid, "hello")
    await first.request(
        "dsh/send",
        {"sessionId": sid, "message": {"content": "parked"}, "target": "next-turn", "wakeup": False},
    )
    stored = _seqs(first, sid)
    await stop_daemon(first)

    second = await start_daemon(state, fake)
    try:
        attached = await second.request("dsh/session/attach", {"sessionId": sid, "replay": "none"})
        assert second.of(sid) == []  # nothing replayed
        assert attached["lastSeq"] == stored[-1] and attached["status"] == "idle"
        assert [m["content"][0]["text"] for m in attached["inbox"]["nextTurn"]] == ["parked"]
        page = await second.request("dsh/session/transcript", {"sessionId": sid})
        assert page["lastSeq"] == attached["lastSeq"]
        assert [t["turn"] for t in page["turns"]] == [1]
        assert page["turns"][0]["items"][-1]["text"] == "Hello there!"

        # A turn that streams, then stalls until cancelled; the transcript is taken in its middle.
        pieces = text_stream([f"w{i} " for i in range(12)])[:-2]  # no finish: the stream stays open
        fake.script(Reply.stream(pieces, delay=0.05, tail="stall"))
        await second.request("dsh/wake", {"sessionId": sid})
        await second.wait_event(sid, "assistant/delta", 3)
        middle = await second.request("dsh/session/transcript", {"sessionId": sid})
        await second.request("dsh/cancel", {"sessionId": sid, "keepInbox": True})
        await second.wait_idle_turn(sid)
        live = [e for e in second.of(sid) if "seq" in e]
        assert [e["seq"] for e in live] == list(range(attached["lastSeq"] + 1, live[-1]["seq"] + 1))
        after = [e for e in live if e["seq"] > middle["lastSeq"]]
        assert after and after[0]["seq"] == middle["lastSeq"] + 1
        running = middle["turns"][0]
        assert running["turn"] == 2 and "end" not in running
        # what the page showed of the streaming step, plus the chunks after it, is the whole reply
        shown = "".join(i["text"] for i in running["items"] if i.get("partial"))
        rest = "".join(
            d["text"]
            for e in after
            if e["type"] == "assistant/chunk"
            for d in e["data"]["deltas"]
            if d["type"] == "text"
        )
        (message,) = [e for e in live if e["type"] == "assistant/message"]
        assert message["data"]["interrupted"] is True
        assert shown + rest == message["data"]["message"]["content"][0]["text"]
        final = await second.request("dsh/session/transcript", {"sessionId": sid, "limit": 1})
        last = final["turns"][0]
        assert last["end"] == {"kind": "aborted", "cause": "user"}
        assert last["items"][-1] == {
            "type": "assistant",
            "seq": message["seq"],
            "step": 1,
            "text": message["data"]["message"]["content"][0]["text"],
            "interrupted": True,
        }
        with pytest.raises(JsonRpcException) as bad:
            await second.request("dsh/session/attach", {"sessionId": sid, "replay": "some"})
        assert bad.value.data["code"] == "invalid_params"
    finally:
        await stop_daemon(second)


async def test_transcript_and_replay_none_of_a_session_another_daemon_drives(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    state = tmp_path / "state"
    driver = await start_daemon(state, fake)
    reader = await start_daemon(state, fake)
    try:
        sid = await driver.new_session()
        await _turn_done(driver, sid, "one")
        await _turn_done(driver, sid, "two")
        mine = await driver.request("dsh/session/transcript", {"sessionId": sid})
        theirs = await reader.request("dsh/session/transcript", {"sessionId": sid})
        assert theirs["turns"] == mine["turns"] and [t["turn"] for t in theirs["turns"]] == [2, 1]
        deep = await reader.request("dsh/session/transcript", {"sessionId": sid, "beforeTurn": 2})
        assert deep["turns"] == mine["turns"][1:] and deep["hasMore"] is False
        beyond = await reader.request("dsh/session/transcript", {"sessionId": sid, "beforeTurn": 9})
        assert beyond["turns"] == mine["turns"]
        attached = await reader.request("dsh/session/attach", {"sessionId": sid, "replay": "none"})
        assert attached["readOnly"] is True and reader.of(sid) == []
        assert attached["lastSeq"] == theirs["lastSeq"]
    finally:
        await stop_daemon(driver)
    # The driver is gone: the reader drives it now and gets only what came after its lastSeq.
    await reader.request("dsh/followup", {"sessionId": sid, "message": {"content": "three"}})
    await reader.wait_idle_turn(sid)
    seqs = _seqs(reader, sid)
    assert seqs == list(range(attached["lastSeq"] + 1, seqs[-1] + 1))
    await stop_daemon(reader)


async def test_a_fork_s_transcript_keeps_the_queued_mark_of_a_prompt_sent_while_a_turn_ran(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """Issue 36.2: a prompt queued behind a running turn is `queued` in the transcript of the session
    and of a fork of it (the fork copies the splices that say so), also as the fork page's first turn."""
    d = await start_daemon(tmp_path / "state", fake)
    try:
        fake.script(
            Reply.stream(text_stream(["w"] * 20), gate_after=(3, "long")),
            text_reply("second answer"),
            text_reply("third answer"),
        )
        sid = await d.new_session()
        await d.request("dsh/followup", {"sessionId": sid, "message": {"content": "long one"}})
        await d.wait_event(sid, "assistant/delta")
        await d.request("dsh/followup", {"sessionId": sid, "message": {"content": "queued behind it"}})
        fake.open_gate("long")
        await d.wait_idle_turn(sid, 2)
        await _turn_done(d, sid, "a third, on its own")

        def marks(page: dict[str, Any]) -> list[tuple[int, str, bool]]:
            return [
                (t["turn"], i["text"], bool(i.get("queued")))
                for t in reversed(page["turns"])
                for i in t["items"]
                if i["type"] == "message" and i["source"].get("kind") == "user"
            ]

        want = [(1, "long one", False), (2, "queued behind it", True), (3, "a third, on its own", False)]
        title = (await d.request("dsh/session/list", {}))["sessions"][0]["title"]
        assert marks(await d.request("dsh/session/transcript", {"sessionId": sid})) == want
        fork_id = (await d.request("dsh/session/fork", {"sessionId": sid, "atTurn": 3}))["sessionId"]
        fork_page = await d.request("dsh/session/transcript", {"sessionId": fork_id})
        assert marks(fork_page) == want
        # The fork says where it came from: a line of its last copied turn (issue 36.2).
        lines = [i for i in fork_page["turns"][0]["items"] if i["type"] == "event"]
        assert [(i["event"], i["data"]) for i in lines] == [
            (
                "session/notice",
                {
                    "kind": "fork",
                    "level": "info",
                    "message": f"Forked from «{title}» at turn 3.",
                    "forkOf": {"sessionId": sid, "atTurn": 3, "title": title},
                },
            )
        ]
        last_two = await d.request("dsh/session/transcript", {"sessionId": fork_id, "limit": 2})
        assert marks(last_two) == want[1:]
        first_page = await d.request(
            "dsh/session/transcript", {"sessionId": fork_id, "beforeTurn": 3, "limit": 1}
        )
        assert marks(first_page) == [want[1]]
    finally:
        await stop_daemon(d)
