"""Named agents in Neovim (protocol.md §12 "Subagents", "Named agents") over the real daemon: before
any session :DshAgents lists the folder's agents (`dsh/agents/list {cwd}`) in a float with their tool
sets and models; <CR> on one asks for the task and sends the delegation prompt, the model's
`run_subagent {agent: NAME}` runs that agent with its own instructions, and its card and the
parent's answer show in the chat. `:DshAgents NAME TASK` sends at once; an unknown NAME is said."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dsh_daemon.model.named_agents import delegation_prompt
from tests.fakes.deepseek_server import FakeDeepSeek, Reply
from tests.neovim.harness import Editor
from tests.server.harness import text_reply, tool_call_stream

REVIEWER = (
    "---\ndescription: Reviews a change for bugs\ntools: explore\n---\nREVIEWER-INSTRUCTIONS: be strict.\n"
)
FIXER = "---\ndescription: Fixes failing tests\ntools: edit\nmodel: deepseek-v4-pro\n---\nFix it.\n"


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def agents_float(editor: Editor) -> dict[str, Any] | None:
    return next((f for f in editor.floats() if f["kind"] == "agents"), None)


def last_user(body: dict[str, Any]) -> Any:
    return [m["content"] for m in body["messages"] if m["role"] == "user"][-1]


def run_reviewer(task: str) -> Reply:
    call = ("s1", "run_subagent", {"agent": "reviewer", "description": "review", "prompt": task})
    return Reply.stream(tool_call_stream([call]))


def test_the_list_before_a_session_then_a_task_for_one(editor: Editor, fake: FakeDeepSeek) -> None:
    work = editor.paths.work
    write(work / ".dsh" / "agents" / "reviewer.md", REVIEWER)
    write(work / ".dsh" / "agents" / "fixer.md", FIXER)
    fake.script(run_reviewer("CHILD-REVIEW: look at app.py"), text_reply("The reviewer found nothing."))
    fake.script_for("CHILD-REVIEW", text_reply("SUMMARY-REVIEW: no bugs"))

    editor.cmd("DshAgents")
    shown = editor.wait(lambda: agents_float(editor), what="the agents float")
    assert shown["title"] == " dsh: named agents " and shown["current"]
    assert shown["lines"] == [
        "fixer     Fixes failing tests · tools: edit (read, search and edit files) · model: deepseek-v4-pro",
        "reviewer  Reviews a change for bugs · tools: explore (read and search only) · model: the session's",
    ]
    screen = "\n".join(editor.screen("agents-list"))
    assert "dsh: named agents" in screen and "reviewer  Reviews a change for bugs" in screen

    # The person picks the reviewer and types the task.
    editor.lua(
        "_G.asked = nil vim.ui.input = function(opts, cb) _G.asked = opts.prompt cb('check app.py') end"
    )
    editor.keys("j<CR>")
    assert editor.lua("return _G.asked") == "Task for the reviewer agent: "
    assert agents_float(editor) is None
    editor.wait_footers(1, timeout=60)  # a parent's two requests and a child session between them
    assert last_user(fake.requests[0].json) == delegation_prompt("reviewer", "check app.py")
    child = next(r.json for r in fake.requests if "REVIEWER-INSTRUCTIONS" in str(r.json["messages"]))
    assert "CHILD-REVIEW: look at app.py" in str(child["messages"])
    editor.wait_text("The reviewer found nothing.")
    assert any("subagent “review”" in line for line in editor.lines()), editor.lines()
    editor.screen("agents-ran")


def test_a_name_and_task_on_the_command_line_and_an_unknown_name(editor: Editor, fake: FakeDeepSeek) -> None:
    write(editor.paths.work / ".dsh" / "agents" / "reviewer.md", REVIEWER)
    fake.script(text_reply("Not delegating."))
    editor.cmd("DshAgents nobody check it")  # said, nothing sent
    editor.wait(
        lambda: 'no named agent "nobody" (known: reviewer)' in editor.lua("return T.messages()"),
        what="the warning",
    )
    assert fake.requests == []
    (editor.paths.work / "app.py").write_text("print('APP-CONTENT')\n")
    editor.cmd("DshAgents reviewer check @app.py please")
    editor.wait_footers(1)
    sent = fake.requests[0].json
    users = [m["content"] for m in sent["messages"] if m["role"] == "user"]
    assert delegation_prompt("reviewer", "check @app.py please") in users, users
    assert "APP-CONTENT" in str(sent["messages"])  # the mention went with it, as with :Dsh
