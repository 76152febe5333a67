"""The permission policy (pre-execute) and the changed-file notice (post-execute) as hooks."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from dsh_daemon.agent.signal import AbortSignal
from dsh_daemon.agent.tools import Allow, Ask, Deny, PostExecuteDecision, ToolCall, ToolOutcome
from dsh_daemon.tools.documents import StaticDocuments
from dsh_daemon.tools.factory import ToolKit, build_tool_registry
from dsh_daemon.tools.workspace import Workspace
from tests.tools.conftest import FakeContext, run_tool

NPM_CACHE = os.path.realpath("/tmp/npm-cache")


def call(name: str, args: Mapping[str, Any]) -> ToolCall:
    return ToolCall("c1", name, json.dumps(args), dict(args), 1, 1)


async def decide(kit: ToolKit, name: str, args: Mapping[str, Any]) -> Any:
    [policy] = kit.hooks.pre_execute
    return await policy(call(name, args), AbortSignal())


async def test_defaults_reads_allow_edits_ask_and_commands_follow_the_sandbox(
    kit: ToolKit, root: Path
) -> None:
    for name in ("read_file", "list_dir", "find_files", "grep"):
        assert isinstance(await decide(kit, name, {"path": "x"}), Allow), name
    asked = await decide(kit, "write_file", {"path": "n.txt", "content": "x"})
    assert isinstance(asked, Ask) and asked.title == "Write n.txt"
    # workspace-write (the default) confines the command: nobody is asked.
    assert isinstance(await decide(kit, "run_command", {"command": "make test"}), Allow)
    assert await decide(kit, "someone_elses_tool", {}) is None  # no opinion about unknown tools
    # full-access asks as before, with the sandbox mode in the preview.
    unconfined = build_tool_registry(Workspace([root]), config={"sandbox": "full-access"})
    asked = await decide(unconfined, "run_command", {"command": "make test"})
    assert isinstance(asked, Ask) and asked.title == "Run: make test"
    assert asked.preview is not None and asked.preview["command"] == "make test"
    assert asked.preview["sandbox"] == "full-access"
    # A person who set run_command to "ask" is still asked, confined or not.
    explicit = build_tool_registry(Workspace([root]), config={"permissions": {"run_command": "ask"}})
    assert isinstance(await decide(explicit, "run_command", {"command": "make test"}), Ask)


async def test_a_widening_is_always_asked_and_shows_the_reason_and_the_widening(root: Path) -> None:
    escalate = {
        "reason": "npm needs its cache",
        "writable": ["/tmp/npm-cache"],
        "network": ["Registry.npmjs.org"],
    }
    for permissions in ({}, {"run_command": "allow"}, {"run_command": "ask"}):
        kit = build_tool_registry(Workspace([root]), config={"permissions": permissions})
        asked = await decide(kit, "run_command", {"command": "npm ci", "escalate": escalate})
        assert isinstance(asked, Ask), permissions
        assert asked.preview is not None and asked.preview["escalation"] == {
            "reason": "npm needs its cache",
            "writable": [NPM_CACHE],
            "network": ["registry.npmjs.org"],
            "unconfined": False,
        }
        assert "npm needs" not in (asked.scope or "")  # allow-always covers the widening, whatever the reason
        assert asked.title.startswith("Widen the sandbox (writable: ")
    kit = build_tool_registry(Workspace([root]))
    unconfined = await decide(
        kit, "run_command", {"command": "make", "escalate": {"reason": "r", "unconfined": True}}
    )
    assert isinstance(unconfined, Ask) and unconfined.scope == "run_command:unconfined:make"
    # A malformed widening is refused unasked, with the tool's own error.
    for bad in ({"reason": ""}, {"reason": "r"}, {"reason": "r", "network": ["not a domain"]}, "x"):
        assert isinstance(await decide(kit, "run_command", {"command": "make", "escalate": bad}), Allow)
        outcome = await run_tool(kit, "run_command", {"command": "make", "escalate": bad})
        assert outcome.error_code == "INVALID_ARGUMENTS", bad


async def test_plan_mode_offers_commands_read_only_and_refuses_widenings_unasked(kit: ToolKit) -> None:
    [policy] = kit.hooks.pre_execute
    policy.session_mode = "plan"
    assert kit.sandbox.mode == "read-only"
    assert "run_command" in {s.name for s in kit.registry.specs()}
    assert isinstance(await decide(kit, "run_command", {"command": "ls"}), Allow)
    args = {"command": "ls", "escalate": {"reason": "r", "writable": ["/tmp"]}}
    assert isinstance(await decide(kit, "run_command", args), Allow)
    outcome = await run_tool(kit, "run_command", args)
    assert outcome.error_code == "SANDBOX_DENIED" and "plan mode" in str(outcome.content)


async def test_a_widening_nobody_approved_is_refused(kit: ToolKit) -> None:
    # The tool itself refuses a widening without the person's approval (a policy that let it through).
    args = {"command": "true", "escalate": {"reason": "r", "writable": ["/tmp"]}}
    outcome = await run_tool(kit, "run_command", args)
    assert outcome.error_code == "ESCALATION_REFUSED"


async def test_an_edit_is_asked_with_its_diff(kit: ToolKit, tmp_path: Path) -> None:
    [policy] = kit.hooks.pre_execute
    root = policy.workspace.cwd
    (root / "p.txt").write_text("one\ntwo\n")
    asked = await decide(kit, "edit_file", {"path": "p.txt", "old_string": "two", "new_string": "2"})
    assert isinstance(asked, Ask) and asked.preview is not None
    assert "-two" in asked.preview["diff"] and "+2" in asked.preview["diff"]
    assert (root / "p.txt").read_text() == "one\ntwo\n"  # asking writes nothing


async def test_config_overrides_and_deny_hides_the_tool(root: Path) -> None:
    config = {
        "permissions": {"run_command": "deny", "edit_file": "allow", "read_file": "ask", "other": "ask"}
    }
    kit = build_tool_registry(Workspace([root]), config=config)
    assert "run_command" not in kit.registry.tools  # never offered to the model
    assert isinstance(await decide(kit, "run_command", {"command": "ls"}), Deny)
    assert isinstance(await decide(kit, "edit_file", {"path": "a"}), Allow)
    assert await decide(kit, "read_file", {"path": "a"}) == Ask("Run read_file")
    assert await decide(kit, "other", {}) == Ask("Run other")


def test_bad_config_is_refused(root: Path) -> None:
    ws = Workspace([root])
    for config in (
        {"permissions": {"edit_file": "sometimes"}},
        {"limits": {"nope": 1}},
        {"limits": {"read_max_chars": 0}},
        {"colour": "blue"},
        {"ripgrep": 3},
        {"permissions": {"edit_file": "sandbox"}},
        {"sandbox": "open"},
        {"sandbox": {"mode": "read-only", "network": {"allow": "pypi.org"}}},
        {"sandbox": {"writable": ["relative/path"]}},
        {"sandbox": {"colour": 1}},
    ):
        with pytest.raises(ValueError):
            build_tool_registry(ws, config=config)


async def test_a_call_confinement_refuses_fails_without_asking_like_a_read(
    kit: ToolKit, root: Path, outside: Path
) -> None:
    os.symlink(outside / "secret.txt", root / "link")
    for args in ({"path": "../outside/secret.txt"}, {"path": "link"}):
        for name in ("write_file", "edit_file", "read_file"):
            full = (
                {**args, "content": "x", "old_string": "a", "new_string": "b"}
                if name != "read_file"
                else args
            )
            decision = await decide(kit, name, full)
            assert isinstance(decision, Allow), (name, decision)  # nobody is asked
            outcome = await run_tool(kit, name, full)
            assert outcome.is_error and outcome.error_code == "OUTSIDE_WORKSPACE", (name, outcome)
    assert not (outside / "secret.txt").exists() or (outside / "secret.txt").read_text() != "x"


async def test_a_write_to_a_fifo_fails_before_anyone_is_asked(kit: ToolKit, root: Path) -> None:
    os.mkfifo(root / "pipe")
    for name, args in (
        ("write_file", {"path": "pipe", "content": "x"}),
        ("edit_file", {"path": "pipe", "old_string": "a", "new_string": "b"}),
    ):
        decision = await decide(kit, name, args)
        assert isinstance(decision, Allow), (name, decision)
        outcome = await run_tool(kit, name, args)
        assert outcome.is_error and outcome.error_code == "NOT_A_FILE", (name, outcome)


async def test_a_refusal_ends_only_the_call_it_was_made_for(kit: ToolKit, root: Path) -> None:
    await decide(kit, "write_file", {"path": "../nope", "content": "x"})  # refused, call c1 turn 1 step 1
    ctx = FakeContext(call=ToolCall("c1", "write_file", "{}", {}, 2, 1))  # same id, a later turn
    outcome = await run_tool(kit, "write_file", {"path": "fine.txt", "content": "ok"}, ctx)
    assert not outcome.is_error and (root / "fine.txt").read_text() == "ok"


async def notices(kit: ToolKit) -> list[str]:
    [hook] = kit.hooks.post_execute
    decision = await hook(call("any", {}), ToolOutcome.text("ok"))
    if decision is None:
        return []
    assert isinstance(decision, PostExecuteDecision) and decision.outcome is None
    [message] = decision.additional_contexts
    assert dict(message.source) == {"kind": "plugin", "plugin": "dsh-tools", "form": "notice"}
    return message.text.splitlines()


async def test_files_changed_since_read_are_noticed_once(kit: ToolKit, root: Path) -> None:
    (root / "a.py").write_text("one\n")
    (root / "b.py").write_text("two\n")
    (root / "unread.py").write_text("x\n")
    await run_tool(kit, "read_file", {"path": "a.py"})
    await run_tool(kit, "read_file", {"path": "b.py"})
    assert await notices(kit) == []
    (root / "a.py").write_text("one, changed by someone else\n")
    (root / "unread.py").write_text("y\n")  # never read: not the model's concern
    os.utime(root / "b.py")  # touched, same text: no notice
    [line] = await notices(kit)
    assert line.startswith("Note: a.py changed on disk") and "read it again" in line
    assert await notices(kit) == []  # reported once
    (root / "b.py").unlink()
    assert await notices(kit) == ["Note: b.py was deleted since you read it."]


async def test_the_models_own_edits_are_not_noticed(kit: ToolKit, root: Path) -> None:
    (root / "a.py").write_text("one\n")
    await run_tool(kit, "read_file", {"path": "a.py"})
    await run_tool(kit, "edit_file", {"path": "a.py", "old_string": "one", "new_string": "uno"})
    await run_tool(kit, "write_file", {"path": "new.py", "content": "n\n"})
    assert await notices(kit) == []
    (root / "new.py").write_text("changed\n")
    assert await notices(kit) == [
        "Note: new.py changed on disk (or in the editor) since you read it; "
        "read it again before relying on it or editing it."
    ]


async def test_editor_buffer_changes_are_noticed(root: Path) -> None:
    (root / "a.py").write_text("disk\n")
    docs = StaticDocuments({root / "a.py": "buffer 1\n"})
    kit = build_tool_registry(Workspace([root]), documents=docs)
    await run_tool(kit, "read_file", {"path": "a.py"})
    assert await notices(kit) == []
    docs.texts[root / "a.py"] = "buffer 2\n"
    assert len(await notices(kit)) == 1
