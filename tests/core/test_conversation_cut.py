"""`conversation/cut` (issue 25): the next request is the history as it stood when the turn began,
also across a compaction logged after that turn (the summary of the later turns goes too), every
request before and after still rebuilds from the log (D7), and turn numbers keep growing."""

from __future__ import annotations

from pathlib import Path

from dsh_daemon.agent.compaction import SUMMARY_HEADING
from dsh_daemon.llm.scripted import reply, usage
from dsh_daemon.model import events as ev
from dsh_daemon.model.payloads import ConversationCut, TurnStarted, entry
from tests.core.harness import Harness, msg


async def _turn(h: Harness, text: str) -> None:
    h.agent.followup(msg(text))
    await h.idle()


def _texts(request: object) -> list[str]:
    return [m.text for m in request.messages]  # type: ignore[attr-defined]


async def test_a_cut_restores_the_history_of_a_turns_start_even_past_a_compaction(tmp_path: Path) -> None:
    h = Harness(
        tmp_path,
        [
            reply("one", use=usage(300, 5)),
            reply("two", use=usage(500, 5)),
            reply("three", use=usage(900, 5)),  # the next step compacts first
            reply("SUMMARY of one and two"),
            reply("four", use=usage(400, 5)),
            reply("after the cut", use=usage(100, 5)),
        ],
    )
    h.provider.window = 1000
    for text in ("first", "second", "third", "fourth"):
        await _turn(h, text)
    assert h.durable(ev.CONTEXT_COMPACTED)
    assert SUMMARY_HEADING in _texts(h.provider.requests[-1])[0]
    h.agent.log.append(*entry(ConversationCut(2)), commit=True)  # back to before "second"
    await _turn(h, "fifth")
    h.check()  # every request, before and after the cut, equals its rebuild from the log
    assert _texts(h.provider.requests[-1]) == ["first", "one", "fifth"]
    turns = [TurnStarted.of(e).turn for e in h.durable(ev.TURN_START)]
    assert turns == [1, 2, 3, 4, 5]  # the cut turns keep their numbers; the next one is new
