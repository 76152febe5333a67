"""Hooks in Neovim (issue 35.3) over the real daemon: a project's hooks waiting for trust are a
notice naming them (live `hooks/untrusted`, and the attach reply's `hooksUntrusted` for a chat
resumed in a new Neovim), :DshTrust trusts them after asking (`dsh/project/trust`) and from then on
they run; what a hook told the model shows as the hook's; a hook that fails is one warning."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.fakes.deepseek_server import FakeDeepSeek, Reply
from tests.neovim.harness import Editor, Paths
from tests.server.harness import text_reply, tool_call_stream


def read(call_id: str, path: str) -> Reply:
    return Reply.stream(tool_call_stream([(call_id, "read_file", {"path": path})]))


def project_hooks(paths: Paths, ran: Path) -> Path:
    """The project's hooks: `guard` records that it ran and adds context after read_file; `broken`
    fails each time."""
    hooks = {
        "hooks": {
            "postToolUse": [
                {
                    "name": "guard",
                    "matcher": "read_file",
                    "command": f'echo ran >> {ran}; echo \'{{"additionalContext": "guard checked the read"}}\'',
                },
                {"name": "broken", "matcher": "read_file", "command": "echo nope >&2; exit 1"},
            ]
        }
    }
    config = paths.work / ".dsh" / "config.json"
    config.parent.mkdir()
    config.write_text(json.dumps(hooks))
    return config


def user_texts(body: dict[str, Any]) -> list[str]:
    out = []
    for m in body["messages"]:
        if m["role"] == "user":
            content = m["content"]
            out.append(content if isinstance(content, str) else json.dumps(content))
    return out


def test_a_projects_hooks_wait_for_trust_then_run_and_a_failure_warns_once(
    start_editor: Any, paths: Paths, fake: FakeDeepSeek
) -> None:
    ran = paths.tmp / "ran.txt"
    config = project_hooks(paths, ran)
    (paths.work / "a.txt").write_text("alpha\n")
    fake.script(read("call_h1", "a.txt"), text_reply("Read it."))
    editor: Editor = start_editor()
    editor.cmd("Dsh read a.txt")
    editor.wait_footers(1)
    notice = (
        f"⚠ this project has 2 hooks (postToolUse) in {config.resolve()}: they do not run until you"
        " trust them · :DshTrust runs them"
    )
    assert editor.wait_text(notice).count(notice) == 1
    assert not ran.exists()  # not trusted: they did not run
    assert ":DshTrust" in editor.lua("return T.messages()")  # said where the person looks too

    # A new Neovim resuming the chat learns it from the attach reply: the same notice, once.
    editor.quit()
    editor = start_editor()
    editor.cmd("DshResume")
    editor.wait_text(notice)
    assert editor.lines().count(notice) == 1

    # :DshTrust names what it trusts and asks; Cancel trusts nothing.
    editor.lua(
        "_G.asked = {} _G.answer = 2 vim.fn.confirm = function(msg, choices)"
        " table.insert(_G.asked, {msg, choices}) return _G.answer end"
    )
    editor.cmd("DshTrust")
    assert editor.lua("return _G.asked") == [
        [
            f"Trust the 2 hooks of {config.resolve()}?\nEvents: postToolUse\n"
            "They run where the agent's commands run (the sandbox mode), from the next event.",
            "&Trust them\n&Cancel",
        ]
    ]
    assert not (paths.state / "trusted-projects.json").exists()
    editor.lua("_G.answer = 1")
    editor.cmd("DshTrust")
    editor.wait_text(
        f"✓ trusted 2 hooks of {paths.work.resolve()} (postToolUse): they run from the next event"
    )
    assert str(paths.work.resolve()) in (paths.state / "trusted-projects.json").read_text()

    # They run now: guard's context reaches the model and shows as the hook's; broken warns once.
    fake.script(read("call_h2", "a.txt"), read("call_h3", "a.txt"), text_reply("Read twice."))
    editor.cmd("Dsh read it again, twice")
    editor.wait_footers(2)
    assert ran.read_text() == "ran\nran\n"
    lines = editor.lines()
    assert lines.count("⚓ hook guard (postToolUse): guard checked the read") == 2
    failed = [line for line in lines if line.startswith("⚠ hook broken")]
    assert failed == [
        "⚠ hook broken (postToolUse, the project's) failed: it exited with status 1: nope;"
        " it said nothing and the turn went on"
    ]
    assert "guard checked the read" in "\n".join(user_texts(fake.requests[-1].json))
    # Trusted: :DshTrust has nothing left to do.
    editor.cmd("DshTrust")
    assert "no project hooks wait for your trust here" in editor.lua("return T.messages()")
