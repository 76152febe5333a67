"""The diff a review reads, from git in the session's cwd: a bounded subprocess, no shell.

What git is asked cannot run anything the repository configures: git runs through `gitrun` (hooks,
the fsmonitor hook, the pager and transports off, none of the daemon's secrets in its environment),
external diff drivers and textconv filters are off (`NO_DIFF_PROGRAMS`), as is every configured
clean/process filter (`no_filters`), and a ref the person names is resolved by `rev-parse --verify
--end-of-options` to a commit id before it is used (never read as an option). The output is cut at
`MAX_DIFF_BYTES` (the model reads the rest with its tools: the changed files are listed whole).
Blocking: call off the event loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dsh_daemon.host.errors import WireError, invalid_params, shown
from dsh_daemon.host.gitrun import NO_DIFF_PROGRAMS, GitFailed, no_filters, run_git
from dsh_daemon.model.payloads import ReviewTarget

MAX_DIFF_BYTES = 200_000
MAX_UNTRACKED_FILES = 200
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"  # git's id of the empty tree
_DIFF = (*NO_DIFF_PROGRAMS, "--no-color", "--no-renames")


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
    return run_git(root, *args, limit=limit, ok=ok, config=config)


def _text(root: Path, *args: str) -> str:
    return _git(root, *args, limit=1_000_000)[0].decode("utf-8", "replace")


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
    config = no_filters(root)
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
