"""`dsh/agents/list` over the real wire (protocol.md §12 "Subagents", "Named agents"): a client lists a
folder's named agents before it opens a session (`{cwd}`), or a session's (`{sessionId}`); neither,
both, an unknown session, a cwd that is no folder and one outside the workspace (as a session's cwd
there would be) get typed errors, and the daemon goes on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pygls.exceptions import JsonRpcException

from tests.fakes.deepseek_server import FakeDeepSeek
from tests.server.harness import Daemon, start_daemon, stop_daemon


async def refused(d: Daemon, params: dict[str, Any]) -> tuple[str, str]:
    """(the error's `data.code`, its message) of a `dsh/agents/list` the daemon refuses."""
    try:
        await d.request("dsh/agents/list", params)
    except JsonRpcException as exc:
        return exc.data["code"], exc.message
    raise AssertionError(f"dsh/agents/list {params} was not refused")


REVIEWER = "---\ndescription: Reviews a change for bugs\ntools: explore\n---\nBe strict.\n"
FIXER = "---\ndescription: Fixes failing tests\ntools: edit\nmodel: deepseek-v4-pro\n---\nFix it.\n"


async def test_listed_by_folder_before_a_session_and_by_session(tmp_path: Path, fake: FakeDeepSeek) -> None:
    work = tmp_path / "work"
    agents = work / ".dsh" / "agents"
    agents.mkdir(parents=True)
    (agents / "reviewer.md").write_text(REVIEWER)
    (agents / "fixer.md").write_text(FIXER)
    (agents / "broken.md").write_text("no header\n")  # left out, never fatal
    d = await start_daemon(tmp_path / "state", fake, apply_edit=False, root=work)
    try:
        expected = [
            {
                "name": "fixer",
                "description": "Fixes failing tests",
                "tools": "edit",
                "model": "deepseek-v4-pro",
            },
            {"name": "reviewer", "description": "Reviews a change for bugs", "tools": "explore"},
        ]
        assert await d.request("dsh/agents/list", {"cwd": str(work)}) == {"agents": expected}
        (work / "empty").mkdir()
        assert await d.request("dsh/agents/list", {"cwd": str(work / "empty")}) == {"agents": []}
        assert await d.request("dsh/agents/list", {"cwd": "."}) == {"agents": expected}  # the workspace's
        sid = await d.new_session(cwd=str(work))
        assert await d.request("dsh/agents/list", {"sessionId": sid}) == {"agents": expected}
    finally:
        await stop_daemon(d)


async def test_neither_both_unknown_session_and_no_folder_are_typed_errors(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    d = await start_daemon(tmp_path / "state", fake, apply_edit=False, root=work)
    try:
        for bad in ({}, {"cwd": str(work), "sessionId": "x"}):
            code, message = await refused(d, bad)
            assert code == "invalid_params" and "either sessionId or cwd" in message, message
        assert (await refused(d, {"sessionId": "no-such-session"}))[0] == "unknown_session"
        code, message = await refused(d, {"cwd": str(work / "missing")})
        assert code == "invalid_params" and "not a directory" in message, message
        # A folder outside the workspace is refused as a session's cwd there would be.
        elsewhere = tmp_path / "elsewhere"
        (elsewhere / ".dsh" / "agents").mkdir(parents=True)
        (elsewhere / ".dsh" / "agents" / "spy.md").write_text("---\ndescription: not this project's\n---\n")
        assert (await refused(d, {"cwd": str(elsewhere)}))[0] == "outside_workspace"
        assert (await refused(d, {"cwd": "a\u0000b"}))[0] == "invalid_params"
        # The daemon goes on: a good request is answered after the refused ones.
        assert await d.request("dsh/agents/list", {"cwd": str(work)}) == {"agents": []}
    finally:
        await stop_daemon(d)
