"""Checkpoints, rewind and fork through the real daemon process (protocol.md §15): edited and created
files restored or deleted, a file changed by run_command restored from a git snapshot (the
repository's index, HEAD and stash untouched), a conflict refused, the conversation cut so the next
request holds exactly the kept history, a fork, a rewind refused while a turn runs, and a SIGKILL in
the middle of a rewind leaving each file restored or untouched with the log saying which."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import stat
import subprocess
import zlib
from pathlib import Path
from typing import Any

import pytest
from pygls.exceptions import JsonRpcException

from tests.fakes.deepseek_server import FakeDeepSeek, Reply
from tests.server.harness import Daemon, start_daemon, stop_daemon, text_reply, tool_call_stream


def call(name: str, args: dict[str, Any], call_id: str = "call_1") -> Reply:
    return Reply.stream(tool_call_stream([(call_id, name, args)]))


def edit(path: Path, old: str, new: str, call_id: str = "call_1") -> Reply:
    return call("edit_file", {"path": str(path), "old_string": old, "new_string": new}, call_id)


def write(path: Path, content: str, call_id: str = "call_1") -> Reply:
    return call("write_file", {"path": str(path), "content": content}, call_id)


async def run_turn(daemon: Daemon, sid: str, text: str) -> None:
    done = len(daemon.of(sid, "turn/end"))
    await daemon.request("dsh/followup", {"sessionId": sid, "message": {"content": text}})
    await daemon.wait_idle_turn(sid, done + 1)


def user_texts(request_json: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request_json["messages"] if m["role"] == "user"]


def roles(request_json: dict[str, Any]) -> list[str]:
    return [m["role"] for m in request_json["messages"] if m["role"] != "system"]


async def error_of(daemon: Daemon, method: str, params: dict[str, Any]) -> Any:
    with pytest.raises(JsonRpcException) as caught:
        await daemon.request(method, params)
    return caught.value


async def test_rewind_restores_edits_deletes_created_files_and_cuts_the_conversation(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    kept, created = work / "a.txt", work / "new.txt"
    kept.write_text("one\n")
    d = await start_daemon(tmp_path / "state", fake, apply_edit=False, root=work)
    fake.script(
        edit(kept, "one", "two"),
        text_reply("first done"),
        write(created, "brand new\n"),
        edit(kept, "two", "three", "call_2"),
        text_reply("second done"),
        text_reply("after the rewind"),
    )
    sid = await d.new_session(cwd=str(work))
    await run_turn(d, sid, "first prompt")
    await run_turn(d, sid, "second prompt")
    assert kept.read_text() == "three\n" and created.read_text() == "brand new\n"

    listed = await d.request("dsh/session/checkpoints", {"sessionId": sid})
    by_turn = {t["turn"]: {f["path"]: f for f in t["files"]} for t in listed["turns"]}
    assert set(by_turn) == {1, 2}
    assert by_turn[1][str(kept)]["created"] is False
    assert by_turn[2][str(created)]["created"] is True and by_turn[2][str(created)]["by"] == "edit"
    # the befores and the afters (a turn's diff reads them), each content once, compressed
    contents = [b"one\n", b"two\n", b"brand new\n", b"three\n"]
    assert listed["storedBytes"] == sum(len(zlib.compress(c, 1)) for c in contents)

    result = await d.request("dsh/session/rewind", {"sessionId": sid, "beforeTurn": 2})
    assert result["restored"] == [str(kept)] and result["deleted"] == [str(created)]
    assert result["conflicts"] == [] and result["notRestorable"] == []
    assert kept.read_text() == "two\n" and not created.exists()

    phases = [e["data"]["phase"] for e in d.of(sid, "rewind/files")]
    assert phases == ["started", "done"]
    (cut,) = d.of(sid, "conversation/cut")
    assert cut["seq"] == result["cutSeq"] and cut["data"] == {"beforeTurn": 2}

    # The next request holds turn 1 and the new prompt: turn 2 is gone from the history.
    await run_turn(d, sid, "third prompt")
    last = fake.requests[-1].json
    assert user_texts(last) == ["first prompt", "third prompt"]
    first_turn = fake.requests[1].json  # turn 1's second request: prompt, tool call, result
    assert last["messages"][: len(first_turn["messages"]) + 1] == [
        *first_turn["messages"],
        {"role": "assistant", "content": "first done"},
    ]
    assert roles(last) == ["user", "assistant", "tool", "assistant", "user"]

    # Rewinding all the way restores the file as it was before turn 1 (the rewind itself expected).
    again = await d.request("dsh/session/rewind", {"sessionId": sid, "beforeTurn": 1, "conversation": False})
    assert again["restored"] == [str(kept)] and kept.read_text() == "one\n"
    assert "cutSeq" not in again
    await stop_daemon(d)


def git(work: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t"}
    env |= {"GIT_COMMITTER_EMAIL": "t@t", "HOME": str(work)}
    return subprocess.run(
        ["git", "-C", str(work), *args], capture_output=True, text=True, check=True, env=env
    ).stdout


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
async def test_a_file_changed_by_run_command_is_restored_from_a_git_snapshot(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    git(work, "init", "-q")
    tracked = work / "tracked.txt"
    tracked.write_text("committed\n")
    git(work, "add", "tracked.txt")
    git(work, "commit", "-q", "-m", "init")
    tracked.write_text("committed\nand not yet staged\n")  # the person's work in progress
    (work / "staged.txt").write_text("staged\n")
    git(work, "add", "staged.txt")
    before = (
        git(work, "rev-parse", "HEAD"),
        (work / ".git" / "index").read_bytes(),
        git(work, "stash", "list"),
    )

    d = await start_daemon(tmp_path / "state", fake, apply_edit=False, root=work)
    command = "echo overwritten > tracked.txt && echo made > made.txt"
    fake.script(call("run_command", {"command": command}), text_reply("ran it"))
    sid = await d.new_session(cwd=str(work))
    await run_turn(d, sid, "run it")
    assert tracked.read_text() == "overwritten\n" and (work / "made.txt").exists()
    assert (
        git(work, "rev-parse", "HEAD"),
        (work / ".git" / "index").read_bytes(),
        git(work, "stash", "list"),
    ) == before

    listed = await d.request("dsh/session/checkpoints", {"sessionId": sid})
    (turn,) = listed["turns"]
    assert turn["commands"] == 1 and "unrestorableCommands" not in turn
    assert {(f["path"], f["created"], f["by"]) for f in turn["files"]} == {
        (str(tracked), False, "command"),
        (str(work / "made.txt"), True, "command"),
    }

    result = await d.request("dsh/session/rewind", {"sessionId": sid, "beforeTurn": 1, "conversation": False})
    assert result["restored"] == [str(tracked)] and result["deleted"] == [str(work / "made.txt")]
    assert tracked.read_text() == "committed\nand not yet staged\n" and not (work / "made.txt").exists()
    assert (
        git(work, "rev-parse", "HEAD"),
        (work / ".git" / "index").read_bytes(),
        git(work, "stash", "list"),
    ) == before
    await stop_daemon(d)


async def test_without_git_a_rewind_says_what_commands_changed_cannot_be_restored(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    d = await start_daemon(
        tmp_path / "state", fake, apply_edit=False, root=work, env={"GIT_CEILING_DIRECTORIES": str(tmp_path)}
    )
    fake.script(call("run_command", {"command": "echo x > out.txt"}), text_reply("ran"))
    sid = await d.new_session(cwd=str(work))
    await run_turn(d, sid, "run")
    listed = await d.request("dsh/session/checkpoints", {"sessionId": sid})
    assert listed["turns"] == [{"turn": 1, "files": [], "commands": 1, "unrestorableCommands": 1}]
    result = await d.request("dsh/session/rewind", {"sessionId": sid, "beforeTurn": 1, "conversation": False})
    (problem,) = result["notRestorable"]
    assert problem["turn"] == 1 and "outside a git work tree" in problem["reason"]
    assert (work / "out.txt").exists()
    await stop_daemon(d)


async def test_a_file_the_person_changed_after_the_agent_is_a_conflict_unless_forced(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    target = work / "c.txt"
    target.write_text("agent will change this\n")
    d = await start_daemon(tmp_path / "state", fake, apply_edit=False, root=work)
    fake.script(edit(target, "will change", "changed"), text_reply("done"))
    sid = await d.new_session(cwd=str(work))
    await run_turn(d, sid, "change it")
    target.write_text("agent changed this\nand the person added a line\n")

    result = await d.request("dsh/session/rewind", {"sessionId": sid, "beforeTurn": 1})
    (conflict,) = result["conflicts"]
    assert conflict["path"] == str(target) and conflict["turn"] == 1
    assert result["restored"] == [] and "cutSeq" not in result
    assert target.read_text() == "agent changed this\nand the person added a line\n"
    assert d.of(sid, "rewind/files") == [] and d.of(sid, "conversation/cut") == []

    forced = await d.request("dsh/session/rewind", {"sessionId": sid, "beforeTurn": 1, "force": True})
    assert forced["restored"] == [str(target)] and forced["conflicts"] == []
    assert target.read_text() == "agent will change this\n"
    await stop_daemon(d)


async def test_a_fifo_put_in_place_of_an_edited_file_is_left_alone_and_the_rewind_answers(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """Issue 32 item 3: a rewind reads what is at each path through the one safe reader; a FIFO there
    used to block the rewind forever. It is named in `notRestorable` and left alone, even with force."""
    work = tmp_path / "work"
    work.mkdir()
    target = work / "c.txt"
    target.write_text("agent will change this\n")
    d = await start_daemon(tmp_path / "state", fake, apply_edit=False, root=work)
    fake.script(edit(target, "will change", "changed"), text_reply("done"))
    sid = await d.new_session(cwd=str(work))
    await run_turn(d, sid, "change it")
    target.unlink()
    os.mkfifo(target)
    try:
        for force in (False, True):
            params = {"sessionId": sid, "beforeTurn": 1, "force": force}
            result = await asyncio.wait_for(d.request("dsh/session/rewind", params), 60)
            (problem,) = result["notRestorable"]
            assert problem["path"] == str(target) and problem["turn"] == 1
            assert "is not a regular file (a FIFO)" in problem["reason"], problem
            assert result["restored"] == [] and result["conflicts"] == []
    except BaseException:
        os.kill(d.client._server.pid, signal.SIGKILL)  # type: ignore[union-attr]  # stuck on the FIFO
        raise
    assert stat.S_ISFIFO(target.lstat().st_mode)
    await stop_daemon(d)


async def test_a_change_the_person_made_between_two_agent_edits_is_a_conflict_unless_forced(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """The agent edits, the person edits the same file, the agent edits again: the file holds what
    the agent's last change left, but restoring the content before the first would drop the person's
    line, so the rewind names the conflict and writes nothing; forced, it restores."""
    work = tmp_path / "work"
    work.mkdir()
    target = work / "shared.txt"
    target.write_text("one\n")
    d = await start_daemon(tmp_path / "state", fake, apply_edit=False, root=work)
    fake.script(
        edit(target, "one", "two"),
        text_reply("first"),
        edit(target, "two", "three"),
        text_reply("second"),
    )
    sid = await d.new_session(cwd=str(work))
    await run_turn(d, sid, "first edit")
    target.write_text("two\nthe person's line\n")
    await run_turn(d, sid, "second edit")
    assert target.read_text() == "three\nthe person's line\n"

    result = await d.request("dsh/session/rewind", {"sessionId": sid, "beforeTurn": 1})
    (conflict,) = result["conflicts"]
    assert conflict["path"] == str(target) and conflict["turn"] == 2
    assert "between the agent's changes to it in turn 1 and turn 2" in conflict["reason"]
    assert result["restored"] == [] and "cutSeq" not in result
    assert target.read_text() == "three\nthe person's line\n"
    assert d.of(sid, "rewind/files") == [] and d.of(sid, "conversation/cut") == []

    # Rewinding only the second turn keeps the person's line: no conflict there.
    second = await d.request("dsh/session/rewind", {"sessionId": sid, "beforeTurn": 2, "conversation": False})
    assert second["conflicts"] == [] and target.read_text() == "two\nthe person's line\n"

    forced = await d.request("dsh/session/rewind", {"sessionId": sid, "beforeTurn": 1, "force": True})
    assert forced["restored"] == [str(target)] and forced["conflicts"] == []
    assert "wroteNoFile" not in forced and forced["cutSeq"] == d.of(sid, "conversation/cut")[-1]["seq"]
    assert target.read_text() == "one\n"
    await stop_daemon(d)


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
async def test_an_edit_then_a_command_on_the_same_file_chain_and_a_change_between_them_conflicts(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """An edit's sha256 and a command's git blob are compared by content: an edit followed by a
    command connects (no false conflict); the person's change between them is a conflict."""
    work = tmp_path / "work"
    work.mkdir()
    git(work, "init", "-q")
    target = work / "mixed.txt"
    target.write_text("one\n")
    d = await start_daemon(tmp_path / "state", fake, apply_edit=False, root=work)
    fake.script(
        edit(target, "one", "two"),
        text_reply("edited"),
        call("run_command", {"command": "echo ran >> mixed.txt"}),
        text_reply("ran"),
        edit(target, "one", "two"),
        text_reply("edited again"),
        call("run_command", {"command": "echo ran >> mixed.txt"}),
        text_reply("ran again"),
    )
    sid = await d.new_session(cwd=str(work))
    await run_turn(d, sid, "edit")
    await run_turn(d, sid, "run")
    assert target.read_text() == "two\nran\n"
    clean = await d.request("dsh/session/rewind", {"sessionId": sid, "beforeTurn": 1, "conversation": False})
    assert clean["conflicts"] == [] and clean["restored"] == [str(target)]
    assert target.read_text() == "one\n"

    await run_turn(d, sid, "edit again")
    target.write_text("two\nthe person's line\n")
    await run_turn(d, sid, "run again")
    result = await d.request("dsh/session/rewind", {"sessionId": sid, "beforeTurn": 3, "conversation": False})
    (conflict,) = result["conflicts"]
    assert conflict["path"] == str(target) and conflict["turn"] == 4
    assert target.read_text() == "two\nthe person's line\nran\n"
    await stop_daemon(d)


