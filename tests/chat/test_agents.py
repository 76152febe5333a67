"""`/agents` in the terminal chat (protocol.md §12 "Subagents", "Named agents"): `dsh-daemon chat` in a
real pseudo-terminal (tmux) over its real daemon and the fake provider. Before any session it lists
the folder's named agents with their tool sets; `/agents NAME TASK` sends the delegation prompt,
the model's `run_subagent {agent: NAME}` runs that agent with its instructions, and its summary
comes back. An unknown name or a missing task is said, and nothing is sent."""

from __future__ import annotations

from pathlib import Path

from dsh_daemon.model.named_agents import delegation_prompt
from tests.chat.screen import Screen, needs_tmux, prompts
from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.harness import daemon_env, tool_call_stream

REVIEWER = (
    "---\ndescription: Reviews a change for bugs\ntools: explore\n---\nREVIEWER-INSTRUCTIONS: be strict.\n"
)
FIXER = "---\ndescription: Fixes failing tests\ntools: edit\nmodel: deepseek-v4-pro\n---\nFix it.\n"


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@needs_tmux
def test_agents_lists_them_and_hands_a_task_to_one(tmp_path: Path) -> None:
    work = tmp_path / "work"
    write(work / ".dsh" / "agents" / "reviewer.md", REVIEWER)
    write(work / ".dsh" / "agents" / "fixer.md", FIXER)
    with FakeDeepSeek() as fake:
        call = (
            "s1",
            "run_subagent",
            {"agent": "reviewer", "description": "review", "prompt": "CHILD-REVIEW"},
        )
        fake.script(Reply.stream(tool_call_stream([call])), Reply.stream(text_stream(["PARENT-DONE"])))
        fake.script_for("CHILD-REVIEW", Reply.stream(text_stream(["SUMMARY-REVIEW: no bugs"])))
        chat = Screen(tmp_path, daemon_env(tmp_path / "state", fake), ["--no-thinking", "chat"], cwd=work)
        try:
            chat.wait("Enter sends")
            chat.type("/agents")
            chat.keys("Enter")
            screen = chat.wait("/agents NAME TASK hands TASK", whole=False)
            assert "fixer          Fixes failing tests" in screen
            assert "tools: edit (read, search and edit files) · model: deepseek-v4-pro" in screen
            assert "reviewer       Reviews a change for bugs" in screen
            assert "tools: explore (read and search only) · model: the session's" in screen

            for line, said in (
                ("/agents nobody do it", "[no named agent 'nobody' (known: fixer, reviewer)]"),
                ("/agents reviewer", "[/agents reviewer needs a task: /agents reviewer TASK]"),
            ):
                chat.type(line)
                chat.keys("Enter")
                chat.wait(said, whole=False)
            assert fake.requests == []  # neither was sent

            chat.type("/agents reviewer check app.py")
            chat.keys("Enter")
            chat.wait("PARENT-DONE", whole=False)
            assert prompts(fake)[0] == delegation_prompt("reviewer", "check app.py")
            child = next(r.json for r in fake.requests if "REVIEWER-INSTRUCTIONS" in str(r.json["messages"]))
            assert "CHILD-REVIEW" in str(child["messages"])  # the named agent ran, with its instructions
            assert "SUMMARY-REVIEW: no bugs" in str(fake.requests[-1].json["messages"])
        finally:
            chat.close()
