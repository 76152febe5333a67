"""A model change is a line of the transcript page (`session/settings` items, protocol.md §3), so a
client's "Model: …" line survives a reload; a change of the sandbox alone is none, also when the
model choice it repeats was logged pages earlier. Real processes over real pipes: an ACP process
makes the changes (its config options write the session's settings, the sandbox's included), then
an LSP daemon reads the pages from the store, and again from memory once it drives the session."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from acp import text_block

from tests.acp.harness import acp_daemon, settle
from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.harness import start_daemon, stop_daemon


def _model_lines(page: dict[str, Any]) -> list[tuple[int, int, str | None, str | None]]:
    """(turn, seq, model, effort) of each `session/settings` item, oldest first."""
    return [
        (t["turn"], i["seq"], i["data"].get("model"), i["data"].get("reasoningEffort"))
        for t in sorted(page["turns"], key=lambda t: t["turn"])
        for i in t["items"]
        if i["type"] == "event" and i["event"] == "session/settings"
    ]


async def test_model_changes_are_page_lines_and_a_sandbox_change_alone_is_not(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    state = tmp_path / "state"
    fake.script(*(Reply.stream(text_stream([f"answer {n}"])) for n in range(1, 4)))
    async with acp_daemon(state, fake) as acp:
        sid = await acp.new_session()
        option = acp.conn.set_config_option
        await settle(option(config_id="model", session_id=sid, value="deepseek-v4-pro"))
        await settle(acp.conn.prompt(session_id=sid, prompt=[text_block("one")]))
        await settle(option(config_id="reasoning_effort", session_id=sid, value="max"))
        await settle(acp.conn.prompt(session_id=sid, prompt=[text_block("two")]))
        await settle(acp.conn.prompt(session_id=sid, prompt=[text_block("three")]))
        # The sandbox alone, after turn 3: the event repeats pro/max, logged two turns before.
        await settle(option(config_id="sandbox", session_id=sid, value="read-only"))

    d = await start_daemon(state, fake)
    try:
        for how in ("from the store", "from memory"):
            if how == "from memory":
                await d.request("dsh/session/attach", {"sessionId": sid, "replay": "none"})
            whole = await d.request("dsh/session/transcript", {"sessionId": sid})
            lines = _model_lines(whole)
            # the model (logged before turn 1: its first items) and the effort (between turns 1 and 2:
            # turn 1's); nothing for the sandbox
            assert [(turn, model, effort) for turn, _seq, model, effort in lines] == [
                (1, "deepseek-v4-pro", None),
                (1, "deepseek-v4-pro", "max"),
            ], how
            # A page of turn 3 alone (its lead, turn 2, holds no settings): its sandbox change is
            # compared with the settings logged before the page, not taken for a model change.
            newest = await d.request("dsh/session/transcript", {"sessionId": sid, "limit": 1})
            assert [t["turn"] for t in newest["turns"]] == [3] and _model_lines(newest) == [], how
            older = await d.request("dsh/session/transcript", {"sessionId": sid, "beforeTurn": 2})
            assert _model_lines(older) == lines, how
    finally:
        await stop_daemon(d)
