"""The task suite cannot rot (issue 35.5): for every task in bench/tasks, a scripted model that makes
the oracle's tool calls (its patch applied through the agent's real tools, in a real `dsh-daemon exec
--json` against the fake provider, commands in the real sandbox) passes the hidden checks, and one that
answers without doing anything fails them. Plus the runner's command line and its JSONL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.tasks.oracle import Step, edit_calls, oracle_steps
from bench.tasks.runner import Endpoint, TaskResult, run_task
from bench.tasks.suite import Task, load_tasks, prepare_repo, run_checks
from dsh_daemon.sandbox import probe_level
from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.harness import ROOT, daemon_env, tool_call_stream

TASKS = load_tasks()
BY_NAME = {task.name: task for task in TASKS}
NULL_ANSWER = "I looked at the repository; nothing needs to change."
# A confined command reaches a server on loopback only with the sandbox's layer 1 (a network namespace
# of the session's own; protocol.md §16): this task's servers and its checks' server need it.
NEEDS_LOOPBACK = {"background-server"}
FAKE = Endpoint(model="deepseek-v4-flash", thinking=False)  # the fake checks thinking-mode history


def script_oracle(fake: FakeDeepSeek, steps: list[Step]) -> None:
    replies = [
        Reply.stream(tool_call_stream([(f"call_{n}_{i}", c.name, c.arguments) for i, c in enumerate(step)]))
        for n, step in enumerate(steps)
    ]
    fake.script(*replies, Reply.stream(text_stream(["Done: the change is made and checked."])))


def run_scripted(task: Task, tmp_path: Path, steps: list[Step] | None) -> TaskResult:
    """`task` through exec against the fake: the oracle's steps, or (None) the null model's answer."""
    with FakeDeepSeek() as fake:
        if steps is None:
            fake.script(Reply.stream(text_stream([NULL_ANSWER])))
        else:
            script_oracle(fake, steps)
        env = daemon_env(tmp_path / "state", fake)
        result = run_task(task, Endpoint(fake.base_url, FAKE.model, thinking=False), env=env)
        assert fake.pending == 0, (
            f"the agent stopped before the script's end: {result.error or result.answer}"
        )
    return result


def describe(result: TaskResult) -> str:
    errors = [e["data"] for e in result.events if e["type"] == "tool/result" and e["data"].get("error")]
    return f"{result.status} {result.error or ''}\nchecks:\n{result.checks_output}\ntool errors: {json.dumps(errors)[:3000]}"


def test_there_are_at_least_twelve_tasks_each_complete() -> None:
    assert len(TASKS) >= 12
    for task in TASKS:
        assert task.summary and task.prompt.strip(), task.name
        assert list(task.checks.glob("test_*.py")), f"{task.name}: no pytest file in checks/"
        assert task.oracle_patch.read_text().startswith("diff --git"), task.name


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_the_oracle_passes(name: str, tmp_path: Path) -> None:
    task = BY_NAME[name]
    if name in NEEDS_LOOPBACK and not probe_level().namespaces:
        pytest.skip(f"{name} needs the sandbox's loopback of its own (layer 1): {probe_level().describe()}")
    steps = oracle_steps(task)
    result = run_scripted(task, tmp_path, steps)
    assert result.passed, describe(result)
    assert (result.status, result.exit_code) == ("completed", 0), describe(result)
    calls = [e["data"] for e in result.events if e["type"] == "tool/call"]
    assert len(calls) == sum(len(step) for step in steps)  # every call went through the agent's tools
    edits = [
        e["data"]
        for e in result.events
        if e["type"] == "tool/result" and e["data"]["name"] in ("edit_file", "write_file")
    ]
    assert edits and not [e for e in edits if e.get("error")], describe(result)
    assert result.steps == len(steps) + 1 and result.input_tokens > 0 and result.cost_usd
    if name == "background-server":
        check_the_background_server_ran(result)


def command_results(result: TaskResult, command: str) -> list[str]:
    ids = [
        e["data"]["callId"]
        for e in result.events
        if e["type"] == "tool/call" and command in e["data"]["arguments"]
    ]
    return [
        e["data"]["message"]["content"][0]["content"][0]["text"]
        for e in result.events
        if e["type"] == "tool/result" and e["data"]["callId"] in ids
    ]


def check_the_background_server_ran(result: TaskResult) -> None:
    """The oracle's servers ran in the background (p1, then p2 after the fix) and were stopped by the
    agent, and the e2e test reached them through the session's own loopback: it failed before the
    fix and passed after."""
    started = [e["data"]["processId"] for e in result.events if e["type"] == "process/started"]
    exited = [e["data"] for e in result.events if e["type"] == "process/exited"]
    assert started == ["p1", "p2"] and [e.get("stoppedBy") for e in exited] == ["agent", "agent"], exited
    before, after = command_results(result, "tests/test_e2e.py")
    assert "1 failed, 1 passed" in before and "2 passed" in after, (before, after)


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_the_null_run_fails(name: str, tmp_path: Path) -> None:
    result = run_scripted(BY_NAME[name], tmp_path, None)
    assert (result.status, result.exit_code, result.tool_calls) == ("completed", 0, 0), describe(result)
    assert result.answer == NULL_ANSWER
    assert not result.passed, f"{name}: the checks pass on the untouched repository:\n{result.checks_output}"


def test_edit_calls_replay_to_the_patched_text() -> None:
    before = "".join(f"line {n}\n" for n in range(1, 30))
    after = before.replace("line 3\n", "line three\n").replace("line 20\n", "line 20\nline 20b\n")
    calls = edit_calls("f.txt", before, after)
    assert [c.name for c in calls] == ["edit_file", "edit_file"]
    text = before
    for call in calls:
        assert text.count(call.arguments["old_string"]) == 1
        text = text.replace(call.arguments["old_string"], call.arguments["new_string"])
    assert text == after
    # A region whose text is not unique cannot be an exact edit: the whole file is written instead.
    repeated = "same\n" * 12
    changed = "same\n" * 5 + "other\n" + "same\n" * 6
    (call,) = edit_calls("r.txt", repeated, changed)
    assert call.name == "write_file" and call.arguments["content"] == changed


def test_a_task_past_its_timeout_is_cancelled_and_reported(tmp_path: Path) -> None:
    task = BY_NAME["fix-failing-test"]
    with FakeDeepSeek() as fake:
        fake.script(Reply.stream(text_stream(["Thinking about it"])[:2], tail="stall"))
        result = run_task(
            task,
            Endpoint(fake.base_url, FAKE.model, thinking=False),
            env=daemon_env(tmp_path / "state", fake),
            timeout_s=3,
        )
    assert (result.status, result.exit_code, result.passed) == ("timeout", 130, False), describe(result)


def test_the_command_line_runs_tasks_prints_a_table_and_writes_jsonl(tmp_path: Path) -> None:
    """`python -m bench.tasks` as a person runs it: the first task gets the oracle's replies, the second
    the null model's; the table and the JSONL say one of two passed. The model is one the daemon has
    no prices for; `--config` gives them: 1 USD per input token the fake reports missing the cache
    (12 per request), nothing else."""
    first, second = BY_NAME["fix-failing-test"], BY_NAME["implement-stub"]
    out = tmp_path / "results.jsonl"
    config = tmp_path / "config.json"
    prices = {"bench-model": {"cacheHit": 0, "cacheMiss": 1_000_000, "output": 0}}
    config.write_text(json.dumps({"provider": {"prices": prices}}))
    with FakeDeepSeek() as fake:
        script_oracle(fake, oracle_steps(first))
        fake.script(Reply.stream(text_stream([NULL_ANSWER])))
        env = daemon_env(tmp_path / "state", fake)
        argv = [
            "--base-url",
            fake.base_url,
            "--model",
            "bench-model",
            "--no-thinking",
            "--config",
            str(config),
        ]
        argv += ["--tasks", f"{first.name},{second.name}", "--jsonl", str(out)]
        done = subprocess.run(
            [sys.executable, "-m", "bench.tasks", *argv],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
            timeout=300,
        )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split()[:3] == ["task", "pass", "status"]
    rows = {line.split()[0]: line.split() for line in lines if line.split() and line.split()[0] in BY_NAME}
    assert rows[first.name][1:3] == ["PASS", "completed"] and rows[second.name][1:3] == ["fail", "completed"]
    assert lines[-1].split()[:3] == ["total", "1/2", "(50%)"]
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["type"], r.get("task"), r.get("passed")) for r in records] == [
        ("task", first.name, True),
        ("task", second.name, False),
        ("total", None, 1),
    ]
    assert records[0]["steps"] == len(oracle_steps(first)) + 1
    assert [r["costUsd"] for r in records] == [
        12.0 * records[0]["steps"],
        12.0,
        12.0 * (records[0]["steps"] + 1),
    ]
    assert records[0]["model"] == "bench-model" and records[0]["baseUrl"] == fake.base_url
    assert (
        records[-1]["passRate"] == 0.5
        and records[-1]["inputTokens"] == records[0]["inputTokens"] + records[1]["inputTokens"]
    )
    assert "DEEPSEEK_API_KEY" not in out.read_text() and "sk-test" not in out.read_text()


def test_an_unknown_task_is_a_usage_error() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.tasks", "--tasks", "no-such-task"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 2 and "no task no-such-task" in done.stderr


def test_prepared_repo_is_a_clean_git_checkout_and_checks_replace_planted_ones(tmp_path: Path) -> None:
    task = BY_NAME["implement-stub"]
    work = prepare_repo(task, tmp_path / "repo")
    assert (
        subprocess.run(["git", "status", "--porcelain"], cwd=work, capture_output=True, text=True).stdout
        == ""
    )
    planted = work / ".bench_checks"
    planted.mkdir()
    # An agent that plants a passing check of the same name gains nothing: the real ones replace it.
    (planted / "test_hidden.py").write_text("def test_nothing():\n    pass\n")
    outcome = run_checks(task, work)
    assert not outcome.passed and "NotImplementedError" in outcome.output


def test_the_checks_run_the_agents_code_confined(tmp_path: Path) -> None:
    """The hidden checks import what the agent wrote: they run in the sandbox (workspace-write), so a
    write outside the task's repository is refused; unconfined (a machine without the sandbox) it is
    not."""
    root = tmp_path / "task"
    (root / "repo").mkdir(parents=True)
    (root / "checks").mkdir()
    (root / "repo" / "evil.py").write_text(
        "import os, pathlib\ndef run():\n    pathlib.Path(os.environ['OUTSIDE']).write_text('escaped')\n"
    )
    (root / "checks" / "test_hidden.py").write_text("import evil\n\ndef test_it():\n    evil.run()\n")
    task = Task(name="escape", root=root, summary="", prompt="")
    outside = tmp_path / "outside.txt"
    env = {**os.environ, "OUTSIDE": str(outside)}
    confined = run_checks(task, prepare_repo(task, tmp_path / "a"), env)
    assert not confined.passed and not outside.exists(), confined.output
    assert "PermissionError" in confined.output or "Read-only" in confined.output, confined.output
    unconfined = run_checks(task, prepare_repo(task, tmp_path / "b"), env, confined=False)
    assert unconfined.passed and outside.read_text() == "escaped", unconfined.output
