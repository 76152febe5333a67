"""One task of the suite with a real local model (issue 35.5): SmolLM2-135M behind llama-cpp-python's
OpenAI-compatible server (tests/llm/llama.py; scripts/setup-local-model.sh installs it, and without it
this test skips). What is asserted is the plumbing: the task ran through `dsh-daemon exec --json`
against a real model server to a typed end, and its checks ran. Whether the model solved the task is
reported, never asserted: a 135M model does not call tools on its own (shared/spec/provider.md).
The report is a `BenchReport` warning (it shows in pytest's warnings summary, under xdist too) and a
`record_property` (JUnit XML)."""

from __future__ import annotations

import dataclasses
import json
import os
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest

from bench.tasks.report import table
from bench.tasks.runner import Endpoint, run_task
from bench.tasks.suite import load_tasks
from dsh_daemon.chat.exec_args import STATUS_NAMES
from tests.llm.llama import MODEL_ALIAS, llama_server
from tests.server.harness import ROOT

pytestmark = pytest.mark.slow

TASK = "fix-failing-test"


class BenchReport(UserWarning):
    """A measurement the test reports without asserting it."""


def local_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DEEPSEEK_", "DSH_"))}
    env.update({"DSH_HOME": str(tmp_path / "state"), "HOME": str(tmp_path / "home"), "PYTHONPATH": str(ROOT)})
    return env


def test_one_task_with_the_local_smollm2(
    tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    # The model reads a long prompt slowly on 2 cores: at most 2 requests of at most 128 tokens each
    # (it would otherwise write until its context is full), and a timeout that cancels the run.
    task = dataclasses.replace(load_tasks([TASK])[0], max_turns=2)
    config = {"provider": {"maxTokens": 128}}
    with llama_server(tmp_path, n_ctx=8192) as server:
        endpoint = Endpoint(server.base_url, MODEL_ALIAS, thinking=False)
        result = run_task(task, endpoint, env=local_env(tmp_path), timeout_s=420, config=config)
        death = server.death()
    record = result.record()
    record_property("bench_task_result", json.dumps(record))
    print(table([result]))
    warnings.warn(
        BenchReport(
            f"SmolLM2-135M (local) on {TASK}: {'PASS' if result.passed else 'fail'} ({result.status},"
            f" {result.steps} steps, {result.tool_calls} tool calls, {result.input_tokens} input tokens,"
            f" {result.wall_s:.1f} s)"
        ),
        stacklevel=1,
    )
    assert death is None, death
    assert result.error is None, result.error
    assert result.status in {*STATUS_NAMES.values(), "timeout"}, record
    assert result.steps >= 1, record  # the model was asked at least once
    assert result.checks_output, "the checks did not run"
