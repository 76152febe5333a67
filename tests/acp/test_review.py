"""`/review` over ACP (the official SDK client) on a real git repository: the review turn runs inside
the prompt, each finding shows as its `report_finding` tool call with the file and line in
`locations` and the body and suggested fix in its content, a refused finding is a failed call, and
`session/load` replays the review as the command typed, with the findings' locations again."""

from __future__ import annotations

from pathlib import Path

from acp import text_block

from tests.acp.harness import acp_daemon, settle
from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.harness import tool_call_stream
from tests.server.test_review import finding, repo_with_changes


async def test_review_command_shows_findings_as_tool_calls_with_locations(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    repo = tmp_path / "repo"
    repo_with_changes(repo)
    fake.script(
        Reply.stream(
            tool_call_stream(
                [finding("call_1"), finding("call_2", path="../elsewhere.py", startLine=1, endLine=1)]
            )
        ),
        Reply.stream(text_stream(["One finding."])),
    )
    async with acp_daemon(tmp_path / "state", fake) as d:
        sid = await d.new_session(cwd=repo)
        await d.wait_for(lambda: bool(d.client.updates(sid, "available_commands_update")))
        (advertised,) = d.client.updates(sid, "available_commands_update")
        assert "review" in {c["name"] for c in advertised["availableCommands"]}

        response = await settle(d.conn.prompt(session_id=sid, prompt=[text_block("/review look at math")]))
        assert response.stop_reason == "end_turn"
        said = d.client.text(sid)
        assert said.startswith("Reviewing 2 changed files.") and "One finding." in said
        assert said.endswith("Review finished: 1 finding.")
        assert "look at math" in fake.requests[0].json["messages"][-1]["content"]

        calls = [u for u in d.client.updates(sid, "tool_call")]
        assert [c["title"] for c in calls] == [
            "error: Division by zero on an empty list (app.py:2)",
            "error: Division by zero on an empty list (../elsewhere.py:1)",
        ]
        app = str((repo / "app.py").resolve())
        assert calls[0]["locations"] == [{"path": app, "line": 2}] and calls[0]["kind"] == "think"
        ends = {
            u["toolCallId"]: u
            for u in d.client.updates(sid, "tool_call_update")
            if u.get("status") in ("completed", "failed")
        }
        done = ends[calls[0]["toolCallId"]]
        assert done["status"] == "completed"
        texts = [c["content"]["text"] for c in done["content"] if c["type"] == "content"]
        assert texts[0].startswith("error app.py:2: Division by zero on an empty list\n\nlen(xs) is 0")
        (diff,) = [c for c in done["content"] if c["type"] == "diff"]
        assert diff["path"] == app and "max(len(xs), 1)" in diff["newText"]
        refused = ends[calls[1]["toolCallId"]]
        assert refused["status"] == "failed" and refused["rawOutput"]["error"]["code"] == "OUTSIDE_WORKSPACE"

        # Loaded again: the review shows as the command typed (not the diff), and its finding's place.
        before = len(d.client.updates(sid))
        await d.conn.load_session(session_id=sid, cwd=str(repo), mcp_servers=[])
        replayed = d.client.updates(sid)[before:]
        users = [u["content"]["text"] for u in replayed if u["sessionUpdate"] == "user_message_chunk"]
        assert users == ["/review look at math"]
        located = [u for u in replayed if u["sessionUpdate"] == "tool_call_update" and u.get("locations")]
        assert located == [
            {"sessionUpdate": "tool_call_update", "toolCallId": calls[0]["toolCallId"],
             "locations": [{"path": app, "line": 2}]}
        ]  # fmt: skip
