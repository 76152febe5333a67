"""A turn's `$/progress` comes begin → reports → end, with nothing after the end, also for a client
that answers `window/workDoneProgress/create` only after the turn has ended (everything the turn
reported waits for that answer)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.harness import Daemon, start_daemon, stop_daemon


def answer_create_after_the_turn(client: LanguageClient, daemon: Daemon) -> None:
    """The client's answer to `create` waits until it has seen the turn end (a `dsh/event`)."""
    client.protocol.fm._features.pop(types.WINDOW_WORK_DONE_PROGRESS_CREATE)

    @client.feature(types.WINDOW_WORK_DONE_PROGRESS_CREATE)
    async def create(params: Any) -> None:
        token = str(params.token)
        session_id = token.removeprefix("dsh-").rsplit("-", 1)[0]
        await daemon.wait_for(lambda: bool(daemon.of(session_id, "turn/end")))
        client.progress_reports.setdefault(token, [])


@pytest.mark.parametrize(
    "module",
    [
        "dsh_daemon",
        # the turn's end observed in the loop step after the answer's, where fc71fa6's race was
        "tests.fakes.progress_race",
    ],
)
async def test_progress_answered_after_the_turn_ended_comes_in_order(
    tmp_path: Path, fake: FakeDeepSeek, module: str
) -> None:
    # deltas further apart than REPORT_EVERY_S: each one a report, all waiting for the answer
    fake.script(Reply.stream(text_stream(["one", "two", "three"]), delay=0.3))
    daemon = await start_daemon(tmp_path / "state", fake, setup=answer_create_after_the_turn, module=module)
    try:
        sid = await daemon.new_session()
        await daemon.request("dsh/followup", {"sessionId": sid, "message": {"content": "hello"}})
        await daemon.wait_idle_turn(sid)
        token = f"dsh-{sid}-1"
        reports = daemon.client.progress_reports
        await daemon.wait_for(
            lambda: any(isinstance(r, types.WorkDoneProgressEnd) for r in reports.get(token, []))
        )
        # a round trip after the end: whatever the daemon wrote before its answer has arrived
        await daemon.request("dsh/session/list", {})
        kinds = [type(r).__name__ for r in reports[token]]
        assert kinds[0] == "WorkDoneProgressBegin", kinds
        assert kinds[-1] == "WorkDoneProgressEnd", kinds  # nothing after the end
        assert kinds.count("WorkDoneProgressEnd") == 1, kinds
        assert set(kinds[1:-1]) == {"WorkDoneProgressReport"}, kinds  # at least one, all before the end
        assert reports[token][-1].message == "completed"
    finally:
        await stop_daemon(daemon)
