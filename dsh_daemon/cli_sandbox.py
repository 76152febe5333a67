"""`dsh-daemon sandbox check` (what this machine allows and why) and `dsh-daemon sandbox run`
(a command run as the agent would run it: same policy, same fork server)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path


def sandbox_check(*, as_json: bool) -> int:
    """Exit status 0 when a confined mode can run commands here, 1 when only full-access can."""
    from dsh_daemon.sandbox import probe_level

    level = probe_level()
    if as_json:
        print(json.dumps(level.json(), indent=2))
    else:
        print(f"sandbox: {level.describe()}")
        print(f"  layer 0 (Landlock + seccomp): {'yes' if level.confined else 'no'}")
        print(f"  layer 1 (user, mount, PID, network namespaces): {'yes' if level.namespaces else 'no'}")
        if not level.confined:
            print("  read-only and workspace-write refuse to run commands here; choose full-access")
    return 0 if level.confined else 1


def sandbox_run(argv: Sequence[str], *, mode: str, layers: str, state_dir: Path) -> int:
    """Run `argv` in the current directory under `mode`; its exit status is ours (126: the sandbox
    refused or could not confine it)."""
    if not argv:
        print("dsh-daemon sandbox run: give the command after --", file=sys.stderr)
        return 2
    return asyncio.run(_run(list(argv), mode, layers, state_dir))


async def _run(argv: list[str], mode: str, layers: str, state_dir: Path) -> int:
    from dsh_daemon.sandbox import Sandbox, SandboxPolicy, SandboxUnavailable

    temp = Path(tempfile.mkdtemp(prefix="dsh-sandbox-"))
    try:
        policy = SandboxPolicy(
            mode=mode,  # type: ignore[arg-type]  # argparse's choices are the modes
            roots=(Path.cwd(),),
            temp_dir=temp,
            layers=layers,  # type: ignore[arg-type]
            dsh_home=state_dir,
        )
        try:
            sandbox = await Sandbox.start(policy)
        except SandboxUnavailable as exc:
            print(f"dsh-daemon sandbox: refused: {exc}", file=sys.stderr)
            return 126
        try:
            print(f"dsh-daemon sandbox: {mode}, {sandbox.level.describe()}", file=sys.stderr)
            env = dict(os.environ)
            process = await sandbox.spawn(argv, cwd=Path.cwd(), env=env, stdin=0, stdout=1, stderr=2)
            return await process.wait() % 256
        finally:
            await sandbox.aclose()
    finally:
        shutil.rmtree(temp, ignore_errors=True)