async def test_a_forced_rewind_that_wrote_no_file_says_so_and_reports_the_cut(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """The editor refuses every restoring edit: the forced rewind writes nothing, yet the conversation
    is cut as asked; the reply says no file was written and gives the cut's seq."""
    work = tmp_path / "work"
    work.mkdir()
    target = work / "e.txt"
    target.write_text("before\n")
    d = await start_daemon(tmp_path / "state", fake, apply_edit=True, root=work)

    def editor_saves(params: dict[str, Any]) -> dict[str, Any]:
        ((uri, edits),) = params["edit"]["changes"].items()
        Path(uri.removeprefix("file://")).write_text(edits[0]["newText"])
        return {"applied": True}

    d.on_apply_edit = editor_saves
    fake.script(edit(target, "before", "after"), text_reply("changed"))
    sid = await d.new_session(cwd=str(work))
    await run_turn(d, sid, "change it")
    target.write_text("after\nand the person's line\n")  # a conflict, forced below

    d.on_apply_edit = lambda params: {"applied": False, "failureReason": "the person said no"}
    result = await d.request("dsh/session/rewind", {"sessionId": sid, "beforeTurn": 1, "force": True})
    assert result["restored"] == [] and result["deleted"] == [] and result["wroteNoFile"] is True
    (failed,) = result["notRestorable"]
    assert failed["path"] == str(target) and failed["reason"].startswith("not written")
    (cut,) = d.of(sid, "conversation/cut")
    assert result["cutSeq"] == cut["seq"] and cut["data"] == {"beforeTurn": 1}
    done = d.of(sid, "rewind/files")[-1]["data"]
    assert done["phase"] == "done" and done["restored"] == [] and done["failed"][0]["path"] == str(target)
    assert target.read_text() == "after\nand the person's line\n"
    await stop_daemon(d)


async def test_a_rewind_is_refused_while_a_turn_runs_and_the_queue_stays(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    d = await start_daemon(tmp_path / "state", fake, apply_edit=False, root=work)
    asked = asyncio.Event()
    release = asyncio.Event()

    async def hold(params: dict[str, Any]) -> dict[str, Any]:
        asked.set()
        await release.wait()
        return {"outcome": "reject"}

    d.on_permission = hold
    fake.script(text_reply("one"), write(work / "x.txt", "x\n"), text_reply("two"), text_reply("three"))
    sid = await d.new_session(cwd=str(work))
    await run_turn(d, sid, "first")
    await d.request("dsh/followup", {"sessionId": sid, "message": {"content": "second"}})
    await asyncio.wait_for(asked.wait(), 15)
    await d.request("dsh/followup", {"sessionId": sid, "message": {"content": "queued"}})
    error = await error_of(d, "dsh/session/rewind", {"sessionId": sid, "beforeTurn": 1})
    assert error.data["code"] == "session_busy" and "stop the turn first" in error.message
    inbox = await d.request("dsh/inbox/list", {"sessionId": sid})
    assert [i["content"][0]["text"] for i in inbox["nextTurn"]] == ["queued"]
    release.set()
    await d.wait_idle_turn(sid, 3)
    await stop_daemon(d)


async def test_a_fork_holds_exactly_the_kept_history_and_leaves_the_original(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    d = await start_daemon(tmp_path / "state", fake, apply_edit=False, root=work)
    fake.script(text_reply("answer one"), text_reply("answer two"), text_reply("forked answer"))
    sid = await d.new_session(cwd=str(work), title="Work")
    await run_turn(d, sid, "prompt one")
    await run_turn(d, sid, "prompt two")

    forked = await d.request(
        "dsh/session/fork", {"sessionId": sid, "atTurn": 1, "message": {"content": "forked prompt"}}
    )
    fork_id = forked["sessionId"]
    assert fork_id != sid
    attached = await d.request("dsh/session/attach", {"sessionId": fork_id})
    # Turn 1 replayed, then the forked prompt's turn. That turn starts with the fork, before this
    # attach: on a loaded machine it has ended (and its live `agent/status idle` gone by) before the
    # attach is answered, so its durable turn/end is what is waited for, not a live status.
    await d.wait_for(lambda: len(d.of(fork_id, "turn/end")) >= 2)
    assert attached["status"] in ("idle", "running")
    request = fake.requests[-1].json
    assert [(m["role"], m["content"]) for m in request["messages"] if m["role"] != "system"] == [
        ("user", "prompt one"),
        ("assistant", "answer one"),
        ("user", "forked prompt"),
    ]
    sessions = {s["sessionId"]: s for s in (await d.request("dsh/session/list", {}))["sessions"]}
    assert sessions[fork_id]["title"] == "Work (fork)" and sessions[sid]["title"] == "Work"
    transcript = await d.request("dsh/session/transcript", {"sessionId": sid})
    assert len(transcript["turns"]) == 2  # the original keeps both turns

    error = await error_of(d, "dsh/session/fork", {"sessionId": sid, "atTurn": 5})
    assert error.data["code"] == "invalid_params"
    await stop_daemon(d)


async def test_sigkill_in_the_middle_of_a_rewind_leaves_each_file_restored_or_untouched(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """The editor applies the first restored file and the daemon is killed while it waits for the
    second: reopened, the log says which planned file was restored and which was not."""
    work = tmp_path / "work"
    work.mkdir()
    first, second = work / "first.txt", work / "second.txt"
    first.write_text("first before\n")
    second.write_text("second before\n")
    state = tmp_path / "state"
    d = await start_daemon(state, fake, apply_edit=True, root=work)

    def editor_saves(params: dict[str, Any]) -> dict[str, Any]:
        ((uri, edits),) = params["edit"]["changes"].items()
        path = Path(uri.removeprefix("file://"))
        path.write_text(edits[0]["newText"])  # an editor that saves what it applies
        return {"applied": True}

    d.on_apply_edit = editor_saves
    fake.script(
        edit(first, "before", "after"),
        edit(second, "before", "after", "call_2"),
        text_reply("both changed"),
    )
    sid = await d.new_session(cwd=str(work))
    await run_turn(d, sid, "change both")
    assert first.read_text() == "first after\n" and second.read_text() == "second after\n"

    server = d.client._server
    assert server is not None
    applied = len(d.applied_edits)

    def kill_on_the_second(params: dict[str, Any]) -> dict[str, Any]:
        if len(d.applied_edits) - applied == 1:
            return editor_saves(params)
        os.kill(server.pid, signal.SIGKILL)  # the daemon dies waiting for this answer
        return {"applied": False}

    d.on_apply_edit = kill_on_the_second
    with pytest.raises(Exception):  # noqa: B017 - the connection dies with the daemon
        await asyncio.wait_for(d.request("dsh/session/rewind", {"sessionId": sid, "beforeTurn": 1}), 15)
    await asyncio.wait_for(server.wait(), 15)
    with contextlib.suppress(Exception):
        await d.client.stop()
    assert first.read_text() == "first before\n" and second.read_text() == "second after\n"

    again = await start_daemon(state, fake, apply_edit=False, root=work)
    await again.request("dsh/session/attach", {"sessionId": sid})
    rewinds = [e["data"] for e in again.of(sid, "rewind/files")]
    assert [r["phase"] for r in rewinds] == ["started", "interrupted"]
    assert rewinds[1]["restored"] == [str(first)] and rewinds[1]["untouched"] == [str(second)]
    assert again.of(sid, "conversation/cut") == []  # the cut comes with `done` only

    # Running it again finishes it: only the untouched file is left to restore.
    result = await again.request("dsh/session/rewind", {"sessionId": sid, "beforeTurn": 1})
    assert result["restored"] == [str(second)] and result["conflicts"] == []
    assert first.read_text() == "first before\n" and second.read_text() == "second before\n"
    await stop_daemon(again)


async def test_over_the_budget_the_oldest_checkpoint_is_dropped_and_a_rewind_says_so(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    target = work / "d.txt"
    first = "".join(chr(0x41 + (i * 7) % 26) + str(i) for i in range(40)) + "\n"  # compresses little
    target.write_text(first)
    stored_first = len(zlib.compress(first.encode(), 1))
    options = {"thinking": False, "tools": {"limits": {"checkpoint_bytes": stored_first + 40}}}
    d = await start_daemon(tmp_path / "state", fake, apply_edit=False, root=work, init_options=options)
    fake.script(
        edit(target, "A0", "turn-one"),
        text_reply("one"),
        edit(target, "turn-one", "turn-two"),
        text_reply("two"),
    )
    sid = await d.new_session(cwd=str(work))
    await run_turn(d, sid, "first")
    await run_turn(d, sid, "second")

    listed = await d.request("dsh/session/checkpoints", {"sessionId": sid})
    files = {t["turn"]: t["files"][0] for t in listed["turns"]}
    assert files[1].get("dropped") is True and "dropped" not in files[2]
    assert listed["storedBytes"] <= listed["maxBytes"] == stored_first + 40

    lost = await d.request("dsh/session/rewind", {"sessionId": sid, "beforeTurn": 1, "conversation": False})
    (problem,) = lost["notRestorable"]
    assert problem["path"] == str(target) and problem["turn"] == 1 and "budget" in problem["reason"]
    assert lost["restored"] == [] and "turn-two" in target.read_text()

    kept = await d.request("dsh/session/rewind", {"sessionId": sid, "beforeTurn": 2, "conversation": False})
    assert kept["restored"] == [str(target)] and "turn-one" in target.read_text()
    await stop_daemon(d)


async def test_after_a_rewind_that_cuts_the_conversation_the_model_hears_no_stale_file_notice(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """The files a rewind wrote are what the kept history saw (or never saw): no "deleted since you
    read it" about a file a cut turn created. A files-only rewind keeps the turns, so the model is
    told its file changed."""
    work = tmp_path / "work"
    work.mkdir()
    kept, created = work / "a.txt", work / "new.txt"
    kept.write_text("one\n")
    d = await start_daemon(tmp_path / "state", fake, apply_edit=False, root=work)
    fake.script(
        call("read_file", {"path": str(kept)}),
        text_reply("read it"),
        write(created, "brand new\n"),
        edit(kept, "one", "two", "call_2"),
        text_reply("second done"),
        call("list_dir", {"path": str(work)}),
        text_reply("listed"),
        write(created, "again\n"),
        text_reply("written"),
        call("list_dir", {"path": str(work)}),
        text_reply("listed again"),
    )
    sid = await d.new_session(cwd=str(work))
    await run_turn(d, sid, "read a")
    await run_turn(d, sid, "make new and edit a")
    await d.request("dsh/session/rewind", {"sessionId": sid, "beforeTurn": 2})
    assert not created.exists() and kept.read_text() == "one\n"
    await run_turn(d, sid, "list")
    after_tool = "\n".join(user_texts(fake.requests[-1].json))
    assert "since you read it" not in after_tool

    # files only: the turn that wrote new.txt stays in the history, so its removal is news
    await run_turn(d, sid, "write new again")
    await d.request("dsh/session/rewind", {"sessionId": sid, "beforeTurn": 4, "conversation": False})
    assert not created.exists()
    await run_turn(d, sid, "list again")
    assert "new.txt was deleted since you read it" in "\n".join(user_texts(fake.requests[-1].json))
    await stop_daemon(d)
