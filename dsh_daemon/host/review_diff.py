"""The diff a review reads, from git in the session's cwd: a bounded subprocess, no shell.

What git is asked cannot run anything the repository configures: external diff drivers and
textconv filters are off (`--no-ext-diff --no-textconv`), as are every configured clean/process
filter (`_no_filters`), the fsmonitor hook and the pager, and
a ref the person names is resolved by `rev-parse --verify --end-of-options` to a commit id before it
is used (never read as an option). git gets none of the daemon's secrets: its environment is the
daemon's locale, PATH and HOME only. The output is cut at `MAX_DIFF_BYTES` (the model reads the rest
with its tools: the changed files are listed whole). Blocking: call off the event loop.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from dsh_daemon.host.errors import WireError, invalid_params, shown
from dsh_daemon.model.payloads import ReviewTarget

GIT_TIMEOUT_S = 20.0
MAX_DIFF_BYTES = 200_000
MAX_UNTRACKED_FILES = 200
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"  # git's id of the empty tree
_SAFE = ("-c", "core.fsmonitor=false", "-c", "core.pager=cat", "--no-pager")
# What git is given of the daemon's environment: where programs and the person's git settings are,
# the locale; nothing else (the API key and MCP servers' secrets stay with the daemon).
_KEPT_ENV = frozenset(
    {"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "XDG_CONFIG_HOME"}
    | {"GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_NOSYSTEM"}
)
_DIFF = ("--no-ext-diff", "--no-textconv", "--no-color", "--no-renames")


class GitFailed(Exception):
    pass


@dataclass(frozen=True, slots=True)
class ReviewDiff:
    root: Path  # the top of the work tree
    target: ReviewTarget
    text: str  # the unified diff, cut at MAX_DIFF_BYTES
    files: tuple[str, ...]  # every changed file, relative to `root`
    truncated: bool


def not_a_repository(cwd: str) -> WireError:
    return WireError(
        "not_a_repository",
        f"{shown(cwd)} is not inside a git work tree: a review reads its changes from git",
        cwd=shown(cwd),
    )


def _git(
    root: Path | str,
    *args: str,
    limit: int = MAX_DIFF_BYTES,
    ok: tuple[int, ...] = (0,),
    config: tuple[str, ...] = (),
) -> tuple[bytes, bool]:
    """(stdout cut at `limit` bytes, whether it was cut). GitFailed on another exit status."""
    git = shutil.which("git")
    if git is None:
        raise GitFailed("git is not installed")
    env = {k: v for k, v in os.environ.items() if k in _KEPT_ENV}  # never the daemon's secrets
    env.update(GIT_OPTIONAL_LOCKS="0", GIT_TERMINAL_PROMPT="0")
    try:
        with subprocess.Popen(
            [git, *_SAFE, *config, "-C", str(root), *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        ) as proc:
            assert proc.stdout is not None and proc.stderr is not None
            out = proc.stdout.read(limit + 1)
            cut = len(out) > limit
            if cut:
                proc.kill()  # the rest is not read: git must not block on a full pipe
                proc.wait(GIT_TIMEOUT_S)
                return out[:limit], True
            try:
                _, err = proc.communicate(timeout=GIT_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                raise GitFailed(f"git {args[0]} took longer than {GIT_TIMEOUT_S:.0f} s") from None
    except (OSError, subprocess.SubprocessError) as exc:
        raise GitFailed(f"git {args[0]}: {exc}") from exc
    if proc.returncode not in ok:
        raise GitFailed(f"git {args[0]}: {err.decode('utf-8', 'replace').strip()[:500]}")
    return out, False


def _text(root: Path, *args: str) -> str:
    return _git(root, *args, limit=1_000_000)[0].decode("utf-8", "replace")


def _no_filters(root: Path) -> tuple[str, ...]:
    """`-c` settings that switch off every filter driver the configuration names: a diff against
    the work tree runs a file's `clean` filter (or `process`) on it, and `.gitattributes` (the
    project's) picks the driver; no flag turns filters off, an empty command does."""
    try:
        out = _text(root, "config", "--name-only", "-z", "--get-regexp", r"^filter\.")
    except GitFailed:  # none configured (git exits 1)
        return ()
    names = {key[len("filter.") :].rsplit(".", 1)[0] for key in out.split("\0") if key.startswith("filter.")}
    overrides: list[str] = []
    for name in sorted(names):
        for setting in ("clean=", "smudge=", "process=", "required=false"):
            overrides += ["-c", f"filter.{name}.{setting}"]
    return tuple(overrides)


