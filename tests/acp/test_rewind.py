"""Issue 24.1 (ACP side): `/undo` and `/rewind N` as slash commands (the official SDK client), on the
host's rewind (protocol.md §15)."""

from __future__ import annotations

from pathlib import Path

from acp import text_block

from tests.acp.harness import AcpDaemon, acp_daemon, settle
from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.harness import tool_call_stream


def tool_then_done(call_id: str, tool: str, args: dict[str, str]) -> tuple[Reply, Reply]:
    return Reply.stream(tool_call_stream([(call_id, tool, args)])), Reply.stream(text_stream(["done"]))


async def run(d: AcpDaemon, sid: str, text: str) -> str:
    before = d.client.text(sid)
    response = await settle(d.conn.prompt(session_id=sid, prompt=[text_block(text)]))
    assert response.stop_reason == "end_turn"
    return d.client.text(sid)[len(before) :]


async def test_undo_and_rewind_take_back_files_and_the_conversation(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    fake.script(
        *tool_then_done(
            "call_1", "edit_file", {"path": "app.py", "old_string": "x = 1", "new_string": "x = 2"}
        ),
        *tool_then_done("call_2", "write_file", {"path": "notes.md", "content": "new\n"}),
        *tool_then_done(
            "call_3", "edit_file", {"path": "app.py", "old_string": "x = 1", "new_string": "x = 3"}
        ),
    )
    async with acp_daemon(tmp_path / "state", fake) as d:
        target = d.work / "app.py"
        target.write_text("x = 1\n")
        sid = await d.new_session()
        await d.wait_for(lambda: bool(d.client.updates(sid, "available_commands_update")))
        (advertised,) = d.client.updates(sid, "available_commands_update")
        assert {"undo", "rewind"} <= {c["name"] for c in advertised["availableCommands"]}

        assert "nothing to undo" in await run(d, sid, "/undo")
        await run(d, sid, "bump x")
        assert target.read_text() == "x = 2\n"
        said = await run(d, sid, "/undo")
        assert "Restored app.py" in said, said
        assert target.read_text() == "x = 1\n"
        requests = len(fake.requests)

        await run(d, sid, "write notes")  # turn 2 creates a file
        assert (d.work / "notes.md").read_text() == "new\n"
        listing = await run(d, sid, "/rewind")
        assert "1. bump x — app.py" in listing and "2. write notes — notes.md" in listing, listing
        said = await run(d, sid, "/rewind 2")
        assert "Deleted notes.md" in said and "back to before turn 2" in said, said
        assert not (d.work / "notes.md").exists()
        assert len(fake.requests) == requests + 2  # no command reached the model

        await run(d, sid, "bump x again")  # turn 3: the model no longer sees turn 2
        users = [m["content"] for m in fake.requests[-1].json["messages"] if m["role"] == "user"]
        assert "write notes" not in users and "bump x again" in users
        target.write_text("x = 3\nmine\n")  # the person changes the file after the agent did
        said = await run(d, sid, "/undo")
        assert "Nothing was rewound" in said and "app.py" in said and "/undo force" in said, said
        assert target.read_text() == "x = 3\nmine\n"
        assert "Restored app.py" in await run(d, sid, "/undo force")
        assert target.read_text() == "x = 1\n"
        assert "has not begun" in await run(d, sid, "/rewind 9")
        assert "Usage" in await run(d, sid, "/rewind two")
