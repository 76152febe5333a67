"""Compaction (issue 14 item 4): crossing `compactAtRatio` compacts before the next step's claim, an
overflow compacts and retries, `compact()` by hand, a failed compaction changes nothing, and every
request (the summarising one included) rebuilds from the log."""

from __future__ import annotations

from pathlib import Path

from dsh_daemon.agent.compaction import PURPOSE, SUMMARY_HEADING
from dsh_daemon.agent.derive import rebuild_requests
from dsh_daemon.agent.loop import CompactionError
from dsh_daemon.llm.scripted import Fail, reply, usage
from dsh_daemon.model import events as ev
from dsh_daemon.model.provider import LlmFailure
from tests.core.harness import Harness, echo_tool, msg

OVERFLOW = LlmFailure("CONTEXT_WINDOW_EXCEEDED", "maximum context length exceeded", status=400)


def _purposes(h: Harness) -> list[str | None]:
    return [r.config.get("purpose") for r in h.provider.requests]  # type: ignore[misc]


async def _turn(h: Harness, text: str) -> None:
    h.agent.followup(msg(text))
    await h.idle()


async def test_crossing_the_window_compacts_before_the_next_step_and_goes_on(tmp_path: Path) -> None:
    h = Harness(
        tmp_path,
        [
            reply("one", use=usage(300, 5)),
            reply("two", use=usage(500, 5)),
            reply("three", use=usage(900, 5)),  # >= 0.85 * 1000: the next step compacts first
            reply("SUMMARY of one and two"),
            reply("four", use=usage(400, 5)),
        ],
    )
    h.provider.window = 1000
    for text in ("first", "second", "third", "fourth"):
        await _turn(h, text)
    h.check()  # invariants + every request (the summarising one too) equals its rebuild from the log
    assert _purposes(h) == [None, None, None, PURPOSE, None]
    [compacted] = h.durable(ev.CONTEXT_COMPACTED)
    data = compacted.data
    assert data["reason"] == "ratio" and data["summary"] == "SUMMARY of one and two"
    # The kept tail is the last two turns (the third and the current one).
    third_start = [e.seq for e in h.durable(ev.TURN_START)][2]
    assert data["keptFromSeq"] == third_start
    assert isinstance(data["tokensBefore"], int) and isinstance(data["tokensAfter"], int)
    # The summarising request: the transcript of what came before the tail, no tools, no thinking.
    summarising = h.provider.requests[3]
    assert summarising.tools == () and "Summarise" in str(summarising.system) + summarising.messages[0].text  # type: ignore[union-attr]
    transcript = summarising.messages[0].text  # type: ignore[union-attr]
    assert "first" in transcript and "one" in transcript and "third" not in transcript
    # Before the claim of the step it serves: turn/start, claim, then compaction, then the step.
    types = h.types()
    fourth = [i for i, t in enumerate(types) if t == ev.TURN_START][3]
    assert types[fourth : fourth + 6] == [
        ev.TURN_START,
        ev.INBOX_SPLICED,
        ev.LLM_REQUEST,
        ev.CONTEXT_COMPACTED,
        ev.STEP_START,
        ev.USER_MESSAGE,
    ]
    assert h.request_texts(4) == [f"{SUMMARY_HEADING}\n\nSUMMARY of one and two", "third", "three", "fourth"]
    # It rebuilds from the log after a restart, and goes on.
    h2 = await h.reopen()
    h2.provider.window = 1000
    h2.provider.push(reply("five", use=usage(450, 5)))
    await _turn(h2, "fifth")
    h2.check()
    assert h2.request_texts(0)[:4] == [
        f"{SUMMARY_HEADING}\n\nSUMMARY of one and two",
        "third",
        "three",
        "fourth",
    ]
    assert len(rebuild_requests(h2.log)) == 6
    await h2.manager.close()


async def test_mid_turn_compaction_before_the_next_steps_claim(tmp_path: Path) -> None:
    h = Harness(
        tmp_path,
        [
            reply("a", use=usage(100, 1)),
            reply("", tool_calls=[("c1", "echo", '{"x": 1}')], use=usage(950, 1)),
            reply("SUMMARY"),
            reply("done", use=usage(200, 1)),
        ],
        tools=[echo_tool()],
    )
    h.provider.window = 1000
    await _turn(h, "first")
    await _turn(h, "second")
    h.check()
    assert _purposes(h) == [None, None, PURPOSE, None]
    types = h.types()
    at = types.index(ev.CONTEXT_COMPACTED)
    # After the tool step closed, before the next step's claim and its step/start.
    assert types[at - 3 : at + 1] == [ev.TOOL_RESULT, ev.STEP_END, ev.LLM_REQUEST, ev.CONTEXT_COMPACTED]
    assert types[at + 1] == ev.STEP_START
    assert h.turn_ends()[-1] == {"kind": "completed"}


