"""A turn's diff, kept or undone by hunk, through the real daemon process and the fake provider
(protocol.md §15 "A turn's diff"): the live `turn/diff` as the turn edits and at its end, undoing one
of three hunks leaves the other two and the person's own later edit, a hunk the person changed since
is a named conflict with nothing written, the model is told what was undone before its next step,
and the diff (with what was kept and undone) is the same after a SIGKILL and after a rewind."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import zlib
from pathlib import Path
from typing import Any

import pytest
from pygls.exceptions import JsonRpcException

from tests.fakes.deepseek_server import FakeDeepSeek, Reply
from tests.server.harness import Daemon, start_daemon, stop_daemon, text_reply, tool_call_stream

ORIGINAL = [f"line {n}\n" for n in range(1, 13)]


def agents_version() -> list[str]:
    """Three separate changes: line 2, line 6 (and one added after it), line 10."""
    lines = list(ORIGINAL)
    lines[1] = "line 2 by the agent\n"
    lines[9] = "line 10 by the agent\n"
    lines[5:6] = ["line 6 by the agent\n", "a line the agent added\n"]
    return lines


def write(path: Path, content: str, call_id: str = "call_1") -> Reply:
    return Reply.stream(tool_call_stream([(call_id, "write_file", {"path": str(path), "content": content})]))


async def run_turn(daemon: Daemon, sid: str, text: str) -> None:
    done = len(daemon.of(sid, "turn/end"))
    await daemon.request("dsh/followup", {"sessionId": sid, "message": {"content": text}})
    await daemon.wait_idle_turn(sid, done + 1)


def user_texts(request_json: dict[str, Any]) -> list[str]:
    return [str(m["content"]) for m in request_json["messages"] if m["role"] == "user"]


async def test_undoing_one_of_three_hunks_keeps_the_others_and_the_persons_edit_across_a_kill_and_a_rewind(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    app, other = work / "app.py", work / "other.txt"
    app.write_text("".join(ORIGINAL))
    state = tmp_path / "state"
    d = await start_daemon(state, fake, apply_edit=False, root=work)
    fake.script(
        write(app, "".join(agents_version())),
        text_reply("three changes"),
        text_reply("noted"),
        write(other, "made in turn 3\n"),
        text_reply("another file"),
    )
    sid = await d.new_session(cwd=str(work))
    await run_turn(d, sid, "change app.py")

    # Live: after the edit, then final at the turn's end.
    await d.wait_for(lambda: any(e["data"]["final"] for e in d.of(sid, "turn/diff")))
    live = [e["data"] for e in d.of(sid, "turn/diff")]
    assert [x["final"] for x in live] == [False, True]
    assert live[-1]["files"] == [
        {
            "path": str(app),
            "status": "modified",
            "by": "edit",
            "added": 4,
            "removed": 3,
            "hunks": 3,
            "pending": 3,
        }
    ]
    assert all("seq" not in e for e in d.of(sid, "turn/diff"))

    diff = await d.request("dsh/turn/diff", {"sessionId": sid})
    assert diff["turn"] == 1 and diff["final"] is True
    (file,) = diff["files"]
    assert [
        (h["index"], h["oldStart"], h["oldLines"], h["newStart"], h["newLines"]) for h in file["hunks"]
    ] == [
        (1, 2, 1, 2, 1),
        (2, 6, 1, 6, 2),
        (3, 10, 1, 11, 1),
    ]
    assert file["hunks"][1]["diff"].startswith("@@ -3,7 +3,8 @@\n line 3\n")
    assert "-line 6\n+line 6 by the agent\n+a line the agent added\n" in file["hunks"][1]["diff"]

    # The person edits a line far from every hunk, then undoes hunk 2.
    person = agents_version()
    person[-1] = "line 12 as the person wrote it\n"
    app.write_text("".join(person))
    undone = await d.request("dsh/turn/undo", {"sessionId": sid, "turn": 1, "path": str(app), "hunks": [2]})
    assert undone["undone"] == [2] and undone["conflicts"] == [] and "noteId" in undone
    expected = list(person)
    expected[5:7] = ["line 6\n"]
    assert app.read_text() == "".join(expected)  # hunks 1 and 3 and the person's line stay

    # A hunk whose lines the person changed since is a conflict: nothing is written for it.
    changed = list(expected)
    changed[9] = "line 10, the person's version\n"
    app.write_text("".join(changed))
    refused = await d.request("dsh/turn/undo", {"sessionId": sid, "turn": 1, "path": str(app), "hunks": [3]})
    assert refused["undone"] == []
    assert [(c["path"], c["hunk"]) for c in refused["conflicts"]] == [(str(app), 3)]
    assert "changed since the turn" in refused["conflicts"][0]["reason"]
    assert app.read_text() == "".join(changed)
    again = await d.request("dsh/turn/undo", {"sessionId": sid, "turn": 1, "path": str(app), "hunks": [2]})
    assert again["undone"] == [] and again["conflicts"][0]["reason"] == "already undone"

    kept = await d.request("dsh/turn/keep", {"sessionId": sid, "turn": 1, "path": str(app), "hunks": [1]})
    assert kept == {"kept": [1]}
    reviewed = await d.request("dsh/turn/diff", {"sessionId": sid, "turn": 1})
    assert [h["state"] for h in reviewed["files"][0]["hunks"]] == ["kept", "undone", "pending"]
    assert [h["diff"] for h in reviewed["files"][0]["hunks"]] == [h["diff"] for h in file["hunks"]]
    assert [e["data"]["action"] for e in d.of(sid, "turn/review")] == ["undo", "keep"]
    assert all("seq" in e for e in d.of(sid, "turn/review"))

    # The model hears what was undone before its next step, once.
    await run_turn(d, sid, "go on")
    notes = [t for t in user_texts(fake.requests[-1].json) if "The person undid" in t]
    assert len(notes) == 1
    assert f"The person undid hunk 2 of {app} from turn 1" in notes[0]
    assert "+line 6 by the agent" in notes[0]

    # SIGKILL: the next daemon rebuilds exactly the same diff, states included.
    server = d.client._server
    assert server is not None
    os.kill(server.pid, signal.SIGKILL)
    await asyncio.wait_for(server.wait(), 15)
    with contextlib.suppress(Exception):
        await d.client.stop()
    d = await start_daemon(state, fake, apply_edit=False, root=work)
    await d.request("dsh/session/attach", {"sessionId": sid})
    assert await d.request("dsh/turn/diff", {"sessionId": sid, "turn": 1}) == reviewed

    # A rewind of a later turn leaves turn 1's diff as it was; the last kept turn is 2 again.
    await run_turn(d, sid, "now other.txt")
    assert other.read_text() == "made in turn 3\n"
    rewound = await d.request("dsh/session/rewind", {"sessionId": sid, "beforeTurn": 3})
    assert rewound["deleted"] == [str(other)] and rewound["conflicts"] == []
    assert await d.request("dsh/turn/diff", {"sessionId": sid, "turn": 1}) == reviewed
    assert await d.request("dsh/turn/diff", {"sessionId": sid}) == {"turn": 2, "files": [], "final": True}
    await stop_daemon(d)


async def test_a_rewind_after_an_undo_chains_it_and_restores_without_a_conflict(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """The undo is recorded as a change: a later rewind expects the file to hold what it wrote."""
    work = tmp_path / "work"
    work.mkdir()
    app = work / "app.py"
    app.write_text("".join(ORIGINAL))
    d = await start_daemon(tmp_path / "state", fake, apply_edit=False, root=work)
    fake.script(write(app, "".join(agents_version())), text_reply("done"))
    sid = await d.new_session(cwd=str(work))
    await run_turn(d, sid, "change app.py")
    undone = await d.request(
        "dsh/turn/undo", {"sessionId": sid, "turn": 1, "path": str(app), "hunks": [1, 3]}
    )
    assert undone["undone"] == [1, 3]
    before = await d.request("dsh/turn/diff", {"sessionId": sid, "turn": 1})
    rewound = await d.request("dsh/session/rewind", {"sessionId": sid, "beforeTurn": 1})
    assert rewound["conflicts"] == [] and rewound["restored"] == [str(app)]
    assert app.read_text() == "".join(ORIGINAL)
    # the rewind's own rows (at turn 1, the last turn) are not part of turn 1's diff
    assert await d.request("dsh/turn/diff", {"sessionId": sid, "turn": 1}) == before
    await stop_daemon(d)


async def test_undoing_a_created_file_deletes_it_and_bad_requests_are_typed(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    created = work / "new.txt"
    d = await start_daemon(tmp_path / "state", fake, apply_edit=False, root=work)
    fake.script(write(created, "fresh\n"), text_reply("created"))
    sid = await d.new_session(cwd=str(work))
    await run_turn(d, sid, "create it")
    diff = await d.request("dsh/turn/diff", {"sessionId": sid})
    assert diff["files"][0]["status"] == "created" and len(diff["files"][0]["hunks"]) == 1
    for params, code in [
        ({"turn": 1, "path": str(created), "hunks": [2]}, "invalid_params"),
        ({"turn": 1, "path": str(work / "never.txt")}, "invalid_params"),
        ({"turn": 5, "path": str(created)}, "invalid_params"),
    ]:
        with pytest.raises(JsonRpcException) as caught:
            await d.request("dsh/turn/undo", {"sessionId": sid, **params})
        assert caught.value.data["code"] == code, params
    assert created.exists()
    result = await d.request("dsh/turn/undo", {"sessionId": sid, "turn": 1, "path": str(created)})
    assert result["undone"] == [1] and not created.exists()
    await stop_daemon(d)


async def test_an_undo_goes_through_the_editor_when_it_applies_edits(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """The person can undo the undo in the editor: it is one `workspace/applyEdit`."""
    work = tmp_path / "work"
    work.mkdir()
    app = work / "app.py"
    app.write_text("".join(ORIGINAL))
    d = await start_daemon(tmp_path / "state", fake, apply_edit=True, root=work)

    def editor_saves(params: dict[str, Any]) -> dict[str, Any]:
        ((uri, edits),) = params["edit"]["changes"].items()
        Path(uri.removeprefix("file://")).write_text(edits[0]["newText"])
        return {"applied": True}

    d.on_apply_edit = editor_saves
    fake.script(write(app, "".join(agents_version())), text_reply("done"))
    sid = await d.new_session(cwd=str(work))
    await run_turn(d, sid, "change app.py")
    edits = len(d.applied_edits)
    undone = await d.request("dsh/turn/undo", {"sessionId": sid, "turn": 1, "path": str(app), "hunks": [3]})
    assert undone["undone"] == [3] and len(d.applied_edits) == edits + 1
    assert "line 10\n" in app.read_text() and "line 2 by the agent\n" in app.read_text()
    await stop_daemon(d)


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
async def test_a_file_a_command_changed_has_its_hunks_from_the_git_snapshots(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    from tests.server.test_rewind import call, git

    work = tmp_path / "work"
    work.mkdir()
    git(work, "init", "-q")
    tracked = work / "tracked.txt"
    tracked.write_text("one\ntwo\nthree\n")
    d = await start_daemon(tmp_path / "state", fake, apply_edit=False, root=work)
    command = "printf 'one\\nTWO\\nthree\\n' > tracked.txt && echo made > made.txt"
    fake.script(call("run_command", {"command": command}), text_reply("ran it"))
    sid = await d.new_session(cwd=str(work))
    await run_turn(d, sid, "run it")
    diff = await d.request("dsh/turn/diff", {"sessionId": sid})
    files = {f["path"]: f for f in diff["files"]}
    assert files[str(tracked)]["by"] == "command" and files[str(tracked)]["status"] == "modified"
    assert files[str(tracked)]["hunks"][0]["diff"] == "@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n"
    assert files[str(work / "made.txt")]["status"] == "created"
    undone = await d.request("dsh/turn/undo", {"sessionId": sid, "turn": 1, "path": str(tracked)})
    assert undone["undone"] == [1] and tracked.read_text() == "one\ntwo\nthree\n"
    await stop_daemon(d)


async def test_a_diff_whose_after_content_went_over_the_budget_says_so_and_undo_names_it(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    app = work / "app.py"
    app.write_text("".join(ORIGINAL))
    room = len(zlib.compress("".join(ORIGINAL).encode(), 1)) + 4  # the before fits, not the after too
    options = {"thinking": False, "tools": {"limits": {"checkpoint_bytes": room}}}
    d = await start_daemon(tmp_path / "state", fake, apply_edit=False, root=work, init_options=options)
    fake.script(write(app, "".join(agents_version())), text_reply("done"))
    sid = await d.new_session(cwd=str(work))
    await run_turn(d, sid, "change app.py")
    (file,) = (await d.request("dsh/turn/diff", {"sessionId": sid}))["files"]
    assert file["hunks"] == [] and file["status"] == "modified" and "not kept" in file["unavailable"]
    undone = await d.request("dsh/turn/undo", {"sessionId": sid, "turn": 1, "path": str(app)})
    assert undone["undone"] == [] and "not kept" in undone["conflicts"][0]["reason"]
    # a rewind still has what it needs: the before content was kept
    rewound = await d.request("dsh/session/rewind", {"sessionId": sid, "beforeTurn": 1})
    assert rewound["restored"] == [str(app)] and app.read_text() == "".join(ORIGINAL)
    await stop_daemon(d)
