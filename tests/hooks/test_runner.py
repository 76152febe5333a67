"""One hook run by `HookRunner` through a session's real `CommandSandbox` (real processes, confined
where this machine can): its stdin document, each way of answering, and each way of failing."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from dsh_daemon.hooks.runner import MAX_STDOUT, HookAnswer, HookFailure, HookRunner, parse_answer
from dsh_daemon.model.hooks import HookCommand, parse_hooks
from dsh_daemon.sandbox.level import probe_level
from dsh_daemon.tools.config import SandboxSettings
from dsh_daemon.tools.sandboxing import CommandSandbox
from dsh_daemon.tools.workspace import Workspace

MODE = "workspace-write" if probe_level().confined else "full-access"


@pytest.fixture
async def runner(tmp_path: Path) -> AsyncIterator[HookRunner]:
    work = tmp_path / "work"
    work.mkdir()
    sandbox = CommandSandbox(Workspace([work]), SandboxSettings(mode=MODE))
    try:
        yield HookRunner(sandbox.spawn, lambda: work, lambda: {"PATH": "/usr/bin:/bin", "SECRET_TOKEN": "x"})
    finally:
        await sandbox.aclose()


def python(code: str, **entry: Any) -> HookCommand:
    return HookCommand("preToolUse", (sys.executable, "-c", code), **entry)


async def test_the_document_arrives_on_stdin_whole_even_when_large(runner: HookRunner) -> None:
    big = "x" * 1_000_000  # larger than a pipe: stdin is a file, so neither side can block on it
    code = (
        "import json, sys; d = json.load(sys.stdin); "
        "print(json.dumps({'additionalContext': f\"{d['event']} {len(d['big'])}\"}))"
    )
    answer = await runner.run(python(code), {"event": "preToolUse", "big": big})
    assert answer == HookAnswer(context="preToolUse 1000000")


async def test_a_hook_that_never_reads_stdin_still_answers(runner: HookRunner) -> None:
    answer = await runner.run(python("print('{}')"), {"big": "y" * 1_000_000})
    assert answer == HookAnswer()


async def test_a_shell_line_runs_with_sh_and_exit_2_blocks_with_stderr(runner: HookRunner) -> None:
    hook = HookCommand("preToolUse", "echo 'not today' >&2; exit 2")
    assert await runner.run(hook, {}) == HookAnswer(block=True, reason="not today")


async def test_the_hook_does_not_see_credential_like_variables(runner: HookRunner) -> None:
    code = "import json, os; print(json.dumps({'additionalContext': str('SECRET_TOKEN' in os.environ)}))"
    answer = await runner.run(python(code), {})
    # full-access spawns get the env as the host built it (already scrubbed of the daemon's secrets)
    assert answer == HookAnswer(context="False" if MODE != "full-access" else "True")


async def test_a_child_left_holding_stdout_does_not_hold_the_answer(runner: HookRunner) -> None:
    code = (
        "import subprocess, sys; "
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); "
        'print(\'{"additionalContext": "done"}\', flush=True)'
    )
    answer = await runner.run(python(code, timeout_s=60), {})
    assert answer == HookAnswer(context="done")


async def test_each_way_of_failing(runner: HookRunner) -> None:
    slow = await runner.run(python("import time; time.sleep(600)", timeout_s=0.5), {})
    assert isinstance(slow, HookFailure) and "did not finish within 0.5 s" in slow.reason
    flood = await runner.run(python(f"import sys; sys.stdout.write('z' * {2 * MAX_STDOUT})"), {})
    assert isinstance(flood, HookFailure) and "more than 64 KiB" in flood.reason
    missing = await runner.run(HookCommand("stop", ("/nonexistent/hook",)), {})
    assert isinstance(missing, HookFailure)


@pytest.mark.parametrize(
    ("status", "stdout", "stderr", "expected"),
    [
        (0, b"", b"", HookAnswer()),
        (0, b"  \n", b"", HookAnswer()),
        (0, b'{"decision": "block", "reason": "no"}', b"", HookAnswer(block=True, reason="no")),
        (0, b'{"permission": "allow"}', b"", HookAnswer(permission="allow")),
        (0, b'{"permission": "deny", "reason": "r"}', b"", HookAnswer(reason="r", permission="deny")),
        (2, b"ignored", b"", HookAnswer(block=True, reason="blocked by a hook (exit status 2)")),
        (0, b"[1, 2]", b"", HookFailure("its output is not a JSON object: '[1, 2]'")),
        (0, b"\xff\xfe", b"", None),
        (0, b'{"permission": "maybe"}', b"", None),
        (0, b'{"additionalContext": 3}', b"", None),
        (0, b'{"decision": "stop"}', b"", None),
        (0, b'{"additionalContext": "\\ud800"}', b"", None),  # no message can hold a lone surrogate
        (1, b"", b"boom", HookFailure("it exited with status 1: boom")),
        (-9, b"", b"", HookFailure("it was killed by signal 9")),
    ],
)
def test_answers(
    status: int, stdout: bytes, stderr: bytes, expected: HookAnswer | HookFailure | None
) -> None:
    answer = parse_answer(status, stdout, stderr)
    if expected is None:
        assert isinstance(answer, HookFailure)
    else:
        assert answer == expected


def test_settings_parse_and_refuse_naming_the_entry() -> None:
    settings = parse_hooks(
        {
            "preToolUse": [{"command": "a", "matcher": "run_command|edit_file", "timeoutS": 5, "name": "g"}],
            "stop": [{"command": ["b", "c"]}],
        }
    )
    (guard,) = settings.for_event("preToolUse", "run_command")
    assert guard.label == "g" and guard.timeout_s == 5 and guard.argv() == ["/bin/sh", "-c", "a"]
    assert settings.for_event("preToolUse", "run") == ()  # the whole name must match
    assert settings.for_event("stop")[0].argv() == ["b", "c"]
    assert settings.events == ("preToolUse", "stop")
    for bad, where in [
        ({"onStart": []}, "unknown event"),
        ({"stop": {}}, "hooks.stop must be a list"),
        ({"stop": [{"command": ""}]}, "hooks.stop[0].command"),
        ({"stop": [{"command": "a", "matcher": "x"}]}, "hooks.stop[0].matcher"),
        ({"preToolUse": [{"command": "a", "matcher": "("}]}, "not a regular expression"),
        ({"stop": [{"command": "a", "timeoutS": 601}]}, "hooks.stop[0].timeoutS"),
        ({"stop": [{"command": "a", "timeoutS": True}]}, "hooks.stop[0].timeoutS"),
        ({"stop": [{"command": "a", "extra": 1}]}, "unknown keys"),
        ([], "hooks must be an object"),
    ]:
        with pytest.raises(ValueError) as caught:
            parse_hooks(bad)
        assert where in str(caught.value), (bad, str(caught.value))


def test_config_json_hooks_apply_and_a_bad_entry_is_left_out_and_named(tmp_path: Path) -> None:
    from dsh_daemon.host.config_report import effective_configuration

    hooks = {"stop": [{"command": "make test", "name": "tests"}, {"command": "x", "timeoutS": 0}]}
    (tmp_path / "config.json").write_text(json.dumps({"hooks": hooks}))
    report = effective_configuration(tmp_path, {}, {})
    shown = {s.key: s.value for s in report.settings if s.key.startswith("hooks.")}
    assert shown == {"hooks.stop[0]": {"command": "make test", "timeoutS": 30.0, "name": "tests"}}
    (problem,) = report.problems
    assert "hooks.stop[1].timeoutS" in problem and problem.endswith("; ignored")
