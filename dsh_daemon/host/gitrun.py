"""git as the daemon runs it itself (checkpoint snapshots, turn diffs, rewinds, a review's diff): a
bounded subprocess, no shell, that runs nothing a repository configures and is given none of the
daemon's secrets (docs/design.md §14 "git the daemon runs").

Every call: hooks off (`core.hooksPath=/dev/null`: `git add` runs `post-index-change`), the fsmonitor
hook and the pager off, no transport (`protocol.allow=never`, `GIT_NO_LAZY_FETCH`: a partial clone
would fetch a missing object through the repository's `core.sshCommand`), stdin closed (git's
children would read the daemon's protocol), an environment of the locale, PATH, HOME and git's
config variables only. A command that reads the work tree or writes an index (`add`, `diff`
against the work tree, `write-tree`: a racily clean file is re-read) also passes
`no_filters(root)`; a diff that prints patches passes `NO_DIFF_PROGRAMS`. Blocking: call off the
event loop."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path

GIT_TIMEOUT_S = 20.0
_SAFE = (
    "--no-pager",
    *("-c", "core.fsmonitor=false", "-c", "core.pager=cat", "-c", "core.hooksPath=/dev/null"),
    *("-c", "protocol.allow=never"),
)
# What git is given of the daemon's environment: where programs and the person's git settings are,
# the locale; nothing else (the API key and MCP servers' secrets stay with the daemon).
_KEPT_ENV = frozenset(
    {"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "XDG_CONFIG_HOME"}
    | {"GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_NOSYSTEM"}
)
_FIXED_ENV = {"GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0", "GIT_NO_LAZY_FETCH": "1"}
NO_DIFF_PROGRAMS = ("--no-ext-diff", "--no-textconv")


class GitFailed(Exception):
    pass


def git_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The whole environment git runs with: the kept part of the daemon's, then `extra`."""
    env = {k: v for k, v in os.environ.items() if k in _KEPT_ENV}
    env.update(_FIXED_ENV)
    env.update(extra or {})
    return env


def run_git(
    root: Path | str,
    *args: str,
    limit: int | None = None,
    ok: tuple[int, ...] = (0,),
    config: tuple[str, ...] = (),
    env: Mapping[str, str] | None = None,
    timeout_s: float = GIT_TIMEOUT_S,
) -> tuple[bytes, bool]:
    """(stdout, cut at `limit` bytes when given, whether it was cut; the rest is never read).
    GitFailed on another exit status, or once `timeout_s` passed (git is killed)."""
    git = shutil.which("git")
    if git is None:
        raise GitFailed("git is not installed")
    # stderr to a file: a pipe left unread while stdout is (a warning per file) would block git.
    with tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(
                [git, *_SAFE, *config, "-C", str(root), *args],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=err,
                env=git_env(env),
                start_new_session=True,  # its own group: a kill reaches whatever git started too
            )
        except OSError as exc:
            raise GitFailed(f"git {args[0]}: {exc}") from exc
        expired = threading.Event()

        def kill() -> None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)

        def expire() -> None:
            if proc.returncode is None:  # not reaped yet: its group id is still its own
                expired.set()
                kill()

        timer = threading.Timer(timeout_s, expire)  # bounds the read as well as the wait
        timer.start()
        try:
            assert proc.stdout is not None
            with proc.stdout:
                out = proc.stdout.read() if limit is None else proc.stdout.read(limit + 1)
                cut = limit is not None and len(out) > limit
                if cut:
                    kill()  # git must not block on a full pipe
            proc.wait()
        finally:
            timer.cancel()
        if expired.is_set():
            raise GitFailed(f"git {args[0]} took longer than {timeout_s:.0f} s")
        if not cut and proc.returncode not in ok:
            err.seek(0)
            raise GitFailed(f"git {args[0]}: {err.read(4000).decode('utf-8', 'replace').strip()[:500]}")
    if cut:
        return out[:limit], True
    return out, False


def no_filters(root: Path | str) -> tuple[str, ...]:
    """`-c` settings that switch off every filter driver the configuration names: `git add` and a
    diff against the work tree run a file's `clean` filter (or `process`), and `.gitattributes` (the
    project's) picks the driver; no flag turns filters off, an empty command does."""
    try:
        out = run_git(root, "config", "--name-only", "-z", "--get-regexp", r"^filter\.")[0]
    except GitFailed:  # none configured (git exits 1)
        return ()
    keys = out.decode("utf-8", "surrogateescape").split("\0")
    names = {key[len("filter.") :].rsplit(".", 1)[0] for key in keys if key.startswith("filter.")}
    overrides: list[str] = []
    for name in sorted(names):
        for setting in ("clean=", "smudge=", "process=", "required=false"):
            overrides += ["-c", f"filter.{name}.{setting}"]
    return tuple(overrides)
