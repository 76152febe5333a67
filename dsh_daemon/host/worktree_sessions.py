"""What the person does with a session's worktree (protocol.md "Worktrees"): list, diff, apply to
their work tree, keep as a branch, discard. The git work is `host/worktrees.py`, run off the event
loop; this module finds the worktree a request names and refuses what must wait for an idle session.

A worktree is named by its session (`sessionId`) or, once its session is gone, by its `path`."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dsh_daemon.host import worktrees
from dsh_daemon.host.errors import invalid_params, session_busy_because, shown
from dsh_daemon.session.store import WorktreeRow

if TYPE_CHECKING:
    from dsh_daemon.host.hosted import HostedSession
    from dsh_daemon.host.sessions import SessionHost
    from dsh_daemon.mcp.config import ServerSource


async def create_in_worktree(
    host: SessionHost,
    cwd: str,
    branch: str | None,
    base: str | None,
    *,
    title: str | None = None,
    mcp_servers: ServerSource | None = None,
) -> HostedSession:
    """A new session in a git worktree of its own (both front ends): planned and made off the event
    loop (a checkout takes as long as the repository needs), recorded in between so that a crash while
    it is made leaves it listed; the session is then created in it, or the failure is raised and the
    record dropped (`create` removes the folder and branch it could not use)."""
    session_id = str(uuid.uuid4())
    planned = await asyncio.to_thread(worktrees.plan_worktree, cwd, session_id, branch, base, title)
    store = host.manager.store
    store.record_worktree(planned.row)
    try:
        made = await asyncio.to_thread(worktrees.add_worktree, planned)
        return host.create(cwd, title=title, mcp_servers=mcp_servers, worktree=made, session_id=session_id)
    except BaseException:
        store.forget_worktree(planned.row.path)
        raise


def stored_worktree(host: SessionHost, session_id: str) -> dict[str, Any] | None:
    """What the store says of a session's worktree (no git: for lists that must answer at once)."""
    row = host.manager.store.worktree_of(session_id)
    if row is None:
        return None
    return {"path": row.path, "branch": row.branch, "base": row.base, "repo": row.repo}


def find_worktree(host: SessionHost, session_id: str | None, path: str | None, method: str) -> WorktreeRow:
    """The worktree a request names: by its session, or by its path; exactly one of them."""
    if (session_id is None) == (path is None):
        raise invalid_params(f"{method}: name the worktree by sessionId or by path (one of them)")
    store = host.manager.store
    if session_id is not None:
        host.manager.info(session_id)  # unknown_session when there is no such session
        row = store.worktree_of(session_id)
        if row is None:
            raise invalid_params(f"{method}: session {shown(session_id)} has no worktree of its own")
        return row
    assert path is not None
    row = store.worktree_at(str(Path(path)))
    if row is None:
        raise invalid_params(f"{method}: {shown(path)} is no worktree the daemon made")
    return row


def _refuse_while_running(host: SessionHost, row: WorktreeRow, doing: str) -> None:
    hosted = host.sessions.get(row.session_id or "")
    if hosted is not None and hosted.agent.running:
        raise session_busy_because(
            hosted.session_id,
            f"a turn is running in its worktree; cancel it or wait, then {doing}",
            reason="running",
        )


async def list_worktrees(host: SessionHost, repo: str | None) -> list[dict[str, Any]]:
    """Every worktree the daemon made (of `repo` when given), with its session (null: gone) and its
    figures. A worktree whose session is gone and whose folder is gone is forgotten here."""
    store = host.manager.store
    rows = store.worktrees()
    figures = await asyncio.to_thread(_listed, rows, repo)
    out = []
    for row in rows:
        data = figures.get(row.path)
        if data is None:
            continue
        if row.session_id is None and not data["exists"]:
            store.forget_worktree(row.path)
            continue
        out.append({**data, "baseCommit": row.base_commit, "sessionId": row.session_id})
    return out


def _listed(rows: list[WorktreeRow], repo: str | None) -> dict[str, dict[str, Any]]:
    wanted = None if repo is None else Path(repo).resolve()
    return {
        row.path: worktrees.worktree_status(row)
        for row in rows
        if wanted is None or Path(row.repo).resolve() == wanted
    }


def worktree_rows(host: SessionHost, session_ids: list[str]) -> list[WorktreeRow]:
    """The worktrees of those sessions that have one (read on the event loop: the store's thread)."""
    store = host.manager.store
    return [row for sid in session_ids if (row := store.worktree_of(sid)) is not None]


def figures_blocking(rows: list[WorktreeRow]) -> dict[str, dict[str, Any]]:
    """`worktree` of each session's row, as a session list shows it (git: call off the event loop)."""
    return {row.session_id or "": worktrees.worktree_status(row) for row in rows}


async def diff(host: SessionHost, session_id: str | None, path: str | None) -> dict[str, Any]:
    row = find_worktree(host, session_id, path, "dsh/worktree/diff")
    result = await asyncio.to_thread(worktrees.worktree_diff, row)
    patch = result.patch[: worktrees.MAX_PATCH_BYTES]
    return {
        "path": row.path,
        "branch": row.branch,
        "base": row.base,
        "baseCommit": row.base_commit,
        "files": list(result.files),
        "patch": patch.decode("utf-8", "replace"),
        "truncated": len(result.patch) > len(patch),
    }


async def apply(host: SessionHost, session_id: str | None, path: str | None) -> dict[str, Any]:
    """The worktree's diff into the person's work tree (its repository's main one), all or nothing."""
    row = find_worktree(host, session_id, path, "dsh/worktree/apply")
    _refuse_while_running(host, row, "apply it")
    return await asyncio.to_thread(worktrees.apply_to, row, row.repo)


async def keep(host: SessionHost, session_id: str | None, path: str | None) -> dict[str, Any]:
    """Commit what is not committed on the branch, remove the folder; the branch stays."""
    row = find_worktree(host, session_id, path, "dsh/worktree/keep")
    _refuse_while_running(host, row, "keep it")
    _stop_processes(host, row)
    title = host.manager.info(row.session_id).title if row.session_id else None
    result = await asyncio.to_thread(
        worktrees.keep_as_branch, row, f"dsh: {title or 'session ' + row.branch}"
    )
    await _closed(host, row)
    return result


async def discard(host: SessionHost, session_id: str | None, path: str | None) -> dict[str, Any]:
    """Remove the folder and the branch, uncommitted work included (the person chose this)."""
    row = find_worktree(host, session_id, path, "dsh/worktree/discard")
    _refuse_while_running(host, row, "discard it")
    _stop_processes(host, row)
    await asyncio.to_thread(worktrees.remove_worktree, row, delete_branch=True)
    await _closed(host, row)
    return {"branch": row.branch}


def _stop_processes(host: SessionHost, row: WorktreeRow) -> None:
    """A session's background processes work in the folder about to go."""
    hosted = host.sessions.get(row.session_id or "")
    if hosted is not None:
        hosted.stop_processes_now("person")


async def _closed(host: SessionHost, row: WorktreeRow) -> None:
    """After its folder went: a session keeps its worktree's record (opening it again then refuses,
    saying why, rather than working in the editor's folders) and stops being driven here; a worktree
    nobody's is forgotten."""
    if row.session_id is None:
        host.manager.store.forget_worktree(row.path)
    else:
        await host.close_session(row.session_id)
