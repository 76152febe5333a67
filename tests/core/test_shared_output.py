"""A running call's live output shared through the store for other processes' windows
(`session/liveoutput.py`): bounded per call and per session, never part of the log, so every model
request still rebuilds from the log alone."""

from __future__ import annotations

import asyncio
import itertools
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dsh_daemon.agent.tools import ToolContext, ToolOutcome
from dsh_daemon.llm.scripted import reply
from dsh_daemon.model import events as ev
from dsh_daemon.session.liveoutput import SHARED_CHARS_PER_CALL, SharedOutput
from dsh_daemon.session.store import DB_FILENAME, SessionStore
from tests.core.harness import FnTool, Harness, msg

LINE = "x" * 99 + "\n"


def chatty(lines: int) -> FnTool:
    """A tool that prints `lines` numbered lines, yielding to the loop between them."""

    async def body(args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        for i in range(lines):
            ctx.emit_output(f"{i:06d}{LINE}")
            if i % 50 == 0:
                await asyncio.sleep(0)
        return ToolOutcome.text(f"printed {lines} lines")

    return FnTool("chatty", body)


def printed(lines: int) -> str:
    return "".join(f"{i:06d}{LINE}" for i in range(lines))


def shared_rows(state: Path, session_id: str) -> list[tuple[int, int, str, int, int, str]]:
    with sqlite3.connect(state / DB_FILENAME) as db:
        return list(
            db.execute(
                "SELECT id, turn, call_id, after_seq, start, text FROM tool_output WHERE session_id=? "
                "ORDER BY id",
                (session_id,),
            )
        )


async def test_a_chatty_command_keeps_only_its_latest_output_and_the_log_rebuilds_every_request(
    tmp_path: Path,
) -> None:
    lines = 5_000  # 530,000 characters: five times the per-call cap
    h = Harness(
        tmp_path, [reply("", tool_calls=[("c1", "chatty", "{}")]), reply("done")], tools=[chatty(lines)]
    )
    h.agent.followup(msg("print a lot"))
    await h.idle()
    whole = printed(lines)
    live = "".join(str(e.data["text"]) for e in h.live(ev.TOOL_OUTPUT))
    assert live == whole  # the driver's own clients get everything, live

    rows = shared_rows(tmp_path, h.agent.session_id)
    stored = "".join(row[5] for row in rows)
    assert len(stored) <= SHARED_CHARS_PER_CALL  # bounded, however much the command printed
    assert stored and whole.endswith(stored)  # the latest output, contiguous
    for before, after in itertools.pairwise(rows):
        assert after[4] == before[4] + len(before[5])  # each row starts where the one before ended
    assert rows[-1][4] + len(rows[-1][5]) == len(whole)
    # Each row sits before the call's result in the log's order.
    (result,) = h.durable(ev.TOOL_RESULT)
    assert all(row[3] < (result.seq or 0) for row in rows)
    # The log holds no output and the requests are what the log rebuilds (checked by `check`).
    assert not any("output" in e.type for e in h.log)
    h.check()
    assert h.request_texts(1)[-1] == f"result:printed {lines} lines"

    # A resume rebuilds the same history with the rows still in the store.
    await h.manager.close()
    again = Harness(tmp_path, [reply("next")], session_id=h.agent.session_id, tools=[chatty(1)])
    again.agent.followup(msg("and now"))
    await again.idle()
    again.check()
    before = h.provider.requests[-1].messages
    assert again.provider.requests[0].messages[: len(before)] == before
    await again.manager.close()


async def test_older_turns_output_goes_when_a_new_turn_shares_some(tmp_path: Path) -> None:
    script = []
    for turn in range(1, 4):
        script += [reply("", tool_calls=[(f"c{turn}", "chatty", "{}")]), reply(f"turn {turn}")]
    h = Harness(tmp_path, script, tools=[chatty(3)])
    for turn in range(1, 4):
        h.agent.followup(msg(f"turn {turn}"))
        await h.idle()
    rows = shared_rows(tmp_path, h.agent.session_id)
    assert {(row[1], h.provider_id(row[2])) for row in rows} == {
        (2, "c2"),
        (3, "c3"),
    }  # turn 1's went with turn 3's first row
    h.check()
    await h.manager.close()


def test_rows_are_coalesced_and_the_last_is_written_on_close(tmp_path: Path) -> None:
    """Without a running loop every add writes at once; with a long interval only the first does, the
    rest wait for the timer or for `close`."""
    store = SessionStore(tmp_path)
    store.create_session("s", title=None, cwd=None)
    seq = [7]

    async def run() -> None:
        shared = SharedOutput(store, "s", 1, 1, "c1", last_seq=lambda: seq[0], every=3600.0)
        shared.add("a")  # the first row: at once
        seq[0] = 8
        shared.add("b")
        shared.add("c")
        assert [r.text for r in store.tool_output_after("s", 0)] == ["a"]
        shared.close()
        shared.add("late")  # after the body ended: not shared
        shared.flush()

    asyncio.run(run())
    rows = store.tool_output_after("s", 0)
    assert [(r.text, r.start, r.after_seq) for r in rows] == [("a", 0, 7), ("bc", 1, 8)]
    store.close()


def test_a_lost_lease_or_a_failed_write_never_fails_the_call(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    store.create_session("s", title=None, cwd=None)
    lost = SharedOutput(store, "s", 1, 1, "c1", last_seq=lambda: 0, writable=lambda: False)
    lost.add("not ours to write")
    lost.close()
    assert store.tool_output_after("s", 0) == []
    store.close()
    broken = SharedOutput(store, "s", 1, 1, "c2", last_seq=lambda: 0)  # a closed connection
    broken.add("x")
    broken.add("y")
    broken.close()


def test_a_driver_whose_lease_was_taken_shares_no_more_output(tmp_path: Path) -> None:
    """A command goes on printing after another process took the session (a forced take-over): no log
    write tells this process yet, so the store checks the lease with each row, and refuses it, as it
    refuses an event append; a follower would otherwise show it after the new driver's result."""
    store = SessionStore(tmp_path)
    store.create_session("s", title=None, cwd=None)
    assert store.write_lease("s", "me", 1, "h", replace_holder=None)
    shared = SharedOutput(store, "s", 1, 1, "c1", last_seq=lambda: 0, holder="me")
    shared.add("mine")
    assert store.write_lease("s", "them", 2, "h", replace_holder="me")  # taken over
    shared.add("after the take-over")
    shared.close()
    assert [r.text for r in store.tool_output_after("s", 0)] == ["mine"]
    store.close()