async def test_overflow_compacts_and_the_step_runs_again(tmp_path: Path) -> None:
    h = Harness(
        tmp_path,
        [
            reply("one", use=usage(100, 1)),
            [Fail(OVERFLOW)],
            reply("SUMMARY of the first turn"),
            reply("two", use=usage(150, 1)),
        ],
    )
    await _turn(h, "first")
    await _turn(h, "second")
    h.check()
    assert _purposes(h) == [None, None, PURPOSE, None]
    assert h.turn_ends() == [{"kind": "completed"}, {"kind": "completed"}]
    assert h.durable(ev.CONTEXT_COMPACTED)[0].data["reason"] == "overflow"
    # The prompt of the step that overflowed is kept verbatim after the summary.
    assert h.request_texts(3) == [f"{SUMMARY_HEADING}\n\nSUMMARY of the first turn", "second"]
    steps = [(e.data["turn"], e.data["step"]) for e in h.durable(ev.STEP_START)]
    assert steps == [(1, 1), (2, 1), (2, 2)]


async def test_overflow_again_after_compacting_ends_the_turn(tmp_path: Path) -> None:
    h = Harness(tmp_path, [reply("one"), [Fail(OVERFLOW)], reply("SUMMARY"), [Fail(OVERFLOW)]])
    await _turn(h, "first")
    await _turn(h, "second")
    h.check()
    assert h.turn_ends()[-1]["kind"] == "error"
    assert h.turn_ends()[-1]["error"]["code"] == "CONTEXT_WINDOW_EXCEEDED"
    assert len(h.live(ev.AGENT_ERROR)) == 1


async def test_a_failed_compaction_changes_nothing(tmp_path: Path) -> None:
    h = Harness(
        tmp_path,
        [reply("one", use=usage(900, 1)), [Fail(LlmFailure("AUTH", "bad key", status=401))]],
    )
    h.provider.window = 1000
    await _turn(h, "first")
    await _turn(h, "second")
    h.check()
    end = h.turn_ends()[-1]
    assert end["kind"] == "error" and end["error"]["code"] == "AUTH"
    assert end["error"]["message"].startswith("compaction failed: ")
    assert h.durable(ev.CONTEXT_COMPACTED) == []
    # The claimed prompt went back to the inbox, parked; nothing else entered.
    assert [m.text for m in h.agent.inbox.next_turn] == ["second"]
    assert h.user_messages() == [(1, "first")]
    # The next wake compacts and runs it.
    h.provider.push(reply("SUMMARY"), reply("two", use=usage(100, 1)))
    assert h.agent.wake()
    await h.idle()
    h.check()
    assert h.turn_ends()[-1] == {"kind": "completed"}
    assert h.request_texts(len(h.provider.requests) - 1) == [f"{SUMMARY_HEADING}\n\nSUMMARY", "second"]


async def test_manual_compact_when_idle_and_while_running(tmp_path: Path) -> None:
    h = Harness(tmp_path, [reply("one"), reply("two"), reply("SUMMARY by hand"), reply("three")])
    await _turn(h, "first")
    await _turn(h, "second")
    parked = msg("parked")
    h.agent.inject(parked)
    result = await h.agent.compact()
    assert result["compacted"] is True and set(result) >= {"keptFromSeq", "tokensBefore", "tokensAfter"}
    # One turn that only compacted: no claim, no step; the parked inject stays parked.
    assert h.turn_ends()[-1] == {"kind": "completed"}
    assert [m.id for m in h.agent.inbox.next_step] == [parked.id]
    assert h.statuses()[-2:] == ["running", "idle"]
    await _turn(h, "third")
    h.check()
    assert _purposes(h) == [None, None, PURPOSE, None]
    assert h.request_texts(3)[0] == f"{SUMMARY_HEADING}\n\nSUMMARY by hand"
    assert h.request_texts(3)[-2:] == ["parked", "third"]


async def test_manual_compact_with_nothing_to_compact_and_failing(tmp_path: Path) -> None:
    h = Harness(tmp_path, [[Fail(LlmFailure("AUTH", "bad key", status=401))]])
    assert (await h.agent.compact())["compacted"] is False
    await _turn(h, "first")  # AUTH on the step itself
    h.provider.push([Fail(LlmFailure("AUTH", "bad key", status=401))])
    try:
        await h.agent.compact()
    except CompactionError as exc:
        assert exc.error["code"] == "AUTH"
    else:
        raise AssertionError("a failed compaction raises")
    assert h.durable(ev.CONTEXT_COMPACTED) == []
    h.check()
