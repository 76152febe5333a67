"""The tasks on disk, a task's starting repository and its hidden checks."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

TASKS_DIR = Path(__file__).resolve().parent
CHECKS_DIR_NAME = ".bench_checks"  # where the hidden checks go once the agent stopped
GIT_IDENTITY = ("-c", "user.name=bench", "-c", "user.email=bench@localhost", "-c", "commit.gpgsign=false")
DEFAULT_MAX_TURNS = 40
DEFAULT_TIMEOUT_S = 600.0
CHECK_TIMEOUT_S = 300.0
SANDBOX_REFUSED = 126  # `dsh-daemon sandbox run`'s status when it cannot confine


class TaskError(ValueError):
    """A task folder that is not a task, or a name that names none."""


@dataclass(frozen=True)
class Task:
    name: str
    root: Path
    summary: str
    prompt: str
    max_turns: int = DEFAULT_MAX_TURNS
    timeout_s: float = DEFAULT_TIMEOUT_S
    sandbox: str | None = None  # the exec's --sandbox; None: the configured default (workspace-write)

    @property
    def repo(self) -> Path:
        return self.root / "repo"

    @property
    def checks(self) -> Path:
        return self.root / "checks"

    @property
    def oracle_patch(self) -> Path:
        return self.root / "oracle.patch"

    @property
    def oracle_extra(self) -> Path:
        return self.root / "oracle.json"


def load_task(root: Path) -> Task:
    meta_path = root / "task.toml"
    missing = [
        p.name
        for p in (meta_path, root / "prompt.md", root / "repo", root / "checks", root / "oracle.patch")
        if not p.exists()
    ]
    if missing:
        raise TaskError(f"{root.name}: not a task, it lacks {', '.join(missing)}")
    meta = tomllib.loads(meta_path.read_text())
    return Task(
        name=root.name,
        root=root,
        summary=str(meta.get("summary", "")),
        prompt=(root / "prompt.md").read_text(),
        max_turns=int(meta.get("max_turns", DEFAULT_MAX_TURNS)),
        timeout_s=float(meta.get("timeout_s", DEFAULT_TIMEOUT_S)),
        sandbox=meta.get("sandbox"),
    )


def load_tasks(names: Sequence[str] | None = None, tasks_dir: Path = TASKS_DIR) -> list[Task]:
    """Every task in `tasks_dir`, sorted by name; or those named, in the order given."""
    found = {p.name: p for p in tasks_dir.iterdir() if p.is_dir() and (p / "task.toml").exists()}
    if not names:
        return [load_task(found[name]) for name in sorted(found)]
    unknown = [name for name in names if name not in found]
    if unknown:
        raise TaskError(f"no task {', '.join(unknown)} (there are: {', '.join(sorted(found))})")
    return [load_task(found[name]) for name in names]


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *GIT_IDENTITY, *args], cwd=repo, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} in {repo}: {done.stderr.strip()}")
    return done.stdout


def prepare_repo(task: Task, dest: Path) -> Path:
    """The task's starting files in `dest`, committed to a new git repository (branch main)."""
    shutil.copytree(task.repo, dest, symlinks=True)
    git(dest, "init", "-q", "-b", "main")
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "-m", f"start of task {task.name}")
    return dest


@dataclass(frozen=True)
class CheckOutcome:
    passed: bool
    output: str  # the tail of pytest's output
    seconds: float


def interpreter_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """`base` (default: this process's environment) with this interpreter's directory first on PATH,
    so that `python` and `pytest` in a task's commands and checks are the ones running the suite, and
    pytest's plugin autoload off: the tasks are plain pytest projects, whatever plugins that
    interpreter has."""
    env = dict(os.environ if base is None else base)
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([bindir, env.get("PATH", os.defpath)])
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    return env


def run_checks(
    task: Task, work: Path, env: Mapping[str, str] | None = None, *, confined: bool = True
) -> CheckOutcome:
    """Copy the hidden checks into `work` (replacing any the agent may have made) and run them with
    pytest, this interpreter, no plugins but pytest's own: passed when pytest exits 0. They run the
    agent's code, so they run `confined` by default: in dsh's sandbox (`dsh-daemon sandbox run`,
    workspace-write: writes only in `work` and a private temp dir, no network but a loopback of their
    own). Where the sandbox cannot be had they fail, saying so, unless `confined` is False."""
    target = work / CHECKS_DIR_NAME
    if target.is_symlink() or target.is_file():
        target.unlink()
    elif target.exists():
        shutil.rmtree(target)
    shutil.copytree(task.checks, target)
    check_env = interpreter_env(env)
    check_env.pop("DEEPSEEK_API_KEY", None)
    pytest = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "--rootdir",
        str(work),
        CHECKS_DIR_NAME,
    ]
    if not confined:
        return _run_checks(pytest, work, check_env)
    with tempfile.TemporaryDirectory(prefix="dsh-checks-state-") as state:
        sandbox = [sys.executable, "-m", "dsh_daemon", "--state-dir", state, "sandbox", "run"]
        return _run_checks([*sandbox, "--mode", "workspace-write", "--", *pytest], work, check_env)


def _run_checks(command: Sequence[str], work: Path, env: Mapping[str, str]) -> CheckOutcome:
    started = time.monotonic()
    try:
        done = subprocess.run(
            command, cwd=work, env=dict(env), capture_output=True, text=True, timeout=CHECK_TIMEOUT_S
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout if isinstance(exc.stdout, str) else ""
        note = f"[checks timed out after {CHECK_TIMEOUT_S:.0f} s]"
        return CheckOutcome(False, f"{out[-3000:]}\n{note}", time.monotonic() - started)
    output = (done.stdout + done.stderr)[-3000:]
    if done.returncode == SANDBOX_REFUSED and "sandbox: refused" in done.stderr:
        output += (
            "\n[the checks could not run confined on this machine; --unconfined-checks runs them as they are]"
        )
    return CheckOutcome(done.returncode == 0, output, time.monotonic() - started)
