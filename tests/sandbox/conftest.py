"""Fixtures of the sandbox suites: a fresh scene per test and a helper that runs a shell snippet in a
session's sandbox and returns its status and output. Real kernel features, no mocks: a machine
without Landlock skips these suites (tests/sandbox/test_refusal.py still runs)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from dsh_daemon.sandbox import Sandbox, SandboxPolicy, probe_level
from tests.sandbox.scene import API_KEY_NAME, Scene

needs_layer0 = pytest.mark.skipif(not probe_level().confined, reason=probe_level().describe())
needs_layer1 = pytest.mark.skipif(not probe_level().namespaces, reason=probe_level().describe())


@pytest.fixture
def scene(tmp_path: Path) -> Iterator[Scene]:
    built = Scene.build(tmp_path)
    try:
        yield built
    finally:
        built.close()


def policy_for(scene: Scene, mode: str, layers: str, **extra: object) -> SandboxPolicy:
    return SandboxPolicy(
        mode=mode,  # type: ignore[arg-type]
        roots=(scene.ws,),
        temp_dir=scene.temp,
        layers=layers,  # type: ignore[arg-type]
        home=scene.home,
        dsh_home=scene.dsh_home,
        **extra,  # type: ignore[arg-type]
    )


def command_env(scene: Scene) -> dict[str, str]:
    """What a caller might hand a command, the daemon's API key included (spawn must drop it)."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(scene.home),
        "LANG": "C.UTF-8",
        API_KEY_NAME: scene.api_key,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }


async def run(
    sandbox: Sandbox, script: str, *, cwd: Path, env: dict[str, str], keep_leftovers: bool = False
) -> tuple[int, str]:
    """Run `sh -c script`; its status and its stdout and stderr together."""
    devnull = os.open(os.devnull, os.O_RDONLY)
    with tempfile.TemporaryFile() as out:
        try:
            process = await sandbox.spawn(
                ["sh", "-c", script],
                cwd=cwd,
                env=env,
                stdin=devnull,
                stdout=out.fileno(),
                stderr=out.fileno(),
                keep_leftovers=keep_leftovers,
            )
        finally:
            os.close(devnull)
        status = await process.wait()
        out.seek(0)
        return status, out.read().decode(errors="replace")


@pytest.fixture
async def started() -> AsyncIterator[list[Sandbox]]:
    """Sandboxes a test starts, closed at its end."""
    sandboxes: list[Sandbox] = []
    yield sandboxes
    for sandbox in sandboxes:
        await sandbox.aclose()
