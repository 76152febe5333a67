"""The VS Code extension's own test suites (editors/vscode), run through npm.

They need `scripts/setup-vscode.sh` first (node_modules; code-server, Node 24 and chromium for the end
to end test). Without those they skip and say why, except under CI (env CI set), where they fail.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXT = ROOT / "editors" / "vscode"
CODE_SERVER = EXT / ".tools" / "cs" / "node_modules" / ".bin" / "code-server"


def _require(ok: bool, reason: str) -> None:
    if ok:
        return
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI is set, so this is a failure: run scripts/setup-vscode.sh)")
    pytest.skip(f"{reason}: run scripts/setup-vscode.sh")


def _npm(*args: str, timeout: float) -> None:
    _require(shutil.which("npm") is not None, "npm is not installed")
    _require((EXT / "node_modules" / ".bin" / "vitest").exists(), "editors/vscode/node_modules is missing")
    env = dict(os.environ, FORCE_COLOR="0", NO_COLOR="1")
    # Each suite rebuilds dist/: under pytest-xdist the three must not run at the same time.
    with open(EXT / ".test.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        result = subprocess.run(
            ["npm", *args], cwd=EXT, capture_output=True, text=True, timeout=timeout, env=env
        )
    assert result.returncode == 0, (
        f"`npm {' '.join(args)}` exited {result.returncode}\n--- stdout\n{result.stdout[-20000:]}"
        f"\n--- stderr\n{result.stderr[-8000:]}"
    )


def test_typecheck_lint_build() -> None:
    _npm("run", "check", timeout=300)


def test_vitest() -> None:
    _npm("test", timeout=600)


def test_end_to_end_in_code_server() -> None:
    """The packaged .vsix in code-server, driven by Chromium: stream, queue, stop, run queue, edit
    approval from the diff card, a selection chip, Reload Window; the sandbox header, an escalation
    answered from its card, the plan and a budget stop (e2e/sandbox.e2e.ts). Screenshots:
    $DSH_E2E_SHOTS or a temp dir printed in the output."""
    _require(CODE_SERVER.exists(), "code-server is not installed")
    _require(
        Path("/usr/bin/chromium").exists() or shutil.which("chromium") is not None,
        "chromium is not installed",
    )
    _npm("run", "e2e", timeout=1500)
