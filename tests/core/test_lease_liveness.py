"""Whether a lease holder lives: a zombie daemon (exited, not yet reaped by the editor that spawned
it) must not keep its sessions leased (issue 10 item 3: a reloaded window comes back writable)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dsh_daemon.session.lease import pid_alive

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")


def _state(pid: int) -> str:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rfind(")") + 2 :].split()[0]


def test_a_running_process_is_alive_and_an_unreaped_exited_one_is_not() -> None:
    assert pid_alive(os.getpid())
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    quitter = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        assert pid_alive(sleeper.pid)
        for _ in range(1000):  # not reaped (no wait()): it stays a zombie once it has exited
            if _state(quitter.pid) == "Z":
                break
            time.sleep(0.01)
        assert _state(quitter.pid) == "Z"
        assert not pid_alive(quitter.pid)
    finally:
        sleeper.kill()
        sleeper.wait()
        quitter.wait()
