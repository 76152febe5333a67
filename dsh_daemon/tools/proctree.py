"""Every process a `run_command` started, however it detached, so that killing a command (timeout,
cancel, task cancellation) and the daemon's shutdown leave nothing behind.

A process group alone is not enough: a child can leave it (`setsid`, `nohup … &` under a
job-controlling shell, a double fork). So, on Linux:
- the daemon makes itself a child subreaper (`prctl(PR_SET_CHILD_SUBREAPER)`): an orphan of a command
  is re-parented to the daemon instead of init, and stays findable by parentage;
- every command's environment carries a marker (`DSH_COMMAND_ID`), which its descendants inherit;
- a tree is the command's shell and its descendants (walking `/proc` by parent pid), plus every
  orphan adopted by the daemon (or init) that carries the marker, plus the descendants of processes
  seen in an earlier scan (pid and start time, so a reused pid is never mistaken for one of them).
Adopted orphans are the daemon's children, so it reaps them once they are dead.

Where `/proc` or `prctl` is missing (macOS), only the process group is killed.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal as signals
import sys
import uuid
from collections import defaultdict
from dataclasses import dataclass, field

MARKER_ENV = "DSH_COMMAND_ID"
PR_SET_CHILD_SUBREAPER = 36

_HAS_PROC = os.path.isdir("/proc/self")
_subreaper: bool | None = None


def become_subreaper() -> bool:
    """Once per process (Linux only): orphans of our commands are re-parented to us, not to init."""
    global _subreaper
    if _subreaper is None:
        _subreaper = False
        if sys.platform.startswith("linux"):
            with contextlib.suppress(OSError, AttributeError):
                libc = ctypes.CDLL(None, use_errno=True)
                _subreaper = libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    return _subreaper


@dataclass(frozen=True, slots=True)
class _Proc:
    ppid: int
    start: int  # clock ticks after boot: with the pid, a process's identity
    state: str
    pgrp: int


def _table() -> dict[int, _Proc]:
    table: dict[int, _Proc] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return table
    for name in entries:
        if not name.isdigit():
            continue
        proc = _table_entry(int(name))
        if proc is not None:  # else: gone meanwhile
            table[int(name)] = proc
    return table


def _table_entry(pid: int) -> _Proc | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read()
        fields = raw[raw.rindex(b")") + 2 :].split()
        return _Proc(int(fields[1]), int(fields[19]), fields[0].decode(), int(fields[2]))
    except (OSError, ValueError, IndexError):
        return None


def _carries(pid: int, marker: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return marker in b"\0" + handle.read()
    except OSError:
        return False


@dataclass(eq=False)
class ProcessTree:
    """The processes of one command: its shell `root` and everything descending from it."""

    root: int
    marker: str = field(default_factory=lambda: uuid.uuid4().hex)
    known: set[tuple[int, int]] = field(default_factory=set)  # (pid, start time) seen in a scan
    root_start: int | None = None  # the shell's start time: its pid is never trusted once reused

    def started(self, root: int) -> None:
        """The command's shell is `root` (spawned with `env` in its environment)."""
        self.root = root
        proc = _table_entry(root)
        self.root_start = proc.start if proc is not None else None

    @property
    def env(self) -> dict[str, str]:
        return {MARKER_ENV: self.marker}

    def scan(self) -> dict[int, _Proc]:
        """The live processes of the tree now (the root included while it exists)."""
        table = _table()
        if not table:
            return {}
        children: dict[int, list[int]] = defaultdict(list)
        for pid, proc in table.items():
            children[proc.ppid].append(pid)
        seeds = set()
        root = table.get(self.root)
        if root is not None and root.start == self.root_start:
            seeds.add(self.root)
        seeds |= {pid for pid, start in self.known if pid in table and table[pid].start == start}
        tag = f"\0{MARKER_ENV}={self.marker}\0".encode()
        me = os.getpid()
        for pid, proc in table.items():
            if proc.ppid in (me, 1) and pid not in seeds and _carries(pid, tag):
                seeds.add(pid)  # an orphan of this command, adopted by the daemon (or init)
        found: dict[int, _Proc] = {}
        stack = [pid for pid in seeds if pid in table]
        while stack:
            pid = stack.pop()
            if pid in found or pid == me:
                continue
            found[pid] = table[pid]
            stack.extend(children.get(pid, ()))
        self.known |= {(pid, proc.start) for pid, proc in found.items() if pid != self.root}
        return found

    def signal(self, sig: int) -> int:
        """Send `sig` to the root's process group and to every process of the tree; how many got it."""
        found = self.scan()
        if not _HAS_PROC or any(proc.pgrp == self.root for proc in found.values()):
            # The group is still the command's (never a reused pid's); without /proc, trust it.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.root, sig)
        sent = 0
        for pid, proc in found.items():
            if proc.state == "Z":
                continue
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
                sent += 1
        self.reap()
        return sent

    def reap(self) -> None:
        """Collect adopted orphans of this tree that have died (never the root: asyncio waits for it)."""
        me = os.getpid()
        table = _table()
        for pid, start in list(self.known):
            proc = table.get(pid)
            if proc is None or proc.start != start:
                self.known.discard((pid, start))
                continue
            if proc.ppid == me and proc.state == "Z":
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, os.WNOHANG)
                self.known.discard((pid, start))

    def alive(self) -> bool:
        return any(proc.state != "Z" for proc in self.scan().values())


# Trees whose processes may outlive their command (a detached background process): killed when the
# daemon shuts down.
_TREES: set[ProcessTree] = set()


def register(tree: ProcessTree) -> None:
    _TREES.add(tree)


def forget_finished() -> None:
    for tree in list(_TREES):
        tree.reap()
        if not tree.alive():
            _TREES.discard(tree)


def kill_all() -> None:
    """The daemon is going away: every process any command started dies with it."""
    for tree in list(_TREES):
        tree.signal(signals.SIGKILL)
        _TREES.discard(tree)
