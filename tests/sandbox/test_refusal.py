"""No silent fail-open: a confined mode with no confinement refuses, and says why; full-access still
runs (unconfined, through the same interface). The command line shows the same."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dsh_daemon.sandbox import Sandbox, SandboxLevel, SandboxUnavailable, probe_level
from tests.sandbox.conftest import command_env, needs_layer0, policy_for, run
from tests.sandbox.scene import Scene

NOTHING = SandboxLevel(
    landlock_abi=None,
    seccomp=False,
    namespaces=False,
    reasons=("the kernel has no Landlock (ENOSYS)", "seccomp filter is written for x86-64, this is riscv64"),
)


@pytest.mark.parametrize("mode", ["workspace-write", "read-only"])
async def test_layers_none_refuses_confined_modes_with_the_reason(scene: Scene, mode: str) -> None:
    with pytest.raises(SandboxUnavailable, match=r"layers=none.*only full-access can run commands"):
        await Sandbox.start(policy_for(scene, mode, "none"))


@pytest.mark.parametrize("mode", ["workspace-write", "read-only"])
async def test_a_machine_without_landlock_refuses_with_the_reason(scene: Scene, mode: str) -> None:
    with pytest.raises(SandboxUnavailable) as caught:
        await Sandbox.start(policy_for(scene, mode, "auto"), NOTHING)
    text = str(caught.value)
    assert "the kernel has no Landlock (ENOSYS)" in text and "riscv64" in text and "unconfined" in text


async def test_full_access_runs_unconfined_where_nothing_confines(
    scene: Scene, started: list[Sandbox]
) -> None:
    sandbox = await Sandbox.start(policy_for(scene, "full-access", "none"), NOTHING)
    started.append(sandbox)
    status, _ = await run(
        sandbox, f"echo written > {scene.outside}/target.txt", cwd=scene.ws, env=command_env(scene)
    )
    assert status == 0 and (scene.outside / "target.txt").read_text() == "written\n"
    assert sandbox.proxy_socket() is None


def test_the_level_describes_what_is_missing() -> None:
    assert NOTHING.describe().startswith("unconfined (only full-access can run commands")
    partial = SandboxLevel(7, True, False, ("namespaces refused: unshare: Operation not permitted",))
    assert partial.describe() == "Landlock 7 + seccomp; namespaces refused: unshare: Operation not permitted"
    assert partial.confined and not NOTHING.confined


def _cli(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dsh_daemon", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_sandbox_check_prints_the_probed_level(tmp_path: Path) -> None:
    env = {**os.environ, "DSH_HOME": str(tmp_path / "dsh")}
    done = _cli("sandbox", "check", "--json", cwd=tmp_path, env=env)
    assert json.loads(done.stdout) == probe_level().json()
    assert done.returncode == (0 if probe_level().confined else 1)
    text = _cli("sandbox", "check", cwd=tmp_path, env=env).stdout
    assert text.startswith(f"sandbox: {probe_level().describe()}\n")


@needs_layer0
@pytest.mark.parametrize("layers", ["auto", "landlock-only"])
def test_sandbox_run_confines_a_command_as_the_agent_would(scene: Scene, layers: str) -> None:
    env = {
        **command_env(scene),
        "DSH_HOME": str(scene.dsh_home),
        "PYTHONPATH": str(Path(__file__).parents[2]),
    }
    script = f"env; echo in > src/file.txt; cat {scene.dsh_home}/sessions.db; echo out > {scene.outside}/target.txt"
    done = _cli("sandbox", "run", "--layers", layers, "--", "sh", "-c", script, cwd=scene.ws, env=env)
    assert done.returncode != 0
    assert (scene.ws / "src" / "file.txt").read_text() == "in\n"
    assert (scene.outside / "target.txt").read_text() == "ORIGINAL\n"
    assert not any(token in done.stdout + done.stderr for token in scene.secret_tokens())
    assert "workspace-write, Landlock" in done.stderr
    full = _cli("sandbox", "run", "--mode", "full-access", "--", "sh", "-c", f"echo out > {scene.outside}/target.txt", cwd=scene.ws, env=env)  # fmt: skip
    assert full.returncode == 0 and (scene.outside / "target.txt").read_text() == "out\n"
