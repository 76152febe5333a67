"""Commands spawned without confinement, through the sandbox's interface (`Sandbox.spawn`,
`SandboxedProcess.wait/kill_tree`), where the sandbox's fork server cannot run (a system other than
Linux): only `full-access` can run here, and a confined mode is refused (`SandboxUnavailable`), never
run unconfined.

The process tree is tracked as `run_command` always did (`proctree`: its own session, a marker in
its environment, orphans adopted by the daemon), so killing a command kills everything it started.
"""

from __future__ import annotations

import asyncio
import signal as signals
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from dsh_daemon.sandbox.policy import SandboxLevel, SandboxPolicy, SandboxUnavailable
from dsh_daemon.tools import proctree


def probe_level() -> SandboxLevel:
    return SandboxLevel(None, False, False, (f"no sandbox on {sys.platform} (Linux only)",))


class SandboxedProcess:
    def __init__(self, popen: subprocess.Popen[bytes], tree: proctree.ProcessTree) -> None:
        self._popen = popen
        self._tree = tree
        self.pid = popen.pid

    async def wait(self) -> int:
        """The exit status as soon as it is known (never waiting on the output pipe); the tree is
        scanned meanwhile (~every 0.2 s), so a process that detaches is still known as the command's."""
        delay, waited = 0.005, 0.0
        while (code := self._popen.poll()) is None:
            await asyncio.sleep(delay)
            waited += delay
            delay = min(delay * 2, 0.05)
            if waited >= 0.2:
                waited = 0.0
                self._tree.scan()
        self._tree.scan()
        return code

    def kill_tree(self, sig: int = signals.SIGKILL) -> None:
        self._tree.signal(sig)
        self._tree.reap()


class Sandbox:
    def __init__(self, policy: SandboxPolicy, level: SandboxLevel) -> None:
        self.policy = policy
        self.level = level
        self.proxy_port: int | None = None

    @classmethod
    async def start(cls, policy: SandboxPolicy, level: SandboxLevel | None = None) -> Sandbox:
        level = level or probe_level()
        if policy.mode != "full-access":
            raise SandboxUnavailable(level.describe())
        proctree.become_subreaper()
        return cls(policy, level)

    def proxy_socket(self) -> None:
        return None

    @property
    def layer1(self) -> bool:
        return False

    async def spawn(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        stdin: int,
        stdout: int,
        stderr: int,
        keep_leftovers: bool = False,
        own_env: Mapping[str, str] | None = None,
    ) -> SandboxedProcess:
        if self.policy.mode != "full-access":
            raise SandboxUnavailable(self.level.describe())
        env = {**env, **(own_env or {})}
        proctree.forget_finished()
        tree = proctree.ProcessTree(0)
        # No preexec_fn: safe in a multi-threaded daemon; a fork+exec is as quick as asyncio's own.
        popen = subprocess.Popen(  # noqa: ASYNC220
            list(argv),
            cwd=cwd,
            env={**env, **tree.env},
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
            close_fds=True,
        )
        tree.started(popen.pid)
        proctree.register(tree)
        return SandboxedProcess(popen, tree)

    async def update(self, policy: SandboxPolicy) -> None:
        self.policy = policy

    async def aclose(self) -> None:
        """Nothing of its own to stop: the daemon's shutdown kills the trees (`proctree.kill_all`)."""
        return None