def _commit(root: Path, ref: str, what: str) -> str:
    if not ref or ref.startswith("-") or "\0" in ref:
        raise invalid_params(f"dsh/review/start: {what} must name a commit, not {shown(ref)}")
    try:
        return _text(
            root, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"
        ).strip()
    except GitFailed:
        raise invalid_params(
            f"dsh/review/start: {what} {shown(ref)} is no commit of this repository"
        ) from None


def _names(root: Path, *args: str) -> list[str]:
    return [name for name in _text(root, *args).split("\0") if name]


def review_diff(cwd: Path, target: ReviewTarget) -> ReviewDiff:
    """The changes `target` names; `not_a_repository` outside a git work tree (or, with `reason:
    "git-failed"`, where git could not compute the diff: a damaged repository, a timeout),
    `invalid_params` for a ref that names no commit."""
    try:
        return _review_diff(cwd, target)
    except GitFailed as exc:
        raise WireError(
            "not_a_repository",
            shown(f"git could not compute the diff in {cwd}: {exc}", 2000),
            cwd=shown(str(cwd)),
            reason="git-failed",
        ) from None


def _review_diff(cwd: Path, target: ReviewTarget) -> ReviewDiff:
    try:
        top = _text(cwd, "rev-parse", "--show-toplevel").strip()
    except GitFailed:
        raise not_a_repository(str(cwd)) from None
    if not top:
        raise not_a_repository(str(cwd))
    root = Path(top)
    untracked: list[str] = []
    if target.kind == "commit":
        commit = _commit(root, target.ref or "", "commit")
        target = ReviewTarget("commit", commit)
        parents = _text(root, "rev-list", "--parents", "-n", "1", commit).split()
        before = parents[1] if len(parents) > 1 else EMPTY_TREE
        args: tuple[str, ...] = (before, commit)
    else:
        try:
            head: str | None = _commit(root, "HEAD", "HEAD")
        except WireError:
            head = None  # a repository without a commit yet: everything is new
        if target.kind == "base":
            base = _commit(root, target.ref or "", "base")
            if head is None:
                raise invalid_params("dsh/review/start: this repository has no commit to compare with a base")
            before = _text(root, "merge-base", base, head).strip()
        else:
            before = head or EMPTY_TREE
        args = (before,)  # against the work tree (staged and unstaged changes alike)
        untracked = _names(root, "ls-files", "-z", "--others", "--exclude-standard")[:MAX_UNTRACKED_FILES]
    config = _no_filters(root)
    names = _git(root, "diff", *_DIFF, "--name-only", "-z", *args, "--", limit=1_000_000, config=config)[0]
    files = [name for name in names.decode("utf-8", "replace").split("\0") if name] + untracked
    out, cut = _git(root, "diff", *_DIFF, *args, "--", config=config)
    for name in untracked:
        if cut:
            break
        more, cut = _git(
            root,
            "diff",
            *_DIFF,
            "--no-index",
            "--",
            "/dev/null",
            name,
            limit=MAX_DIFF_BYTES - len(out),
            ok=(0, 1),
            config=config,
        )
        out += more
    return ReviewDiff(root, target, out.decode("utf-8", "replace"), tuple(files), cut)
