"""The commands' private temp directory (`$TMPDIR`, `dsh-sandbox-…`) does not outlive its sandbox:
removed by `aclose`, and also when a sandbox is dropped without it (collected, or at the
interpreter's exit). A test run left ~60 of them in /tmp before; a crowded /tmp once made the fork
server's rules too large to send (tests/sandbox/test_crowded_rules.py)."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dsh_daemon.tools.factory import build_tool_registry
from dsh_daemon.tools.sandboxing import probe_level
from dsh_daemon.tools.workspace import Workspace
from tests.server.harness import ROOT
from tests.tools.conftest import run_tool, text_of

PRINT_TMPDIR = {"command": 'echo "TMPDIR=$TMPDIR"'}
# A confined command gets the private directory as its $TMPDIR (an unconfined one keeps the person's).
pytestmark = pytest.mark.skipif(not probe_level().confined, reason=probe_level().describe())


def _tmpdir_in(text: str) -> Path:
    line = next(line for line in text.splitlines() if line.startswith("TMPDIR="))
    return Path(line.removeprefix("TMPDIR="))


async def test_aclose_removes_it(root: Path) -> None:
    kit = build_tool_registry(Workspace([root]), config={"sandbox": "workspace-write"})
    temp = _tmpdir_in(text_of(await run_tool(kit, "run_command", PRINT_TMPDIR)))
    assert temp.name.startswith("dsh-sandbox-") and temp.is_dir()
    await kit.sandbox.aclose()
    assert not temp.exists()
    await kit.sandbox.aclose()  # a second close finds nothing to remove


async def test_a_sandbox_dropped_without_aclose_removes_it_when_collected(root: Path) -> None:
    kit = build_tool_registry(Workspace([root]), config={"sandbox": "workspace-write"})
    temp = _tmpdir_in(text_of(await run_tool(kit, "run_command", PRINT_TMPDIR)))
    (temp / "left.txt").write_text("a command's scratch file\n")
    assert temp.is_dir()
    del kit
    gc.collect()
    assert not temp.exists()


def test_a_process_that_ends_without_closing_its_sandbox_removes_it(root: Path) -> None:
    script = textwrap.dedent(
        f"""
        import asyncio
        from dsh_daemon.tools.factory import build_tool_registry
        from dsh_daemon.tools.workspace import Workspace
        from tests.tools.conftest import run_tool, text_of

        async def main():
            global kit  # still referenced when the interpreter exits
            kit = build_tool_registry(Workspace([{str(root)!r}]), config={{"sandbox": "workspace-write"}})
            print(text_of(await run_tool(kit, "run_command", {PRINT_TMPDIR!r})), flush=True)

        asyncio.run(main())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert done.returncode == 0, done.stderr
    temp = _tmpdir_in(done.stdout)
    assert temp.name.startswith("dsh-sandbox-")
    assert not temp.exists()
