"""A session's policy turned into the fork server's rules, once per session (and when the policy
changes), never per command: the Landlock paths and rights, the TCP ports, and in layer 1 the mounts.

The result is a plain JSON object the fork server reads. What each layer protects and why the
layer-0 rules look as they do is docs/design.md's "Sandbox" section."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from dsh_daemon.sandbox import landlock as ll
from dsh_daemon.sandbox.policy import (
    PROTECTED_IN_GIT_DIR,
    PROTECTED_IN_ROOT,
    SandboxLevel,
    SandboxPolicy,
)

# Devices a command writes to as a matter of course (its terminal, /dev/null).
DEVICES = (
    *("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"),
    *("/dev/tty", "/dev/ptmx", "/dev/pts"),
)
READ = ll.READ
READ_WRITE = ll.READ | ll.WRITE


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


def _is_beneath(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents


def git_dirs(root: Path) -> list[Path]:
    """The git directories a commit in `root` writes: `root/.git`, or for a worktree (`.git` is a
    file) its own git dir and the common one it names."""
    dot_git = root / ".git"
    if dot_git.is_dir():
        return [_real(dot_git)]
    if not dot_git.is_file():
        return []
    try:
        text = dot_git.read_text(errors="replace").strip()
    except OSError:
        return []
    if not text.startswith("gitdir:"):
        return []
    own = _real(root / text.removeprefix("gitdir:").strip())
    found = [own]
    try:
        common = (own / "commondir").read_text().strip()
        found.append(_real(own / common))
    except OSError:
        pass
    return found


def protected_paths(roots: tuple[Path, ...]) -> list[Path]:
    """What stays read-only inside the writable places (those that exist)."""
    found: list[Path] = []
    for root in roots:
        found += [root / name for name in PROTECTED_IN_ROOT]
        for git_dir in git_dirs(root):
            found += [git_dir / name for name in PROTECTED_IN_GIT_DIR]
        dot_git = root / ".git"
        if dot_git.is_file():
            found.append(dot_git)  # a worktree's pointer to its git dir
    return [p for p in dict.fromkeys(found) if p.exists() or p.is_symlink()]


def make_missing_git_entries(roots: tuple[Path, ...]) -> list[Path]:
    """Create-and-mask (layer 1): a git dir of a root that lacks `hooks` or `config` gets an empty
    one (what `git init` makes; git reads an empty one as it reads none), so that it exists to be
    bound read-only; otherwise a command could make it and put a hook or `core.fsmonitor` there that
    runs when the person next uses git outside the sandbox. Only common git dirs (a worktree's own
    has neither: git reads the common one's). Returns what was created."""
    made: list[Path] = []
    for root in roots:
        for git_dir in git_dirs(root):
            if (git_dir / "commondir").exists() or not git_dir.is_dir():
                continue
            hooks, config = git_dir / "hooks", git_dir / "config"
            try:
                if not os.path.lexists(hooks):
                    hooks.mkdir(mode=0o755)
                    made.append(hooks)
                if not os.path.lexists(config):
                    config.touch(mode=0o644, exist_ok=False)
                    made.append(config)
            except OSError:
                continue  # not ours to create (a read-only checkout): nothing a command can make either
    return made


def missing_protected(roots: tuple[Path, ...]) -> list[Path]:
    """Protected names of a root that do not exist now (`.git`, `.dsh`): were one made later (by the
    person, or by a command in layer 1, where a root is writable), the rules must be rebuilt to
    protect it (`Sandbox.protect_appeared`)."""
    names = (".git", *PROTECTED_IN_ROOT)
    return [root / name for root in roots for name in names if not os.path.lexists(root / name)]


def _allow_all_but(top: Path, excluded: list[Path], rights: int) -> list[tuple[str, int]]:
    """Grant `rights` beneath `top` except beneath each excluded path: Landlock only allows, and a
    right on a directory covers all beneath it, so each directory on the way to an excluded path
    gets nothing itself and each of its other entries (as they are now) gets the rights."""
    inside = [e for e in excluded if _is_beneath(e, top)]
    if not inside:
        return [(str(top), rights)]
    if top in inside:
        return []
    granted: list[tuple[str, int]] = []
    try:
        names = sorted(os.listdir(top))
    except OSError:
        return []
    for name in names:
        entry = top / name
        # A symlink needs no rule (Landlock judges the path it resolves to, which has its own), and
        # a rule on one would grant its target: pytest's `pytest-current` points at an ancestor of
        # the tests' fake home, and would have made every secret beneath it readable.
        if not entry.is_symlink():
            granted += _allow_all_but(entry, inside, rights)
    return granted


def compute_rules(
    policy: SandboxPolicy, level: SandboxLevel, *, namespaces: bool, proxy_port: int | None
) -> dict[str, Any]:
    """The fork server's rules for this policy on this machine (`namespaces`: layer 1 is used)."""
    if not policy.confined:
        return {"confine": False, "namespaces": False}
    assert level.landlock_abi is not None
    roots = tuple(_real(r) for r in policy.roots)
    temp = _real(policy.temp_dir)
    writable = tuple(_real(w) for w in policy.writable)
    secrets = [_real(s) for s in policy.secret_paths()]
    existing_secrets = [s for s in secrets if s.exists()]
    if namespaces and policy.mode == "workspace-write":
        make_missing_git_entries(roots)
    protected = protected_paths(roots) if policy.mode == "workspace-write" else []
    paths: list[tuple[str, int]] = []
    write_places = [*roots, *writable] if policy.mode == "workspace-write" else list(writable)
    mounts: dict[str, Any] = {}
    if namespaces:
        # The mounts hide the secrets and keep the protected paths read-only, so Landlock can grant
        # reads on all of / and writes on each whole root.
        paths.append(("/", READ))
        for place in write_places:
            paths.append((str(place), READ_WRITE))
        if policy.mode == "workspace-write":
            for root in roots:
                for git_dir in git_dirs(root):
                    if not _is_beneath(git_dir, root):
                        paths.append((str(git_dir), READ_WRITE))
        # The private temp dir is bound over /tmp (programs that ignore TMPDIR write there), unless
        # that would hide a root, a widening or a secret's mask (tests keep everything in /tmp).
        under_tmp = [p for p in (*roots, *writable, *secrets) if _is_beneath(p, Path("/tmp"))]
        bind_tmp = not under_tmp and temp != Path("/tmp")
        # Each git dir is pinned (bound over itself, writable): a mount point cannot be renamed, so
        # `.git` cannot be moved aside and replaced by a copy without the read-only binds inside it.
        pins = [g for root in roots for g in git_dirs(root)] if policy.mode == "workspace-write" else []
        mounts = {
            "pins": [str(p) for p in dict.fromkeys(pins)],
            "ro_binds": [str(p) for p in protected],
            "mask_dirs": [str(s) for s in existing_secrets if s.is_dir()],
            "mask_files": [str(s) for s in existing_secrets if not s.is_dir()],
            "tmp": str(temp) if bind_tmp else None,
        }
        if mounts["tmp"]:
            paths.append(("/tmp", READ_WRITE))
    else:
        paths += _allow_all_but(Path("/"), secrets, READ)
        for place in write_places:
            if place in roots:
                # A right on the root would cover .git/hooks and .dsh: grant each entry but those,
                # and inside each git dir each entry but hooks and config.
                keep_out = [place / name for name in (".git", *PROTECTED_IN_ROOT)] + secrets
                entries = _allow_all_but(place, keep_out, READ)
                paths += [(p, READ_WRITE) for p, _ in entries if p != str(place)]
            else:
                paths += [(p, READ_WRITE) for p, _ in _allow_all_but(place, secrets, READ)]
        if policy.mode == "workspace-write":
            for root in roots:
                for git_dir in git_dirs(root):
                    keep_out = [git_dir / name for name in PROTECTED_IN_GIT_DIR]
                    entries = _allow_all_but(git_dir, keep_out, READ)
                    paths += [(p, READ_WRITE) for p, _ in entries if p != str(git_dir)]
    paths.append((str(temp), READ_WRITE))
    for device in DEVICES:
        paths.append((device, READ | ll.DEVICE_WRITE))
    return {
        "confine": True,
        "namespaces": namespaces,
        "abi": level.landlock_abi,
        "paths": paths,
        # Layer 1's network namespace has only its own loopback: TCP is left to it. Layer 0 allows
        # connect to the proxy's port only, and no bind.
        "connect_ports": None if namespaces else ([proxy_port] if proxy_port else []),
        "mounts": mounts,
        # protected names missing now: the daemon rebuilds the rules when one appears
        "watch": [str(p) for p in missing_protected(roots)] if policy.mode == "workspace-write" else [],
        "tmpdir": "/tmp" if mounts.get("tmp") else str(temp),
        "uid": os.getuid(),
        "gid": os.getgid(),
    }
