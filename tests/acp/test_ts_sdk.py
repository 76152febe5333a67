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

import pytest

from dsh_daemon.sandbox.level import probe_level
from tests.acp.harness import COMMAND, UNCONFINED_CONFIG
from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.harness import daemon_env, tool_call_stream

TS = Path(__file__).with_name("ts")

pytestmark = pytest.mark.slow


def test_a_scripted_session_of_the_typescript_sdk_has_no_schema_violation(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    node = shutil.which("node")
    if node is None or not (TS / "node_modules" / "@agentclientprotocol" / "sdk").is_dir():
        missing = "node or the TypeScript ACP SDK is not installed: run scripts/setup-acp-sdk.sh"
        if os.environ.get("CI"):
            pytest.fail(f"{missing} (CI is set, so this is a failure)")
        pytest.skip(missing)
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
    ran = subprocess.run(
        [node, str(TS / "session.mjs")], cwd=TS, env=env, capture_output=True, text=True, timeout=120
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    report = json.loads(ran.stdout.strip().splitlines()[-1])
    print(json.dumps({"checked": report["checked"], "seen": report["seen"]}))
    assert report["violations"] == [], json.dumps(report["violations"], indent=1)[:4000]
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
