"""What confinement this machine gives, probed once per process: Landlock's ABI and seccomp in this
process (harmless queries), user namespaces in a child process (really set up, never assumed)."""

from __future__ import annotations

import functools
import subprocess
import sys
from pathlib import Path

from dsh_daemon.sandbox.policy import SandboxLevel

PACKAGE_PARENT = str(Path(__file__).resolve().parent.parent.parent)
# How the fork server starts: without site (the daemon's path is passed) and without the
# environment's PYTHON* variables, importing only what it needs.
BOOT = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from dsh_daemon.sandbox.forkserver import main; sys.exit(main())"
)


def server_argv(*extra: str) -> list[str]:
    return [sys.executable, "-I", "-S", "-c", BOOT, PACKAGE_PARENT, *extra]


APPARMOR_KNOB = Path("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")


def _namespaces_reason() -> str | None:
    try:
        done = subprocess.run(
            server_argv("--probe"), capture_output=True, text=True, timeout=20, env={}, cwd="/"
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"namespaces not probed: {exc}"
    answer = done.stdout.strip() or done.stderr.strip()[-300:] or f"probe exited {done.returncode}"
    if answer == "ok":
        return None
    try:
        if APPARMOR_KNOB.read_text().strip() == "1":
            answer += " (AppArmor restricts unprivileged user namespaces: see README, 'Sandbox')"
    except OSError:
        pass
    return answer


@functools.cache
def probe_level() -> SandboxLevel:
    """This machine's level, probed once per process."""
    if not sys.platform.startswith("linux"):
        return SandboxLevel(None, False, False, (f"no sandbox on {sys.platform}: Linux only",))
    from dsh_daemon.sandbox import landlock, seccomp

    reasons: list[str] = []
    abi = landlock.abi_version()
    if isinstance(abi, str):
        reasons.append(abi)
    seccomp_reason = seccomp.available()
    if seccomp_reason:
        reasons.append(seccomp_reason)
    namespaces_reason = _namespaces_reason()
    if namespaces_reason:
        reasons.append(namespaces_reason)
    return SandboxLevel(
        landlock_abi=abi if isinstance(abi, int) else None,
        seccomp=seccomp_reason is None,
        namespaces=namespaces_reason is None,
        reasons=tuple(reasons),
    )
