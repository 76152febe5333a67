"""Sessions in their own git worktree (issue 34.2; protocol.md "Worktrees"): made, measured, diffed
against their base, applied to the person's work tree, kept as a branch, or discarded.

Where: a worktree of repository `/p/app` lives in the sibling folder `/p/app.dsh-worktrees/NAME`, made
by the daemon. Not under `DSH_HOME`: that folder is masked for confined commands, and a session's
commands must work in their worktree. Not inside the repository: the person's `git status` and
tools would see it.

Invariants kept here:
- The person's work tree is only ever written by `apply`, and only when the whole diff applies cleanly
  (`git apply --check` first, then `git apply` of the same patch): a conflict names the files and
  changes nothing, so applying one session's worktree then another's never loses either.
- A worktree is removed only when the person asks (`discard`, `keep`, or a delete that says so); a
  worktree whose session is gone stays listed (`store.worktrees()`), never deleted silently.
- git runs through `gitrun` (no hooks, filters, fsmonitor or transport; none of the daemon's secrets):
  `worktree add` checks files out, which would run a smudge filter and the post-checkout hook.
Blocking: call off the event loop.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsh_daemon.host import gitsnap
from dsh_daemon.host.errors import WireError, invalid_params, shown
from dsh_daemon.host.gitrun import NO_DIFF_PROGRAMS, GitFailed, no_filters, run_git
from dsh_daemon.session.store import WorktreeRow

FOLDER_SUFFIX = ".dsh-worktrees"
MAX_PATCH_BYTES = 2_000_000  # a diff shown to a client is cut here (apply always uses the whole one)
_BRANCH_CHARS = re.compile(r"[^A-Za-z0-9._/-]+")
_FALLBACK_IDENTITY = ("-c", "user.name=dsh-daemon", "-c", "user.email=dsh-daemon@localhost")


def not_a_repository(cwd: str) -> WireError:
    return WireError(
        "not_a_repository",
        f"{shown(cwd)} is not inside a git work tree: a session in its own worktree needs a repository",
        cwd=shown(cwd),
    )


def _text(
    root: Path | str, *args: str, env: dict[str, str] | None = None, config: tuple[str, ...] = ()
) -> str:
    return run_git(root, *args, env=env, config=config)[0].decode("utf-8", "surrogateescape")


@dataclass(frozen=True, slots=True)
class NewWorktree:
    row: WorktreeRow  # session_id None until the session is created with it
    cwd: str  # the session's cwd inside it (the person's subfolder, mapped)


def branch_name(session_id: str, title: str | None) -> str:
    """`dsh/<words of the title>-<8 of the id>`: readable in `git branch`, unique per session."""
    words = _BRANCH_CHARS.sub("-", (title or "session").lower()).strip("-./")[:40].strip("-./")
    return f"dsh/{words or 'session'}-{session_id[:8]}"


def plan_worktree(
    cwd: str, session_id: str, branch: str | None, base: str | None, title: str | None
) -> NewWorktree:
    """Where a new session's worktree will be, on which branch from which commit (nothing is made
    yet: the daemon records it first, so a crash while it is made leaves it listed); typed errors for
    what the person got wrong (not a repository, a branch that exists, a base that is no commit)."""
    try:
        top = Path(_text(cwd, "rev-parse", "--show-toplevel").strip())
        common = Path(_text(cwd, "rev-parse", "--path-format=absolute", "--git-common-dir").strip())
    except GitFailed:
        raise not_a_repository(cwd) from None
    repo = common.parent if common.name == ".git" else top  # the main work tree, also from a worktree
    base_name = base or "HEAD"
    if base_name.startswith("-") or "\0" in base_name:
        raise invalid_params(f"worktree.base must name a commit, not {shown(base_name)}")
    try:
        base_commit = _text(
            top, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{base_name}^{{commit}}"
        ).strip()
    except GitFailed:
        raise invalid_params(f"worktree.base {shown(base_name)} is no commit of {shown(str(repo))}") from None
    name = branch or branch_name(session_id, title)
    try:
        _text(top, "check-ref-format", "--branch", name)
    except GitFailed:
        raise invalid_params(f"worktree.branch {shown(name)} is not a valid branch name") from None
    if name.startswith("-"):
        raise invalid_params(f"worktree.branch {shown(name)} is not a valid branch name")
    with contextlib.suppress(GitFailed):
        _text(top, "show-ref", "--verify", "--quiet", f"refs/heads/{name}")
        raise invalid_params(f"worktree.branch {shown(name)} exists already; name another or leave it out")
    folder = repo.parent / f"{repo.name}{FOLDER_SUFFIX}"
    path = folder / name.replace("/", "-")
    for n in range(2, 100):
        if not path.exists():
            break
        path = folder / f"{name.replace('/', '-')}-{n}"
    inside = (
        Path(cwd).resolve().relative_to(top.resolve())
        if Path(cwd).resolve().is_relative_to(top.resolve())
        else Path()
    )
    return NewWorktree(
        WorktreeRow(str(path), str(repo), name, base_name, base_commit, None), str(path / inside)
    )


def add_worktree(new: NewWorktree) -> NewWorktree:
    """`git worktree add -b BRANCH FOLDER BASE_COMMIT` as `plan_worktree` planned it; the session's cwd
    is the person's subfolder where the checkout has it, else the worktree's top."""
    row = new.row
    Path(row.path).parent.mkdir(exist_ok=True)
    try:
        run_git(
            row.repo,
            "worktree",
            "add",
            "--quiet",
            "-b",
            row.branch,
            "--",
            row.path,
            row.base_commit,
            config=no_filters(row.repo),
        )
    except GitFailed as exc:
        raise invalid_params(f"the worktree could not be made: {exc}") from None
    return NewWorktree(row, new.cwd if Path(new.cwd).is_dir() else row.path)


def remove_worktree(row: WorktreeRow, *, delete_branch: bool) -> None:
    """The worktree's folder gone (uncommitted changes in it too: the person chose this), and its
    branch when `delete_branch`."""
    repo = row.repo
    if Path(row.path).exists():
        try:
            run_git(repo, "worktree", "remove", "--force", "--force", "--", row.path)
        except GitFailed:
            shutil.rmtree(row.path, ignore_errors=True)  # not a worktree git knows any more
    with contextlib.suppress(GitFailed):
        run_git(repo, "worktree", "prune")
    if delete_branch:
        with contextlib.suppress(GitFailed):  # gone already
            run_git(repo, "branch", "-D", "--", row.branch)


@dataclass(frozen=True, slots=True)
class WorktreeDiff:
    tree: str  # the worktree as a tree object
    files: tuple[dict[str, Any], ...]  # {path, status: added|modified|deleted, added, removed}
    patch: bytes  # the whole binary-safe patch from the base


def worktree_diff(row: WorktreeRow) -> WorktreeDiff:
    """Everything the session changed against its base: commits on its branch and what is not committed."""
    if not Path(row.path).is_dir():
        raise invalid_params(f"the worktree {shown(row.path)} is gone")
    tree = gitsnap.snapshot(row.path)  # what `git add -A` would take; its index and HEAD untouched
    diff = ("diff", *NO_DIFF_PROGRAMS, "--no-color", "--no-renames")
    numstat = _text(row.path, *diff, "--numstat", "-z", row.base_commit, tree)
    status = _text(row.path, *diff, "--name-status", "-z", row.base_commit, tree)
    kinds: dict[str, str] = {}
    parts = [p for p in status.split("\0") if p]
    for kind, name in zip(parts[::2], parts[1::2], strict=False):
        kinds[name] = {"A": "added", "D": "deleted"}.get(kind[:1], "modified")
    files: list[dict[str, Any]] = []
    for entry in (e for e in numstat.split("\0") if e):
        added, removed, name = entry.split("\t", 2)
        files.append(
            {
                "path": name,
                "status": kinds.get(name, "modified"),
                "added": int(added) if added.isdigit() else 0,  # "-": a binary file
                "removed": int(removed) if removed.isdigit() else 0,
                **({"binary": True} if added == "-" else {}),
            }
        )
    patch = run_git(row.path, *diff, "--binary", "--full-index", row.base_commit, tree)[0]
    return WorktreeDiff(tree, tuple(files), patch)


def worktree_status(row: WorktreeRow) -> dict[str, Any]:
    """What a session list shows of a worktree: whether it exists, how many files differ from its
    base, and how many commits its branch is ahead of the base (the base branch now, else the base
    commit)."""
    out: dict[str, Any] = {"path": row.path, "branch": row.branch, "base": row.base, "repo": row.repo}
    if not Path(row.path).is_dir():
        return {**out, "exists": False}
    try:
        changed = len(worktree_diff(row).files)
        against = row.base if row.base != "HEAD" and _is_branch(row.repo, row.base) else row.base_commit
        ahead = int(_text(row.path, "rev-list", "--count", f"{against}..HEAD", "--").strip() or 0)
    except (GitFailed, ValueError):
        return {**out, "exists": True}
    return {**out, "exists": True, "changedFiles": changed, "ahead": ahead}


def _is_branch(repo: str, name: str) -> bool:
    try:
        run_git(repo, "show-ref", "--verify", "--quiet", f"refs/heads/{name}")
    except GitFailed:
        return False
    return True


def apply_to(row: WorktreeRow, target: str) -> dict[str, Any]:
    """The worktree's whole diff from its base applied to `target` (the person's work tree) as
    uncommitted changes, or nothing at all: `{applied: true, files}` or `{applied: false, conflicts:
    [{path, reason}]}`. A file the person changed where the diff changes it, a file the diff adds that
    they already have: each a conflict, and their file stays as it is."""
    diff = worktree_diff(row)
    if not diff.files:
        return {"applied": True, "files": []}
    fd, patch_path = tempfile.mkstemp(prefix="dsh-worktree-", suffix=".patch")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(diff.patch)
        off = no_filters(target)
        failed = _apply(target, patch_path, off, check=True)
        if failed is not None:
            return {"applied": False, "conflicts": _conflicts(failed, diff.files)}
        failed = _apply(target, patch_path, off, check=False)
        if failed is not None:  # changed between the check and now: git apply is all or nothing
            return {"applied": False, "conflicts": _conflicts(failed, diff.files)}
    finally:
        with contextlib.suppress(OSError):
            os.unlink(patch_path)
    return {"applied": True, "files": list(diff.files)}


def _apply(target: str, patch_path: str, config: tuple[str, ...], *, check: bool) -> str | None:
    """None when `git apply` (whole, atomic) succeeded; else what git said."""
    args = ["apply", "--binary", "--whitespace=nowarn", *(["--check"] if check else []), patch_path]
    try:
        run_git(target, *args, config=config)
    except GitFailed as exc:
        return str(exc)
    return None


_FAILED_PATH = re.compile(r"(?:patch failed|error): ([^:\n]+?)(?::\d+)?(?:: (.+))?$", re.MULTILINE)


def _conflicts(message: str, files: tuple[dict[str, Any], ...]) -> list[dict[str, str]]:
    """The files git named, with its reason in words; every file of the diff when it named none."""
    known = {f["path"] for f in files}
    found: dict[str, str] = {}
    for line in message.splitlines():
        for path in known:
            if path in line and path not in found:
                if "already exists" in line:
                    found[path] = "it exists in your work tree already"
                elif "does not exist" in line:
                    found[path] = "it is not in your work tree"
                else:
                    found[path] = "you changed it where this session changed it too"
    if not found:
        return [{"path": p, "reason": message.removeprefix("git apply: ")[:300]} for p in sorted(known)]
    return [{"path": p, "reason": r} for p, r in sorted(found.items())]


def keep_as_branch(row: WorktreeRow, message: str) -> dict[str, Any]:
    """What is not committed in the worktree committed on its branch (the person's git identity, else
    dsh-daemon's), then the folder removed; the branch stays with every commit."""
    if Path(row.path).is_dir():
        off = no_filters(row.path)
        if _text(row.path, "status", "--porcelain", "--untracked-files=all", config=off).strip():
            identity = () if _has_identity(row.path) else _FALLBACK_IDENTITY
            run_git(row.path, "add", "-A", "--", ".", config=off)
            run_git(row.path, "commit", "--quiet", "--no-verify", "-m", message, config=(*off, *identity))
    commit = _text(row.repo, "rev-parse", "--verify", "--quiet", f"refs/heads/{row.branch}").strip()
    remove_worktree(row, delete_branch=False)
    return {"branch": row.branch, "commit": commit}


def _has_identity(path: str) -> bool:
    try:
        return bool(_text(path, "config", "user.email").strip())
    except GitFailed:
        return False
