"""A session's cwd: the workspace root by default, a relative one resolved against the workspace
(each test failed before its fix)."""

from __future__ import annotations

from pathlib import Path

from tests.fakes.deepseek_server import FakeDeepSeek
from tests.server.harness import start_daemon, stop_daemon


async def test_session_cwd_defaults_to_the_workspace_root(tmp_path: Path, fake: FakeDeepSeek) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    d = await start_daemon(tmp_path / "state", fake, root=folder)
    sid = await d.new_session()
    (listed,) = (await d.request("dsh/session/list", {}))["sessions"]
    assert listed["sessionId"] == sid and listed["cwd"] == str(folder)
    relative = await d.request("dsh/session/new", {"cwd": "sub/dir"})
    rows = {s["sessionId"]: s for s in (await d.request("dsh/session/list", {}))["sessions"]}
    assert Path(rows[relative["sessionId"]]["cwd"]).is_absolute()
    await stop_daemon(d)


async def test_relative_cwd_is_resolved_against_the_workspace(tmp_path: Path, fake: FakeDeepSeek) -> None:
    folder = tmp_path / "project"
    (folder / "sub").mkdir(parents=True)
    d = await start_daemon(tmp_path / "state", fake, root=folder)
    created = await d.request("dsh/session/new", {"cwd": "sub"})
    (listed,) = (await d.request("dsh/session/list", {"cwd": str(folder / "sub") + "/"}))["sessions"]
    assert listed["sessionId"] == created["sessionId"] and listed["cwd"] == str(folder / "sub")
    await stop_daemon(d)
