"""Named agents over ACP (protocol.md §12 "Subagents" and "ACP mode" → "Slash commands"), a real
daemon over real pipes and the fake provider: each of the session's named agents is advertised as
`/agent-NAME`; a prompt `/agent-NAME TASK` reaches the model as the delegation prompt, and the
model's `run_subagent {agent: NAME}` runs that agent with its own instructions. Without a task it is
refused; an unknown NAME is ordinary text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dsh_daemon.model.named_agents import delegation_prompt
from tests.acp.harness import raw_acp
from tests.acp.test_custom_commands import advertised, users, write
from tests.acp.test_raw import prompt, start
from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.harness import tool_call_stream

REVIEWER = (
    "---\ndescription: Reviews a change for bugs\ntools: explore\n---\nREVIEWER-INSTRUCTIONS: be strict.\n"
)


def run_reviewer(task: str) -> Reply:
    call = ("s1", "run_subagent", {"agent": "reviewer", "description": "review", "prompt": task})
    return Reply.stream(tool_call_stream([call]))


async def test_named_agents_are_offered_and_run_as_a_delegation(tmp_path: Path, fake: FakeDeepSeek) -> None:
    state = tmp_path / "state"
    work = state / "work"
    write(work / ".dsh" / "agents" / "reviewer.md", REVIEWER)
    write(work / ".dsh" / "commands" / "agent-reviewer.md", "A custom command named as the agent's.\n")
    fake.script(
        run_reviewer("CHILD-REVIEW: review app.py"),
        Reply.stream(text_stream(["PARENT-DONE"])),
    )
    fake.script_for("CHILD-REVIEW", Reply.stream(text_stream(["SUMMARY-REVIEW: no bugs"])))
    async with raw_acp(state, fake) as raw:
        sid = await start(raw, work)
        update = (await raw.until(advertised(raw)))["params"]["update"]
        offered: list[dict[str, Any]] = update["availableCommands"]
        assert [c["name"] for c in offered].count("agent-reviewer") == 1  # the agent's, not the command
        assert offered[-1] == {
            "name": "agent-reviewer",
            "description": "Run the reviewer agent: Reviews a change for bugs (tools: explore)",
            "input": {"hint": "task"},
        }

        answer = await raw.call(
            "session/prompt", {"sessionId": sid, "prompt": prompt("/agent-reviewer app.py")}
        )
        assert answer["result"]["stopReason"] == "end_turn", answer
        assert users(fake.requests[0].json)[-1] == delegation_prompt("reviewer", "app.py")
        child = next(r.json for r in fake.requests if "REVIEWER-INSTRUCTIONS" in str(r.json["messages"]))
        assert "CHILD-REVIEW: review app.py" in str(child["messages"])
        assert "SUMMARY-REVIEW: no bugs" in str(fake.requests[-1].json["messages"])  # the parent got it

        before = len(fake.requests)
        fake.script(run_reviewer("CHILD-REVIEW: again"), Reply.stream(text_stream(["PARENT-AGAIN"])))
        fake.script_for("CHILD-REVIEW", Reply.stream(text_stream(["SUMMARY-AGAIN"])))
        typed = "/agent-reviewer\nthe tests\nand the docs"  # the task on the lines after the name
        answer = await raw.call("session/prompt", {"sessionId": sid, "prompt": prompt(typed)})
        assert answer["result"]["stopReason"] == "end_turn", answer
        expected = delegation_prompt("reviewer", "the tests\nand the docs")
        assert users(fake.requests[before].json)[-1] == expected
        assert "SUMMARY-AGAIN" in str(fake.requests[-1].json["messages"])

        refused = await raw.call("session/prompt", {"sessionId": sid, "prompt": prompt("/agent-reviewer  ")})
        assert refused["error"]["data"]["code"] == "invalid_params", refused
        assert "needs a task" in refused["error"]["message"]

        before = len(fake.requests)
        fake.script(Reply.stream(text_stream(["plain answer"])))
        answer = await raw.call("session/prompt", {"sessionId": sid, "prompt": prompt("/agent-nobody hi")})
        assert answer["result"]["stopReason"] == "end_turn", answer
        assert users(fake.requests[before].json)[-1] == "/agent-nobody hi"  # no such agent: plain text
