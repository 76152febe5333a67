"""A session in its own git worktree over ACP (protocol.md §20): `session/new` with
`_meta.dsh.worktree` (the Python SDK sends keyword arguments as `_meta`) answers once the worktree exists, naming it; the session's edit lands there,
not in the person's work tree; `session/list` names each such session's worktree."""

from __future__ import annotations

import json
from pathlib import Path

from acp import text_block

from tests.acp.harness import acp_daemon, settle
from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.harness import tool_call_stream
from tests.server.test_worktrees import git


async def test_a_session_in_its_own_worktree_over_acp(tmp_path: Path, fake: FakeDeepSeek) -> None:
    repo, state = tmp_path / "app", tmp_path / "state"
    repo.mkdir()
    state.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "app.py").write_text("VALUE = 1\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "start")
    (state / "config.json").write_text(json.dumps({"tools": {"permissions": {"write_file": "allow"}}}))
    async with acp_daemon(state, fake) as d:
        created = await settle(
            d.conn.new_session(cwd=str(repo), mcp_servers=[], dsh={"worktree": {"branch": "acp-feat"}})
        )
        sid = created.session_id
        worktree = (created.field_meta or {})["dsh"]["worktree"]
        copy = tmp_path / "app.dsh-worktrees" / "acp-feat"
        assert worktree == {"path": str(copy), "branch": "acp-feat", "base": "HEAD", "repo": str(repo)}
        write = ("c1", "write_file", {"path": "app.py", "content": "VALUE = 2\n"})
        fake.script(Reply.stream(tool_call_stream([write])), Reply.stream(text_stream(["done"])))
        done = await settle(d.conn.prompt(session_id=sid, prompt=[text_block("change it")]))
        assert done.stop_reason == "end_turn"
        assert (copy / "app.py").read_text() == "VALUE = 2\n" and (
            repo / "app.py"
        ).read_text() == "VALUE = 1\n"
        listed = await settle(d.conn.list_sessions(cwd=str(repo)))
        (row,) = [s for s in listed.sessions if s.session_id == sid]
        assert (row.field_meta or {})["dsh"]["worktree"]["branch"] == "acp-feat"
        # Not a repository: refused, naming why; no session is made.
        plain = tmp_path / "plain"
        plain.mkdir()
        try:
            await settle(d.conn.new_session(cwd=str(plain), mcp_servers=[], dsh={"worktree": {}}))
        except Exception as exc:
            assert "not inside a git work tree" in str(exc)
        else:
            raise AssertionError("a worktree outside git was not refused")
