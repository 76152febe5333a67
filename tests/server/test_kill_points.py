"""The crash soak at the write points of a fork, a rewind and a snapshot write (issue 32.5 and 32.9):
the real daemon SIGKILLs itself just before and just after each SQLite commit and each file rename
or unlink of that operation, one point per run (`tests/fakes/kill_points.py`), until a run completes.
After every kill the store holds what the design promises: a fork whole or not at all (never an
empty "… (fork)" session), each rewound file restored or untouched with the log saying which, and a
session that opens with or without its snapshot to the same state."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from dsh_daemon.agent.invariants import check_log
from dsh_daemon.host.manager import SessionManager
from dsh_daemon.model import events as ev
from dsh_daemon.session.checkpoints import CheckpointStore
from dsh_daemon.session.store import SessionStore
from tests.core.test_snapshot import derived_state
from tests.fakes.deepseek_server import FakeDeepSeek
from tests.server.harness import Daemon, start_daemon, stop_daemon, text_reply
from tests.server.test_rewind import edit, run_turn

MOST_POINTS = 40  # far more than any of these operations reaches: a loop that never ends is a failure


async def _run_until_killed(
    state: Path, fake: FakeDeepSeek, work: Path, kill_at: str, act: Callable[[Daemon], Awaitable[None]]
) -> bool:
    """`act` against the daemon that kills itself at `kill_at`, then a clean stop; whether it died."""
    d = await start_daemon(
        state,
        fake,
        apply_edit=False,
        root=work,
        module="tests.fakes.kill_points",
        env={"DSH_TEST_KILL_AT": kill_at},
    )
    server = d.client._server
    assert server is not None
    try:
        await asyncio.wait_for(act(d), 60)
        await stop_daemon(d)
    except Exception:
        await asyncio.wait_for(server.wait(), 15)
        assert server.returncode == -signal.SIGKILL, (kill_at, server.returncode)
        with contextlib.suppress(Exception):
            await d.client.stop()
        return True
    await asyncio.wait_for(server.wait(), 15)
    return server.returncode == -signal.SIGKILL


async def _two_turns(state: Path, fake: FakeDeepSeek, work: Path, first: Path, second: Path) -> str:
    """A session whose turn 1 edits two files (so it has checkpoints) and whose turn 2 only answers."""
    _write({first: "first before\n", second: "second before\n"})
    d = await start_daemon(state, fake, apply_edit=False, root=work)
    fake.script(
        edit(first, "before", "after"),
        edit(second, "before", "after", "call_2"),
        text_reply("both changed"),
        text_reply("answer two"),
    )
    sid = await d.new_session(cwd=str(work), title="Work")
    await run_turn(d, sid, "change both")
    await run_turn(d, sid, "prompt two")
    await stop_daemon(d)
    assert _read(first, second) == ["first after\n", "second after\n"]
    return sid


def _write(contents: dict[Path, str]) -> None:
    for path, text in contents.items():
        path.write_text(text)


def _read(*paths: Path) -> list[str | None]:
    return [path.read_text() if path.exists() else None for path in paths]


def _checkpoint_rows(store: SessionStore, session_id: str) -> list[tuple[object, ...]]:
    rows = CheckpointStore(store, 1 << 30).since_turn(session_id, 1)
    return [(r.turn, r.kind, r.path, r.before_hash, r.after_hash, r.dropped) for r in rows]


async def test_a_fork_killed_at_any_write_point_is_whole_or_absent(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    base = tmp_path / "base"
    sid = await _two_turns(base, fake, work, work / "a.txt", work / "b.txt")
    store = SessionStore(base)
    source = store.load_events(sid)
    copied = next(i for i, e in enumerate(source) if e.type == ev.TURN_START and e.data["turn"] == 2)
    source_checkpoints = [row for row in _checkpoint_rows(store, sid) if row[0] <= 1]
    assert source_checkpoints  # turn 1's edits
    store.close()

    async def fork(d: Daemon) -> None:
        await d.request("dsh/session/fork", {"sessionId": sid, "atTurn": 1})

    kills = whole = 0
    for point in range(MOST_POINTS):
        state = tmp_path / f"fork-{point}"
        shutil.copytree(base, state)
        killed = await _run_until_killed(state, fake, work, f"fork:{point}", fork)
        store = SessionStore(state)
        forks = [s for s in store.list_sessions() if s.session_id != sid]
        if forks:
            (info,) = forks
            events = store.load_events(info.session_id)
            assert len(events) > copied and info.last_seq == len(events) - 1, (point, info)
            assert [(e.type, e.data) for e in events[:copied]] == [
                (e.type, e.data) for e in source[:copied]
            ], point
            # Its title, then the line that says where it came from (issue 36.2), in the same transaction.
            assert [e.type for e in events[-2:]] == [ev.SESSION_TITLE, ev.SESSION_NOTICE], point
            assert events[-1].data["forkOf"] == {"sessionId": sid, "atTurn": 1, "title": "Work"}
            assert info.title == "Work (fork)"
            assert _checkpoint_rows(store, info.session_id) == source_checkpoints, point
            checkpoints = CheckpointStore(store, 1 << 30)
            for row in source_checkpoints:
                assert row[3] is None or checkpoints.blob(info.session_id, str(row[3])) is not None
            store.close()
            manager = SessionManager(state)
            agent = manager.open(info.session_id)
            assert check_log(agent.log.events, agent.inbox.pending_ids()) == [], point
            assert agent.turn == 1 and len(agent.inbox) == 0
            await manager.close()
            whole += 1
        else:
            assert killed, point  # a fork that was answered is there
            store.close()
        if not killed:
            break
        kills += 1
    else:
        raise AssertionError(f"the fork was still being killed after {MOST_POINTS} points")
    assert kills >= 2 and whole >= 2  # killed before its commit (absent) and after it (whole)


def _rewinds(store: SessionStore, session_id: str) -> tuple[list[dict[str, object]], int]:
    """The session's `rewind/files` events' data, and how many `conversation/cut` it holds."""
    events = store.load_events(session_id)
    rewinds = [dict(e.data) for e in events if e.type == ev.REWIND_FILES]
    return rewinds, sum(e.type == ev.CONVERSATION_CUT for e in events)


@pytest.mark.slow  # a daemon started per write point, and again per interrupted rewind
async def test_a_rewind_killed_at_any_write_point_leaves_each_file_restored_or_untouched_and_says_which(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    first, second = work / "a.txt", work / "b.txt"
    base = tmp_path / "base"
    sid = await _two_turns(base, fake, work, first, second)
    before = ["first before\n", "second before\n"]
    after = ["first after\n", "second after\n"]

    async def rewind(d: Daemon) -> None:
        result = await d.request("dsh/session/rewind", {"sessionId": sid, "beforeTurn": 1})
        assert result["restored"] == [str(first), str(second)] and result["conflicts"] == []

    kills = interrupted = 0
    for point in range(MOST_POINTS):
        state = tmp_path / f"rewind-{point}"
        shutil.copytree(base, state)
        _write({first: after[0], second: after[1]})
        killed = await _run_until_killed(state, fake, work, f"rewind:{point}", rewind)
        on_disk = _read(first, second)
        assert all(now in (old, new) for now, old, new in zip(on_disk, before, after, strict=True)), point
        store = SessionStore(state)
        rewinds, cuts = _rewinds(store, sid)
        store.close()
        phases = [r["phase"] for r in rewinds]
        if phases == ["started", "done"]:
            assert on_disk == before and cuts == 1, point
        elif phases == ["started"]:
            assert killed and cuts == 0, point  # the cut comes with `done` only
            # Opened again, the log says which planned file holds its restored content; running the
            # rewind again completes it.
            d = await start_daemon(state, fake, apply_edit=False, root=work)
            await d.request("dsh/session/attach", {"sessionId": sid})
            said = d.of(sid, "rewind/files")[-1]["data"]
            assert said["phase"] == "interrupted", point
            restored = [
                str(p) for p, now, old in zip((first, second), on_disk, before, strict=True) if now == old
            ]
            untouched = [
                str(p) for p, now, old in zip((first, second), on_disk, before, strict=True) if now != old
            ]
            assert (said["restored"], said["untouched"]) == (restored, untouched), point
            again = await d.request("dsh/session/rewind", {"sessionId": sid, "beforeTurn": 1})
            assert again["conflicts"] == [] and _read(first, second) == before, point
            await stop_daemon(d)
            interrupted += 1
        else:
            assert killed and phases == [] and on_disk == after and cuts == 0, (point, phases)
        if not killed:
            break
        kills += 1
    else:
        raise AssertionError(f"the rewind was still being killed after {MOST_POINTS} points")
    assert kills >= 6 and interrupted >= 3, (kills, interrupted)


@pytest.mark.slow  # a daemon started per write point, and again per interrupted rewind
async def test_a_snapshot_write_killed_at_any_point_opens_to_the_state_the_log_derives(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    base = tmp_path / "base"
    sid = await _two_turns(base, fake, work, work / "a.txt", work / "b.txt")

    async def turn(d: Daemon) -> None:
        fake.script(text_reply("answer three"))
        await d.request("dsh/session/attach", {"sessionId": sid})
        await run_turn(d, sid, "prompt three")

    kills = snapshots = 0
    for point in range(MOST_POINTS):
        state = tmp_path / f"snapshot-{point}"
        shutil.copytree(base, state)
        killed = await _run_until_killed(state, fake, work, f"snapshot:{point}", turn)
        without = tmp_path / f"snapshot-{point}-dropped"
        shutil.copytree(state, without)
        store = SessionStore(without)
        store.drop_snapshot(sid)
        store.close()
        states = []
        for opened in (state, without):
            manager = SessionManager(opened)
            agent = manager.open(sid)
            assert check_log(agent.log.events, agent.inbox.pending_ids()) == [], point
            states.append((derived_state(agent), agent.log.events.base))
            await manager.close()
        assert states[0][0] == states[1][0], point
        snapshots += states[0][1] > 0  # opened from a snapshot the kill left whole
        if not killed:
            break
        kills += 1
    else:
        raise AssertionError(f"the snapshot write was still being killed after {MOST_POINTS} points")
    assert kills >= 2 and snapshots >= 2, (kills, snapshots)
