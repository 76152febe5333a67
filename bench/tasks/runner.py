"""One task through `dsh-daemon exec --json`: its repository prepared in a temp dir, the agent run to
its end against an endpoint, the hidden checks run, and what it cost."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.tasks.suite import Task, interpreter_env, prepare_repo, run_checks

# What the agent may do unasked in a run: commands run confined (the sandbox's default,
# workspace-write) and need no permission; the edits do.
ALLOWED_TOOLS = ("edit_file", "write_file")
CANCEL_GRACE_S = 20.0  # after SIGINT at the task's timeout, how long the turn has to end in order


@dataclass(frozen=True)
class Endpoint:
    base_url: str | None = None  # None: the daemon's default (DeepSeek)
    model: str | None = None
    thinking: bool = True
    max_cost_usd: float | None = None


@dataclass(frozen=True)
class TaskResult:
    task: str
    passed: bool
    status: str  # exec's result status ("completed", "failed", "budget-exhausted", …), or "timeout"
    exit_code: int | None
    steps: int  # model requests (step/start events)
    tool_calls: int
    tool_errors: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cost_usd: float | None
    wall_s: float  # the agent's run, from exec's start to its exit
    check_s: float
    answer: str = ""
    checks_output: str = ""
    error: str | None = None  # why there is no result line, when there is none
    events: list[dict[str, Any]] = field(default_factory=list, repr=False)

    def record(self) -> dict[str, Any]:
        """The JSONL record, keys in camelCase as on dsh's wire (events left out)."""
        data = asdict(self)
        del data["events"]
        return {"type": "task", **{_camel(key): value for key, value in data.items()}}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def exec_command(task: Task, work: Path, state: Path, endpoint: Endpoint) -> list[str]:
    command = [sys.executable, "-m", "dsh_daemon", "--state-dir", str(state)]
    if endpoint.base_url:
        command += ["--base-url", endpoint.base_url]
    if endpoint.model:
        command += ["--model", endpoint.model]
    if not endpoint.thinking:
        command.append("--no-thinking")
    command += ["exec", "--json", "--cwd", str(work), "--max-turns", str(task.max_turns)]
    for tool in ALLOWED_TOOLS:
        command += ["--allow", tool]
    if endpoint.max_cost_usd is not None:
        command += ["--max-cost-usd", str(endpoint.max_cost_usd)]
    if task.sandbox:
        command += ["--sandbox", task.sandbox]
    return [*command, "-"]  # the prompt on stdin


def _run_exec(
    command: Sequence[str], prompt: str, env: Mapping[str, str], cwd: Path, timeout_s: float
) -> tuple[int | None, str, str, bool]:
    """(exit code, stdout, stderr, timed out). At the timeout the turn is cancelled with SIGINT, as a
    person's Ctrl-C would, then killed if it does not end."""
    proc = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(env),
        cwd=cwd,
    )
    try:
        out, err = proc.communicate(prompt, timeout=timeout_s)
        return proc.returncode, out, err, False
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=CANCEL_GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        return proc.returncode, out, err, True


def parse_output(stdout: str) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """exec --json's lines: the events, and the result line (None when the run ended without one)."""
    events: list[dict[str, Any]] = []
    result: dict[str, Any] | None = None
    for line in stdout.splitlines():
        try:
            item = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(item, dict) and item.get("type") == "result":
            result = item
        elif isinstance(item, dict):
            events.append(item)
    return events, result


def run_task(
    task: Task,
    endpoint: Endpoint,
    *,
    env: Mapping[str, str] | None = None,
    keep: Path | None = None,
    timeout_s: float | None = None,
    config: Mapping[str, Any] | None = None,
    confined_checks: bool = True,
) -> TaskResult:
    """Run `task` to its end and check it. `env`: the exec's environment (default this process's; the
    interpreter's directory goes first on PATH); `keep`: leave the repository and the daemon's state
    there (else a temp dir, removed); `config`: the daemon's config.json for the run (its state dir
    starts empty: nothing of the person's own sessions or settings); `confined_checks`: run the
    checks in the sandbox (`run_checks`)."""
    with tempfile.TemporaryDirectory(prefix=f"dsh-task-{task.name}-") as tmp:
        base = keep / task.name if keep is not None else Path(tmp)
        base.mkdir(parents=True, exist_ok=True)
        work = prepare_repo(task, base / "repo")
        state = base / "state"
        state.mkdir(exist_ok=True)
        if config is not None:
            (state / "config.json").write_text(json.dumps(config))
        exec_env = interpreter_env(env)
        command = exec_command(task, work, state, endpoint)
        started = time.monotonic()
        code, out, err, timed_out = _run_exec(
            command, task.prompt, exec_env, work, timeout_s or task.timeout_s
        )
        wall = time.monotonic() - started
        if keep is not None:
            (base / "exec.jsonl").write_text(out)
            (base / "exec.stderr").write_text(err)
        events, result = parse_output(out)
        checks = run_checks(task, work, env, confined=confined_checks)
        usage = (result or {}).get("usage") or {}
        tool_results = [e["data"] for e in events if e.get("type") == "tool/result"]
        error = None
        if result is None:
            error = f"exec exited {code} without a result line; stderr ends: {err[-1500:]}"
        return TaskResult(
            task=task.name,
            passed=checks.passed,
            status="timeout" if timed_out else str((result or {}).get("status", "no-result")),
            exit_code=code,
            steps=sum(1 for e in events if e.get("type") == "step/start"),
            tool_calls=sum(1 for e in events if e.get("type") == "tool/call"),
            tool_errors=sum(1 for r in tool_results if r.get("error")),
            input_tokens=int(usage.get("inputTokens", 0)),
            output_tokens=int(usage.get("outputTokens", 0)),
            cache_read_tokens=int(usage.get("cacheReadTokens", 0)),
            cost_usd=(result or {}).get("costUsd"),
            wall_s=round(wall, 3),
            check_s=round(checks.seconds, 3),
            answer=str((result or {}).get("answer", ""))[:2000],
            checks_output=checks.output,
            error=error,
            events=events,
        )
