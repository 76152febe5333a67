"""Optional (issue 24): the official TypeScript ACP SDK (npm `@agentclientprotocol/sdk` 2.4.0) as a
client of `dsh-daemon acp` over pipes, every message the agent writes checked against the SDK's zod
schema. `.ci/run` installs the SDK (`scripts/setup-acp-sdk.sh`, from the npm registry); without it
the test skips, or fails when `CI` is set:

    bash scripts/setup-acp-sdk.sh
    .venv/bin/python -m pytest tests/acp/test_ts_sdk.py
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from dsh_daemon.sandbox.level import probe_level
from tests.acp.harness import COMMAND, UNCONFINED_CONFIG
from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.harness import daemon_env, tool_call_stream
from tests.server.test_review import finding, repo_with_changes

TS = Path(__file__).with_name("ts")

pytestmark = pytest.mark.slow


def sdk_node() -> str:
    """node, with the SDK installed; else the test skips (fails under CI)."""
    node = shutil.which("node")
    if node is None or not (TS / "node_modules" / "@agentclientprotocol" / "sdk").is_dir():
        missing = "node or the TypeScript ACP SDK is not installed: run scripts/setup-acp-sdk.sh"
        if os.environ.get("CI"):
            pytest.fail(f"{missing} (CI is set, so this is a failure)")
        pytest.skip(missing)
    return node


def run_script(node: str, script: str, env: dict[str, str]) -> dict[str, Any]:
    """One of ts/'s scripts; its report, after checking that nothing broke a schema (ACP's env_var
    auth method, newer than the SDK's schema, is the one known difference: checked.mjs)."""
    ran = subprocess.run(
        [node, str(TS / script)],
        cwd=TS,
        env={**env, "DSH_TS_TRACE": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    report: dict[str, Any] = json.loads(ran.stdout.strip().splitlines()[-1])
    print(json.dumps({"checked": report["checked"], "seen": report["seen"]}))
    assert report["violations"] == [], json.dumps(report["violations"], indent=1)[:4000]
    assert set(report["tolerated"]) <= {
        f"initialize result: .authMethods[0].{field}" for field in ("type", "vars", "link")
    }, report["tolerated"]
    return report


def test_a_scripted_session_of_the_typescript_sdk_has_no_schema_violation(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    node = sdk_node()
    state = tmp_path / "state"
    work = tmp_path / "work"  # outside DSH_HOME, which confined commands cannot see
    work.mkdir(parents=True)
    (state / "home").mkdir(parents=True)
    cache = tmp_path / "cache"
    cache.mkdir()
    # full-access at first: the command runs in the client's terminal as it is; then (where this
    # machine confines) the session's sandbox option makes the next one run confined, shown in the
    # client's terminal through the attach wrapper, and an escalation asks.
    (state / "config.json").write_text(UNCONFINED_CONFIG)
    confined = probe_level().confined
    call = ("call_ts_1", "run_command", {"command": "echo from the ts sdk"})
    replies = [Reply.stream(tool_call_stream([call])), Reply.stream(text_stream(["ran it"]))]
    # a subagent (its card follows the child's read) beside a background process (a card of its own)
    subagent = {"description": "ts worker", "prompt": "CHILD-TS: read notes.txt", "tools": "explore"}
    background = {"command": "echo bg; exit 2", "background": True}
    delegated = [("call_ts_sub", "run_subagent", subagent), ("call_ts_bg", "run_command", background)]
    replies += [Reply.stream(tool_call_stream(delegated)), Reply.stream(text_stream(["delegated"]))]
    (work / "notes.txt").write_text("notes\n")
    fake.script_for(
        "CHILD-TS",
        Reply.stream(tool_call_stream([("call_ts_read", "read_file", {"path": "notes.txt"})])),
        Reply.stream(text_stream(["SUMMARY-TS: notes.txt says notes"])),
    )
    if confined:
        inside = ("call_ts_2", "run_command", {"command": "echo confined from the ts sdk"})
        widen = {"reason": "a cache", "writable": [str(cache)]}
        widened = (
            "call_ts_3",
            "run_command",
            {"command": f"echo widened > {cache}/w.txt", "escalate": widen},
        )
        replies += [Reply.stream(tool_call_stream([inside])), Reply.stream(text_stream(["ran confined"]))]
        replies += [Reply.stream(tool_call_stream([widened])), Reply.stream(text_stream(["ran widened"]))]
    fake.script(*replies)
    env = daemon_env(
        state,
        fake,
        DSH_AGENT_COMMAND=json.dumps(COMMAND),
        DSH_WORK=str(work),
        DSH_CONFINED="1" if confined else "0",
    )
    report = run_script(node, "session.mjs", env)
    seen = report["seen"]
    assert report["checked"] >= 30, report
    assert seen["authMethods"] == ["deepseek-api-key"]
    assert seen["first"] == "end_turn" and seen["command"] == "end_turn" and seen["listed"] == 2
    assert seen["delegated"] == seen["ps"] == "end_turn"
    assert seen["children"] == ["Subagent: ts worker"]  # the child is listed, naming its parent
    assert any("▸ Read notes.txt" in text for text in seen["subagentCard"]), seen["subagentCard"]
    assert "SUMMARY-TS: notes.txt says notes" in seen["subagentCard"][-1]
    assert seen["processCard"][0][:2] == ["tool_call", "in_progress"]
    assert ["tool_call_update", "failed", "p1 exited with code 2."] in seen["processCard"], seen[
        "processCard"
    ]
    assert seen["terminalContent"] is True  # the command ran in the SDK client's terminal
    for kind in (
        "agent_message_chunk",
        "tool_call",
        "tool_call_update",
        "session_info_update",
        "usage_update",
    ):
        assert kind in seen["kinds"], seen
    tools = [m["content"] for m in fake.requests[-1].json["messages"] if m["role"] == "tool"]
    assert "from the ts sdk" in tools[0]
    if confined:
        assert seen["sandbox"] == "workspace-write" and seen["confined"] == seen["escalated"] == "end_turn"
        assert any("confined from the ts sdk\n[exit code 0]" in told for told in tools), tools
        assert (cache / "w.txt").read_text() == "widened\n"
        (asked,) = [p for p in seen["permissions"] if p["title"].startswith("Widen the sandbox")]
        assert asked["options"] == [
            "Allow once",
            "Allow for this session",
            "Always (saved to config)",
            "Reject",
        ]


def test_issue_39_item_by_item_over_the_typescript_sdk(tmp_path: Path, fake: FakeDeepSeek) -> None:
    """Issue 39 over the TypeScript SDK (ts/issue39.mjs), every message zod-checked both ways; two
    processes share the session as two CodeCompanion chats do. Items 8's sandbox, escalation,
    subagent and background-process cards are in the session above."""
    node = sdk_node()
    state = tmp_path / "state"
    work = tmp_path / "work"
    repo_with_changes(work)  # for /review
    (state / "home").mkdir(parents=True)
    (state / "config.json").write_text(UNCONFINED_CONFIG)
    steps = [{"title": "Read the code", "status": "done"}, {"title": "Fix it", "status": "in_progress"}]
    fake.script(
        Reply.stream(tool_call_stream([("call_plan", "update_plan", {"steps": steps})])),
        Reply.stream(text_stream(["planned"])),
        Reply.stream(text_stream(["queue reply"])),
        Reply.stream(text_stream(["steer reply"])),
        Reply.stream(tool_call_stream([finding("call_finding")])),
        Reply.stream(text_stream(["One finding."])),
        Reply.stream(text_stream(["B answer"])),
        Reply.stream(text_stream(["A again"])),
    )
    env = daemon_env(state, fake, DSH_AGENT_COMMAND=json.dumps(COMMAND), DSH_WORK=str(work))
    seen = run_script(node, "issue39.mjs", env)["seen"]
    bodies = [r.json for r in fake.requests]
    users = [[m["content"] for m in b["messages"] if m["role"] == "user"] for b in bodies]
    # 1: the mode is a select config option, kept in step with set_mode both ways.
    assert seen["modeOption"] == ["select", "mode", "ask"]
    assert seen["modeSet"] == "plan" and seen["modeUpdates"] == ["plan", "accept-edits"]
    # 2: thinking is an on/off select for a client that did not say it takes booleans, a boolean for one that did.
    assert seen["thinkingA"] == ["select", ["on", "off"]]  # A picks "off"; B reads it as false
    assert seen["loadedInB"] == {"model": "deepseek-v4-pro", "thinking": False, "type": "boolean"}
    # 3: an idle /queue and /steer stream their turn inside their own prompt.
    assert seen["queue"] == seen["steer"] == "end_turn"
    assert seen["queueInside"] and seen["steerInside"], seen
    assert "queue reply" in seen["queueSaid"] and "after the current turn" not in seen["queueSaid"]
    assert users[2][-1] == "hello queued" and users[3][-1] == "look at the tests"
    # 4: the command behind the re-sent cancelled prompt ran; nothing reached the model for it.
    assert seen["resent"] == "end_turn"
    assert "/rename" not in json.dumps(bodies)
    # 5: the model choice is the session's: B loads it, uses it, changes it; A sees that and uses it.
    assert [b["model"] for b in bodies] == ["deepseek-v4-pro"] * 7 + ["deepseek-v4-flash"]
    assert bodies[0]["thinking"] == bodies[6]["thinking"] == {"type": "disabled"} and users[6][-1] == "from B"
    assert seen["fromB"] == seen["backInA"] == "end_turn" and seen["modelInAAfter"] == "deepseek-v4-flash"
    assert users[7][-1] == "back in A"
    # 6: the plan tool's plan, kind think.
    assert seen["plans"] == [[["Read the code", "completed"], ["Fix it", "in_progress"]]]
    assert seen["planCallKind"] == "think" and seen["planStop"] == "end_turn"
    # 7: image not advertised and refused in words; usage in the prompt's answer (the unstable schema's `usage`).
    assert seen["image"] is False
    assert seen["imageRefused"]["code"] == -32602 and "text only" in seen["imageRefused"]["message"]
    # (two requests of 12 + 3 tokens each)
    assert seen["usage"] == {
        "inputTokens": 24,
        "outputTokens": 6,
        "totalTokens": 30,
        "cachedReadTokens": 0,
        "thoughtTokens": 0,
    }
    # 8: review findings with locations, kind think; fork behind its capability.
    assert seen["review"] == "end_turn"
    assert seen["findings"] == [{"kind": "think", "locations": [{"path": str(work / "app.py"), "line": 2}]}]
    assert seen["forkCapability"] and seen["forked"]
    # 9: B's prompt shows in A before B's answer; a chat nobody prompted is in no list.
    assert seen["separated"]
    assert seen["listedInA"] == seen["listedInB"] == {"original": True, "empty": False}
